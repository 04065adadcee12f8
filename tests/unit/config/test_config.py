from __future__ import annotations

import dataclasses
import re

import pytest

from edgechat.config.settings import DEFAULT_SYSTEM_PROMPT, Settings
from edgechat.config.variables import VARIABLES
from edgechat.core.models import find
from edgechat.core.requests import Limits


def settings(**values: object) -> Settings:
    return Settings.from_mapping(values)


def test_defaults() -> None:
    s = settings()
    assert s == Settings()
    assert s.system_prompt == DEFAULT_SYSTEM_PROMPT
    assert s.models == ("glm", "kimi", "llama")
    assert s.default_model == "glm"
    assert s.fallback_chain == ("glm", "llama")
    assert s.limits == Limits()
    assert (s.first_token_timeout_s, s.idle_timeout_s, s.total_timeout_s, s.heartbeat_s) == (
        60.0,
        30.0,
        300.0,
        15.0,
    )
    assert s.allowed_origins == ()
    assert s.api_token is None
    assert s.log_prompts is False
    assert (s.cache_mode, s.cache_ttl_s, s.ai_gateway_id) == ("deterministic", 86_400, None)


def test_default_system_prompt_is_plain() -> None:
    assert len(DEFAULT_SYSTEM_PROMPT) < 300
    lowered = DEFAULT_SYSTEM_PROMPT.lower()
    for word in ("secret", "password", "token", "never reveal", "key"):
        assert word not in lowered


def test_every_variable_is_read() -> None:
    s = settings(
        SYSTEM_PROMPT="  You are terse.  ",
        MODELS=f"kimi, {find('glm').id},llama,glm",  # type: ignore[union-attr]
        DEFAULT_MODEL="kimi",
        FALLBACK_CHAIN="kimi,glm",
        MAX_BODY_BYTES="1000",
        MAX_MESSAGES="5",
        MAX_MESSAGE_CHARS="100",
        MAX_TOTAL_CHARS="200",
        DEFAULT_OUTPUT_TOKENS="64",
        MAX_OUTPUT_TOKENS="128",
        FIRST_TOKEN_TIMEOUT_S="20",
        IDLE_TIMEOUT_S="7.5",
        TOTAL_TIMEOUT_S="120",
        HEARTBEAT_S="5",
        ALLOWED_ORIGINS="https://chat.example.com, HTTP://LOCALHOST:8787/,https://a.example:443",
        API_TOKEN="tok-123456-0123456789",
        LOG_PROMPTS="true",
        CACHE_MODE="ALL",
        CACHE_TTL_S="600",
        AI_GATEWAY_ID=" my-gateway ",
    )
    assert s.system_prompt == "You are terse."
    assert s.models == ("kimi", "glm", "llama")  # ids become aliases, duplicates go
    assert s.default_model == "kimi"
    assert s.fallback_chain == ("kimi", "glm")
    assert s.limits == Limits(1000, 5, 100, 200, 64, 128)
    assert (s.first_token_timeout_s, s.idle_timeout_s, s.total_timeout_s, s.heartbeat_s) == (
        20.0,
        7.5,
        120.0,
        5.0,
    )
    assert s.allowed_origins == (
        "https://chat.example.com",
        "http://localhost:8787",
        "https://a.example",
    )
    assert s.api_token == "tok-123456-0123456789"
    assert s.log_prompts is True
    assert (s.cache_mode, s.cache_ttl_s, s.ai_gateway_id) == ("all", 600, "my-gateway")


def test_from_vars_takes_a_getter_and_non_string_values() -> None:
    values = {"MAX_MESSAGES": 7, "LOG_PROMPTS": True, "HEARTBEAT_S": 2.5, "API_TOKEN": ""}
    s = Settings.from_vars(values.get)
    assert s.limits.max_messages == 7
    assert s.log_prompts is True
    assert s.heartbeat_s == 2.5
    assert s.api_token is None  # empty means unset


def test_empty_values_mean_unset() -> None:
    assert settings(MODELS="", DEFAULT_MODEL=" ", SYSTEM_PROMPT="", MAX_MESSAGES="") == Settings()
    assert settings(MODELS=" , ,", ALLOWED_ORIGINS=",") == Settings()


def test_default_fallback_chain_follows_the_allowed_models() -> None:
    assert settings(MODELS="glm,kimi").fallback_chain == ("glm",)
    assert settings(MODELS="kimi", DEFAULT_MODEL="kimi").fallback_chain == ()


@pytest.mark.parametrize("text", ["1", "true", "TRUE", "yes", "on"])
def test_log_prompts_true(text: str) -> None:
    assert settings(LOG_PROMPTS=text).log_prompts is True


@pytest.mark.parametrize("text", ["0", "false", "False", "no", "off"])
def test_log_prompts_false(text: str) -> None:
    assert settings(LOG_PROMPTS=text).log_prompts is False


@pytest.mark.parametrize(
    ("values", "variable"),
    [
        ({"MODELS": "glm,gpt-4"}, "MODELS"),
        ({"DEFAULT_MODEL": "gpt-4"}, "DEFAULT_MODEL"),
        ({"DEFAULT_MODEL": "glm-5.3"}, "DEFAULT_MODEL"),  # known, but not in MODELS
        ({"MODELS": "kimi"}, "DEFAULT_MODEL"),  # the default glm is not allowed
        ({"FALLBACK_CHAIN": "glm,glm-5.3"}, "FALLBACK_CHAIN"),
        ({"FALLBACK_CHAIN": "glm,nope"}, "FALLBACK_CHAIN"),
        ({"MAX_BODY_BYTES": "64k"}, "MAX_BODY_BYTES"),
        ({"MAX_MESSAGES": "0"}, "MAX_MESSAGES"),
        ({"MAX_MESSAGE_CHARS": "-5"}, "MAX_MESSAGE_CHARS"),
        ({"MAX_TOTAL_CHARS": "1.5"}, "MAX_TOTAL_CHARS"),
        ({"DEFAULT_OUTPUT_TOKENS": "abc"}, "DEFAULT_OUTPUT_TOKENS"),
        ({"DEFAULT_OUTPUT_TOKENS": "5000"}, "DEFAULT_OUTPUT_TOKENS"),
        ({"MAX_OUTPUT_TOKENS": "100"}, "DEFAULT_OUTPUT_TOKENS"),  # below the default 1024
        ({"FIRST_TOKEN_TIMEOUT_S": "0"}, "FIRST_TOKEN_TIMEOUT_S"),
        ({"IDLE_TIMEOUT_S": "nan"}, "IDLE_TIMEOUT_S"),
        ({"TOTAL_TIMEOUT_S": "inf"}, "TOTAL_TIMEOUT_S"),
        ({"HEARTBEAT_S": "-1"}, "HEARTBEAT_S"),
        ({"HEARTBEAT_S": "soon"}, "HEARTBEAT_S"),
        ({"TOTAL_TIMEOUT_S": "30"}, "FIRST_TOKEN_TIMEOUT_S"),
        ({"IDLE_TIMEOUT_S": "400"}, "IDLE_TIMEOUT_S"),
        ({"LOG_PROMPTS": "maybe"}, "LOG_PROMPTS"),
        ({"ALLOWED_ORIGINS": "chat.example.com"}, "ALLOWED_ORIGINS"),
        ({"ALLOWED_ORIGINS": "*"}, "ALLOWED_ORIGINS"),
        ({"ALLOWED_ORIGINS": "https://a.example/path"}, "ALLOWED_ORIGINS"),
        ({"ALLOWED_ORIGINS": "ftp://a.example"}, "ALLOWED_ORIGINS"),
        ({"ALLOWED_ORIGINS": "https://user@a.example"}, "ALLOWED_ORIGINS"),
        ({"ALLOWED_ORIGINS": "https://a.example:99999"}, "ALLOWED_ORIGINS"),
        ({"ALLOWED_ORIGINS": "https://a.example?x=1"}, "ALLOWED_ORIGINS"),
        ({"SYSTEM_PROMPT": ["not", "text"]}, "SYSTEM_PROMPT"),
        ({"CACHE_MODE": "sometimes"}, "CACHE_MODE"),
        ({"CACHE_TTL_S": "59"}, "CACHE_TTL_S"),
        ({"CACHE_TTL_S": "1h"}, "CACHE_TTL_S"),
        ({"MAX_KNOWLEDGE_BASES": "0"}, "MAX_KNOWLEDGE_BASES"),
        ({"MAX_KNOWLEDGE_CHUNKS": "many"}, "MAX_KNOWLEDGE_CHUNKS"),
        ({"KNOWLEDGE_CHUNK_TOKENS": "20"}, "KNOWLEDGE_CHUNK_TOKENS"),
        ({"KNOWLEDGE_CHUNK_TOKENS": "5000"}, "KNOWLEDGE_CHUNK_TOKENS"),
        ({"KNOWLEDGE_CHUNK_OVERLAP": "200"}, "KNOWLEDGE_CHUNK_OVERLAP"),  # half of 400
        ({"KNOWLEDGE_CHUNK_OVERLAP": "-1"}, "KNOWLEDGE_CHUNK_OVERLAP"),
        ({"KNOWLEDGE_TOP_K": "51"}, "KNOWLEDGE_TOP_K"),
        ({"KNOWLEDGE_CONTEXT_TOKENS": "100"}, "KNOWLEDGE_CONTEXT_TOKENS"),  # under a chunk
    ],
)
def test_bad_values_name_the_variable(values: dict[str, object], variable: str) -> None:
    with pytest.raises(ValueError, match=variable):
        Settings.from_mapping(values)


def test_errors_never_show_secrets_or_the_prompt() -> None:
    with pytest.raises(ValueError, match="MODELS") as caught:
        settings(
            API_TOKEN="hunter2-secret-0123456789", SYSTEM_PROMPT="classified prompt", MODELS="gpt"
        )
    assert "hunter2" not in str(caught.value)
    assert "classified" not in str(caught.value)


@pytest.mark.parametrize("token", ["t", "change-me", "x" * 15])
def test_a_short_api_token_is_refused_without_being_shown(token: str) -> None:
    # A short token is guessable; it is also taken out of every stream, so
    # one that a model's JSON envelope holds ("t") would break every event.
    with pytest.raises(ValueError, match="API_TOKEN must be at least 16 characters") as caught:
        settings(API_TOKEN=token)
    assert repr(token) not in str(caught.value)
    assert settings(API_TOKEN="x" * 16).api_token == "x" * 16


def test_repr_hides_the_api_token() -> None:
    s = settings(API_TOKEN="hunter2-secret-0123456789")
    assert "hunter2" not in repr(s)
    assert "hunter2" not in str(s)


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().api_token = "x"  # type: ignore[misc]


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ValueError, match="MODELS"):
        Settings(models=("@cf/zai-org/glm-4.7-flash",), default_model="glm")
    with pytest.raises(ValueError, match="MODELS"):
        Settings(models=())
    with pytest.raises(ValueError, match="DEFAULT_MODEL"):
        Settings(models=("kimi",))


def alias_list(models: tuple[object, ...]) -> list[str]:
    return [model.alias for model in models]  # type: ignore[attr-defined]


def test_fallbacks_after() -> None:
    s = settings(MODELS="glm,kimi,llama,glm-5.3", FALLBACK_CHAIN="glm-5.3,glm,llama")
    model = find
    assert alias_list(s.fallbacks_after(model("glm-5.3"))) == ["glm", "llama"]  # type: ignore[arg-type]
    assert alias_list(s.fallbacks_after(model("glm"))) == ["llama"]  # type: ignore[arg-type]
    assert alias_list(s.fallbacks_after(model("llama"))) == []  # type: ignore[arg-type]
    # Not in the chain (e.g. a paid-only model on the Free plan): the whole chain.
    assert alias_list(s.fallbacks_after(model("kimi"))) == ["glm-5.3", "glm", "llama"]  # type: ignore[arg-type]
    assert settings(FALLBACK_CHAIN="glm").fallbacks_after(model("glm")) == ()  # type: ignore[arg-type]


# --- the registry the docs' configuration reference is rendered from -----------------


def names_read(values: dict[str, str]) -> set[str]:
    """Every name ``Settings.from_vars`` asks for, given ``values``."""
    asked: set[str] = set()

    def get(name: str) -> object:
        asked.add(name)
        return values.get(name)

    Settings.from_vars(get)
    return asked


def test_the_registry_names_every_variable_read_and_no_other() -> None:
    plain = {v.name for v in VARIABLES if not v.per_provider}
    assert names_read({}) == plain
    assert len(VARIABLES) == len({v.name for v in VARIABLES})


def test_the_registrys_provider_patterns_are_what_a_named_provider_reads() -> None:
    patterns = {v.name for v in VARIABLES if v.per_provider}
    plain = {v.name for v in VARIABLES if not v.per_provider}
    asked = names_read(
        {
            "PROVIDERS": "zhipu,my_llm",
            "MY_LLM_BASE_URL": "https://x.example/v1",
            "MY_LLM_MODEL": "m",
        }
    )
    assert asked - plain == {
        pattern.replace("<NAME>", prefix) for pattern in patterns for prefix in ("ZHIPU", "MY_LLM")
    }


@pytest.mark.parametrize(
    "variable",
    [v for v in VARIABLES if v.default is not None and not v.per_provider],
    ids=lambda v: v.name,
)
def test_each_documented_default_is_the_default(variable: object) -> None:
    """Setting a variable to the default the docs show changes nothing."""
    name, default = variable.name, variable.default  # type: ignore[attr-defined]
    assert Settings.from_mapping({name: default}) == Settings()


def test_the_provider_defaults_are_the_built_in_ones() -> None:
    s = settings(PROVIDERS="zhipu,moonshot", ZHIPU_API_KEY="k" * 16, MOONSHOT_API_KEY="m" * 16)
    by_name = {v.name: v.default for v in VARIABLES}
    for provider in s.providers:
        assert f"{provider.name}: {provider.base_url}" in (by_name["<NAME>_BASE_URL"] or "")
        assert f"{provider.name}: {provider.model_name}" in (by_name["<NAME>_MODEL"] or "")


# --- shadow trials ---------------------------------------------------------------------


def test_shadow_trials_are_off_by_default_and_read_when_set() -> None:
    s = Settings()
    assert (s.shadow_model, s.shadow_rate, s.shadow_daily_usd, s.shadow_judge) == (
        None,
        0.0,
        None,
        "glm",
    )
    on = settings(
        SHADOW_MODEL=find("kimi").id,  # type: ignore[union-attr]
        SHADOW_RATE="0.05",
        SHADOW_DAILY_USD="0.50",
        SHADOW_JUDGE="llama",
    )
    # An id becomes its alias; the challenger need not be in MODELS.
    assert (on.shadow_model, on.shadow_rate, on.shadow_daily_usd, on.shadow_judge) == (
        "kimi",
        0.05,
        0.5,
        "llama",
    )
    outside = settings(MODELS="glm", SHADOW_MODEL="glm-5.3", SHADOW_RATE="1", SHADOW_DAILY_USD="1")
    assert outside.shadow_model == "glm-5.3"
    # A challenger with a rate of 0 tries nothing and needs no cap.
    assert settings(SHADOW_MODEL="kimi", SHADOW_RATE="0").shadow_rate == 0


# --- spend alerts (ALERT_WEBHOOK, ALERT_AT, ALERT_FORMAT) -----------------------------

HOOK = "https://hooks.slack.com/services/T000/B000/s3cretS3cret"


def test_alert_settings_are_read() -> None:
    s = settings(ALERT_WEBHOOK=f" {HOOK} ", ALERT_AT="10, 75,100", ALERT_FORMAT="Discord")
    assert (s.alert_webhook, s.alert_at, s.alert_format) == (HOOK, (10, 75, 100), "discord")
    assert Settings().alert_at == (50, 80, 100)
    assert Settings().alert_webhook is None
    assert settings(ALERT_WEBHOOK="http://127.0.0.1:8123/hook").alert_webhook is not None
    assert settings(ALERT_AT="100").alert_at == (100,)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"SHADOW_MODEL": "gpt-4"}, "SHADOW_MODEL names an unknown model; known: glm, "),
        ({"SHADOW_JUDGE": "judge-judy"}, "SHADOW_JUDGE names an unknown model; known: glm, "),
        ({"SHADOW_RATE": "1.5"}, "SHADOW_RATE must be a number from 0 to 1: the share of"),
        ({"SHADOW_RATE": "-0.1"}, "SHADOW_RATE must be a number from 0 to 1"),
        ({"SHADOW_RATE": "10%"}, "SHADOW_RATE must be a number from 0 to 1"),
        ({"SHADOW_RATE": "nan"}, "SHADOW_RATE must be a number from 0 to 1"),
        ({"SHADOW_RATE": "0.1"}, "SHADOW_RATE needs SHADOW_MODEL: the model the sampled"),
        (
            {"SHADOW_MODEL": "kimi", "SHADOW_RATE": "0.1"},
            "SHADOW_DAILY_USD is required with SHADOW_MODEL and SHADOW_RATE: a positive amount",
        ),
        (
            {"SHADOW_MODEL": "kimi", "SHADOW_RATE": "0.1", "SHADOW_DAILY_USD": "0"},
            "SHADOW_DAILY_USD must be a positive amount of US dollars",
        ),
        (
            {"SHADOW_MODEL": "kimi", "SHADOW_RATE": "0.1", "SHADOW_DAILY_USD": "five"},
            "SHADOW_DAILY_USD must be a positive amount of US dollars",
        ),
    ],
)
def test_bad_shadow_settings_name_the_variable_and_the_rule(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        Settings.from_mapping(values)
    assert str(caught.value).startswith(message)


def test_shadow_settings_made_directly_are_checked_too() -> None:
    with pytest.raises(ValueError, match="SHADOW_MODEL names an unknown model"):
        Settings(shadow_model="@cf/moonshotai/kimi-k2.6")  # an id: settings hold aliases
    with pytest.raises(ValueError, match="SHADOW_RATE must be a number from 0 to 1"):
        Settings(shadow_model="kimi", shadow_rate=2.0, shadow_daily_usd=1.0)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"ALERT_WEBHOOK": "http://hooks.example.com/s3cretS3cret"},
            "ALERT_WEBHOOK must be an https:// URL (http:// only for a local server)",
        ),
        (
            {"ALERT_WEBHOOK": "ftp://hooks.example.com/s3cretS3cret"},
            "ALERT_WEBHOOK must be an https:// URL (http:// only for a local server)",
        ),
        (
            {"ALERT_WEBHOOK": "hooks.slack.com/s3cretS3cret"},
            "ALERT_WEBHOOK must be an https:// URL (http:// only for a local server)",
        ),
        (
            {"ALERT_WEBHOOK": "https://[::1/s3cretS3cret"},
            "ALERT_WEBHOOK must be an https:// URL (http:// only for a local server)",
        ),
        (
            {"ALERT_AT": "50,eighty"},
            "ALERT_AT entry 2 must be a whole number of percent from 1 to 100",
        ),
        ({"ALERT_AT": "0,50"}, "ALERT_AT entry 1 must be a whole number of percent from 1 to 100"),
        (
            {"ALERT_AT": "50,101"},
            "ALERT_AT entry 2 must be a whole number of percent from 1 to 100",
        ),
        ({"ALERT_AT": "50.5"}, "ALERT_AT entry 1 must be a whole number of percent from 1 to 100"),
        ({"ALERT_AT": "-5"}, "ALERT_AT entry 1 must be a whole number of percent from 1 to 100"),
        (
            {"ALERT_AT": "50,,80"},
            "ALERT_AT entry 2 must be a whole number of percent from 1 to 100",
        ),
        ({"ALERT_AT": "80,50"}, "ALERT_AT must list its percents in ascending order, each once"),
        ({"ALERT_AT": "50,50,80"}, "ALERT_AT must list its percents in ascending order, each once"),
        ({"ALERT_FORMAT": "teams"}, "ALERT_FORMAT must be one of auto, slack, discord, json"),
    ],
)
def test_a_bad_alert_setting_names_the_variable_and_the_rule(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)) as caught:
        Settings.from_mapping(values)
    assert "s3cret" not in str(caught.value)


def test_directly_made_alert_settings_are_held_to_the_same_rules() -> None:
    with pytest.raises(ValueError, match="ALERT_AT must list at least one percent"):
        Settings(alert_at=())
    with pytest.raises(ValueError, match="ALERT_AT entry 1"):
        Settings(alert_at=(0,))
    with pytest.raises(ValueError, match="ALERT_WEBHOOK must be an https:// URL"):
        Settings(alert_webhook="http://example.com/x")
    with pytest.raises(ValueError, match="ALERT_FORMAT"):
        Settings(alert_format="teams")


def test_the_webhook_is_never_shown() -> None:
    s = settings(ALERT_WEBHOOK=HOOK)
    assert "s3cret" not in repr(s)
    assert next(v for v in VARIABLES if v.name == "ALERT_WEBHOOK").secret
