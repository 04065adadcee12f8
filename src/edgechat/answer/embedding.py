"""Embeddings: the vectors of texts, one binding call for them all, and
what they cost. Every embedding edgechat makes goes through ``embed``
(``/v1/embeddings``, the semantic cache's questions, a knowledge base's
chunks), and is paid for through ``billing`` like any answer.

Workers AI's embedding models answer ``{shape, data, pooling}``
(https://developers.cloudflare.com/workers-ai/models/bge-m3/), with no token
counts: the input tokens are the model's count when it sends one (``usage``),
else edgechat's one estimate of a text's tokens (``documents.estimate_tokens``:
a CJK character a token, four other characters a token), summed over the
texts. The cost is those tokens at the model's list price
(``EmbeddingModel.price_in_per_m``: bge-m3 $0.012 per million input tokens,
https://developers.cloudflare.com/workers-ai/platform/pricing/, "Embeddings
model pricing"), and Workers AI bills it in Neurons like any of its models.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgechat.answer import billing
from edgechat.answer.context import Context
from edgechat.core.faults import UpstreamMalformed, UpstreamTimeout
from edgechat.core.models import EMBEDDING_CATALOG, EmbeddingModel
from edgechat.core.ports import Ai
from edgechat.media import documents
from edgechat.users.usage import NEURONS_PER_USD

__all__ = ["BGE_M3", "Embedded", "bill_of", "charge", "embed"]

# The model every feature embeds with (VECTORS' index is bge-m3's: 1,024 dimensions).
BGE_M3 = EMBEDDING_CATALOG[0]


@dataclass(frozen=True, slots=True)
class Embedded:
    """The vectors of the texts, in order, and what making them cost."""

    vectors: list[list[float]]
    # Input tokens: the model's count, or the estimate (``estimated``).
    tokens: int
    estimated: bool
    cost_usd: float
    neurons: float
    model: EmbeddingModel = BGE_M3


async def embed(
    ai: Ai,
    texts: Sequence[str],
    *,
    timeout_s: float,
    model: EmbeddingModel = BGE_M3,
    options: dict[str, Any] | None = None,
) -> Embedded:
    """The vectors of ``texts`` (one call), their tokens and cost; raises
    ``UpstreamError`` (``UpstreamTimeout`` past ``timeout_s`` seconds,
    ``UpstreamMalformed`` for an answer that is not one vector a text).
    Nothing is counted here: the caller charges it (``bill_of``,
    ``billing.charge``) once it is done."""
    inputs = {"text": list(texts)}
    try:
        result = await asyncio.wait_for(ai.run(model.id, inputs, options or {}), timeout_s)
    except TimeoutError as exc:
        raise UpstreamTimeout(detail=f"{model.id} did not answer within {timeout_s:.0f} s") from exc
    vectors = _vectors(result, len(inputs["text"]), model.dimensions)
    counted = _prompt_tokens(result)
    tokens = counted if counted is not None else sum(map(documents.estimate_tokens, inputs["text"]))
    cost = tokens * model.price_in_per_m / 1_000_000
    return Embedded(vectors, tokens, counted is None, cost, cost * NEURONS_PER_USD, model)


def bill_of(embedded: Embedded) -> billing.Bill:
    """What ``billing`` counts for an embedding call: its input tokens and cost."""
    return billing.Bill(embedded.model, embedded.cost_usd, prompt_tokens=embedded.tokens)


def charge(ctx: Context, embedded: Embedded) -> None:
    """Counts an embedding call for the request's user after the reply, like an answer."""
    billing.charge(ctx, bill_of(embedded))


def _vectors(result: dict[str, Any], count: int, dimensions: int) -> list[list[float]]:
    data = result.get("data")
    if type(data) is not list or len(data) != count:
        raise UpstreamMalformed(detail=f"no {count} vectors in the embedding model's answer")
    for vector in data:
        if (
            type(vector) is not list
            or len(vector) != dimensions
            or not set(map(type, vector)) <= {int, float}
            or not all(map(math.isfinite, vector))
        ):
            raise UpstreamMalformed(detail=f"a vector that is not {dimensions} finite numbers")
    return data


def _prompt_tokens(result: dict[str, Any]) -> int | None:
    usage = result.get("usage")
    tokens = usage.get("prompt_tokens") if type(usage) is dict else None
    return tokens if type(tokens) is int and tokens >= 0 else None
