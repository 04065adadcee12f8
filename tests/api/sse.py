"""A strict parser of edgechat's Server-Sent Events, for the black-box tests.

edgechat's framing is narrower than the SSE standard allows, and these tests
hold it to that: every line ends with ``\\n`` (a raw ``\\r`` can only come
from unescaped model text), an event is exactly one ``event:`` line and one
``data:`` line whose value is one JSON object, then a blank line; the only
comment is ``: ping`` (a blank line may follow it); a stream ends on an event
boundary. Anything else is an ``AssertionError`` naming what broke, so a
framing slip cannot go unnoticed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["PING", "Event", "Parsed", "SSEParser", "parse"]

PING = ": ping"
EVENT_NAMES = frozenset({"meta", "reasoning", "token", "done", "error"})


@dataclass(frozen=True)
class Event:
    name: str
    data: dict[str, Any]


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

    def text(self, name: str = "token") -> str:
        """The concatenated ``text`` of every event called ``name``."""
        texts = [event.data["text"] for event in self.of(name)]
        for text in texts:
            assert isinstance(text, str), f"{name}.text is not a string: {text!r}"
        return "".join(texts)

    @property
    def meta(self) -> dict[str, Any]:
        assert self.events, "the stream has no events"
        first = self.events[0]
        assert first.name == "meta", f"first event is {first.name!r}, not meta"
        return first.data

    @property
    def final(self) -> Event:
        """The one closing ``done`` or ``error`` event, checked to be last and unique."""
        closing = [event for event in self.events if event.name in ("done", "error")]
        assert len(closing) == 1, f"expected exactly one done/error event, got {self.names}"
        assert self.events[-1] is closing[0], f"done/error is not the last event: {self.names}"
        return closing[0]


class SSEParser:
    """Incremental: ``feed`` bytes as they arrive, ``close`` at the end of the body."""

    def __init__(self) -> None:
        self.parsed = Parsed()
        self._buffer = b""
        self._name: str | None = None
        self._data: dict[str, Any] | None = None
        self._lines_in_event = 0

    def feed(self, chunk: bytes) -> list[Event | str]:
        """Parses every complete line in ``chunk``; returns the new items."""
        assert b"\r" not in chunk, f"raw carriage return in the stream: {chunk!r}"
        self._buffer += chunk
        new: list[Event | str] = []
        while b"\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n", 1)
            item = self._line(raw.decode("utf-8"))  # strict: the stream must be UTF-8
            if item is not None:
                self.parsed.items.append(item)
                new.append(item)
        return new

    def close(self) -> Parsed:
        assert self._buffer == b"", f"stream ends inside a line: {self._buffer!r}"
        assert self._lines_in_event == 0, "stream ends inside an event (no closing blank line)"
        return self.parsed

    def _line(self, line: str) -> Event | str | None:
        if line == "":
            if self._lines_in_event == 0:
                return None  # ends a comment (": ping\n\n"); dispatches nothing
            assert self._name is not None, "event without an event: line"
            assert self._data is not None, f"event {self._name!r} without a data: line"
            event = Event(self._name, self._data)
            self._name, self._data, self._lines_in_event = None, None, 0
            return event
        if line.startswith(":"):
            assert line == PING, f"unexpected comment line {line!r}"
            assert self._lines_in_event == 0, "comment inside an event"
            return PING
        self._lines_in_event += 1
        field_name, sep, value = line.partition(": ")
        assert sep, f"line is not 'field: value': {line!r}"
        if field_name == "event":
            assert self._name is None, f"two event: lines in one event: {line!r}"
            assert self._data is None, "event: line after data: line"
            assert value in EVENT_NAMES, f"unknown event name {value!r}"
            self._name = value
            return None
        assert field_name == "data", f"unexpected SSE field {field_name!r} in {line!r}"
        assert self._data is None, f"two data: lines in one event: {line!r}"
        try:
            data = json.loads(value)
        except ValueError as exc:
            raise AssertionError(f"data: is not one line of JSON: {value!r}") from exc
        assert isinstance(data, dict), f"data: is not a JSON object: {value!r}"
        self._data = data
        return None


def parse(body: bytes) -> Parsed:
    """Parses a whole stream body."""
    parser = SSEParser()
    parser.feed(body)
    return parser.close()
