"""The OpenAI API's shapes: ``chat.completion.chunk`` streams, whole
``chat.completion`` answers, the model list and the error body.

The model call itself is ``answer.Answer``'s, as for ``/chat``; what
differs is the framing. GLM and Kimi already stream OpenAI chunks, and those
are forwarded as the bytes they are: per batch of events, one search for the
few shapes an OpenAI client cannot take - Workers AI's native
``{"response": …}`` events (Llama's whole stream, and the usage chunk Workers
AI appends to GLM's), usage-only chunks and ``[DONE]`` - and only a batch that
holds one is parsed, event by event. Native text becomes chunks of our own;
the usage and ``[DONE]`` are written once, at the end (``ChunkFraming.closing``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from edgechat.answer.framing import Outcome, Whole
from edgechat.answer.upstream import Delta, DeltaKind, UpstreamReader, too_deep
from edgechat.core import sse
from edgechat.core.errors import EdgechatError, ModelNotFound
from edgechat.core.faults import UpstreamMalformed
from edgechat.core.models import (
    AUTO,
    EMBEDDING_CATALOG,
    EmbeddingModel,
    Model,
    Usage,
    allowed_models,
)

__all__ = [
    "ChunkFraming",
    "CompletionFraming",
    "error_body",
    "finish_reason",
    "models_json",
    "refuse_truncated",
]

# The Unix time a model "was created" for GET /v1/models: the clients want a
# number; this one is when edgechat's catalog took its current shape.
CATALOG_CREATED = 1_790_000_000

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    429: "rate_limit_error",
}


def error_body(exc: EdgechatError) -> tuple[int, dict[str, Any]]:
    """The status and ``{"error": {message, type, param, code}}`` of ``exc``
    in the OpenAI API; the one place its shape is made."""
    status, code, param, message = exc.status, exc.code, None, exc.public_message
    if isinstance(exc, ModelNotFound):
        status, code, param = 404, "model_not_found", "model"
        message = "The model is not available; GET /v1/models lists the models you can use."
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    # The class's own body (with anything it adds, such as content_refused's
    # categories) in OpenAI's fields.
    error = exc.to_json()["error"] | {
        "message": message,
        "type": kind,
        "param": param,
        "code": code,
    }
    return status, {"error": error}


def models_json(allowed: Sequence[str]) -> dict[str, Any]:
    """Body of ``GET /v1/models``: the allowed chat models, by id (``auto``
    first where it is allowed), then the embedding models."""
    routed = [AUTO] if AUTO.alias in allowed else []
    models: list[Model | EmbeddingModel] = [*routed, *allowed_models(allowed), *EMBEDDING_CATALOG]
    data = [
        {
            "id": model.id,
            "object": "model",
            "created": CATALOG_CREATED,
            "owned_by": "edgechat" if model is AUTO else model.family.lower(),
        }
        for model in models
    ]
    return {"object": "list", "data": data}


def _usage_or_none(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {name: usage[name] for name in ("prompt_tokens", "completion_tokens", "total_tokens")}


def finish_reason(outcome: Outcome, max_tokens: int) -> str:
    """Why the answer ended: the model's word, or for a model that says
    nothing (Llama's native stream), "length" when it used its whole token
    allowance, else "stop"."""
    if outcome.finish_reason is not None:
        return outcome.finish_reason
    usage = outcome.usage
    if usage is not None and usage["completion_tokens"] >= max_tokens:
        return "length"
    return "stop"


class _Completion:
    """What both framings of one completion know from the start."""

    __slots__ = ("created", "id", "max_tokens", "model", "sources")

    def __init__(
        self,
        request_id: str,
        max_tokens: int,
        created: int,
        model: Model,
        sources: list[dict[str, Any]] | None = None,
    ) -> None:
        self.id = "chatcmpl-" + request_id
        self.max_tokens = max_tokens
        self.created = created
        # The model answering (known once its first words came).
        self.model = model
        # A question asked of a knowledge base (``edgechat.knowledge``): the
        # passages its prompt held, given back as ``edgechat.sources``.
        self.sources = sources


def extension(sources: list[dict[str, Any]] | None) -> dict[str, Any]:
    """edgechat's own field of a reply: ``{"edgechat": {"sources": [...]}}``
    for a question asked of a knowledge base, else nothing."""
    return {} if sources is None else {"edgechat": {"sources": sources}}


# What sends a batch down the slow path even when every event in it begins
# as the model's chunks do: native text, which becomes content. JSON escapes
# every quote inside a string, so this cannot be part of a model's text.
_NATIVE_TEXT = b'"response"'

# How Workers AI begins every GLM and Kimi chunk (the emulator writes the
# same): the model's own id, created and model name, which become the
# completion's (OpenAI gives one of each per completion; the model's id
# differs from ours, and Workers AI's model name is not the id asked for).
# A chunk that begins otherwise is parsed instead.
_ENVELOPE = re.compile(
    rb'data: \{"id":"[^"\\\n]*","object":"chat\.completion\.chunk",'
    rb'"created":\d+,"model":"[^"\\\n]*",'
)
# The running usage Workers AI puts at the end of every chunk (OpenAI sends
# usage once, last, and only with include_usage; clients that add up every
# chunk's usage count it many times over): one level of nested counts, as
# ``prompt_tokens_details`` has.
_RUNNING_USAGE = re.compile(rb',"usage":\{[^{}\n]*\}(?=\}\n\n)')
_NESTED_USAGE = re.compile(rb',"usage":(?:null|\{[^{}\n]*(?:\{[^{}\n]*\}[^{}\n]*)*\})(?=\}\n\n)')
_ENVELOPE_FIELDS = frozenset(("id", "object", "created", "model", "usage"))


class ChunkFraming:
    """``/v1/chat/completions`` with ``stream: true``: ``chat.completion.chunk``
    events as OpenAI defines them, whatever the model sent: a first chunk
    with the role, one id, created and model for every chunk, a usage chunk
    at the end when asked for (and no usage anywhere else), ``data: [DONE]``.

    The model's chunks are rewritten per batch, not per event: a replace
    and a regular expression over the batch's bytes (``_fast``); only a
    batch holding something else is read event by event (``_translate``)."""

    relays_natively = False
    ping = sse.PING
    moderates_output = False

    __slots__ = ("_completion", "_include_usage", "_prefix", "_theirs", "_usual")

    def __init__(
        self,
        request_id: str,
        model: Model,
        max_tokens: int,
        *,
        include_usage: bool,
        created: int,
        sources: list[dict[str, Any]] | None = None,
    ) -> None:
        self._completion = _Completion(request_id, max_tokens, created, model, sources)
        self._include_usage = include_usage
        self._prefix = b""
        # The envelope the model writes, the same on each of its chunks
        # (learned from the first): replaced as a whole, no pattern per event;
        # and how a usual chunk begins: that envelope, then a choice.
        self._theirs = b""
        self._usual = b""
        self._answering(model)

    def _answering(self, model: Model) -> None:
        self._completion.model = model
        envelope = json.dumps(self._envelope(), ensure_ascii=False, separators=(",", ":"))
        # What the model's envelope becomes.
        self._prefix = ("data: " + envelope[:-1] + ",").encode()

    def opening(self, model: Model) -> bytes:
        return b""

    def first_words(self, model: Model, data: bytes) -> bytes:
        self._answering(model)
        # The role first, as OpenAI's first chunk has it (GLM's and Kimi's
        # chunks carry none: clients that take a chunk's role from the first
        # one otherwise lose the tool calls of the rest).
        return self._chunk({"role": "assistant", "content": ""}) + self.feed(data)

    def feed(self, whole: bytes) -> bytes:
        """Complete events of the model (``delivery`` splits and checks
        them), as the client gets them."""
        if not whole:
            return b""
        fast = None if _NATIVE_TEXT in whole else self._fast(whole)
        return fast if fast is not None else self._translate(whole)

    def _fast(self, events: bytes) -> bytes | None:
        """``events`` (one line each) with the completion's envelope and
        without the running usage; None unless every one of them has the
        usual shape. A handful of passes over the batch's bytes, each in C:
        it costs about what the batch's size does, not its number of events."""
        theirs = self._theirs
        if not theirs or not events.startswith(theirs):
            match = _ENVELOPE.match(events)
            if match is None:
                return None
            theirs = self._theirs = match.group()
            self._usual = theirs + b'"choices":[{'
        # Its quotes cannot be inside a JSON string: it starts an event
        # wherever it is, and every event must start with it and a choice
        # (not ``[DONE]``, nor a chunk of usage alone, ``"choices":[]``).
        count = events.count(self._usual)
        if count != events.count(b"\n\n") or 2 * count != events.count(b"\n"):
            return None
        out = _RUNNING_USAGE.sub(b"", events.replace(theirs, self._prefix))
        if b'"usage"' in out:
            out = _NESTED_USAGE.sub(b"", out)
            if b'"usage"' in out:
                return None
        return out

    def whole(self, model: Model, answer: Whole) -> bytes:
        """A complete JSON answer the model sent instead of a stream."""
        self._answering(model)
        body = answer.body
        message = _first_message(body)
        delta: dict[str, Any] = {"role": "assistant"}
        if answer.tool_calls:
            delta["tool_calls"] = [
                {"index": index, **call} for index, call in enumerate(answer.tool_calls)
            ]
        for name in ("reasoning_content", "content"):
            text = message.get(name)
            if type(text) is str and text:
                delta[name] = text
        if "content" not in delta and type(body.get("response")) is str:
            delta["content"] = body["response"]
        return self._chunk(delta, finish_reason=answer.finish_reason)

    def closing(self, outcome: Outcome, between_events: bool) -> bytes:
        refuse_truncated(outcome)
        out = b""
        if outcome.finish_reason is None:
            # Native streams say nothing of why they ended: ours says it.
            reason = finish_reason(outcome, self._completion.max_tokens)
            out += self._chunk({}, finish_reason=reason)
        if self._include_usage:
            out += sse.data(
                {
                    **self._envelope(),
                    "choices": [],
                    "usage": _usage_or_none(outcome.usage),
                }
            )
        if self._completion.sources is not None:
            # Its own chunk without choices, as the usage chunk is.
            out += sse.data(
                {**self._envelope(), "choices": [], **extension(self._completion.sources)}
            )
        return out + b"data: [DONE]\n\n"

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        # The official clients raise on an event whose data holds "error".
        return sse.data(error_body(exc)[1])

    # --- the slow path: event by event ----------------------------------

    def _translate(self, whole: bytes) -> bytes:
        out: list[bytes] = []
        texts: list[str] = []
        for event in sse.events(whole):
            chunk = self._event(event, texts)
            if chunk:
                if texts:
                    out.append(self._chunk({"content": "".join(texts)}))
                    texts = []
                out.append(chunk)
        if texts:
            out.append(self._chunk({"content": "".join(texts)}))
        return b"".join(out)

    def _event(self, event: bytes, texts: list[str]) -> bytes:
        """One event as the client gets it (b"": nothing, or native text
        added to ``texts``, which goes out as one chunk of ours)."""
        usual = b"\n" not in event and _NATIVE_TEXT not in event
        fast = self._fast(event + b"\n\n") if usual else None
        if fast is not None:
            return fast
        payload = sse.Fields(event).data
        if payload is None or payload == b"[DONE]" or too_deep(payload):
            return b""
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return b""  # unreadable: the client could not read it either
        if type(obj) is not dict:
            return b""
        choices = obj.get("choices")
        if type(choices) is list and choices:
            rest = {k: v for k, v in obj.items() if k not in _ENVELOPE_FIELDS}
            return sse.data({**self._envelope(), **rest})
        text = obj.get("response") if choices is None else None
        if type(text) is str and text:
            texts.append(text)
        # choices == []: a usage-only chunk; the usage goes out at the end.
        return b""

    def _envelope(self) -> dict[str, Any]:
        completion = self._completion
        return {
            "id": completion.id,
            "object": "chat.completion.chunk",
            "created": completion.created,
            "model": completion.model.id,
        }

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return sse.data({**self._envelope(), "choices": [choice]})


def refuse_truncated(outcome: Outcome) -> None:
    """A stream that stopped with neither a finish reason nor ``[DONE]`` was
    cut off: the OpenAI API has no way to say so but an error (``/chat``
    says it with ``finish_reason: null``)."""
    if outcome.truncated:
        raise UpstreamMalformed(detail="the model's stream ended without its end")


def _first_message(body: dict[str, Any]) -> dict[str, Any]:
    choices = body.get("choices")
    if type(choices) is list and choices and type(choices[0]) is dict:
        message = choices[0].get("message")
        if type(message) is dict:
            return message
    return {}


class CompletionFraming:
    """``/v1/chat/completions`` without streaming: Python reads the whole
    answer and the reply is one ``chat.completion``. Nothing is written while
    the model answers; an error is raised, not framed."""

    relays_natively = False
    ping = b""
    moderates_output = False

    __slots__ = ("_completion", "_content", "_reader", "_reasoning", "_tool_calls")

    def __init__(
        self,
        request_id: str,
        model: Model,
        max_tokens: int,
        *,
        created: int,
        sources: list[dict[str, Any]] | None = None,
    ) -> None:
        self._completion = _Completion(request_id, max_tokens, created, model, sources)
        self._reader = UpstreamReader()
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._tool_calls: list[dict[str, Any]] | None = None

    def opening(self, model: Model) -> bytes:
        return b""

    def first_words(self, model: Model, data: bytes) -> bytes:
        return self.feed(data)

    def feed(self, data: bytes) -> bytes:
        self._take(self._reader.feed(data))
        return b""

    def whole(self, model: Model, answer: Whole) -> bytes:
        self._content.append(answer.content)
        if answer.reasoning:
            self._reasoning.append(answer.reasoning)
        self._tool_calls = answer.tool_calls
        return b""

    def closing(self, outcome: Outcome, between_events: bool) -> bytes:
        refuse_truncated(outcome)
        self._take(self._reader.finish())
        if self._tool_calls is None:
            self._tool_calls = self._reader.tool_calls
        return b""

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        return b""

    def _take(self, deltas: list[Delta]) -> None:
        for kind, text in deltas:
            if kind is DeltaKind.CONTENT:
                self._content.append(text)
            elif kind is DeltaKind.REASONING:
                self._reasoning.append(text)

    def result(self, outcome: Outcome) -> dict[str, Any]:
        """The ``chat.completion`` body, once the answer is complete."""
        assert outcome.model is not None
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content)}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        calls = self._tool_calls
        if calls:
            message["tool_calls"] = calls
            if not message["content"]:
                message["content"] = None
        return {
            "id": self._completion.id,
            "object": "chat.completion",
            "created": self._completion.created,
            "model": outcome.model.id,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": finish_reason(outcome, self._completion.max_tokens),
                }
            ],
            "usage": _usage_or_none(outcome.usage),
            **extension(self._completion.sources),
        }
