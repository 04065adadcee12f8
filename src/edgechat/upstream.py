"""The one reader of what Workers AI streams back, for both wire formats.

``AI.run(..., stream=True)`` yields SSE bytes whose events are either
OpenAI ``chat.completion.chunk`` objects (GLM, Kimi) or native
``{"response": …}`` objects (Llama), sometimes both in one stream, and now and
then a single complete JSON object instead of SSE. ``UpstreamReader`` turns any
of these, cut into chunks at arbitrary bytes, into ``Delta``s of reasoning and
answer text, and keeps the stream's usage and finish reason.

``/chat`` reads with it only the model's first chunks and the last few events
of its ``Tail`` (the rest is relayed without Python, see ``chat.py``); other
callers may read a whole stream, so ``feed`` keeps a fast path for the usual
chunk - whole ``data: {...}\\n\\n`` events with LF line ends - that costs one
decode, one split and one JSON parse per event. Everything unusual (the first
bytes, CR line ends, an event split across chunks, a whole-JSON body, an
oversized line) takes the slow path.
``bench/reader_bench.py`` measures it.
"""

from __future__ import annotations

import codecs
import enum
import json
import math
from typing import Any, NamedTuple

from edgechat.models import Usage

__all__ = [
    "BLANK_LINES",
    "TAIL_BYTES",
    "Delta",
    "DeltaKind",
    "Tail",
    "UpstreamReader",
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

# A line (or a whole-JSON body) longer than this is not a token stream we can
# use; dropping it keeps memory per request flat whatever the upstream sends.
MAX_LINE_CHARS = 1 << 20
MAX_BODY_CHARS = 4 << 20

# Reader modes: where the next chunk goes.
_UNDECIDED = 0  # only whitespace so far
_SSE = 1  # the fast path
_JSON = 2  # a whole non-stream JSON body, buffered until finish()
_DISCARD = 3  # dropping the rest of an oversized SSE line
_FINISHED = 4

# raw_decode is json.loads without its per-call wrapper (type checks, BOM
# check, whitespace regex): 40% less CPU per event. Anything it rejects gets
# a second chance through decode, which also allows surrounding whitespace.
# NaN and the infinities are not JSON: an event holding one is malformed (and
# a whole answer holding one could not be sent on as JSON).


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


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
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": total_tokens,
    }


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
        "_body_chars",
        "_data",
        "_decode",
        "_mode",
        "_raw_usage",
        "_tail",
        "finish_reason",
        "malformed_lines",
        "produced",
        "saw_done",
        "tool_calls",
        "whole_body",
    )

    def __init__(self) -> None:
        # One incremental decoder per stream: a multi-byte character split
        # across chunks is completed by the next chunk, never replaced.
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        self._mode = _UNDECIDED
        self._tail = ""  # the unfinished last line
        self._data: str | None = None  # data of the event being assembled
        self._body: list[str] = []
        self._body_chars = 0
        self._raw_usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.saw_done = False
        self.malformed_lines = 0
        self.produced = False
        self.whole_body: dict[str, Any] | None = None
        self.tool_calls: list[dict[str, Any]] | None = None

    @property
    def usage(self) -> Usage | None:
        # Usage may come on every chunk: keep a reference, normalise on demand.
        raw = self._raw_usage
        return None if raw is None else _normalise_usage(raw)

    def feed(self, chunk: bytes) -> list[Delta]:
        text = self._decode(chunk)
        if self._mode != _SSE or self._tail or "\r" in text:
            return self._feed_slow(text)
        # Fast path: LF line endings, nothing carried over from the last chunk.
        out: list[Delta] = []
        lines = text.split("\n")
        if lines[-1]:
            self._keep_tail(lines[-1])
        del lines[-1]
        for line in lines:
            if not line:
                if self._data is not None:
                    data = self._data
                    self._data = None
                    self._event(data, out)
            elif line.startswith("data: ") and self._data is None:
                self._data = line[6:]
            else:
                self._line(line, out)
        if out:
            self.produced = True
        return out

    def finish(self) -> list[Delta]:
        """Flush what the closed stream left: a partial line, an unterminated event, a body."""
        if self._mode == _FINISHED:
            return []
        out: list[Delta] = []
        text = self._decode(b"", True)
        if self._mode == _JSON:
            self._take_body(text)
            self._whole_body(out)
        elif self._mode != _UNDECIDED or text.strip():
            out = self._feed_slow(text)
            if self._mode == _JSON:  # the stream's first bytes arrived just now
                self._whole_body(out)
            elif self._mode in (_SSE, _DISCARD):
                if self._tail:
                    self._line(self._tail.rstrip("\r"), out)
                if self._data is not None:  # closed without the blank line
                    self._event(self._data, out)
        self._mode = _FINISHED
        self._tail = ""
        self._data = None
        self._body = []
        if out:
            self.produced = True
        return out

    # --- slow path --------------------------------------------------------

    def _feed_slow(self, text: str) -> list[Delta]:
        mode = self._mode
        if mode == _FINISHED:
            raise RuntimeError("UpstreamReader.feed() after finish()")
        if mode == _UNDECIDED:
            start = text.lstrip().lstrip("\ufeff").lstrip()
            if not start:
                return []  # leading whitespace means nothing in either format
            if start[0] in "{[":
                self._mode = _JSON
                self._take_body(start)
                return []
            self._mode = _SSE
            text = start
        elif mode == _JSON:
            self._take_body(text)
            return []
        elif mode == _DISCARD:
            ends = [i for i in (text.find("\n"), text.find("\r")) if i >= 0]
            if not ends:
                return []
            end = min(ends)
            text = text[end + (2 if text.startswith("\r\n", end) else 1) :]
            self._mode = _SSE

        text = self._tail + text if self._tail else text
        if "\r" in text:
            # A CR at the very end may be the first half of a CRLF: wait for more.
            held = "\r" if text.endswith("\r") else ""
            if held:
                text = text[:-1]
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        else:
            held = ""
        out: list[Delta] = []
        lines = text.split("\n")
        tail = lines.pop()
        for line in lines:
            self._line(line, out)
        self._tail = ""
        if tail or held:
            self._keep_tail(tail + held)
        if out:
            self.produced = True
        return out

    def _keep_tail(self, tail: str) -> None:
        if len(tail) <= MAX_LINE_CHARS:
            self._tail = tail
        else:
            self.malformed_lines += 1
            self._tail = ""
            self._mode = _DISCARD

    def _line(self, line: str, out: list[Delta]) -> None:
        if not line:
            if self._data is not None:
                data = self._data
                self._data = None
                self._event(data, out)
        elif line.startswith("data:"):
            value = line[6:] if line.startswith("data: ") else line[5:]
            self._data = value if self._data is None else self._data + "\n" + value
        else:
            self._field(line)

    def _field(self, line: str) -> None:
        # Comments and the fields we have no use for; anything else is not SSE.
        if line.startswith(":"):
            return
        name = line.partition(":")[0]
        if name in ("event", "id", "retry"):
            return
        if name == "data":  # "data:" without a space after the colon
            value = line[5:]
            self._data = value if self._data is None else self._data + "\n" + value
            return
        self.malformed_lines += 1

    def _event(self, data: str, out: list[Delta]) -> None:
        if data == "[DONE]":
            self.saw_done = True
            return
        try:
            obj, end = _raw_decode(data)
            if end != len(data):
                raise ValueError("trailing text")
        except (ValueError, RecursionError):
            try:
                obj = _loads(data)
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
            text = delta.get("reasoning_content") or delta.get("reasoning")
            if text and type(text) is str:
                out.append(Delta(_REASONING, text))
            text = delta.get("content")
            if text and type(text) is str:
                out.append(Delta(_CONTENT, text))
            calls = delta.get("tool_calls")
            if calls and type(calls) is list:
                self._take_tool_calls(calls, out)
        reason = choice.get("finish_reason")
        if reason and type(reason) is str:
            self.finish_reason = reason

    def _take_tool_calls(self, calls: list[Any], out: list[Delta]) -> None:
        # Streamed, a call comes in pieces: the first carries its index, id and
        # name, the next ones fragments of its arguments; whole, in one piece.
        if self.tool_calls is None:
            self.tool_calls = []
        assembled = self.tool_calls
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

    # --- a whole JSON body ------------------------------------------------

    def _take_body(self, text: str) -> None:
        if not text or self._body_chars > MAX_BODY_CHARS:
            return
        self._body_chars += len(text)
        if self._body_chars > MAX_BODY_CHARS:
            self._body = []
            self.malformed_lines += 1
        else:
            self._body.append(text)

    def _whole_body(self, out: list[Delta]) -> None:
        if self._body_chars > MAX_BODY_CHARS:
            return  # already counted
        try:
            obj = _loads("".join(self._body))
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
        data = self._bytes
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = data.rsplit(b"\n\n", TAIL_EVENTS + 1)
        if self._cut or len(events) > TAIL_EVENTS + 1:
            del events[0]  # cut off at the front, or older than the last few
        reader = UpstreamReader()
        reader.feed(b"\n\n".join(events))
        reader.finish()
        return reader
