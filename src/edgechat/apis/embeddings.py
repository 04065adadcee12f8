"""The OpenAI API's embeddings (``POST /v1/embeddings``): one binding call
for all of a request's texts, and the ``list`` of ``embedding`` objects the
OpenAI clients read, as float lists or as base64 of little-endian float32
(what the official Python client asks for by default).

Workers AI's embedding models answer ``{shape, data, pooling}``
(https://developers.cloudflare.com/workers-ai/models/bge-m3/), with no token
counts: ``usage`` is the model's when it sends one, else zero.
"""

from __future__ import annotations

import asyncio
import base64
import math
import struct
from typing import Any

from edgechat.core.faults import UpstreamMalformed, UpstreamTimeout
from edgechat.core.ports import Ai
from edgechat.core.requests import EmbeddingsRequest

__all__ = ["embed", "embeddings_json"]


async def embed(
    ai: Ai, request: EmbeddingsRequest, options: dict[str, Any], timeout_s: float
) -> tuple[list[list[float]], int]:
    """The vectors of ``request.texts``, in order, and the prompt tokens the
    model counted (0 when it says none); raises ``UpstreamError``."""
    inputs = {"text": list(request.texts)}
    try:
        result = await asyncio.wait_for(ai.run(request.model.id, inputs, options), timeout_s)
    except TimeoutError as exc:
        raise UpstreamTimeout(
            detail=f"{request.model.id} did not answer within {timeout_s:.0f} s"
        ) from exc
    return _vectors(result, len(request.texts), request.model.dimensions), _prompt_tokens(result)


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


def _prompt_tokens(result: dict[str, Any]) -> int:
    usage = result.get("usage")
    tokens = usage.get("prompt_tokens") if type(usage) is dict else None
    return tokens if type(tokens) is int and tokens >= 0 else 0


def embeddings_json(
    request: EmbeddingsRequest, vectors: list[list[float]], prompt_tokens: int
) -> dict[str, Any]:
    """The ``list`` body OpenAI's clients read."""
    as_base64 = request.encoding_format == "base64"
    data = [
        {
            "object": "embedding",
            "index": index,
            "embedding": _base64(vector) if as_base64 else vector,
        }
        for index, vector in enumerate(vectors)
    ]
    return {
        "object": "list",
        "data": data,
        "model": request.model.id,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    }


def _base64(vector: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
