"""The one writer of our outgoing Server-Sent Events.

Every event is exactly ``event: <name>\\ndata: <one-line JSON>\\n\\n``. Model
text only ever travels JSON-encoded inside ``data:``; JSON escapes CR and LF,
so text like ``"\\n\\nevent: done"`` cannot end the line or inject a field.
U+2028, U+2029 and U+0085 are escaped too: they are not SSE line breaks, but
some line splitters (Python's ``str.splitlines``, old JavaScript) treat them
as such.

Events of the ``/chat`` stream:

- ``token``      ``{"text": …}`` a piece of the answer
- ``reasoning``  ``{"text": …}`` a piece of the model's thinking
- ``error``      ``{"code": …, "message": …, "retryable": …}`` (see errors.py), then the stream ends
- anything else the chat module emits through ``event()`` (e.g. ``meta``, ``done``)

and ``PING``, a comment line that keeps proxies and the browser from timing out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from edgechat.errors import EdgechatError

__all__ = ["PING", "error", "event", "reasoning", "token"]

PING = b": ping\n\n"

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


def event(name: str, data: Mapping[str, object]) -> bytes:
    """One complete SSE event carrying ``data`` as one line of JSON.

    Raises ``ValueError`` for a name that could break framing, and for data
    JSON cannot represent (NaN, infinities); ``TypeError`` for non-JSON types.
    """
    prefix = _prefix(name)
    payload = _one_line(_encode(data if isinstance(data, dict) else dict(data)))
    return prefix + payload.encode("utf-8", _LONE_SURROGATES) + b"\n\n"


_TOKEN = _prefix("token") + b'{"text":'
_REASONING = _prefix("reasoning") + b'{"text":'


def token(text: str) -> bytes:
    """``event: token`` with ``{"text": text}``; the per-token hot path."""
    return _TOKEN + _one_line(_encode(text)).encode("utf-8", _LONE_SURROGATES) + b"}\n\n"


def reasoning(text: str) -> bytes:
    """``event: reasoning`` with ``{"text": text}``."""
    return _REASONING + _one_line(_encode(text)).encode("utf-8", _LONE_SURROGATES) + b"}\n\n"


def error(exc: EdgechatError) -> bytes:
    """The final ``error`` event: the error's public code and message, and
    whether the same request may succeed later."""
    return event("error", {**exc.to_json()["error"], "retryable": exc.retryable})
