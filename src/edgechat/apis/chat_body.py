"""``POST /chat``'s body rules. Accepted body::

    {"messages": [{"role": "user" | "assistant", "content": str}, ...],
     "model": str?, "temperature": number?, "max_tokens": int?, "reasoning": bool?,
     "preset": str?, "conversation": str?, "knowledge": str?}

``knowledge`` names a knowledge base (its id): the answer reads its
passages nearest the question and cites them (``knowledge.retrieve``).

A ``preset`` names one of the operator's presets (``config.presets``): its
system prompt replaces ``SYSTEM_PROMPT``, its model and temperature apply
unless the body gives its own.

``?comparison=<id>&slot=<n>`` (``read_slot``) makes the question one answer
of a comparison (``POST /api/comparisons``). It is in the query, not the
body, because it decides the rate limit, which is checked before a body is
read: the comparison took this answer's token. The slot's model answers, so
a body's ``model`` is only checked against it (and a preset's model does
not apply); whether the model can read the question is checked once the
slot's model is known. The shared rules are ``body``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgechat.answer.affinity import MAX_CONVERSATION_CHARS
from edgechat.apis.body import (
    Images,
    body_cap,
    check_fit,
    count_text,
    read_content,
    read_knowledge,
    read_max_tokens,
    read_message_items,
    read_model,
    read_object,
    read_temperature,
)
from edgechat.apis.fields import CHAT_FIELDS
from edgechat.config.presets import Preset
from edgechat.core.errors import BadRequest
from edgechat.core.ids import is_random_id
from edgechat.core.requests import MAX_COMPARED, ChatRequest, DocumentFile, Limits, Message, Slot

__all__ = ["SLOT_PARAMS", "parse_chat_request", "read_slot"]

# The query parameters that name a comparison's slot.
SLOT_PARAMS = ("comparison", "slot")


_FIELD_SET = frozenset(CHAT_FIELDS)


_MESSAGE_FIELD_SET = frozenset(("role", "content"))


def parse_chat_request(
    body: bytes,
    limits: Limits,
    allowed_models: Sequence[str],
    default_model: str,
    presets: Sequence[Preset] = (),
    slot: Slot | None = None,
) -> ChatRequest:
    """Validate a ``/chat`` body (``slot``: the comparison's answer it is,
    ``read_slot``); raises only ``PayloadTooLarge`` or ``BadRequest``."""
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
        if slot is None:
            model = preset.model if model is None else model
        temperature = preset.temperature if temperature is None else temperature
    chosen = read_model(model, allowed_models, default_model)
    if slot is not None and model is not None:
        slot = Slot(slot.comparison, slot.index, named=chosen)
    request = ChatRequest(
        messages=messages,
        model=chosen,
        temperature=temperature,
        max_tokens=read_max_tokens(data.get("max_tokens"), limits),
        reasoning=_reasoning(data.get("reasoning")),
        preset_prompt=None if preset is None else preset.system_prompt,
        session=_conversation(data.get("conversation")),
        slot=slot,
        # A comparison's answer never is (``similar.scope_of`` says so too).
        semantic_cache=slot is None,
        knowledge=read_knowledge(data.get("knowledge")),
    )
    if slot is None:
        check_fit(request, allowed_models)
    return request


def read_slot(query: Mapping[str, str]) -> Slot | None:
    """``?comparison=<id>&slot=<n>``: the comparison's answer a question is,
    or None (neither given; other parameters are not ``/chat``'s concern)."""
    given = [name for name in SLOT_PARAMS if name in query]
    if not given:
        return None
    if len(given) != len(SLOT_PARAMS):
        raise BadRequest(public="A comparison's answer names both comparison and slot.")
    cid, index = query["comparison"], query["slot"]
    if not is_random_id(cid):
        raise BadRequest(public="comparison must be the id POST /api/comparisons gave.")
    slots = [str(k) for k in range(MAX_COMPARED)]
    if index not in slots:
        raise BadRequest(public=f"slot must be one of {', '.join(slots)}.")
    return Slot(cid, int(index))


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
