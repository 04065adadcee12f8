"""The model catalog: which Workers AI chat models edgechat knows, and their prices.

The operator chooses which of them are served (``MODELS``); clients name a
model by alias (``glm``) or by id (``@cf/zai-org/glm-4.7-flash``) and anything
else is refused before it can reach ``AI.run``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import NotRequired, TypedDict

from edgechat.core.errors import ModelNotFound

__all__ = [
    "AUTO",
    "CATALOG",
    "EMBEDDING_CATALOG",
    "EmbeddingModel",
    "Model",
    "Usage",
    "WireFormat",
    "allowed_models",
    "catalog_json",
    "cost_usd",
    "find",
    "lookup",
    "lookup_embedding",
]


class WireFormat(enum.Enum):
    """Shape of a model's input and streamed output."""

    # messages + max_completion_tokens in; chat.completion(.chunk) out.
    OPENAI = "openai"
    # messages + max_tokens in; {"response": …, "usage": …} out.
    NATIVE = "native"


@dataclass(frozen=True, slots=True)
class Model:
    alias: str
    id: str
    label: str
    family: str
    context_window: int
    price_in_per_m: float
    price_out_per_m: float
    free_plan: bool
    wire_format: WireFormat
    # Takes OpenAI ``tools`` / ``tool_choice`` and answers with ``tool_calls``.
    tools: bool
    # Reads images: OpenAI ``image_url`` parts in user messages.
    vision: bool = False
    # Thinks before it answers (``reasoning_content``) and reads its earlier
    # thinking back on assistant turns: thinking models expect it on the
    # turns that called tools (mastra #12592, inspect_ai #3137); a model that
    # does not think is sent none.
    thinks: bool = False
    # Whether the prices are known (a provider's may not be configured).
    priced: bool = True
    # A provider's own API (``PROVIDERS``) instead of Workers AI: its name.
    provider: str | None = None
    # $ per million cached input tokens (prompt caching), where the model's
    # catalog page lists one ("per M cached input tokens"); None: it lists
    # none, and cached tokens are priced as any input token.
    price_cached_in_per_m: float | None = None


class Usage(TypedDict):
    """Token counts of one answer, normalised from whatever shape the model sent."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    # Of ``prompt_tokens``, those read from the prompt cache
    # (``prompt_tokens_details.cached_tokens``); absent when none were.
    cached_tokens: NotRequired[int]


# Mirrors the Workers AI model catalog, https://developers.cloudflare.com/workers-ai/models/
# (ids, context windows, $ per million input / output tokens, Free plan access).
# Cached input prices are the model pages' "per M cached input tokens"
# (cloudflare-docs src/content/workers-ai-models/<model>.json, 2026-08:
# kimi-k2.6 0.16, kimi-k2.7-code 0.19, glm-5.3 0.26, glm-5.3-flash 0.03);
# the GLM 4.7 Flash and Llama 3.1 8B pages list none.
# Re-check ids against the live catalog before a release.
CATALOG: tuple[Model, ...] = (
    Model(
        alias="glm",
        id="@cf/zai-org/glm-4.7-flash",
        label="GLM 4.7 Flash",
        family="GLM",
        context_window=131_072,
        price_in_per_m=0.06,
        price_out_per_m=0.40,
        free_plan=True,
        wire_format=WireFormat.OPENAI,
        tools=True,
        thinks=True,
    ),
    Model(
        alias="glm-5.3-flash",
        id="@cf/zai-org/glm-5.3-flash",
        label="GLM 5.3 Flash",
        family="GLM",
        context_window=1_310_720,
        price_in_per_m=0.15,
        price_out_per_m=0.50,
        free_plan=False,
        wire_format=WireFormat.OPENAI,
        tools=True,
        thinks=True,
        vision=True,
        price_cached_in_per_m=0.03,
    ),
    Model(
        alias="glm-5.3",
        id="@cf/zai-org/glm-5.3",
        label="GLM 5.3",
        family="GLM",
        context_window=1_310_720,
        price_in_per_m=1.40,
        price_out_per_m=4.40,
        free_plan=False,
        wire_format=WireFormat.OPENAI,
        tools=True,
        thinks=True,
        price_cached_in_per_m=0.26,
    ),
    Model(
        alias="kimi",
        id="@cf/moonshotai/kimi-k2.6",
        label="Kimi K2.6",
        family="Kimi",
        context_window=262_144,
        price_in_per_m=0.95,
        price_out_per_m=4.00,
        free_plan=False,
        wire_format=WireFormat.OPENAI,
        tools=True,
        thinks=True,
        vision=True,
        price_cached_in_per_m=0.16,
    ),
    Model(
        alias="kimi-code",
        id="@cf/moonshotai/kimi-k2.7-code",
        label="Kimi K2.7 Code",
        family="Kimi",
        context_window=262_144,
        price_in_per_m=0.95,
        price_out_per_m=4.00,
        free_plan=False,
        wire_format=WireFormat.OPENAI,
        tools=True,
        thinks=True,
        price_cached_in_per_m=0.19,
    ),
    Model(
        alias="llama",
        id="@cf/meta/llama-3.1-8b-instruct-fp8",
        label="Llama 3.1 8B",
        family="Llama",
        context_window=32_000,
        price_in_per_m=0.15,
        price_out_per_m=0.29,
        free_plan=True,
        wire_format=WireFormat.NATIVE,
        tools=False,
    ),
)


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """A Workers AI text-embedding model (``POST /v1/embeddings``)."""

    alias: str
    id: str
    label: str
    family: str
    # Dimensions of each vector, and the most a single input may hold.
    dimensions: int
    max_input_tokens: int
    price_in_per_m: float
    free_plan: bool


# https://developers.cloudflare.com/workers-ai/models/bge-m3/: multilingual
# (Chinese and English among 100+ languages), 1,024 dimensions, $0.012 per
# million input tokens; `{text: str | str[]}` in, `{shape, data, pooling}` out.
EMBEDDING_CATALOG: tuple[EmbeddingModel, ...] = (
    EmbeddingModel(
        alias="bge-m3",
        id="@cf/baai/bge-m3",
        label="BGE-M3",
        family="BAAI",
        dimensions=1024,
        max_input_tokens=8192,
        price_in_per_m=0.012,
        free_plan=True,
    ),
)
_EMBEDDING_BY_NAME = MappingProxyType(
    {m.alias: m for m in EMBEDDING_CATALOG} | {m.id: m for m in EMBEDDING_CATALOG}
)


def lookup_embedding(name: str) -> EmbeddingModel:
    """The embedding model a client asked for; an unknown name gets the same
    answer as an unknown chat model, which never repeats the name."""
    model = _EMBEDDING_BY_NAME.get(name) if isinstance(name, str) else None
    if model is None:
        raise ModelNotFound(public=_NOT_AVAILABLE, detail="not an embedding model in the catalog")
    return model


_BY_NAME = MappingProxyType(
    {model.alias: model for model in CATALOG} | {model.id: model for model in CATALOG}
)


# ``auto``: not a model but the routing rules' choice (``config.routes``,
# ``answer.routing``), allowed where ``MODELS`` lists it. A request names it
# until it is routed, before anything is sent: its window is unbounded so that
# no check before routing refuses what a routed model could take, and it
# claims every ability so that routing, not the body's checks, says which
# models fit.
AUTO = Model(
    alias="auto",
    id="auto",
    label="Auto",
    family="Auto",
    context_window=2**31 - 1,
    price_in_per_m=0.0,
    price_out_per_m=0.0,
    free_plan=False,
    wire_format=WireFormat.OPENAI,
    tools=True,
    vision=True,
    priced=False,
)

_NOT_AVAILABLE = "model is not available; GET /api/models lists the models you can use."


def find(name: str) -> Model | None:
    """The catalog entry named by alias or id, allowed or not (for configuration)."""
    return _BY_NAME.get(name)


def lookup(name: str, allowed: Sequence[str]) -> Model:
    """The model a client asked for, if the operator allows it.

    ``allowed`` holds aliases (ids also work). Unknown and disallowed names get
    the same answer, which never repeats the name.
    """
    if name == AUTO.alias and AUTO.alias in allowed:
        return AUTO
    model = _BY_NAME.get(name) if isinstance(name, str) else None
    if model is None or (model.alias not in allowed and model.id not in allowed):
        raise ModelNotFound(public=_NOT_AVAILABLE, detail="model not in catalog or not allowed")
    return model


def allowed_models(allowed: Sequence[str]) -> tuple[Model, ...]:
    """The catalog entries ``allowed`` names, in its order, each once."""
    found = (_BY_NAME.get(name) for name in allowed)
    return tuple(dict.fromkeys(model for model in found if model is not None))


def cost_usd(model: Model, usage: Usage) -> float | None:
    """What an answer cost at list price, in US dollars (None: prices
    unknown). Cached prompt tokens are priced at the model's cached rate, or
    at its input rate where it lists none."""
    if not model.priced:
        return None
    prompt = usage["prompt_tokens"]
    cached = min(usage.get("cached_tokens", 0), prompt)
    cached_rate = model.price_cached_in_per_m
    dollars = (
        (prompt - cached) * model.price_in_per_m
        + cached * (model.price_in_per_m if cached_rate is None else cached_rate)
        + usage["completion_tokens"] * model.price_out_per_m
    ) / 1_000_000
    return round(dollars, 8)


def catalog_json(allowed: Sequence[str], default_alias: str) -> list[dict[str, object]]:
    """Body of ``GET /api/models``: the allowed models in the operator's
    order, ``auto`` where ``MODELS`` lists it (its prices unknown until it
    is routed; its abilities those of any model it may choose)."""
    models = allowed_models(allowed)
    entries: list[dict[str, object]] = []
    for name in dict.fromkeys(allowed):
        model = AUTO if name == AUTO.alias else _BY_NAME.get(name)
        if model is None:
            continue
        entry = {
            "alias": model.alias,
            "id": model.id,
            "label": model.label,
            "family": model.family,
            "context_window": model.context_window,
            "price_in_per_m": model.price_in_per_m,
            "price_out_per_m": model.price_out_per_m,
            "price_cached_in_per_m": model.price_cached_in_per_m,
            "free_plan": model.free_plan,
            "tools": model.tools,
            "vision": model.vision,
            "default": model.alias == default_alias or model.id == default_alias,
        }
        if model is AUTO:
            entry |= {
                "context_window": max((m.context_window for m in models), default=0),
                "price_in_per_m": None,
                "price_out_per_m": None,
                "free_plan": all(m.free_plan for m in models),
                "tools": any(m.tools for m in models),
                "vision": any(m.vision for m in models),
            }
        entries.append(entry)
    return entries
