"""``POST /v1/chat/completions``'s body rules: the API's own body
(``parse_openai_request`` lists what is taken). Its messages may be
``system``, ``developer``, ``user``, ``assistant`` (with ``tool_calls``) and
``tool``, and are the caller's own: no server system prompt is added.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

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
from edgechat.apis.fields import OPENAI_FIELDS, OPENAI_MESSAGE_FIELD_NAMES, OPENAI_MESSAGE_FIELDS
from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.models import AUTO, Model, lookup
from edgechat.core.requests import (
    MAX_COMPARED,
    PARAMS,
    ChatRequest,
    DocumentFile,
    Limits,
    Message,
    OpenAIRequest,
    Role,
)

__all__ = ["MAX_TOOLS", "openai_request", "parse_openai_request"]


_OPENAI_FIELD_SET = frozenset(OPENAI_FIELDS)


_OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")


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
    data = read_object(body, limits, body_cap(limits, allowed_models))
    if not data.keys() <= _OPENAI_FIELD_SET:
        raise BadRequest(
            public="The request has a field edgechat does not support; supported: "
            f"{', '.join(OPENAI_FIELDS)}."
        )
    return openai_request(data, len(body), limits, allowed_models, default_model)


# edgechat's extension on the OpenAI API (``extra_body`` in its clients).
_EXTENSION_RULE = (
    'edgechat must be an object of {"compare_with": [model, ...]}, '
    '{"knowledge": "<base id>"} and {"semantic_cache": true}.'
)


def openai_request(
    data: Mapping[str, Any],
    body_size: int,
    limits: Limits,
    allowed_models: Sequence[str],
    default_model: str,
) -> OpenAIRequest:
    """A Chat Completions body's fields, checked (both APIs end here)."""
    stream = data.get("stream")
    if stream is not None and type(stream) is not bool:
        raise BadRequest(public="stream must be true or false.")
    extension = data.get("edgechat")
    if extension is not None and (
        type(extension) is not dict
        or not extension
        or not extension.keys() <= {"compare_with", "knowledge", "semantic_cache"}
    ):
        raise BadRequest(public=_EXTENSION_RULE)
    extension = extension or {}
    semantic = _semantic_cache(extension.get("semantic_cache"))
    compared = _compare_with(extension.get("compare_with"), allowed_models, bool(stream))
    knowledge = read_knowledge(extension.get("knowledge"), "edgechat.knowledge")
    if compared and knowledge is not None:
        raise BadRequest(public="edgechat.compare_with and edgechat.knowledge do not go together.")
    if semantic and compared:
        raise BadRequest(public="edgechat.semantic_cache does not go with compare_with.")
    n = data.get("n")
    if n is not None and (type(n) is not int or n != 1 + len(compared)):
        raise BadRequest(
            public="n must be the number of models compared (model and edgechat.compare_with)."
            if compared
            else "n must be 1: edgechat returns one choice."
        )
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
    images = Images(limits)
    messages = _openai_messages(data.get("messages"), limits, images)
    images.check_body(body_size)
    chat = ChatRequest(
        messages=messages,
        model=read_model(data.get("model"), allowed_models, default_model),
        temperature=read_temperature(data.get("temperature")),
        max_tokens=read_max_tokens(cap, limits, cap_name),
        reasoning=None,
        params=_openai_params(data),
        server_prompt=False,
        session=user or None,
        semantic_cache=semantic,
        knowledge=knowledge,
    )
    check_fit(chat, allowed_models)
    if compared:
        if chat.model is AUTO or chat.model in compared:
            raise BadRequest(
                public="model and edgechat.compare_with must name different models, not auto."
            )
        for other in compared:
            check_fit(dataclasses.replace(chat, model=other), allowed_models)
    return OpenAIRequest(
        chat=chat, stream=bool(stream), include_usage=include_usage, compare_with=compared
    )


def _semantic_cache(value: Any) -> bool:
    """edgechat's ``semantic_cache: true``: the question may be answered from
    a similar question's kept answer (``SEMANTIC_CACHE``); the OpenAI API's
    questions are not unless they ask."""
    if value is None:
        return False
    if type(value) is not bool:
        raise BadRequest(public="edgechat.semantic_cache must be true or false.")
    return value


def _compare_with(value: Any, allowed_models: Sequence[str], stream: bool) -> tuple[Model, ...]:
    """edgechat's extension, ``{"compare_with": [model, ...]}``: the models
    that answer too (one or two, allowed, distinct, not ``auto``)."""
    if value is None:
        return ()
    most = MAX_COMPARED - 1
    names = value
    if type(names) is not list or not 1 <= len(names) <= most:
        raise BadRequest(
            public=f"edgechat.compare_with must list 1 to {most} models to answer beside model."
        )
    if stream:
        raise BadRequest(
            public="edgechat.compare_with needs stream false: the answers come as one "
            "completion's choices."
        )
    refusal = BadRequest(
        public="edgechat.compare_with must name different models of GET /v1/models, not auto."
    )
    models: list[Model] = []
    for name in names:
        try:
            model = lookup(name, allowed_models) if type(name) is str else None
        except ModelNotFound:
            model = None
        if model is None or model is AUTO or model in models:
            raise refusal
        models.append(model)
    return tuple(models)


def _optional_bool(value: Any, where: str) -> bool:
    if value is None:
        return False
    if type(value) is not bool:
        raise BadRequest(public=f"{where} must be true or false.")
    return value


def _openai_messages(value: Any, limits: Limits, images: Images) -> tuple[Message, ...]:
    messages: list[Message] = []
    total = 0
    known = ", ".join(OPENAI_MESSAGE_FIELD_NAMES)
    for where, item in read_message_items(value, limits, OPENAI_MESSAGE_FIELDS, known):
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
            content, parts, documents = read_content(value, f"{where}.content", counter)
        # An assistant turn that only called tools has no text.
        total = count_text(
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
    return value, count_text(value, at, total, limits, may_be_empty=True)


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
        total = count_text(
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
