"""The one validator of ``POST /chat`` bodies.

A body becomes a ``ChatRequest`` or raises ``PayloadTooLarge`` / ``BadRequest``
with a specific message built only from field names, positions and limits -
never from what the client sent, so nothing a client submits is reflected
back (or into logs through the error text).

Accepted body::

    {"messages": [{"role": "user" | "assistant", "content": str}, ...],
     "model": str?, "temperature": number?, "max_tokens": int?, "reasoning": bool?}

``null`` for an optional field means "not given". Unknown fields are refused,
so a typo (``max_token``) is an error instead of a silently ignored setting.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from edgechat.errors import BadRequest, body_too_large
from edgechat.models import Model, lookup

__all__ = ["ChatRequest", "Limits", "Message", "parse_chat_request"]

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 65_536
    max_messages: int = 50
    max_message_chars: int = 8_000
    max_total_chars: int = 32_000
    default_output_tokens: int = 1_024
    max_output_tokens: int = 4_096

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_messages",
            "max_message_chars",
            "max_total_chars",
            "default_output_tokens",
            "max_output_tokens",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer")
        if self.default_output_tokens > self.max_output_tokens:
            raise ValueError("Limits.default_output_tokens must not exceed max_output_tokens")


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[Message, ...]
    model: Model
    temperature: float | None
    max_tokens: int
    reasoning: bool | None


_FIELDS = ("messages", "model", "temperature", "max_tokens", "reasoning")
_FIELD_SET = frozenset(_FIELDS)
_MESSAGE_FIELD_SET = frozenset(("role", "content"))


def _reject_constant(_name: str) -> None:
    # NaN and Infinity are not JSON; Python's parser accepts them by default.
    raise ValueError("not JSON")


def parse_chat_request(
    body: bytes, limits: Limits, allowed_models: Sequence[str], default_model: str
) -> ChatRequest:
    """Validate a ``/chat`` body; raises only ``PayloadTooLarge`` or ``BadRequest``."""
    if len(body) > limits.max_body_bytes:
        raise body_too_large(limits.max_body_bytes, detail=f"body of {len(body)} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(public="The request body is not valid UTF-8.") from None
    try:
        data: Any = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and integers too long to convert.
        raise BadRequest(public="The request body is not valid JSON.") from None
    if type(data) is not dict:
        raise BadRequest(public="The request body must be a JSON object.")
    if not data.keys() <= _FIELD_SET:
        raise BadRequest(
            public=f"The request has an unknown field; known fields: {', '.join(_FIELDS)}."
        )

    messages = _messages(data.get("messages"), limits)
    model_name = data.get("model")
    if model_name is None:
        model_name = default_model
    elif type(model_name) is not str:
        raise BadRequest(public="model must be a string.")
    return ChatRequest(
        messages=messages,
        model=lookup(model_name, allowed_models),
        temperature=_temperature(data.get("temperature")),
        max_tokens=_max_tokens(data.get("max_tokens"), limits),
        reasoning=_reasoning(data.get("reasoning")),
    )


def _messages(value: Any, limits: Limits) -> tuple[Message, ...]:
    if value is None:
        raise BadRequest(public="messages is required.")
    if type(value) is not list:
        raise BadRequest(public="messages must be an array.")
    if not value:
        raise BadRequest(public="messages must not be empty.")
    if len(value) > limits.max_messages:
        raise BadRequest(public=f"messages has more than {limits.max_messages} entries.")
    messages: list[Message] = []
    total = 0
    for index, item in enumerate(value):
        where = f"messages[{index}]"
        if type(item) is not dict:
            raise BadRequest(public=f"{where} must be an object.")
        if not item.keys() <= _MESSAGE_FIELD_SET:
            raise BadRequest(public=f"{where} has an unknown field; known fields: role, content.")
        role = item.get("role")
        if role == "system":
            raise BadRequest(
                public=f'{where}.role "system" is not accepted: the server sets the system prompt.'
            )
        if role != "user" and role != "assistant":
            raise BadRequest(public=f'{where}.role must be "user" or "assistant".')
        content = item.get("content")
        if type(content) is not str:
            raise BadRequest(public=f"{where}.content must be a string.")
        if len(content) > limits.max_message_chars:
            raise BadRequest(
                public=f"{where}.content is longer than {limits.max_message_chars} characters."
            )
        if not content.strip():
            raise BadRequest(public=f"{where}.content must not be empty.")
        try:
            content.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate such as "\ud800"
            raise BadRequest(public=f"{where}.content is not valid Unicode text.") from None
        total += len(content)
        if total > limits.max_total_chars:
            raise BadRequest(
                public=f"messages are longer than {limits.max_total_chars} characters in total."
            )
        messages.append(Message(role=role, content=content))
    if messages[-1].role != "user":
        raise BadRequest(public="The last message must come from the user.")
    return tuple(messages)


def _temperature(value: Any) -> float | None:
    if value is None:
        return None
    # bool is an int in Python, but true is not a temperature.
    if type(value) not in (int, float) or not 0 <= value <= 2:
        raise BadRequest(public="temperature must be a number from 0 to 2.")
    return float(value)


def _max_tokens(value: Any, limits: Limits) -> int:
    if value is None:
        return limits.default_output_tokens
    if type(value) is not int or not 1 <= value <= limits.max_output_tokens:
        raise BadRequest(
            public=f"max_tokens must be an integer from 1 to {limits.max_output_tokens}."
        )
    return value


def _reasoning(value: Any) -> bool | None:
    if value is None:
        return None
    if type(value) is not bool:
        raise BadRequest(public="reasoning must be true or false.")
    return value
