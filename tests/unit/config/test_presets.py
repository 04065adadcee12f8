"""Presets: the operator's config, checked where every setting is, and what
``/chat`` makes of a ``preset`` by name."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from edgechat.apis.chat_body import parse_chat_request
from edgechat.config.presets import MAX_PRESETS, parse_presets, presets_json
from edgechat.config.settings import Settings
from edgechat.core.errors import BadRequest
from edgechat.core.requests import Limits

PROMPT = "You translate between Chinese and English. secret-word-P7"
TRANSLATOR: dict[str, Any] = {
    "name": "translator",
    "title": {"en": "Translator", "zh": "翻译"},
    "system_prompt": PROMPT,
    "model": "@cf/meta/llama-3.1-8b-instruct-fp8",
    "temperature": 0.3,
    "greeting": {"en": "Send me text to translate.", "zh": "发给我要翻译的文字。"},
}
PLAIN: dict[str, Any] = {
    "name": "plain",
    "title": {"en": "Plain", "zh": "简洁"},
    "system_prompt": "Answer in one sentence.",
}


def settings_with(*presets: dict[str, Any], **values: object) -> Settings:
    return Settings.from_mapping({"PRESETS": json.dumps(list(presets)), **values})


def parse(body: dict[str, Any], s: Settings) -> Any:
    raw = json.dumps(body).encode()
    return parse_chat_request(raw, s.limits, s.models, s.default_model, s.presets)


def ask(**fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": "Hello"}], **fields}


def test_presets_are_read_and_their_model_named_by_alias() -> None:
    s = settings_with(TRANSLATOR, PLAIN)
    translator, plain = s.presets
    assert translator.name == "translator"
    assert translator.model == "llama"
    assert translator.temperature == 0.3
    assert translator.greeting == TRANSLATOR["greeting"]
    assert (plain.model, plain.temperature, plain.greeting) == (None, None, None)
    assert Settings().presets == ()
    assert settings_with().presets == ()


def test_the_list_shows_everything_but_the_prompt() -> None:
    listed = presets_json(settings_with(TRANSLATOR, PLAIN).presets)
    assert listed["presets"][0] == {
        "name": "translator",
        "title": TRANSLATOR["title"],
        "model": "llama",
        "temperature": 0.3,
        "greeting": TRANSLATOR["greeting"],
    }
    assert listed["presets"][1]["greeting"] is None
    assert "secret-word-P7" not in json.dumps(listed)


BAD = [
    ("not json", "PRESETS must be a JSON array of presets"),
    ('{"name": "x"}', "PRESETS must be a JSON array of at most"),
    (json.dumps([PLAIN] * (MAX_PRESETS + 1)), f"at most {MAX_PRESETS} presets"),
    (json.dumps([PLAIN, PLAIN]), "PRESETS has two presets of the same name"),
    (json.dumps([{**PLAIN, "name": "Big Name"}]), "PRESETS[0].name must be"),
    (json.dumps([{**PLAIN, "system_prompt": " "}]), "PRESETS[0].system_prompt must be text"),
    (json.dumps([{**PLAIN, "temperature": 3}]), "PRESETS[0].temperature must be a number"),
    (json.dumps([{**PLAIN, "temperature": True}]), "PRESETS[0].temperature must be a number"),
    (json.dumps([{**PLAIN, "title": {"en": "Only English"}}]), 'PRESETS[0].title needs "en"'),
    (json.dumps([{**PLAIN, "greeting": "hi"}]), 'PRESETS[0].greeting must have "en"'),
    (json.dumps([PLAIN, {**PLAIN, "name": "b", "prompt": "x"}]), "PRESETS[1] must be an object"),
    (json.dumps([{**PLAIN, "model": "gpt-5"}]), "PRESETS[0].model names an unknown model"),
]


@pytest.mark.parametrize(("value", "message"), BAD)
def test_bad_presets_are_caught_with_the_rule(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        Settings.from_mapping({"PRESETS": value})
    assert "P7" not in str(caught.value)


def test_a_preset_model_must_be_allowed() -> None:
    with pytest.raises(ValueError, match=r"PRESETS\[0\].model must be one of MODELS"):
        settings_with(TRANSLATOR, MODELS="glm,kimi")


def test_parse_presets_takes_json_text_only() -> None:
    assert parse_presets(json.dumps([PLAIN]))[0].name == "plain"
    assert parse_presets(None) == parse_presets("  ") == ()
    with pytest.raises(ValueError, match="PRESETS must be text holding a JSON array"):
        parse_presets([PLAIN])


def test_a_preset_sets_the_prompt_model_and_temperature() -> None:
    s = settings_with(TRANSLATOR, PLAIN)
    request = parse(ask(preset="translator"), s)
    assert request.model.alias == "llama"
    assert request.temperature == 0.3
    inputs = request.inputs(request.model, s.system_prompt)
    assert inputs["messages"][0] == {"role": "system", "content": PROMPT}
    assert inputs["temperature"] == 0.3


def test_the_request_model_and_temperature_win_over_the_preset() -> None:
    s = settings_with(TRANSLATOR)
    request = parse(ask(preset="translator", model="glm", temperature=0), s)
    assert (request.model.alias, request.temperature) == ("glm", 0.0)
    assert request.inputs(request.model, s.system_prompt)["messages"][0]["content"] == PROMPT


def test_without_a_preset_the_operator_prompt_stays() -> None:
    s = settings_with(TRANSLATOR, SYSTEM_PROMPT="Operator prompt.")
    request = parse(ask(), s)
    assert request.model.alias == "glm"
    assert request.inputs(request.model, s.system_prompt)["messages"][0]["content"] == (
        "Operator prompt."
    )
    plain = parse(ask(preset="plain"), settings_with(PLAIN))
    assert (plain.model.alias, plain.temperature) == ("glm", None)


@pytest.mark.parametrize("name", ["nope", 3, "", ["translator"]])
def test_an_unknown_preset_is_refused_naming_the_presets(name: object) -> None:
    with pytest.raises(BadRequest) as caught:
        parse(ask(preset=name), settings_with(TRANSLATOR, PLAIN))
    message = caught.value.to_json()["error"]["message"]
    assert message == "preset must name one of this deployment's presets (translator, plain)."


def test_a_preset_where_there_are_none_is_refused() -> None:
    with pytest.raises(BadRequest) as caught:
        parse_chat_request(json.dumps(ask(preset="x")).encode(), Limits(), ("glm",), "glm")
    message = caught.value.to_json()["error"]["message"]
    assert message == "preset is not accepted: this deployment has no presets."
