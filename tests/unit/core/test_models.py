from __future__ import annotations

import dataclasses
import json

import pytest

from edgechat.core.errors import BadRequest
from edgechat.core.models import (
    CATALOG,
    Model,
    Usage,
    WireFormat,
    catalog_json,
    cost_usd,
    find,
    lookup,
)

ALLOWED = ("glm", "kimi", "llama")

# The Workers AI catalog as Cloudflare's model pages give it
# (https://developers.cloudflare.com/workers-ai/models/):
# alias -> (id, context, $/M in, $/M out, free plan, shape).
PLATFORM_MODELS = {
    "glm": ("@cf/zai-org/glm-4.7-flash", 131_072, 0.06, 0.40, True, WireFormat.OPENAI),
    "glm-5.3-flash": ("@cf/zai-org/glm-5.3-flash", 1_310_720, 0.15, 0.50, False, WireFormat.OPENAI),
    "glm-5.3": ("@cf/zai-org/glm-5.3", 1_310_720, 1.40, 4.40, False, WireFormat.OPENAI),
    "kimi": ("@cf/moonshotai/kimi-k2.6", 262_144, 0.95, 4.00, False, WireFormat.OPENAI),
    "kimi-code": ("@cf/moonshotai/kimi-k2.7-code", 262_144, 0.95, 4.00, False, WireFormat.OPENAI),
    "llama": ("@cf/meta/llama-3.1-8b-instruct-fp8", 32_000, 0.15, 0.29, True, WireFormat.NATIVE),
}


def usage(prompt: int, completion: int) -> Usage:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def test_catalog_matches_the_platform_table() -> None:
    assert {model.alias for model in CATALOG} == set(PLATFORM_MODELS)
    for model in CATALOG:
        assert (
            model.id,
            model.context_window,
            model.price_in_per_m,
            model.price_out_per_m,
            model.free_plan,
            model.wire_format,
        ) == PLATFORM_MODELS[model.alias]
        assert model.label
        assert model.family in ("GLM", "Kimi", "Llama")
    assert len({model.id for model in CATALOG}) == len(CATALOG)
    assert find("glm") is not None
    assert find("glm").label == "GLM 4.7 Flash"  # type: ignore[union-attr]
    assert find("kimi").label == "Kimi K2.6"  # type: ignore[union-attr]


def test_models_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        CATALOG[0].alias = "x"  # type: ignore[misc]


@pytest.mark.parametrize("name", ["glm", "@cf/zai-org/glm-4.7-flash"])
def test_lookup_by_alias_or_id(name: str) -> None:
    assert lookup(name, ALLOWED).alias == "glm"


def test_lookup_allow_list_may_hold_ids() -> None:
    assert lookup("kimi", ["@cf/moonshotai/kimi-k2.6"]).alias == "kimi"


@pytest.mark.parametrize(
    "name",
    [
        "glm-5.3",  # known but not allowed
        "@cf/zai-org/glm-5.3",
        "@cf/glm-4",  # the article's made-up ids
        "@cf/moonshot/kimi",
        "GLM",
        " glm",
        "",
        "<script>alert(1)</script>",
    ],
)
def test_lookup_refuses_without_echo(name: str) -> None:
    with pytest.raises(BadRequest) as caught:
        lookup(name, ALLOWED)
    body = json.dumps(caught.value.to_json())
    assert caught.value.status == 400
    if name.strip():
        assert name.strip() not in body
        assert name.strip() not in str(caught.value)
    # Unknown and disallowed look the same to the client.
    assert caught.value.to_json() == {
        "error": {
            "code": "invalid_request",
            "message": "model is not available; GET /api/models lists the models you can use.",
        }
    }


def test_lookup_refuses_non_strings() -> None:
    with pytest.raises(BadRequest):
        lookup(123, ALLOWED)  # type: ignore[arg-type]


def test_cost_usd() -> None:
    glm = lookup("glm", ALLOWED)
    assert cost_usd(glm, usage(1_000_000, 1_000_000)) == pytest.approx(0.46)
    assert cost_usd(glm, usage(0, 0)) == 0.0
    kimi = lookup("kimi", ALLOWED)
    # 1234 * 0.95 / 1e6 + 567 * 4.00 / 1e6 = 0.0011723 + 0.002268
    assert cost_usd(kimi, usage(1234, 567)) == pytest.approx(0.0034403, abs=1e-12)


# "per M cached input tokens" as the model pages list it (cloudflare-docs
# src/content/workers-ai-models/*.json); GLM 4.7 Flash and Llama list none.
CACHED_PRICES = {
    "glm": None,
    "glm-5.3-flash": 0.03,
    "glm-5.3": 0.26,
    "kimi": 0.16,
    "kimi-code": 0.19,
    "llama": None,
}


def test_cached_prices_match_the_model_pages() -> None:
    assert {model.alias: model.price_cached_in_per_m for model in CATALOG} == CACHED_PRICES


def test_cached_prompt_tokens_cost_the_cached_rate_or_the_input_rate() -> None:
    kimi = lookup("kimi", ALLOWED)
    cached: Usage = {**usage(10_000, 100), "cached_tokens": 8_000}
    # 2,000 at 0.95, 8,000 at 0.16, 100 out at 4.00 ($ per million).
    expected = (2_000 * 0.95 + 8_000 * 0.16 + 100 * 4.00) / 1e6
    assert cost_usd(kimi, cached) == pytest.approx(expected, abs=1e-12)
    full = cost_usd(kimi, usage(10_000, 100))
    assert full is not None
    assert expected < full
    # No cached price listed (GLM 4.7 Flash): the full input rate.
    glm = lookup("glm", ALLOWED)
    assert cost_usd(glm, {**usage(10_000, 100), "cached_tokens": 8_000}) == cost_usd(
        glm, usage(10_000, 100)
    )
    # More cached than prompt tokens (a broken count): at most the prompt.
    over: Usage = {**usage(10, 0), "cached_tokens": 50}
    assert cost_usd(kimi, over) == round(10 * 0.16 / 1e6, 8)


def test_cost_usd_is_rounded_to_8_decimals() -> None:
    llama = lookup("llama", ALLOWED)
    cost = cost_usd(llama, usage(1, 1))  # 0.15e-6 + 0.29e-6 = 4.4e-7
    assert cost == 4.4e-7
    assert cost == round(cost, 8)
    assert cost_usd(llama, usage(3, 7)) == round(3 * 0.15e-6 + 7 * 0.29e-6, 8)


def test_catalog_json() -> None:
    entries = catalog_json(["kimi", "glm", "@cf/meta/llama-3.1-8b-instruct-fp8", "glm"], "glm")
    assert [entry["alias"] for entry in entries] == ["kimi", "glm", "llama"]
    assert [entry["default"] for entry in entries] == [False, True, False]
    assert entries[1] == {
        "alias": "glm",
        "id": "@cf/zai-org/glm-4.7-flash",
        "label": "GLM 4.7 Flash",
        "family": "GLM",
        "context_window": 131072,
        "price_in_per_m": 0.06,
        "price_out_per_m": 0.40,
        "price_cached_in_per_m": None,
        "free_plan": True,
        "tools": True,
        "vision": False,
        "default": True,
    }
    json.dumps(entries)  # serialisable as is


def test_catalog_json_skips_unknown_names() -> None:
    assert catalog_json(["nope"], "glm") == []


def test_wire_format_per_model() -> None:
    assert lookup("llama", ALLOWED).wire_format is WireFormat.NATIVE
    assert lookup("kimi", ALLOWED).wire_format is WireFormat.OPENAI
    assert isinstance(CATALOG[0], Model)
