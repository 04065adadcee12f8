"""``POST /chat``'s body rules. Accepted body::

    {"messages": [{"role": "user" | "assistant", "content": str}, ...],
     "model": str?, "temperature": number?, "max_tokens": int?, "reasoning": bool?,
     "preset": str?, "conversation": str?}

A ``preset`` names one of the operator's presets (``config.presets``): its
system prompt replaces ``SYSTEM_PROMPT``, its model and temperature apply
unless the body gives its own. The shared rules are ``body``'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgechat.answer.affinity import MAX_CONVERSATION_CHARS
from edgechat.apis.body import (
    Images,
    body_cap,
    check_fit,
    count_text,
    read_content,
    read_max_tokens,
    read_message_items,
    read_model,
    read_object,
    read_temperature,
)
from edgechat.apis.fields import CHAT_FIELDS
from edgechat.config.presets import Preset
from edgechat.core.errors import BadRequest
from edgechat.core.requests import ChatRequest, DocumentFile, Limits, Message

__all__ = ["parse_chat_request"]


_FIELD_SET = frozenset(CHAT_FIELDS)


_MESSAGE_FIELD_SET = frozenset(("role", "content"))


def parse_chat_request(
    body: bytes,
    limits: Limits,
    allowed_models: Sequence[str],
    default_model: str,
    presets: Sequence[Preset] = (),
) -> ChatRequest:
    """Validate a ``/chat`` body; raises only ``PayloadTooLarge`` or ``BadRequest``."""
    data = read_object(body, limits, body_cap(limits, allowed_models))
    if not data.keys() <= _FIELD_SET:
        raise BadRequest(
            public=f"The request has an unknown field; known fields: {', '.join(CHAT_FIELDS)}."
        )
    images = Images(limits)
    messages = _messages(data.get("messages"), limits, images)
    images.check_body(len(body))
    preset = _preset(data.get("preset"), presets)
    model, temperature = data.get("model"), read_temperature(data.get("temperature"))
    if preset is not None:
        model = preset.model if model is None else model
        temperature = preset.temperature if temperature is None else temperature
    request = ChatRequest(
        messages=messages,
        model=read_model(model, allowed_models, default_model),
        temperature=temperature,
        max_tokens=read_max_tokens(data.get("max_tokens"), limits),
        reasoning=_reasoning(data.get("reasoning")),
        preset_prompt=None if preset is None else preset.system_prompt,
        session=_conversation(data.get("conversation")),
    )
    check_fit(request, allowed_models)
    return request


def _conversation(value: Any) -> str | None:
    """A conversation's name (``affinity.session_of``): a string of 1 to
    MAX_CONVERSATION_CHARS characters, or absent."""
    if value is None:
        return None
    if type(value) is not str or not 0 < len(value) <= MAX_CONVERSATION_CHARS:
        raise BadRequest(
            public=f"conversation must be a string of 1 to {MAX_CONVERSATION_CHARS} characters."
        )
    return value


def _preset(value: Any, presets: Sequence[Preset]) -> Preset | None:
    if value is None:
        return None
    found = next((p for p in presets if p.name == value), None) if type(value) is str else None
    if found is None:
        names = ", ".join(p.name for p in presets)
        raise BadRequest(
            public=f"preset must name one of this deployment's presets ({names})."
            if names
            else "preset is not accepted: this deployment has no presets."
        )
    return found


def _messages(value: Any, limits: Limits, images: Images) -> tuple[Message, ...]:
    messages: list[Message] = []
    total = 0
    for where, item in read_message_items(value, limits, _MESSAGE_FIELD_SET, "role, content"):
        role = item.get("role")
        if role == "system":
            raise BadRequest(
                public=f'{where}.role "system" is not accepted: the server sets the system prompt.'
            )
        if role != "user" and role != "assistant":
            raise BadRequest(public=f'{where}.role must be "user" or "assistant".')
        value = item.get("content")
        documents: tuple[DocumentFile, ...] = ()
        if role == "user" and type(value) is list:
            content, parts, documents = read_content(value, f"{where}.content", images)
        elif type(value) is str:
            content, parts = value, ()
        else:
            raise BadRequest(
                public=f"{where}.content must be a string"
                + (" or a list of text, image and file parts." if role == "user" else ".")
            )
        attachments = bool(parts or documents)
        total = count_text(content, f"{where}.content", total, limits, may_be_empty=attachments)
        messages.append(Message(role=role, content=content, parts=parts, documents=documents))
    if messages[-1].role != "user":
        raise BadRequest(public="The last message must come from the user.")
    return tuple(messages)


def _reasoning(value: Any) -> bool | None:
    if value is None:
        return None
    if type(value) is not bool:
        raise BadRequest(public="reasoning must be true or false.")
    return value
