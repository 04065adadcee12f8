"""``AUTO_ROUTES``: the defaults, keys that keep their defaults, and each
malformed rule refused naming the variable and the entry at fault."""

from __future__ import annotations

import json

import pytest

from edgechat.config.routes import DEFAULT_ROUTES, Rule, Tier, parse_routes, routes_json
from edgechat.config.settings import Settings


def test_unset_or_empty_means_the_defaults() -> None:
    assert parse_routes(None) is DEFAULT_ROUTES
    assert parse_routes("  ") is DEFAULT_ROUTES


def test_the_defaults_written_as_json_read_back_the_same() -> None:
    assert parse_routes(json.dumps(routes_json(DEFAULT_ROUTES))) == DEFAULT_ROUTES


def test_keys_left_out_keep_their_defaults() -> None:
    routes = parse_routes('{"short_chars": 120, "budget": []}')
    assert routes.short_chars == 120
    assert routes.budget == ()
    assert routes.rules == DEFAULT_ROUTES.rules
    assert routes.otherwise == DEFAULT_ROUTES.otherwise


def test_rules_name_models_by_alias_or_id_and_lists_may_be_comma_text() -> None:
    routes = parse_routes(
        json.dumps(
            {
                "rules": [{"if": "code", "use": "@cf/moonshotai/kimi-k2.6, glm", "reason": "code"}],
                "otherwise": {"use": ["llama"]},
                "budget": [{"at": 60, "use": ["llama"]}],
            }
        )
    )
    assert routes.rules == (Rule("code", ("kimi", "glm"), "code"),)
    assert routes.otherwise == Rule(None, ("llama",), "general question")
    assert routes.budget == (Tier(60, ("llama",)),)


def test_a_rule_without_a_reason_gives_its_condition() -> None:
    routes = parse_routes('{"rules": [{"if": "images", "use": ["kimi"]}]}')
    assert routes.rules[0].reason == "images"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[1]", "AUTO_ROUTES must be a JSON object"),
        ("{nope", "AUTO_ROUTES must be a JSON object"),
        ('{"rule": []}', "AUTO_ROUTES has an unknown key 'rule'"),
        ('{"rules": {}}', "AUTO_ROUTES.rules must be an array"),
        ('{"rules": [{"if": "maths", "use": ["glm"]}]}', "AUTO_ROUTES.rules[0].if must be one of"),
        ('{"rules": [{"if": "code"}]}', "AUTO_ROUTES.rules[0] must be an object"),
        ('{"rules": [{"if": "code", "use": []}]}', "AUTO_ROUTES.rules[0].use must list"),
        ('{"rules": [{"if": "code", "use": ["gpt-9"]}]}', "AUTO_ROUTES.rules[0].use names an"),
        ('{"rules": [{"if": "code", "use": ["auto"]}]}', "auto cannot route to auto"),
        ('{"rules": [{"if": "code", "use": ["glm"], "reason": ""}]}', "reason must be printable"),
        ('{"rules": [{"if": "code", "use": ["glm"], "reason": "a\\nb"}]}', "reason must be"),
        ('{"rules": [{"if": "code", "use": ["glm"], "reason": "\\u00e9"}]}', "printable ASCII"),
        ('{"otherwise": {"if": "code", "use": ["glm"]}}', "AUTO_ROUTES.otherwise must be"),
        ('{"short_chars": 0}', "AUTO_ROUTES.short_chars must be a positive whole number"),
        ('{"long_tokens": 1.5}', "AUTO_ROUTES.long_tokens must be a positive whole number"),
        ('{"budget": [{"at": 0, "use": ["glm"]}]}', "AUTO_ROUTES.budget[0].at must be"),
        ('{"budget": [{"at": 80, "use": ["glm"]}, {"at": 50, "use": ["glm"]}]}', "by rising at"),
        ('{"budget": [{"at": 80}]}', "AUTO_ROUTES.budget[0] must be an object with at and use"),
    ],
)
def test_a_malformed_rule_set_names_the_variable_and_the_entry(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=r"^AUTO_ROUTES") as raised:
        parse_routes(value)
    assert message in str(raised.value)


def test_the_settings_refuse_rules_that_name_none_of_the_models() -> None:
    only_llama = '{"rules": [], "otherwise": {"use": ["kimi"]}, "budget": []}'
    with pytest.raises(ValueError, match="AUTO_ROUTES names none of MODELS"):
        Settings.from_mapping({"MODELS": "auto,llama", "AUTO_ROUTES": only_llama})
    # Without auto in MODELS the rules are not used, so they need not match.
    Settings.from_mapping({"MODELS": "llama", "DEFAULT_MODEL": "llama", "AUTO_ROUTES": only_llama})


def test_auto_may_be_the_default_and_a_presets_model_but_not_a_fallback() -> None:
    settings = Settings.from_mapping(
        {
            "MODELS": "auto,glm,llama",
            "DEFAULT_MODEL": "auto",
            "PRESETS": json.dumps(
                [
                    {
                        "name": "p",
                        "title": {"en": "P", "zh": "P"},
                        "system_prompt": "x",
                        "model": "auto",
                    }
                ]
            ),
        }
    )
    assert settings.default_model == "auto"
    assert settings.presets[0].model == "auto"
    with pytest.raises(ValueError, match="FALLBACK_CHAIN"):
        Settings.from_mapping({"MODELS": "auto,glm", "FALLBACK_CHAIN": "auto,glm"})
