"""The one writer of our outgoing Server-Sent Events.

Every event is exactly ``event: <name>\\ndata: <one-line JSON>\\n\\n``. Model
text only ever travels JSON-encoded inside ``data:``; JSON escapes CR and LF,
so text like ``"\\n\\nevent: done"`` cannot end the line or inject a field.
U+2028, U+2029 and U+0085 are escaped too: they are not SSE line breaks, but
some line splitters (Python's ``str.splitlines``, old JavaScript) treat them
as such.

The ``/chat`` stream is ``meta``, then the model's own events as Workers AI
sent them (relayed byte for byte, see ``chat.py``), then one ``done`` or
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

from edgechat.errors import EdgechatError

__all__ = ["CLOSE_EVENT", "PING", "data", "error", "event"]

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


def error(exc: EdgechatError) -> bytes:
    """The final ``error`` event: the error's public code and message, and
    whether the same request may succeed later."""
    return event("error", {**exc.to_json()["error"], "retryable": exc.retryable})
