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

from edgechat import json_body
from edgechat.documents import DocumentFile, check_file_part, document_url_size
from edgechat.errors import BadRequest, body_too_large
from edgechat.images import check_image_part
from edgechat.models import Model, allowed_models, lookup
from edgechat.presets import Preset
from edgechat.requests import PARAMS, ChatRequest, Limits, Message, OpenAIRequest, Role

__all__ = [
    "body_cap",
    "json_object",
    "parse_chat_request",
    "parse_document",
    "parse_openai_request",
]

_FIELDS = ("messages", "model", "temperature", "max_tokens", "reasoning", "preset")
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
    )
    _check_fit(request, allowed_models)
    return request


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
_OPENAI_MESSAGE_FIELDS = frozenset(("role", "content", "name", "tool_calls", "tool_call_id"))
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
    images.check_body(len(body))
    chat = ChatRequest(
        messages=messages,
        model=_model(data.get("model"), allowed_models, default_model),
        temperature=_temperature(data.get("temperature")),
        max_tokens=_max_tokens(cap, limits, cap_name),
        reasoning=None,
        params=_openai_params(data),
        server_prompt=False,
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
    known = "role, content, name, tool_calls, tool_call_id"
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
                documents=documents,
            )
        )
    return tuple(messages)


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


# Every field name the validators above know, in any position: a refusal
# for a lone surrogate names its path through these and stops at any other
# key (a JSON schema's own properties), so it never repeats client text.
_FIELD_NAMES = frozenset(
    (
        *_FIELDS,
        *_OPENAI_FIELDS,
        *_OPENAI_MESSAGE_FIELDS,
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
