"""The one writer of our outgoing Server-Sent Events, and the one place that
splits an upstream's (``EventSplitter``, ``events``, ``Fields``).

Every event is exactly ``event: <name>\\ndata: <one-line JSON>\\n\\n``. Model
text only ever travels JSON-encoded inside ``data:``; JSON escapes CR and LF,
so text like ``"\\n\\nevent: done"`` cannot end the line or inject a field.
U+2028, U+2029 and U+0085 are escaped too: they are not SSE line breaks, but
some line splitters (Python's ``str.splitlines``, old JavaScript) treat them
as such.

The ``/chat`` stream is ``meta``, then the model's own events as Workers AI
sent them (relayed byte for byte, see ``apis.chat``), then one ``done`` or
``error``. What this module writes:

- ``event()``   a named event of ours (``meta``, ``done``)
- ``error()``   ``{"code": …, "message": …, "retryable": …}`` (see errors.py), then the stream ends
- ``data()``    an unnamed event in the model's own shape, for the rare upstream
                that answered with one JSON document instead of a stream
- ``PING``      a comment line that keeps proxies and the browser from timing out
- ``CLOSE_EVENT`` a blank line that ends whatever event an upstream left open
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from edgechat.core.errors import EdgechatError

__all__ = [
    "CLOSE_EVENT",
    "PING",
    "EventSplitter",
    "Fields",
    "data",
    "error",
    "event",
    "events",
    "line_ends_to_lf",
]

PING = b": ping\n\n"
# Before our closing event when the relayed bytes may have stopped mid-line:
# the first LF ends that line, the second dispatches (or drops) what it held,
# so nothing the upstream left can glue onto ``done``/``error``.
CLOSE_EVENT = b"\n\n"

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

# Decoded upstream JSON can hold lone surrogates (from "\ud800"); UTF-8 cannot.
# They only occur inside JSON strings, where "backslashreplace" writes exactly
# the JSON escape back: valid JSON, same value, and no cost otherwise.
_LONE_SURROGATES = "backslashreplace"

# Validated "event: <name>\ndata: " prefixes, so the hot path is one dict lookup.
_prefixes: dict[str, bytes] = {}


def _prefix(name: str) -> bytes:
    prefix = _prefixes.get(name)
    if prefix is None:
        if not isinstance(name, str) or not name or not name.isprintable() or ":" in name:
            # isprintable() rules out CR, LF and every other control or separator.
            raise ValueError("SSE event names must be non-empty, printable and without ':'")
        prefix = _prefixes[name] = f"event: {name}\ndata: ".encode()
    return prefix


def _one_line(text: str) -> str:
    # JSON already escapes CR and LF; escape the other line-breaking characters
    # that a lenient client might split on. Still valid JSON, same value.
    if not text.isascii() and ("\u2028" in text or "\u2029" in text or "\x85" in text):
        text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        text = text.replace("\x85", "\\u0085")
    return text


def _json_line(payload: Mapping[str, object]) -> bytes:
    text = _one_line(_encode(payload if isinstance(payload, dict) else dict(payload)))
    return text.encode("utf-8", _LONE_SURROGATES)


def event(name: str, data: Mapping[str, object]) -> bytes:
    """One complete SSE event carrying ``data`` as one line of JSON.

    Raises ``ValueError`` for a name that could break framing, and for data
    JSON cannot represent (NaN, infinities); ``TypeError`` for non-JSON types.
    """
    return _prefix(name) + _json_line(data) + b"\n\n"


def data(payload: Mapping[str, object]) -> bytes:
    """An unnamed event (``data: <one-line JSON>``), as the model's own events are."""
    return b"data: " + _json_line(payload) + b"\n\n"


def error(exc: EdgechatError, request_id: str) -> bytes:
    """The final ``error`` event: the error's public code and message,
    whether the same request may succeed later, and the request it ends."""
    body = {**exc.to_json()["error"], "retryable": exc.retryable, "request_id": request_id}
    return event("error", body)


# --- reading: the one place that splits an upstream's SSE -------------------

# An event longer than this, unfinished, is no token stream we can use:
# dropped up to its end, so memory per request stays flat whatever comes.
MAX_EVENT_BYTES = 1 << 20


def line_ends_to_lf(data: bytes) -> tuple[bytes, bytes]:
    """``data`` with CRLF and CR line ends made LF, and a CR at the very end
    held back (it may be the first half of a CRLF): ``(normalised, held)``."""
    if b"\r" not in data:
        return data, b""
    held = b"\r" if data.endswith(b"\r") else b""
    if held:
        data = data[:-1]
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), held


class EventSplitter:
    """Complete SSE events out of bytes cut anywhere (in an event, a line, a
    character): ``feed`` returns the events completed so far, LF-ended, each
    with its blank line; an unfinished event waits for the next bytes."""

    __slots__ = ("_discarding", "_pending", "dropped")

    def __init__(self) -> None:
        self._pending = b""
        self._discarding = False
        # Events dropped for their size.
        self.dropped = 0

    @property
    def idle(self) -> bool:
        """Nothing held: the next bytes start an event."""
        return not self._pending and not self._discarding

    def feed(self, data: bytes) -> bytes:
        if self._pending:
            data = self._pending + data
        data, held = line_ends_to_lf(data)
        if self._discarding:
            end = data.find(b"\n\n")
            if end < 0:
                # A last LF may be the first half of the blank line.
                self._pending = (b"\n" if data.endswith(b"\n") else b"") + held
                return b""
            data, self._discarding = data[end + 2 :], False
        cut = data.rfind(b"\n\n")
        whole, rest = (b"", data) if cut < 0 else (data[: cut + 2], data[cut + 2 :])
        if len(rest) > MAX_EVENT_BYTES:
            self.dropped += 1
            rest, held, self._discarding = b"", b"", True
        self._pending = rest + held
        return whole

    def finish(self) -> bytes:
        """What the stream left unfinished (an event without its blank
        line), LF-ended; the splitter is empty afterwards."""
        rest = b"" if self._discarding else self._pending.replace(b"\r", b"\n")
        self._pending, self._discarding = b"", False
        return rest


def events(whole: bytes) -> list[bytes]:
    """The events of ``EventSplitter.feed``'s bytes, without their blank
    lines (blank lines between events make no event)."""
    return [event.lstrip(b"\n") for event in whole.split(b"\n\n") if event.strip(b"\n")]


class Fields:
    """One event's fields: its data (``data:`` lines joined by LF, or None
    without one), its name, and how many lines were not SSE at all."""

    __slots__ = ("data", "name", "stray_lines")

    def __init__(self, event: bytes) -> None:
        self.data: bytes | None = None
        self.name: bytes | None = None
        self.stray_lines = 0
        if event.startswith(b"data: ") and b"\n" not in event:
            self.data = event[6:]  # the usual event: one data line
            return
        values: list[bytes] = []
        for line in event.split(b"\n"):
            field, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if field == b"data":
                values.append(value)
            elif field == b"event":
                self.name = value
            elif field not in (b"", b"id", b"retry"):
                self.stray_lines += 1  # comments (":…") and the other fields are fine
        if values:
            self.data = b"\n".join(values)
