"""``POST /v1/responses``'s body rules. A Responses body is translated into
the Chat Completions body it means and checked by the same rules
(``openai_body``); the messages' rules name the conversation as messages
(``instructions`` first, then ``input``'s items).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from edgechat.apis.body import body_cap, read_object
from edgechat.apis.fields import RESPONSES_FIELDS
from edgechat.apis.openai_body import MAX_TOOLS, openai_request
from edgechat.core.errors import BadRequest
from edgechat.core.requests import Limits, OpenAIRequest

__all__ = ["parse_responses_request"]


_RESPONSES_FIELD_SET = frozenset(RESPONSES_FIELDS)


# Fields that mean the same in both APIs.
_SHARED_FIELDS = ("model", "stream", "temperature", "top_p", "user", "store", "metadata")


def parse_responses_request(
    body: bytes, limits: Limits, allowed_models: Sequence[str], default_model: str
) -> OpenAIRequest:
    """Validate a ``/v1/responses`` body; raises ``PayloadTooLarge``,
    ``BadRequest`` or ``ModelNotFound``."""
    data = read_object(body, limits, body_cap(limits, allowed_models))
    if not data.keys() <= _RESPONSES_FIELD_SET:
        raise BadRequest(
            public="The request has a field edgechat does not support; supported: "
            f"{', '.join(RESPONSES_FIELDS)}."
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
    extension = data.get("edgechat")
    if extension is not None:
        # A knowledge base, as on /v1/chat/completions (compare_with is not
        # the Responses API's: one response has one output).
        if type(extension) is not dict or extension.keys() != {"knowledge"}:
            raise BadRequest(public='edgechat must be {"knowledge": "<base id>"}.')
        chat["edgechat"] = extension
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
    return openai_request(chat, len(body), limits, allowed_models, default_model)


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
        if type(tool) is dict and tool.get("type") == "file_search":
            raise BadRequest(
                public=f"tools[{index}]: file_search is not supported; ask a knowledge base "
                'with "edgechat": {"knowledge": "<base id>"} (GET /api/knowledge lists them).'
            )
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
