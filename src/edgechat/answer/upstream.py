"""The one reader of what Workers AI streams back, for both wire formats.

``AI.run(..., stream=True)`` yields SSE bytes whose events are either
OpenAI ``chat.completion.chunk`` objects (GLM, Kimi) or native
``{"response": …}`` objects (Llama), sometimes both in one stream, and now and
then a single complete JSON object instead of SSE. ``UpstreamReader`` turns any
of these, cut into chunks at arbitrary bytes, into ``Delta``s of reasoning and
answer text, and keeps the stream's usage and finish reason.

``/chat`` reads with it only the model's first chunks and the last few events
of its ``Tail`` (the rest is relayed without Python, see ``apis.chat``); other
callers may read a whole stream, so ``feed`` keeps a fast path for the usual
chunk - whole ``data: {...}\\n\\n`` events with LF line ends - that costs one
decode, one split and one JSON parse per event. Everything unusual (the first
bytes, CR line ends, an event split across chunks, a whole-JSON body, an
oversized line) takes the slow path.
``bench/reader_bench.py`` measures it.
"""

from __future__ import annotations

import enum
import json
import math
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from edgechat.core import sse
from edgechat.core.faults import UpstreamMalformed
from edgechat.core.json_body import nested_deeper_than
from edgechat.core.models import Usage

__all__ = [
    "BLANK_LINES",
    "TAIL_BYTES",
    "Delta",
    "DeltaKind",
    "Redaction",
    "Tail",
    "UpstreamReader",
    "model_events",
    "too_deep",
]


class DeltaKind(enum.Enum):
    REASONING = "reasoning"
    CONTENT = "content"
    # A piece of a function call (its name or a fragment of its arguments);
    # the whole calls are in ``UpstreamReader.tool_calls``.
    TOOL_CALL = "tool_call"


class Delta(NamedTuple):
    kind: DeltaKind
    text: str


_REASONING = DeltaKind.REASONING
_CONTENT = DeltaKind.CONTENT
_TOOL_CALL = DeltaKind.TOOL_CALL

# A whole-JSON body longer than this is no answer we can use (events have
# their own bound, ``sse.MAX_EVENT_BYTES``): memory per request stays flat.
MAX_BODY_BYTES = 4 << 20

# Reader modes: where the next chunk goes.
_UNDECIDED = 0  # only whitespace so far
_SSE = 1
_JSON = 2  # a whole non-stream JSON body, buffered until finish()
_FINISHED = 3

_BOM = b"\xef\xbb\xbf"

# raw_decode is json.loads without its per-call wrapper (type checks, BOM
# check, whitespace regex): 40% less CPU per event. Anything it rejects gets
# a second chance through decode, which also allows surrounding whitespace.
# NaN and the infinities are not JSON: an event holding one is malformed (and
# a whole answer holding one could not be sent on as JSON).


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


# Deeper JSON than this from upstream is no model's answer; unparsed, it
# cannot exhaust the interpreter's stack (in Pyodide that ends the isolate,
# and no RecursionError is raised to catch).
MAX_UPSTREAM_DEPTH = 64


def too_deep(data: bytes) -> bool:
    """Whether upstream JSON ``data`` nests deeper than ``MAX_UPSTREAM_DEPTH``."""
    return data.count(b"[") + data.count(b"{") > MAX_UPSTREAM_DEPTH and nested_deeper_than(
        data, MAX_UPSTREAM_DEPTH
    )


_decoder = json.JSONDecoder(parse_constant=_not_json)
_raw_decode = _decoder.raw_decode
_loads = _decoder.decode


def _count(value: object) -> int:
    if type(value) is int:
        return max(value, 0)
    if type(value) is float and math.isfinite(value):
        return max(int(value), 0)
    return 0


def _normalise_usage(raw: dict[str, Any]) -> Usage | None:
    prompt = raw.get("prompt_tokens", raw.get("input_tokens"))
    completion = raw.get("completion_tokens", raw.get("output_tokens"))
    total = raw.get("total_tokens")
    if prompt is None and completion is None and total is None:
        return None
    prompt_tokens, completion_tokens = _count(prompt), _count(completion)
    total_tokens = _count(total) if total is not None else prompt_tokens + completion_tokens
    usage: Usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total_tokens,
    }
    # Prompt caching: the cached part of the prompt, as OpenAI reports it
    # (https://developers.cloudflare.com/workers-ai/features/prompt-caching/,
    # "Monitoring cached tokens"); the Responses shape says input_tokens_details.
    details = raw.get("prompt_tokens_details", raw.get("input_tokens_details"))
    if type(details) is dict:
        cached = min(_count(details.get("cached_tokens")), prompt_tokens)
        if cached:
            usage["cached_tokens"] = cached
    return usage


def _take_tool_calls(assembled: list[dict[str, Any]], calls: list[Any], out: list[Delta]) -> None:
    """Adds the pieces ``calls`` of one delta to the ``assembled`` calls."""
    # Streamed, a call comes in pieces: the first carries its index, id and
    # name, the next ones fragments of its arguments; whole, in one piece.
    for position, piece in enumerate(calls):
        if type(piece) is not dict:
            continue
        index = piece.get("index", position)
        if type(index) is not int or not 0 <= index <= len(assembled):
            continue
        if index == len(assembled):
            assembled.append(
                {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
        call = assembled[index]
        if type(piece.get("id")) is str and piece["id"]:
            call["id"] = piece["id"]
        function = piece.get("function")
        if type(function) is not dict:
            continue
        name, arguments = function.get("name"), function.get("arguments")
        if type(name) is str and name:
            call["function"]["name"] += name
            out.append(Delta(_TOOL_CALL, name))
        if type(arguments) is str and arguments:
            call["function"]["arguments"] += arguments
            out.append(Delta(_TOOL_CALL, arguments))


def _read_delta(
    delta: dict[str, Any], tool_calls: list[dict[str, Any]] | None, out: list[Delta]
) -> list[dict[str, Any]] | None:
    """One choice's delta (or whole message) into ``out``: its thinking, its
    text, the pieces of its function calls; returns the calls so far."""
    text = delta.get("reasoning_content") or delta.get("reasoning")
    if text and type(text) is str:
        out.append(Delta(_REASONING, text))
    text = delta.get("content")
    if text and type(text) is str:
        out.append(Delta(_CONTENT, text))
    calls = delta.get("tool_calls")
    if calls and type(calls) is list:
        if tool_calls is None:
            tool_calls = []
        _take_tool_calls(tool_calls, calls, out)
    return tool_calls


def _one_line_event(chunk: bytes) -> bool:
    """Whether ``chunk`` is one whole ``data:`` event of one LF-ended line."""
    return (
        chunk.startswith(b"data: ")
        and chunk.find(b"\n") == len(chunk) - 2
        and chunk.endswith(b"\n\n")
        and b"\r" not in chunk
    )


class UpstreamReader:
    """Incremental reader of one upstream response; one instance per stream.

    ``feed`` each chunk as it arrives and ``finish`` once the stream closed;
    both return the text deltas they completed, in order. Afterwards:

    - ``usage``: the last usage the model reported (normalised), or None;
    - ``finish_reason``: the last ``finish_reason`` seen (``"stop"``, ``"length"``…);
    - ``saw_done``: whether ``data: [DONE]`` arrived;
    - ``malformed_lines``: events (or a whole body) that could not be read, skipped;
    - ``produced``: whether any non-empty text came out;
    - ``whole_body``: the object, when the answer was one JSON document
      instead of a stream (set by ``finish``);
    - ``tool_calls``: the function calls the model made, assembled from their
      streamed pieces (OpenAI shape, in index order), or None.
    """

    __slots__ = (
        "_body",
        "_body_bytes",
        "_events",
        "_mode",
        "_raw_usage",
        "finish_reason",
        "malformed_lines",
        "named_events",
        "produced",
        "saw_done",
        "tool_calls",
        "whole_body",
    )

    def __init__(self) -> None:
        self._mode = _UNDECIDED
        # Events are split on bytes and decoded whole: a multi-byte character
        # cut across chunks is never replaced, since no event ends inside one.
        self._events = sse.EventSplitter()
        self._body: list[bytes] = []
        self._body_bytes = 0
        self._raw_usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.saw_done = False
        self.malformed_lines = 0
        # Events with an ``event:`` name: no model sends one.
        self.named_events = 0
        self.produced = False
        self.whole_body: dict[str, Any] | None = None
        self.tool_calls: list[dict[str, Any]] | None = None

    @property
    def usage(self) -> Usage | None:
        # Usage may come on every chunk: keep a reference, normalise on demand.
        raw = self._raw_usage
        return None if raw is None else _normalise_usage(raw)

    def feed(self, chunk: bytes) -> list[Delta]:
        mode = self._mode
        if mode != _SSE:
            if mode == _FINISHED:
                raise RuntimeError("UpstreamReader.feed() after finish()")
            if mode == _UNDECIDED:
                chunk = self._start(chunk)
            if self._mode == _JSON:
                self._take_body(chunk)
                return []
            if not chunk:
                return []
        out: list[Delta] = []
        if self._events.idle and _one_line_event(chunk):
            # The usual chunk: one whole event of one line, nothing held.
            self._data(chunk[6:-2], out)
            if out:
                self.produced = True
            return out
        whole = self._events.feed(chunk)
        if not whole:
            return []
        if whole.startswith(b"data: ") and whole.find(b"\n") == len(whole) - 2:
            self._data(whole[6:-2], out)
        else:
            for event in sse.events(whole):
                self._event(event, out)
        if out:
            self.produced = True
        return out

    def finish(self) -> list[Delta]:
        """Flush what the closed stream left: an unterminated event, a body."""
        if self._mode == _FINISHED:
            return []
        out: list[Delta] = []
        if self._mode == _JSON:
            self._whole_body(out)
        elif self._mode == _UNDECIDED and self._body:
            self.malformed_lines += 1  # a stray part of a byte order mark
        elif self._mode == _SSE:
            rest = self._events.finish()
            if rest.strip():
                for event in sse.events(rest):
                    self._event(event, out)
            self.malformed_lines += self._events.dropped
        self._mode = _FINISHED
        self._body = []
        if out:
            self.produced = True
        return out

    def _start(self, chunk: bytes) -> bytes:
        """Decides the format from the first bytes that are not whitespace
        (nor a byte order mark); until then they are kept in ``_body``."""
        start = (b"".join(self._body) + chunk).lstrip()
        self._body = []
        if start.startswith(_BOM):
            start = start[len(_BOM) :].lstrip()
        elif start and _BOM.startswith(start):
            self._body = [start]  # perhaps the first bytes of a BOM
            return b""
        if start:
            self._mode = _JSON if start[:1] in b"{[" else _SSE
        return start

    def _event(self, event: bytes, out: list[Delta]) -> None:
        fields = sse.Fields(event)
        self.malformed_lines += fields.stray_lines
        if fields.name is not None:
            self.named_events += 1
        if fields.data is not None:
            self._data(fields.data, out)

    def _data(self, data: bytes, out: list[Delta]) -> None:
        if data == b"[DONE]":
            self.saw_done = True
            return
        if too_deep(data):
            self.malformed_lines += 1
            return
        text = data.decode("utf-8", "replace")
        try:
            obj, end = _raw_decode(text)
            if end != len(text):
                raise ValueError("trailing text")
        except (ValueError, RecursionError):
            try:
                obj = _loads(text)
            except (ValueError, RecursionError):
                self.malformed_lines += 1
                return
        if type(obj) is dict:
            self._absorb(obj, out)
        else:
            self.malformed_lines += 1

    def _absorb(self, obj: dict[str, Any], out: list[Delta]) -> None:
        usage = obj.get("usage")
        if usage and type(usage) is dict:
            self._raw_usage = usage
        choices = obj.get("choices")
        if choices is None:
            text = obj.get("response")  # native shape
            if text and type(text) is str:
                out.append(Delta(_CONTENT, text))
            return
        if not choices or type(choices) is not list:
            return
        choice = choices[0]
        if type(choice) is not dict:
            return
        delta = choice.get("delta")
        if delta is None:
            delta = choice.get("message")  # a whole chat.completion
        if type(delta) is dict:
            self.tool_calls = _read_delta(delta, self.tool_calls, out)
        reason = choice.get("finish_reason")
        if reason and type(reason) is str:
            self.finish_reason = reason

    # --- a whole JSON body ------------------------------------------------

    def _take_body(self, data: bytes) -> None:
        if not data or self._body_bytes > MAX_BODY_BYTES:
            return
        self._body_bytes += len(data)
        if self._body_bytes > MAX_BODY_BYTES:
            self._body = []
            self.malformed_lines += 1
        else:
            self._body.append(data)

    def _whole_body(self, out: list[Delta]) -> None:
        if self._body_bytes > MAX_BODY_BYTES:
            return  # already counted
        body = b"".join(self._body)
        if too_deep(body):
            self.malformed_lines += 1
            return
        try:
            obj = _loads(body.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            self.malformed_lines += 1
            return
        if type(obj) is dict and type(obj.get("result")) is dict:
            obj = obj["result"]  # the REST API's envelope, should it ever appear
        if type(obj) is dict:
            self.whole_body = obj
            self._absorb(obj, out)
        else:
            self.malformed_lines += 1


# --- the end of a relayed stream ----------------------------------------------

# The closing events (the last choice with its finish_reason, the usage
# chunk, [DONE]) are a few hundred bytes; 16 KiB holds them even after a long
# last delta, and parsing that much at the end costs well under a millisecond.
TAIL_BYTES = 16 << 10
# The last choice with its finish_reason, a usage-only chunk, the native
# usage chunk, [DONE]: the ending is at most four events; a few more spare.
TAIL_EVENTS = 6

# The line ends that close an event: after them, a stream is between events.
BLANK_LINES = (b"\n\n", b"\r\n\r\n", b"\r\r")


class Tail:
    """The last ``TAIL_BYTES`` of a stream whose events Python does not read
    one by one: enough to learn how it ended (finish reason, usage, ``[DONE]``)
    and whether it stopped between two events."""

    __slots__ = ("_bytes", "_cut")

    def __init__(self) -> None:
        self._bytes = b""
        self._cut = False  # whether the stream's start has fallen out

    def add(self, data: bytes) -> None:
        if len(data) > TAIL_BYTES:
            self._bytes, self._cut = data[-TAIL_BYTES:], True
            return
        kept = self._bytes + data
        if len(kept) > TAIL_BYTES:
            kept, self._cut = kept[-TAIL_BYTES:], True
        self._bytes = kept

    @property
    def between_events(self) -> bool:
        """Whether the stream so far ends with a complete event (or is empty)."""
        return not self._bytes or self._bytes.endswith(BLANK_LINES)

    def read(self) -> UpstreamReader:
        """A finished reader of the tail's last ``TAIL_EVENTS`` complete
        events (one cut off at the front is skipped): its ``usage``,
        ``finish_reason`` and ``saw_done`` are the stream's. Only the last few
        are read because parsing costs (about 25 µs an event in Pyodide) and
        the stream's ending is all they are read for."""
        data = self._bytes.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = data.rsplit(b"\n\n", TAIL_EVENTS + 1)
        if self._cut or len(events) > TAIL_EVENTS + 1:
            del events[0]  # cut off at the front, or older than the last few
        reader = UpstreamReader()
        reader.feed(b"\n\n".join(events))
        reader.finish()
        return reader


# --- only the model's events -------------------------------------------------------

# What a model's stream holds, and so all that is relayed of it: unnamed
# events of one data line, a JSON object (both wire formats) or [DONE]. One
# pass of a regular expression per batch (never a parse per event: that costs
# a millisecond per ~70 events); the objects themselves are the model's.
_MODEL_EVENTS = re.compile(rb"(?:data: (?:\{[^\n]*\}|\[DONE\])\n\n)*")


def model_events(whole: bytes) -> bytes:
    """The model's events of ``whole`` (complete events, as
    ``sse.EventSplitter`` gives them), comments dropped. Raises
    ``UpstreamMalformed`` for anything else: a named event, a line that is
    not SSE, data that is no JSON object."""
    if _MODEL_EVENTS.fullmatch(whole):
        return whole
    kept: list[bytes] = []
    for event in sse.events(whole):
        fields = sse.Fields(event)
        data = fields.data
        if fields.name is not None or fields.stray_lines:
            failure = UpstreamMalformed(
                detail="an event that is not the model's (named, or not SSE)"
            )
        elif data is None:
            continue  # a comment
        elif data != b"[DONE]" and not (data.startswith(b"{") and data.endswith(b"}")):
            failure = UpstreamMalformed(detail="an event whose data is no JSON object")
        else:
            kept.append(event + b"\n\n")
            continue
        failure.before = b"".join(kept)
        raise failure
    return b"".join(kept)


class Redaction:
    """The configured secrets (``API_TOKEN``, the providers' keys), taken out
    of what a provider sends before it is relayed: a provider that writes the
    request's key into its stream must not hand it to the client. Applied to
    whole events, so a secret is never cut in two."""

    __slots__ = ("_secrets",)

    MARK = b"[redacted]"

    def __init__(self, secrets: Iterable[str | None]) -> None:
        forms: set[bytes] = set()
        for secret in secrets:
            if secret:
                forms.add(secret.encode())
                forms.add(json.dumps(secret)[1:-1].encode())  # as a JSON string holds it
        self._secrets = tuple(sorted(forms, key=len, reverse=True))

    def __call__(self, data: bytes) -> bytes:
        for secret in self._secrets:
            if secret in data:
                data = data.replace(secret, self.MARK)
        return data

    def holds_one(self, data: bytes) -> bool:
        return any(secret in data for secret in self._secrets)
