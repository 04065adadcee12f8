"""The one validator of request bodies: ``POST /chat`` and the OpenAI API's
``POST /v1/chat/completions``.

A body becomes a ``ChatRequest`` (or an ``OpenAIRequest`` around one) or raises
``PayloadTooLarge`` / ``BadRequest`` with a specific message built only from
field names, positions and limits - never from what the client sent, so
nothing a client submits is reflected back (or into logs through the error
text). Both bodies share the size caps, the JSON rules (``json_body``:
nesting depth, numbers JavaScript can hold, no lone surrogate anywhere) and
the model lookup.

Accepted ``/chat`` body::

    {"messages": [{"role": "user" | "assistant", "content": str}, ...],
     "model": str?, "temperature": number?, "max_tokens": int?, "reasoning": bool?,
     "preset": str?}

A ``preset`` names one of the operator's presets (``presets.py``): its system
prompt replaces ``SYSTEM_PROMPT``, its model and temperature apply unless the
body gives its own.

``null`` for an optional field means "not given". Unknown fields are refused,
so a typo (``max_token``) is an error instead of a silently ignored setting.

The OpenAI body is the API's own (``parse_openai_request`` lists what is
taken); its messages may be ``system``, ``developer``, ``user``,
``assistant`` (with ``tool_calls``) and ``tool``, and are the caller's own:
no server system prompt is added.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from edgechat.answer.affinity import MAX_CONVERSATION_CHARS
from edgechat.config.presets import Preset
from edgechat.core import json_body
from edgechat.core.errors import BadRequest, body_too_large
from edgechat.core.models import EMBEDDING_CATALOG, Model, allowed_models, lookup, lookup_embedding
from edgechat.core.requests import (
    PARAMS,
    ChatRequest,
    EmbeddingsRequest,
    Limits,
    Message,
    OpenAIRequest,
    Role,
)
from edgechat.media.documents import DocumentFile, check_file_part, document_url_size
from edgechat.media.images import check_image_part

__all__ = [
    "body_cap",
    "json_object",
    "parse_chat_request",
    "parse_document",
    "parse_embeddings_request",
    "parse_openai_request",
    "parse_responses_request",
]

_FIELDS = ("messages", "model", "temperature", "max_tokens", "reasoning", "preset", "conversation")
_FIELD_SET = frozenset(_FIELDS)
_MESSAGE_FIELD_SET = frozenset(("role", "content"))


def parse_chat_request(
    body: bytes,
    limits: Limits,
    allowed_models: Sequence[str],
    default_model: str,
    presets: Sequence[Preset] = (),
) -> ChatRequest:
    """Validate a ``/chat`` body; raises only ``PayloadTooLarge`` or ``BadRequest``."""
    data = _json_object(body, limits, body_cap(limits, allowed_models))
    if not data.keys() <= _FIELD_SET:
        raise BadRequest(
            public=f"The request has an unknown field; known fields: {', '.join(_FIELDS)}."
        )
    images = _Images(limits)
    messages = _messages(data.get("messages"), limits, images)
    images.check_body(len(body))
    preset = _preset(data.get("preset"), presets)
    model, temperature = data.get("model"), _temperature(data.get("temperature"))
    if preset is not None:
        model = preset.model if model is None else model
        temperature = preset.temperature if temperature is None else temperature
    request = ChatRequest(
        messages=messages,
        model=_model(model, allowed_models, default_model),
        temperature=temperature,
        max_tokens=_max_tokens(data.get("max_tokens"), limits),
        reasoning=_reasoning(data.get("reasoning")),
        preset_prompt=None if preset is None else preset.system_prompt,
        session=_conversation(data.get("conversation")),
    )
    _check_fit(request, allowed_models)
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


def json_object(body: bytes, limits: Limits) -> dict[str, Any]:
    """Any other JSON body: an object within ``max_body_bytes`` and the JSON rules."""
    return _json_object(body, limits, limits.max_body_bytes)


def parse_document(body: bytes, limits: Limits) -> DocumentFile:
    """A ``POST /api/documents`` body: one file part, as in a message."""
    cap = limits.max_body_bytes + document_url_size(limits.max_document_bytes)
    return check_file_part(_json_object(body, limits, cap), "file", limits.max_document_bytes)


def body_cap(limits: Limits, allowed: Sequence[str]) -> int:
    """The most a request body may hold in this deployment: more when one of
    its models can see images (``Limits.body_cap``)."""
    return limits.body_cap(any(model.vision for model in allowed_models(allowed)))


def _check_fit(request: ChatRequest, allowed: Sequence[str]) -> None:
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


class _Images:
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


def _content(
    value: Any, where: str, images: _Images | None
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


def _json_object(body: bytes, limits: Limits, cap: int) -> dict[str, Any]:
    # Over the text cap with no image or document in it: refused before it is parsed.
    if len(body) > cap or (len(body) > limits.max_body_bytes and b'"data:' not in body):
        limit = cap if len(body) > cap else limits.max_body_bytes
        raise body_too_large(limit, detail=f"body of {len(body)} bytes")
    data = json_body.loads(
        body,
        max_depth=limits.max_json_depth,
        max_text_bytes=limits.max_body_bytes,
        names=_FIELD_NAMES,
    )
    if type(data) is not dict:
        raise BadRequest(public="The request body must be a JSON object.")
    return data


def _model(value: Any, allowed_models: Sequence[str], default_model: str) -> Model:
    if value is None:
        value = default_model
    elif type(value) is not str:
        raise BadRequest(public="model must be a string.")
    return lookup(value, allowed_models)


def _message_items(
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


def _messages(value: Any, limits: Limits, images: _Images) -> tuple[Message, ...]:
    messages: list[Message] = []
    total = 0
    for where, item in _message_items(value, limits, _MESSAGE_FIELD_SET, "role, content"):
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
            content, parts, documents = _content(value, f"{where}.content", images)
        elif type(value) is str:
            content, parts = value, ()
        else:
            raise BadRequest(
                public=f"{where}.content must be a string"
                + (" or a list of text, image and file parts." if role == "user" else ".")
            )
        attachments = bool(parts or documents)
        total = _count_text(content, f"{where}.content", total, limits, may_be_empty=attachments)
        messages.append(Message(role=role, content=content, parts=parts, documents=documents))
    if messages[-1].role != "user":
        raise BadRequest(public="The last message must come from the user.")
    return tuple(messages)


def _count_text(
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


def _temperature(value: Any) -> float | None:
    if value is None:
        return None
    # bool is an int in Python, but true is not a temperature.
    if type(value) not in (int, float) or not 0 <= value <= 2:
        raise BadRequest(public="temperature must be a number from 0 to 2.")
    return float(value)


def _max_tokens(value: Any, limits: Limits, name: str = "max_tokens") -> int:
    if value is None:
        return limits.default_output_tokens
    if type(value) is not int or not 1 <= value <= limits.max_output_tokens:
        raise BadRequest(public=f"{name} must be an integer from 1 to {limits.max_output_tokens}.")
    return value


def _reasoning(value: Any) -> bool | None:
    if value is None:
        return None
    if type(value) is not bool:
        raise BadRequest(public="reasoning must be true or false.")
    return value


# --- the OpenAI API ----------------------------------------------------------

_OPENAI_FIELDS = (
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    *(param.name for param in PARAMS),
    "n",
    "user",
    # Accepted and not acted on: they change nothing about the answer.
    "parallel_tool_calls",
    "store",
    "metadata",
)
_OPENAI_FIELD_SET = frozenset(_OPENAI_FIELDS)
_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
_OPENAI_MESSAGE_FIELD_NAMES = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
)
_OPENAI_MESSAGE_FIELDS = frozenset(_OPENAI_MESSAGE_FIELD_NAMES)
_RESPONSE_FORMATS = ("text", "json_object", "json_schema")
_REASONING_EFFORTS = ("low", "medium", "high")
_TOOL_CHOICES = ("none", "auto", "required")
MAX_TOOLS = 128
MAX_STOP = 4


def parse_openai_request(
    body: bytes, limits: Limits, allowed_models: Sequence[str], default_model: str
) -> OpenAIRequest:
    """Validate a ``/v1/chat/completions`` body; raises ``PayloadTooLarge``,
    ``BadRequest`` or ``ModelNotFound``. ``model`` may be left out (the
    default model answers); ``max_completion_tokens`` wins over ``max_tokens``."""
    data = _json_object(body, limits, body_cap(limits, allowed_models))
    if not data.keys() <= _OPENAI_FIELD_SET:
        raise BadRequest(
            public="The request has a field edgechat does not support; supported: "
            f"{', '.join(_OPENAI_FIELDS)}."
        )
    return _openai_request(data, len(body), limits, allowed_models, default_model)


def _openai_request(
    data: Mapping[str, Any],
    body_size: int,
    limits: Limits,
    allowed_models: Sequence[str],
    default_model: str,
) -> OpenAIRequest:
    """A Chat Completions body's fields, checked (both APIs end here)."""
    n = data.get("n")
    if n is not None and (type(n) is not int or n != 1):
        raise BadRequest(public="n must be 1: edgechat returns one choice.")
    stream = data.get("stream")
    if stream is not None and type(stream) is not bool:
        raise BadRequest(public="stream must be true or false.")
    include_usage = False
    options = data.get("stream_options")
    if options is not None:
        if type(options) is not dict or not options.keys() <= {"include_usage"}:
            raise BadRequest(public='stream_options must be {"include_usage": true|false}.')
        include_usage = _optional_bool(options.get("include_usage"), "stream_options.include_usage")
    user = data.get("user")
    if user is not None and type(user) is not str:
        raise BadRequest(public="user must be a string.")
    cap, cap_name = data.get("max_completion_tokens"), "max_completion_tokens"
    if cap is None:
        cap, cap_name = data.get("max_tokens"), "max_tokens"
    images = _Images(limits)
    messages = _openai_messages(data.get("messages"), limits, images)
    images.check_body(body_size)
    chat = ChatRequest(
        messages=messages,
        model=_model(data.get("model"), allowed_models, default_model),
        temperature=_temperature(data.get("temperature")),
        max_tokens=_max_tokens(cap, limits, cap_name),
        reasoning=None,
        params=_openai_params(data),
        server_prompt=False,
        session=user or None,
    )
    _check_fit(chat, allowed_models)
    return OpenAIRequest(chat=chat, stream=bool(stream), include_usage=include_usage)


def _optional_bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if type(value) is not bool:
        raise BadRequest(public=f"{where} must be true or false.")
    return value


def _openai_messages(value: Any, limits: Limits, images: _Images) -> tuple[Message, ...]:
    messages: list[Message] = []
    total = 0
    known = ", ".join(_OPENAI_MESSAGE_FIELD_NAMES)
    for where, item in _message_items(value, limits, _OPENAI_MESSAGE_FIELDS, known):
        role = item.get("role")
        if role not in _OPENAI_ROLES:
            raise BadRequest(public=f"{where}.role must be one of {', '.join(_OPENAI_ROLES)}.")
        extra: dict[str, Any] = {}
        tool_calls = item.get("tool_calls")
        if tool_calls is not None:
            if role != "assistant":
                raise BadRequest(public=f"{where}.tool_calls is only for assistant messages.")
            extra["tool_calls"] = tool_calls
            total = _tool_calls(tool_calls, f"{where}.tool_calls", total, limits)
        call_id = item.get("tool_call_id")
        if role == "tool":
            if type(call_id) is not str or not call_id:
                raise BadRequest(public=f"{where}.tool_call_id is required for tool messages.")
            extra["tool_call_id"] = call_id
        elif call_id is not None:
            raise BadRequest(public=f"{where}.tool_call_id is only for tool messages.")
        name = item.get("name")
        if name is not None:
            if type(name) is not str or not 0 < len(name) <= 64:
                raise BadRequest(public=f"{where}.name must be a string of 1 to 64 characters.")
            extra["name"] = name
        reasoning, total = _reasoning_content(item, role, where, total, limits)
        value = item.get("content")
        parts: tuple[dict[str, Any], ...] = ()
        documents: tuple[DocumentFile, ...] = ()
        if value is None:
            content = ""
        else:
            counter = images if role == "user" else None
            content, parts, documents = _content(value, f"{where}.content", counter)
        # An assistant turn that only called tools has no text.
        total = _count_text(
            content,
            f"{where}.content",
            total,
            limits,
            may_be_empty=tool_calls is not None or bool(parts or documents),
        )
        # Workers AI's models know "system"; "developer" is the newer OpenAI name for it.
        wire_role: Role = "system" if role == "developer" else role
        messages.append(
            Message(
                role=wire_role,
                content=content,
                extra=MappingProxyType(extra),
                parts=parts,
                reasoning=reasoning,
                documents=documents,
            )
        )
    return tuple(messages)


def _reasoning_content(
    item: Mapping[str, Any], role: Any, where: str, total: int, limits: Limits
) -> tuple[str, int]:
    """An assistant turn's thinking, as ``/v1`` gave it out (agent loops
    send the turn back as they got it); counted against the limits like
    the text. Returns it and the running total."""
    value = item.get("reasoning_content")
    if value is None:
        return "", total
    if role != "assistant":
        raise BadRequest(public=f"{where}.reasoning_content is only for assistant messages.")
    if type(value) is not str:
        raise BadRequest(public=f"{where}.reasoning_content must be a string.")
    at = f"{where}.reasoning_content"
    return value, _count_text(value, at, total, limits, may_be_empty=True)


def _tool_calls(value: Any, where: str, total: int, limits: Limits) -> int:
    if type(value) is not list or not value:
        raise BadRequest(public=f"{where} must be a non-empty array.")
    for index, call in enumerate(value):
        at = f"{where}[{index}]"
        function = call.get("function") if type(call) is dict else None
        if (
            type(call) is not dict
            or not call.keys() <= {"id", "type", "function"}
            or type(call.get("id")) is not str
            or call.get("type") != "function"
            or type(function) is not dict
            or not function.keys() <= {"name", "arguments"}
            or type(function.get("name")) is not str
            or type(function.get("arguments")) is not str
        ):
            raise BadRequest(
                public=f'{at} must be {{"id", "type": "function", "function": '
                '{"name", "arguments"}} with string values.'
            )
        total = _count_text(
            function["name"] + function["arguments"], f"{at}.function", total, limits
        )
    return total


def _openai_params(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The generation parameters (``requests.PARAMS``) given, each checked."""
    params: dict[str, Any] = {}
    for param in PARAMS:
        value = data.get(param.name)
        if value is not None:
            checked = _PARAM_CHECKS[param.name](value, data)
            if checked is not None:
                params[param.name] = checked
    return MappingProxyType(params)


def _top_p(value: Any, data: Mapping[str, Any]) -> float:
    if type(value) not in (int, float) or not 0 < value <= 1:
        raise BadRequest(public="top_p must be a number above 0 and at most 1.")
    return float(value)


def _penalty(name: str) -> Callable[[Any, Mapping[str, Any]], float]:
    def check(value: Any, data: Mapping[str, Any]) -> float:
        if type(value) not in (int, float) or not -2 <= value <= 2:
            raise BadRequest(public=f"{name} must be a number from -2 to 2.")
        return float(value)

    return check


def _seed(value: Any, data: Mapping[str, Any]) -> int:
    if type(value) is not int or not 0 <= value < 2**63:
        raise BadRequest(public="seed must be a non-negative integer.")
    return value


def _stop(value: Any, data: Mapping[str, Any]) -> Any:
    stops = [value] if type(value) is str else value
    if (
        type(stops) is not list
        or not 0 < len(stops) <= MAX_STOP
        or any(type(s) is not str or not 0 < len(s) <= 100 for s in stops)
    ):
        raise BadRequest(
            public=f"stop must be a string or a list of 1 to {MAX_STOP} strings "
            "of 1 to 100 characters."
        )
    return value


def _response_format(value: Any, data: Mapping[str, Any]) -> Any:
    kind = value.get("type") if type(value) is dict else None
    if kind not in _RESPONSE_FORMATS:
        raise BadRequest(
            public=f"response_format.type must be one of {', '.join(_RESPONSE_FORMATS)}."
        )
    if kind == "json_schema" and type(value.get("json_schema")) is not dict:
        raise BadRequest(public="response_format.json_schema must be an object.")
    return None if kind == "text" else value  # "text" is what every model does anyway


def _reasoning_effort(value: Any, data: Mapping[str, Any]) -> Any:
    if value not in _REASONING_EFFORTS:
        raise BadRequest(public=f"reasoning_effort must be one of {', '.join(_REASONING_EFFORTS)}.")
    return value


def _tools(value: Any, data: Mapping[str, Any]) -> Any:
    _check_tools(value)
    return value


def _tool_choice(value: Any, data: Mapping[str, Any]) -> Any:
    named = (
        type(value) is dict
        and value.get("type") == "function"
        and type(value.get("function")) is dict
        and type(value["function"].get("name")) is str
    )
    if value not in _TOOL_CHOICES and not named:
        raise BadRequest(
            public='tool_choice must be "none", "auto", "required" or '
            '{"type": "function", "function": {"name": ...}}.'
        )
    if data.get("tools") is None and value != "none":
        raise BadRequest(public="tool_choice needs tools.")
    return value


_PARAM_CHECKS: Mapping[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    "top_p": _top_p,
    "stop": _stop,
    "seed": _seed,
    "response_format": _response_format,
    "tools": _tools,
    "tool_choice": _tool_choice,
    "reasoning_effort": _reasoning_effort,
    "frequency_penalty": _penalty("frequency_penalty"),
    "presence_penalty": _penalty("presence_penalty"),
}


def _check_tools(tools: Any) -> None:
    if type(tools) is not list or not 0 < len(tools) <= MAX_TOOLS:
        raise BadRequest(public=f"tools must be a list of 1 to {MAX_TOOLS} tools.")
    for index, tool in enumerate(tools):
        function = tool.get("function") if type(tool) is dict else None
        if (
            type(tool) is not dict
            or tool.get("type") != "function"
            or type(function) is not dict
            or type(function.get("name")) is not str
            or not 0 < len(function["name"]) <= 64
            or ("parameters" in function and type(function["parameters"]) is not dict)
            or ("description" in function and type(function["description"]) is not str)
        ):
            raise BadRequest(
                public=f'tools[{index}] must be {{"type": "function", "function": {{"name", '
                '"description"?, "parameters"?}}.'
            )


# --- the OpenAI Responses API -------------------------------------------------
# A Responses body is translated into the Chat Completions body it means and
# checked by the same rules; the messages' rules name the conversation as
# messages (``instructions`` first, then ``input``'s items).

_RESPONSES_FIELDS = (
    "model",
    "input",
    "instructions",
    "stream",
    "max_output_tokens",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "text",
    "reasoning",
    "user",
    "store",
    "metadata",
    "parallel_tool_calls",
    # Accepted and not acted on: extra output (logprobs, encrypted
    # reasoning) and context truncation are the hosted service's.
    "include",
    "truncation",
    "previous_response_id",
)
_RESPONSES_FIELD_SET = frozenset(_RESPONSES_FIELDS)
# Fields that mean the same in both APIs.
_SHARED_FIELDS = ("model", "stream", "temperature", "top_p", "user", "store", "metadata")


def parse_responses_request(
    body: bytes, limits: Limits, allowed_models: Sequence[str], default_model: str
) -> OpenAIRequest:
    """Validate a ``/v1/responses`` body; raises ``PayloadTooLarge``,
    ``BadRequest`` or ``ModelNotFound``."""
    data = _json_object(body, limits, body_cap(limits, allowed_models))
    if not data.keys() <= _RESPONSES_FIELD_SET:
        raise BadRequest(
            public="The request has a field edgechat does not support; supported: "
            f"{', '.join(_RESPONSES_FIELDS)}."
        )
    include = data.get("include")
    if include is not None and (
        type(include) is not list or any(type(i) is not str for i in include)
    ):
        raise BadRequest(public="include must be a list of strings.")
    if data.get("truncation") not in (None, "auto", "disabled"):
        raise BadRequest(public='truncation must be "auto" or "disabled".')
    if data.get("previous_response_id") is not None:
        raise BadRequest(
            public="previous_response_id is not supported: edgechat stores no conversations; "
            "send the whole conversation in input."
        )
    chat: dict[str, Any] = {name: data[name] for name in _SHARED_FIELDS if name in data}
    chat["messages"] = _responses_messages(data.get("input"), data.get("instructions"))
    if data.get("max_output_tokens") is not None:
        chat["max_completion_tokens"] = data["max_output_tokens"]
    if data.get("parallel_tool_calls") is not None:
        chat["parallel_tool_calls"] = data["parallel_tool_calls"]
    # Agent SDKs send "tools": [] (and "auto") when they have no tools.
    if data.get("tools") is not None and data["tools"] != []:
        chat["tools"] = _responses_tools(data["tools"])
    choice = data.get("tool_choice")
    if choice is not None and ("tools" in chat or choice not in ("auto", "none")):
        chat["tool_choice"] = _responses_tool_choice(choice)
    chat.update(_responses_text_and_reasoning(data))
    return _openai_request(chat, len(body), limits, allowed_models, default_model)


def _responses_messages(items: Any, instructions: Any) -> list[Any]:
    """``instructions`` and ``input`` as Chat Completions messages."""
    messages: list[Any] = []
    if instructions is not None:
        if type(instructions) is not str:
            raise BadRequest(public="instructions must be a string.")
        messages.append({"role": "system", "content": instructions})
    if items is None:
        raise BadRequest(public="input is required.")
    if type(items) is str:
        return [*messages, {"role": "user", "content": items}]
    if type(items) is not list or not items:
        raise BadRequest(public="input must be a string or a non-empty list of items.")
    thought: str | None = None
    for index, item in enumerate(items):
        where = f"input[{index}]"
        kind = item.get("type", "message") if type(item) is dict else None
        if kind == "reasoning":
            thought = _reasoning_item(item, where)
        elif kind == "function_call":
            call = _function_call_item(item, where)
            last = messages[-1] if messages else None
            if type(last) is dict and last.get("role") == "assistant" and "tool_calls" in last:
                last["tool_calls"].append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append(_function_output_item(item, where))
        elif kind == "message":
            messages.append(_message_item(item, where))
        else:
            raise BadRequest(
                public=f"{where}.type must be message, function_call, function_call_output "
                "or reasoning."
            )
        if thought is not None and kind != "reasoning" and messages[-1].get("role") == "assistant":
            messages[-1]["reasoning_content"], thought = thought, None
    return messages


def _reasoning_item(item: dict[str, Any], where: str) -> str:
    """The text of a ``reasoning`` item (what ``/v1/responses`` gave out);
    it goes with the next assistant turn as its thinking."""
    parts = item.get("content") or []
    texts = [p.get("text") for p in parts if type(p) is dict] if type(parts) is list else None
    if texts is None or any(type(t) is not str for t in texts):
        raise BadRequest(public=f'{where}.content must be a list of {{"type", "text"}} parts.')
    return "".join(str(text) for text in texts)


def _function_call_item(item: dict[str, Any], where: str) -> dict[str, Any]:
    fields = ("call_id", "name", "arguments")
    if any(type(item.get(name)) is not str for name in fields):
        raise BadRequest(public=f"{where} needs call_id, name and arguments as strings.")
    function = {"name": item["name"], "arguments": item["arguments"]}
    return {"id": item["call_id"], "type": "function", "function": function}


def _function_output_item(item: dict[str, Any], where: str) -> dict[str, Any]:
    if type(item.get("call_id")) is not str or type(item.get("output")) is not str:
        raise BadRequest(public=f"{where} needs call_id and output as strings.")
    return {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}


_PART_TYPES = {"input_text": "text", "output_text": "text", "input_image": "image_url"}


def _message_item(item: dict[str, Any], where: str) -> dict[str, Any]:
    content = item.get("content")
    if type(content) is list:
        parts: list[Any] = []
        for index, part in enumerate(content):
            kind = part.get("type") if type(part) is dict else None
            if kind not in _PART_TYPES:
                raise BadRequest(
                    public=f"{where}.content[{index}].type must be input_text, output_text "
                    "or input_image."
                )
            if kind == "input_image":
                image = {"url": part.get("image_url")}
                if part.get("detail") is not None:
                    image["detail"] = part["detail"]
                parts.append({"type": "image_url", "image_url": image})
            else:
                parts.append({"type": "text", "text": part.get("text")})
        content = parts
    return {"role": item.get("role"), "content": content}


def _responses_tools(tools: Any) -> list[Any]:
    if type(tools) is not list:
        raise BadRequest(public=f"tools must be a list of 1 to {MAX_TOOLS} tools.")
    converted: list[Any] = []
    for index, tool in enumerate(tools):
        if type(tool) is not dict or tool.get("type") != "function":
            raise BadRequest(
                public=f"tools[{index}] must be a function tool; built-in tools are not supported."
            )
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        converted.append({"type": "function", "function": function})
    return converted


def _responses_tool_choice(choice: Any) -> Any:
    if type(choice) is dict and choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return choice


def _responses_text_and_reasoning(data: Mapping[str, Any]) -> dict[str, Any]:
    """``text.format`` as ``response_format``, ``reasoning.effort`` as ``reasoning_effort``."""
    out: dict[str, Any] = {}
    text = data.get("text")
    if text is not None:
        fmt = text.get("format") if type(text) is dict else None
        if type(fmt) is not dict or not text.keys() <= {"format", "verbosity"}:
            raise BadRequest(public='text must be {"format": {"type": ...}}.')
        if fmt.get("type") == "json_schema":
            schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
            out["response_format"] = {"type": "json_schema", "json_schema": schema}
        else:
            out["response_format"] = {"type": fmt.get("type")}
    reasoning = data.get("reasoning")
    if reasoning is not None:
        effort = reasoning.get("effort") if type(reasoning) is dict else None
        if type(reasoning) is not dict or not reasoning.keys() <= {"effort", "summary"}:
            raise BadRequest(public='reasoning must be {"effort": "low" | "medium" | "high"}.')
        if effort is not None:
            out["reasoning_effort"] = effort
    return out


# --- the OpenAI API's embeddings ---------------------------------------------

_EMBEDDING_FIELDS = ("model", "input", "encoding_format", "dimensions", "user")
_EMBEDDING_FIELD_SET = frozenset(_EMBEDDING_FIELDS)
_ENCODING_FORMATS = ("float", "base64")
# Texts per request: one binding call embeds them all.
MAX_EMBEDDING_INPUTS = 100


def parse_embeddings_request(body: bytes, limits: Limits) -> EmbeddingsRequest:
    """Validate a ``/v1/embeddings`` body; raises ``PayloadTooLarge``,
    ``BadRequest`` or ``ModelNotFound``. ``model`` may be left out (the first
    embedding model of the catalog answers)."""
    data = _json_object(body, limits, limits.max_body_bytes)
    if not data.keys() <= _EMBEDDING_FIELD_SET:
        raise BadRequest(
            public="The request has a field edgechat does not support; supported: "
            f"{', '.join(_EMBEDDING_FIELDS)}."
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
        total = _count_text(text, where, total, limits)
    return tuple(texts)


# Every field name the validators above know, in any position: a refusal
# for a lone surrogate names its path through these and stops at any other
# key (a JSON schema's own properties), so it never repeats client text.
_FIELD_NAMES = frozenset(
    (
        *_FIELDS,
        *_OPENAI_FIELDS,
        *_OPENAI_MESSAGE_FIELDS,
        *_EMBEDDING_FIELDS,
        *_RESPONSES_FIELDS,
        "call_id",
        "name",
        "output",
        "format",
        "schema",
        "effort",
        "type",
        "text",
        "image_url",
        "url",
        "file",
        "filename",
        "file_data",
        "detail",
        "id",
        "function",
        "arguments",
        "description",
        "parameters",
        "include_usage",
        "json_schema",
    )
)
