"""The rules every API's body shares: the size caps, the JSON rules
(``json_body``: nesting depth, numbers JavaScript can hold, no lone surrogate
anywhere), the model lookup, message parts (text, images, documents) and
the numbers a question may set.

A body becomes a ``ChatRequest`` (or an ``OpenAIRequest`` around one) or
raises ``PayloadTooLarge`` / ``BadRequest`` with a specific message built
only from field names, positions and limits - never from what the client
sent, so nothing a client submits is reflected back (or into logs through
the error text). ``null`` for an optional field means "not given". Unknown
fields are refused, so a typo (``max_token``) is an error instead of a
silently ignored setting. Each API's own rules are beside its framing:
``chat_body``, ``openai_body``, ``responses_body``, ``embeddings_body``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from edgechat.apis.fields import FIELD_NAMES
from edgechat.core import json_body
from edgechat.core.errors import BadRequest, body_too_large
from edgechat.core.ids import is_random_id
from edgechat.core.models import Model, allowed_models, lookup
from edgechat.core.requests import ChatRequest, DocumentFile, Limits
from edgechat.media.documents import check_file_part, document_url_size
from edgechat.media.images import check_image_part, data_url_size

__all__ = [
    "Images",
    "body_cap",
    "check_fit",
    "count_text",
    "document_body_cap",
    "json_object",
    "parse_document",
    "read_content",
    "read_knowledge",
    "read_max_tokens",
    "read_message_items",
    "read_model",
    "read_object",
    "read_temperature",
]


def json_object(body: bytes, limits: Limits) -> dict[str, Any]:
    """Any other JSON body: an object within ``max_body_bytes`` and the JSON rules."""
    return read_object(body, limits, limits.max_body_bytes)


def parse_document(
    body: bytes, limits: Limits, most: int | None = None, var: str = "MAX_DOCUMENT_BYTES"
) -> DocumentFile:
    """A ``POST /api/documents`` body: one file part, as in a message, of at
    most ``most`` bytes (the setting ``var``; ``max_document_bytes`` unless
    given: a knowledge base's document has its own)."""
    most = limits.max_document_bytes if most is None else most
    cap = document_body_cap(limits, most)
    return check_file_part(read_object(body, limits, cap), "file", most, var)


def document_body_cap(limits: Limits, most: int) -> int:
    """The largest body of one file part of ``most`` bytes."""
    return limits.max_body_bytes + document_url_size(most)


def body_cap(limits: Limits, allowed: Sequence[str]) -> int:
    """The most a request body may hold in this deployment: ``max_body_bytes``
    of text, what ``max_documents`` documents of the largest size take as data
    URLs, and where one of its models can see, exactly what ``max_images``
    images of the largest size take on top."""
    cap = limits.max_body_bytes + limits.max_documents * document_url_size(
        limits.max_document_bytes
    )
    if any(model.vision for model in allowed_models(allowed)):
        cap += limits.max_images * data_url_size(limits.max_image_bytes)
    return cap


def check_fit(request: ChatRequest, allowed: Sequence[str]) -> None:
    unfit = request.unfit(request.model)
    if unfit == "images":
        seeing = [model.alias for model in allowed_models(allowed) if model.vision]
        which = f"these can: {', '.join(seeing)}" if seeing else "none of them can"
        raise BadRequest(
            public=f"Images need a model that can see; {request.model.id} cannot, and of "
            f"this deployment's models {which}."
        )
    if unfit is not None:
        raise BadRequest(public=f"{unfit} is not supported by {request.model.id}.")


class Images:
    """The images and documents of one request, counted against the limits
    as they are read."""

    __slots__ = ("_limits", "count", "documents", "url_chars")

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self.count = 0
        self.documents = 0
        self.url_chars = 0

    def document(self, part: Any, where: str) -> DocumentFile:
        checked = check_file_part(part, where, self._limits.max_document_bytes)
        self.documents += 1
        if self.documents > self._limits.max_documents:
            raise BadRequest(
                public=f"The conversation has more than {self._limits.max_documents} documents "
                "(MAX_DOCUMENTS)."
            )
        self.url_chars += checked.url_chars
        return checked

    def part(self, part: Any, where: str) -> dict[str, Any]:
        checked = check_image_part(part, where, self._limits.max_image_bytes)
        self.count += 1
        if self.count > self._limits.max_images:
            raise BadRequest(
                public=f"The conversation has more than {self._limits.max_images} images."
            )
        self.url_chars += len(checked["image_url"]["url"])
        return checked

    def check_body(self, size: int) -> None:
        # The cap grows by what the images take, and by no more.
        text_bytes = size - self.url_chars
        if text_bytes > self._limits.max_body_bytes:
            raise body_too_large(self._limits.max_body_bytes, detail=f"{text_bytes} bytes of text")


def read_content(
    value: Any, where: str, images: Images | None
) -> tuple[str, tuple[dict[str, Any], ...], tuple[DocumentFile, ...]]:
    """A message's content: a string, or a non-empty list of text parts and,
    where ``images`` counts them (user messages), image and file parts.
    Returns the text (parts joined by newlines), the parts when there are
    images, and the documents."""
    if type(value) is str:
        return value, (), ()
    kinds = "text, image and file parts" if images is not None else "text parts"
    if type(value) is not list or not value:
        raise BadRequest(public=f"{where} must be a string or a non-empty list of {kinds}.")
    texts: list[str] = []
    parts: list[dict[str, Any]] = []
    documents: list[DocumentFile] = []
    for index, part in enumerate(value):
        at = f"{where}[{index}]"
        kind = part.get("type") if type(part) is dict else None
        if kind == "image_url" and images is not None:
            parts.append(images.part(part, at))
        elif kind == "file" and images is not None:
            documents.append(images.document(part, at))
        elif kind == "text" and type(part.get("text")) is str and part.keys() <= {"type", "text"}:
            texts.append(part["text"])
            parts.append({"type": "text", "text": part["text"]})
        else:
            raise BadRequest(public=f'{at} must be a text part {{"type": "text", "text": "..."}}.')
    has_images = any(p["type"] == "image_url" for p in parts)
    return "\n".join(texts), tuple(parts) if has_images else (), tuple(documents)


def read_object(body: bytes, limits: Limits, cap: int) -> dict[str, Any]:
    # Over the text cap with no image or document in it: refused before it is parsed.
    if len(body) > cap or (len(body) > limits.max_body_bytes and b'"data:' not in body):
        limit = cap if len(body) > cap else limits.max_body_bytes
        raise body_too_large(limit, detail=f"body of {len(body)} bytes")
    data = json_body.loads(
        body,
        max_depth=limits.max_json_depth,
        max_text_bytes=limits.max_body_bytes,
        names=FIELD_NAMES,
    )
    if type(data) is not dict:
        raise BadRequest(public="The request body must be a JSON object.")
    return data


def read_model(value: Any, allowed_models: Sequence[str], default_model: str) -> Model:
    if value is None:
        value = default_model
    elif type(value) is not str:
        raise BadRequest(public="model must be a string.")
    return lookup(value, allowed_models)


def read_message_items(
    value: Any, limits: Limits, fields: frozenset[str], known: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The messages of either body as ``(where, message)``, after the checks
    both share: a non-empty array within ``max_messages`` of objects with
    only ``fields`` (named in ``known``)."""
    if value is None:
        raise BadRequest(public="messages is required.")
    if type(value) is not list:
        raise BadRequest(public="messages must be an array.")
    if not value:
        raise BadRequest(public="messages must not be empty.")
    if len(value) > limits.max_messages:
        raise BadRequest(public=f"messages has more than {limits.max_messages} entries.")
    for index, item in enumerate(value):
        where = f"messages[{index}]"
        if type(item) is not dict:
            raise BadRequest(public=f"{where} must be an object.")
        if not item.keys() <= fields:
            raise BadRequest(public=f"{where} has an unknown field; known fields: {known}.")
        yield where, item


def count_text(
    text: str, where: str, total: int, limits: Limits, *, may_be_empty: bool = False
) -> int:
    """Checks one message's text against the limits; returns the running total."""
    if len(text) > limits.max_message_chars:
        raise BadRequest(public=f"{where} is longer than {limits.max_message_chars} characters.")
    if not may_be_empty and not text.strip():
        raise BadRequest(public=f"{where} must not be empty.")
    total += len(text)
    if total > limits.max_total_chars:
        raise BadRequest(
            public=f"messages are longer than {limits.max_total_chars} characters in total."
        )
    return total


def read_temperature(value: Any) -> float | None:
    if value is None:
        return None
    # bool is an int in Python, but true is not a temperature.
    if type(value) not in (int, float) or not 0 <= value <= 2:
        raise BadRequest(public="temperature must be a number from 0 to 2.")
    return float(value)


def read_max_tokens(value: Any, limits: Limits, name: str = "max_tokens") -> int:
    if value is None:
        return limits.default_output_tokens
    if type(value) is not int or not 1 <= value <= limits.max_output_tokens:
        raise BadRequest(public=f"{name} must be an integer from 1 to {limits.max_output_tokens}.")
    return value


def read_knowledge(value: Any, where: str = "knowledge") -> str | None:
    """A knowledge base's id (``GET /api/knowledge`` lists them), or absent
    (``/chat``'s ``knowledge``, the OpenAI API's ``edgechat.knowledge``)."""
    if value is None:
        return None
    if type(value) is not str or not is_random_id(value):
        raise BadRequest(public=f"{where} must be the id of a knowledge base (GET /api/knowledge).")
    return value
