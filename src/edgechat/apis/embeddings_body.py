"""``POST /v1/embeddings``'s body rules."""

from __future__ import annotations

from typing import Any

from edgechat.apis.body import count_text, read_object
from edgechat.apis.fields import EMBEDDING_FIELDS
from edgechat.core.errors import BadRequest
from edgechat.core.models import EMBEDDING_CATALOG, lookup_embedding
from edgechat.core.requests import EmbeddingsRequest, Limits

__all__ = ["MAX_EMBEDDING_INPUTS", "parse_embeddings_request"]


_EMBEDDING_FIELD_SET = frozenset(EMBEDDING_FIELDS)


_ENCODING_FORMATS = ("float", "base64")


# Texts per request: one binding call embeds them all.
MAX_EMBEDDING_INPUTS = 100


def parse_embeddings_request(body: bytes, limits: Limits) -> EmbeddingsRequest:
    """Validate a ``/v1/embeddings`` body; raises ``PayloadTooLarge``,
    ``BadRequest`` or ``ModelNotFound``. ``model`` may be left out (the first
    embedding model of the catalog answers)."""
    data = read_object(body, limits, limits.max_body_bytes)
    if not data.keys() <= _EMBEDDING_FIELD_SET:
        raise BadRequest(
            public="The request has a field edgechat does not support; supported: "
            f"{', '.join(EMBEDDING_FIELDS)}."
        )
    name = data.get("model")
    if name is not None and type(name) is not str:
        raise BadRequest(public="model must be a string.")
    model = EMBEDDING_CATALOG[0] if name is None else lookup_embedding(name)
    encoding = data.get("encoding_format")
    if encoding is not None and encoding not in _ENCODING_FORMATS:
        raise BadRequest(public=f"encoding_format must be one of {', '.join(_ENCODING_FORMATS)}.")
    dimensions = data.get("dimensions")
    if dimensions is not None and (type(dimensions) is not int or dimensions != model.dimensions):
        raise BadRequest(
            public=f"dimensions must be {model.dimensions} for {model.id}: "
            "its vectors are not shortened."
        )
    user = data.get("user")
    if user is not None and type(user) is not str:
        raise BadRequest(public="user must be a string.")
    return EmbeddingsRequest(
        model=model,
        texts=_embedding_inputs(data.get("input"), limits),
        encoding_format=encoding or "float",
    )


def _embedding_inputs(value: Any, limits: Limits) -> tuple[str, ...]:
    """A string or a list of 1 to ``MAX_EMBEDDING_INPUTS`` strings, each
    held to the message limits and all of them to the conversation's."""
    if value is None:
        raise BadRequest(public="input is required.")
    texts = [value] if type(value) is str else value
    if (
        type(texts) is not list
        or not 0 < len(texts) <= MAX_EMBEDDING_INPUTS
        or any(type(text) is not str for text in texts)
    ):
        raise BadRequest(
            public=f"input must be a string or a list of 1 to {MAX_EMBEDDING_INPUTS} strings "
            "(token arrays are not taken)."
        )
    total = 0
    for index, text in enumerate(texts):
        where = "input" if type(value) is str else f"input[{index}]"
        total = count_text(text, where, total, limits)
    return tuple(texts)
