"""The OpenAI API's embeddings (``POST /v1/embeddings``) on the wire: the
``list`` of ``embedding`` objects the OpenAI clients read, as float lists or
as base64 of little-endian float32 (what the official Python client asks for
by default), and ``usage``: the input tokens (``answer.embedding``: the
model's count, else edgechat's estimate), which are what the call is
charged for.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from edgechat.core.requests import EmbeddingsRequest

__all__ = ["embeddings_json"]


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
