"""Presets over HTTP: ``GET /api/presets`` lists them without their prompts,
``/chat`` answers a ``preset`` by name under its prompt, model and
temperature, and a name that is no preset is a 400 that calls no model."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.api.checks import (
    GLM,
    LLAMA,
    assert_done,
    assert_error,
    calls_before_a_later_request,
    post_chat,
    system_then,
    user,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.presets import two_presets

PROMPT = "You are the translator preset, marker-T4. Translate only."
PRESETS = two_presets(PROMPT)
SETTINGS = {"PRESETS": json.dumps(PRESETS), "SYSTEM_PROMPT": "Operator prompt."}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def test_the_presets_are_listed_without_their_prompts(client: httpx.Client) -> None:
    response = client.get("/api/presets")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {
        "presets": [
            {
                "name": "translator",
                "title": {"en": "Translator", "zh": "翻译"},
                "model": "llama",
                "temperature": 0.2,
                "greeting": {"en": "What shall I translate?", "zh": "要翻译什么。"},
            },
            {
                "name": "brief",
                "title": {"en": "Brief", "zh": "简短"},
                "model": None,
                "temperature": None,
                "greeting": None,
            },
        ]
    }
    assert "marker-T4" not in response.text


def test_the_default_deployment_has_none(new_client: ClientFactory) -> None:
    response = new_client().get("/api/presets")
    assert (response.status_code, response.json()) == (200, {"presets": []})


def test_a_preset_answers_under_its_prompt_model_and_temperature(
    server: Server, client: httpx.Client
) -> None:
    chat = post_chat(client, user("Bonjour", preset="translator"))
    assert_done(chat.events, LLAMA)
    assert "marker-T4" not in chat.body.decode()
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == LLAMA
    assert call["inputs"]["messages"][0] == {"role": "system", "content": PROMPT}
    system_then([{"role": "user", "content": "Bonjour"}], call)
    assert call["inputs"]["temperature"] == 0.2


def test_the_request_model_wins_and_no_preset_keeps_the_operator_prompt(
    server: Server, client: httpx.Client
) -> None:
    assert_done(post_chat(client, user("hi", preset="translator", model="glm")).events, GLM)
    assert_done(post_chat(client, user("hi")).events, GLM)
    first, second = server.ai.wait_for_calls(2)
    assert first["inputs"]["messages"][0]["content"] == PROMPT
    assert second["inputs"]["messages"][0]["content"] == "Operator prompt."


@pytest.mark.parametrize("name", ["nope", 7])
def test_an_unknown_preset_is_refused_and_calls_no_model(
    server: Server, client: httpx.Client, name: object
) -> None:
    chat = post_chat(client, user("hi", preset=name))
    assert_error(chat.response, 400, "invalid_request", "marker-T4")
    assert chat.response.json()["error"]["message"] == (
        "preset must name one of this deployment's presets (translator, brief)."
    )
    assert calls_before_a_later_request(server.ai, client) == []
