"""The one parser of edgechat's ``/chat`` stream, for every test suite.

The stream is ``event: meta``, then the model's own events relayed byte for
byte (unnamed ``data:`` events: OpenAI ``chat.completion.chunk`` objects, or
``{"response": …}`` for Llama, maybe ``data: [DONE]``), then exactly one
``event: done`` or ``event: error``; ``: ping`` comments may come while the
model is silent.

Lines end at CRLF, CR or LF (the WHATWG algorithm), across chunk boundaries.
edgechat's own events are held to edgechat's framing: an ``event:`` line
naming ``meta``, ``done`` or ``error`` and one ``data:`` line holding a JSON
object. The model's events are taken as the upstream sent them. A stream must
end on an event boundary. Anything else is an ``AssertionError`` naming what
broke, so a framing slip cannot go unnoticed.
"""

from __future__ import annotations

import codecs
import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OURS", "PING", "Event", "Lines", "Parsed", "SSEParser", "deltas", "parse"]

PING = ": ping"
# The events edgechat itself writes; every other event is the model's.
OURS = frozenset({"meta", "done", "error"})
MODEL = "message"  # the SSE name of an event without an event: line


def deltas(data: Any) -> tuple[str, str]:
    """(reasoning, content) of one model event, in either wire format, read
    as the chat page reads it."""
    if not isinstance(data, dict):
        return "", ""
    choices = data.get("choices")
    if isinstance(choices, list):
        choice = choices[0] if choices and isinstance(choices[0], dict) else {}
        delta = choice.get("delta") or choice.get("message") or {}
        if not isinstance(delta, dict):
            return "", ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
        content = delta.get("content") or ""
        return (
            reasoning if isinstance(reasoning, str) else "",
            content if isinstance(content, str) else "",
        )
    response = data.get("response")
    return "", response if isinstance(response, str) else ""


@dataclass(frozen=True)
class Event:
    name: str
    # Ours: the JSON object. The model's: its JSON value, or the raw text
    # when it is not JSON (``"[DONE]"``, or whatever a broken upstream sent).
    data: Any


@dataclass
class Parsed:
    """Everything a stream said, in order: events and ``: ping`` comments."""

    items: list[Event | str] = field(default_factory=list)

    @property
    def events(self) -> list[Event]:
        return [item for item in self.items if isinstance(item, Event)]

    @property
    def names(self) -> list[str]:
        return [event.name for event in self.events]

    @property
    def pings(self) -> int:
        return sum(1 for item in self.items if item == PING)

    def of(self, name: str) -> list[Event]:
        return [event for event in self.events if event.name == name]

    @property
    def model_events(self) -> list[Event]:
        return self.of(MODEL)

    def text(self) -> str:
        """The answer: every content delta of the model's events, joined."""
        return "".join(deltas(event.data)[1] for event in self.model_events)

    def reasoning(self) -> str:
        return "".join(deltas(event.data)[0] for event in self.model_events)

    @property
    def saw_done_marker(self) -> bool:
        return any(event.data == "[DONE]" for event in self.model_events)

    @property
    def meta(self) -> dict[str, Any]:
        assert self.events, "the stream has no events"
        first = self.events[0]
        assert first.name == "meta", f"first event is {first.name!r}, not meta"
        return dict(first.data)

    @property
    def final(self) -> Event:
        """The one closing ``done`` or ``error`` event, checked to be last and
        unique: the one carrying ``meta``'s request id, as a client tells
        edgechat's closing from one forged inside a relayed model stream."""
        request_id = self.meta["request_id"]
        closing = [event for event in self.events if _closes(event, request_id)]
        assert len(closing) == 1, f"expected exactly one done/error event, got {self.names}"
        assert self.events[-1] is closing[0], f"done/error is not the last event: {self.names}"
        return closing[0]


def _closes(event: Event, request_id: str) -> bool:
    return event.name in ("done", "error") and event.data.get("request_id") == request_id


class Lines:
    """A stream's lines as they arrive: UTF-8 decoded incrementally, each line
    ended by CRLF, CR or LF (the WHATWG algorithm), across chunk boundaries.
    ``SSEParser`` and the OpenAPI conformance check (``conformance``) read
    their events from it."""

    def __init__(self, *, errors: str = "strict") -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors)
        self._pending_cr = False
        # What has arrived of a line not ended yet.
        self.rest = ""

    def feed(self, chunk: bytes) -> list[str]:
        text = self._decoder.decode(chunk)
        if self._pending_cr:
            # A CR ended the last chunk: an LF opening this one is its CRLF's.
            self._pending_cr = False
            text = text.removeprefix("\n")
        buffer = self.rest + text
        lines: list[str] = []
        start = 0
        for match in _LINE_END.finditer(buffer):
            if match.group() == "\r" and match.end() == len(buffer):
                self._pending_cr = True
            lines.append(buffer[start : match.start()])
            start = match.end()
        self.rest = buffer[start:]
        return lines

    def inside_character(self) -> bool:
        """Whether the bytes so far end inside a UTF-8 character."""
        return self._decoder.decode(b"", True) != ""


_LINE_END = re.compile(r"\r\n|\r|\n")


class SSEParser:
    """Incremental: ``feed`` bytes as they arrive, ``close`` at the end of the
    body. ``errors="replace"`` reads a stream that relayed invalid UTF-8."""

    def __init__(self, *, errors: str = "strict") -> None:
        self.parsed = Parsed()
        self._lines = Lines(errors=errors)
        self._name: str | None = None
        self._data: list[str] | None = None
        self._fields = 0

    def feed(self, chunk: bytes) -> list[Event | str]:
        """Parses every complete line in ``chunk``; returns the new items."""
        new: list[Event | str] = []
        for line in self._lines.feed(chunk):
            item = self._line(line)
            if item is not None:
                self.parsed.items.append(item)
                new.append(item)
        return new

    def close(self) -> Parsed:
        self.feed(b"")
        assert not self._lines.inside_character(), "stream ends inside a UTF-8 character"
        assert self._lines.rest == "", f"stream ends inside a line: {self._lines.rest!r}"
        assert self._fields == 0, "stream ends inside an event (no closing blank line)"
        return self.parsed

    def _line(self, line: str) -> Event | str | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return PING if line == PING else None
        self._fields += 1
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            assert self._name is None, f"two event: lines in one event: {line!r}"
            assert self._data is None, "event: line after a data: line"
            assert value in OURS, f"an event named {value!r}: edgechat names only {sorted(OURS)}"
            self._name = value
        elif name == "data":
            if self._name is not None:
                assert self._data is None, f"two data: lines in edgechat's {self._name} event"
                assert line.startswith("data: "), f"edgechat writes 'data: ', got {line!r}"
            self._data = [*(self._data or []), value]
        return None

    def _dispatch(self) -> Event | None:
        name, data, self._name, self._data, self._fields = self._name, self._data, None, None, 0
        if data is None:
            assert name is None, f"edgechat's {name} event has no data: line"
            return None
        text = "\n".join(data)
        if name is not None:
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise AssertionError(f"{name} data is not one line of JSON: {text!r}") from exc
            assert isinstance(value, dict), f"{name} data is not a JSON object: {text!r}"
            return Event(name, value)
        try:
            return Event(MODEL, json.loads(text))
        except (ValueError, RecursionError):
            # Not JSON, or nested past the parser (a relayed stream may carry
            # either before the Worker's look ends the answer).
            return Event(MODEL, text)


def parse(body: bytes, *, errors: str = "strict") -> Parsed:
    """Parses a whole stream body."""
    parser = SSEParser(errors=errors)
    parser.feed(body)
    return parser.close()
