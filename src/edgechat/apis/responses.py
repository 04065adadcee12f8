"""The OpenAI Responses API (``POST /v1/responses``) over the same answer
path as Chat Completions: the request becomes a ``ChatRequest``
(``validation.parse_responses_request``), ``pipeline`` answers it, and one
of the framings here writes the answer as a ``response`` object, streamed
as the API's typed events (``response.created``, ``response.output_item.added``,
``response.output_text.delta``, ``response.function_call_arguments.delta``,
``response.completed``, …) or whole.

A stream is read per forwarded batch (``upstream.UpstreamReader``), and each
batch's text becomes one delta event per output item, not one per token.
Conversations are not stored: ``previous_response_id`` is refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

from edgechat.answer.framing import Outcome, Whole
from edgechat.answer.upstream import DeltaKind, UpstreamReader
from edgechat.apis.openai import CompletionFraming, extension, finish_reason, refuse_truncated
from edgechat.core import sse
from edgechat.core.errors import EdgechatError
from edgechat.core.models import Model, Usage

__all__ = ["ResponseDocument", "ResponseEvents", "response_object"]

# The text of a batch of GLM's or Kimi's chunks, in order: one pass of this
# and one JSON parse of all the pieces, instead of one parse per event. JSON
# escapes every quote inside a string, so no match starts inside a text. A
# string's body is the "unrolled" form (runs of plain bytes between escapes),
# not one alternative per byte; a batch without reasoning, most of an
# answer, is read by a pattern with a literal start, which the regular
# expression engine finds with a plain search: half the time of the other
# (bench/framing_bench.py).
_STRING = rb'"([^"\\]*(?:\\.[^"\\]*)*)"'
_TEXT = re.compile(rb'"(reasoning_content|reasoning|content)"\s*:\s*' + _STRING)
_CONTENT = re.compile(rb'"content"\s*:\s*' + _STRING)
_REASONING = b'"reasoning'
# What the patterns cannot read: tool calls, native events, whole bodies.
_FOR_THE_READER = (b'"tool_calls"', b'"response"', b'"choices":[]', b'"message"')


def _json_strings(raws: list[bytes]) -> list[str]:
    decoded: list[str] = json.loads(b'["' + b'","'.join(raws) + b'"]')
    return decoded


def _texts(data: bytes) -> list[tuple[DeltaKind, str]]:
    if _REASONING not in data:
        raws = _CONTENT.findall(data)
        return [(DeltaKind.CONTENT, "".join(_json_strings(raws)))] if raws else []
    found = _TEXT.findall(data)
    texts = _json_strings([raw for _, raw in found])
    return [
        (DeltaKind.CONTENT if kind == b"content" else DeltaKind.REASONING, text)
        for (kind, _), text in zip(found, texts, strict=True)
    ]


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    return {
        "input_tokens": usage["prompt_tokens"],
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": usage["completion_tokens"],
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage["total_tokens"],
    }


def response_object(
    response_id: str,
    created: int,
    model: Model,
    output: list[dict[str, Any]],
    outcome: Outcome | None,
    max_tokens: int,
    sources: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The ``response`` object: in progress (no ``outcome`` yet), completed,
    or incomplete (the answer used its whole ``max_output_tokens``); a
    finished answer asked of a knowledge base carries its ``sources``."""
    status, incomplete = "in_progress", None
    if outcome is not None:
        status = "completed"
        if finish_reason(outcome, max_tokens) == "length":
            status, incomplete = "incomplete", {"reason": "max_output_tokens"}
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "model": model.id,
        "output": output,
        "usage": _usage(outcome.usage) if outcome is not None else None,
        "error": None,
        "incomplete_details": incomplete,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "metadata": {},
        **(extension(sources) if outcome is not None else {}),
    }


def _message(item_id: str, text: str, status: str) -> dict[str, Any]:
    part = {"type": "output_text", "text": text, "annotations": []}
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": [part] if status == "completed" else [],
    }


def _reasoning(item_id: str, text: str) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": item_id,
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}],
    }


def _function_call(item_id: str, call: dict[str, Any], status: str) -> dict[str, Any]:
    function = call["function"]
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call["id"],
        "name": function["name"],
        "arguments": function["arguments"] if status == "completed" else "",
        "status": status,
    }


class ResponseDocument(CompletionFraming):
    """``/v1/responses`` without streaming: the whole answer read as for a
    ``chat.completion``, given as one ``response``."""

    def result(self, outcome: Outcome) -> dict[str, Any]:
        completion = super().result(outcome)
        message = completion["choices"][0]["message"]
        rid = completion["id"].removeprefix("chatcmpl-")
        output: list[dict[str, Any]] = []
        if message.get("reasoning_content"):
            output.append(_reasoning(f"rs_{rid}", message["reasoning_content"]))
        if message.get("content"):
            output.append(_message(f"msg_{rid}", message["content"], "completed"))
        for index, call in enumerate(message.get("tool_calls") or ()):
            output.append(_function_call(f"fc_{rid}_{index}", call, "completed"))
        assert outcome.model is not None
        return response_object(
            f"resp_{rid}",
            completion["created"],
            outcome.model,
            output,
            outcome,
            self._completion.max_tokens,
            self._completion.sources,
        )


class ResponseEvents:
    """``/v1/responses`` with ``stream: true``: the typed events, an output
    item at a time (the thinking, the text, each function call), each
    batch's new text in one delta event per item."""

    relays_natively = False
    ping = sse.PING
    moderates_output = False

    __slots__ = (
        "_calls_at",
        "_calls_sent",
        "_created",
        "_done",
        "_id",
        "_max_tokens",
        "_model",
        "_open",
        "_reader",
        "_sequence",
        "_sources",
        "_texts",
    )

    def __init__(
        self,
        request_id: str,
        model: Model,
        max_tokens: int,
        *,
        created: int,
        sources: list[dict[str, Any]] | None = None,
    ) -> None:
        self._id = request_id
        self._sources = sources
        self._model = model
        self._max_tokens = max_tokens
        self._created = created
        self._reader = UpstreamReader()
        self._sequence = 0
        # The finished output items; the open one's kind ("reasoning",
        # "message") and the text of each; argument bytes sent per call.
        self._done: list[dict[str, Any]] = []
        self._open: str | None = None
        self._texts: dict[str, list[str]] = {"reasoning": [], "message": []}
        self._calls_sent: list[int] = []
        # The output index of the first function call (they follow the text).
        self._calls_at = 0

    # --- the framing --------------------------------------------------------

    def opening(self, model: Model) -> bytes:
        response = self._object([], None)
        return self._event("response.created", response=response) + self._event(
            "response.in_progress", response=response
        )

    def first_words(self, model: Model, data: bytes) -> bytes:
        self._model = model
        return self.feed(data)

    def feed(self, data: bytes) -> bytes:
        out: list[bytes] = []
        kind: str | None = None
        texts: list[str] = []
        usual = not any(mark in data for mark in _FOR_THE_READER)
        deltas = _texts(data) if usual else self._reader.feed(data)
        for delta_kind, text in deltas:
            name = "reasoning" if delta_kind is DeltaKind.REASONING else "message"
            if delta_kind is DeltaKind.TOOL_CALL:
                continue
            if name != kind and texts:
                out.append(self._text(kind, "".join(texts)))
                texts = []
            kind = name
            texts.append(text)
        if texts:
            out.append(self._text(kind, "".join(texts)))
        out.append(self._calls())
        return b"".join(out)

    def whole(self, model: Model, answer: Whole) -> bytes:
        self._model = model
        out = b""
        if answer.reasoning:
            out += self._text("reasoning", answer.reasoning)
        if answer.content:
            out += self._text("message", answer.content)
        for index, call in enumerate(answer.tool_calls or ()):
            out += self._call_added(index, call) + self._arguments(index, call)
        return out

    def closing(self, outcome: Outcome, between_events: bool) -> bytes:
        refuse_truncated(outcome)
        self._reader.finish()
        out = self._close()
        for index, call in enumerate(self._reader.tool_calls or ()):
            if index < len(self._calls_sent):
                out += self._call_done(index, call)
        name = "response.completed"
        response = self._object(self._done, outcome)
        if response["status"] == "incomplete":
            name = "response.incomplete"
        return out + self._event(name, response=response)

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        response = self._object(self._done, None)
        response["status"] = "failed"
        response["error"] = {"code": exc.code, "message": exc.public_message}
        return self._event("response.failed", response=response)

    # --- the output items ---------------------------------------------------

    def _object(self, output: list[dict[str, Any]], outcome: Outcome | None) -> dict[str, Any]:
        rid = f"resp_{self._id}"
        return response_object(
            rid, self._created, self._model, output, outcome, self._max_tokens, self._sources
        )

    def _item_id(self, kind: str) -> str:
        return f"{'rs' if kind == 'reasoning' else 'msg'}_{self._id}"

    def _text(self, kind: str | None, text: str) -> bytes:
        """``text`` of the ``kind`` item, opening it (and closing the one
        before) when it is new."""
        assert kind is not None
        out = b""
        if self._open != kind:
            out += self._close()
            out += self._opened(kind)
        self._texts[kind].append(text)
        where = {"item_id": self._item_id(kind), "output_index": len(self._done)}
        name = "reasoning_text" if kind == "reasoning" else "output_text"
        return out + self._event(f"response.{name}.delta", **where, content_index=0, delta=text)

    def _opened(self, kind: str) -> bytes:
        self._open = kind
        item_id, index = self._item_id(kind), len(self._done)
        if kind == "reasoning":
            item = {**_reasoning(item_id, ""), "content": []}
        else:
            item = _message(item_id, "", "in_progress")
        out = self._event("response.output_item.added", output_index=index, item=item)
        if kind == "message":
            part = {"type": "output_text", "text": "", "annotations": []}
            out += self._event(
                "response.content_part.added",
                item_id=item_id,
                output_index=index,
                content_index=0,
                part=part,
            )
        return out

    def _close(self) -> bytes:
        """Ends the open reasoning or message item, if any."""
        kind, self._open = self._open, None
        if kind is None:
            return b""
        item_id, index, text = self._item_id(kind), len(self._done), "".join(self._texts[kind])
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        if kind == "reasoning":
            item = _reasoning(item_id, text)
            out = self._event("response.reasoning_text.done", **where, text=text)
        else:
            item = _message(item_id, text, "completed")
            out = self._event("response.output_text.done", **where, text=text)
            out += self._event("response.content_part.done", **where, part=item["content"][0])
        self._done.append(item)
        return out + self._event("response.output_item.done", output_index=index, item=item)

    def _calls(self) -> bytes:
        """New function calls and new pieces of their arguments."""
        calls = self._reader.tool_calls or []
        out = b""
        for index, call in enumerate(calls):
            if index == len(self._calls_sent):
                if not call["function"]["name"]:
                    break  # its name is still to come
                out += self._call_added(index, call)
            out += self._arguments(index, call)
        return out

    def _call_item_id(self, index: int) -> str:
        return f"fc_{self._id}_{index}"

    def _call_added(self, index: int, call: dict[str, Any]) -> bytes:
        out = self._close()
        if index == 0:
            self._calls_at = len(self._done)
        self._calls_sent.append(0)
        item = _function_call(self._call_item_id(index), call, "in_progress")
        return out + self._event(
            "response.output_item.added", output_index=self._calls_at + index, item=item
        )

    def _arguments(self, index: int, call: dict[str, Any]) -> bytes:
        arguments = call["function"]["arguments"]
        sent = self._calls_sent[index]
        if len(arguments) <= sent:
            return b""
        self._calls_sent[index] = len(arguments)
        return self._event(
            "response.function_call_arguments.delta",
            item_id=self._call_item_id(index),
            output_index=self._calls_at + index,
            delta=arguments[sent:],
        )

    def _call_done(self, index: int, call: dict[str, Any]) -> bytes:
        out = self._arguments(index, call)
        item = _function_call(self._call_item_id(index), call, "completed")
        index_out = self._calls_at + index
        where = {"item_id": item["id"], "output_index": index_out}
        out += self._event(
            "response.function_call_arguments.done", **where, arguments=item["arguments"]
        )
        out += self._event("response.output_item.done", output_index=index_out, item=item)
        self._done.append(item)
        return out

    def _event(self, name: str, **fields: Any) -> bytes:
        self._sequence += 1
        return sse.event(name, {"type": name, "sequence_number": self._sequence, **fields})
