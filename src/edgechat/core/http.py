"""Requests and replies as the core sees them, the headers every API reply carries,
and the canonical form of an origin."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from edgechat.core.errors import BadRequest, EdgechatError
from edgechat.core.ports import Sink

# API replies are data, never documents: nothing may render, frame or sniff them.
API_HEADERS: Mapping[str, str] = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
}

JSON_TYPE = "application/json"
SSE_TYPE = "text/event-stream; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Incoming:
    method: str
    path: str
    # The request's own origin (scheme://host[:port]), for same-origin checks.
    origin: str
    # Lower-case header names.
    headers: Mapping[str, str]
    # The URL's query string, without its "?".
    query: str = ""


@dataclass(slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes = b""
    # A streamed body: called once with the sink once the response is returned.
    stream: Callable[[Sink], Awaitable[None]] | None = None


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        # Surrogates no request can hold (validation refuses them) but a
        # model's text can: each chunk's JSON is decoded alone, so an emoji
        # split across two chunks arrives as two halves. Halves side by side
        # become their character again, any other half U+FFFD; never a 500.
        repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return repaired.encode()


def json_reply(status: int, payload: object, headers: Mapping[str, str] | None = None) -> Reply:
    body = _utf8(json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
    return Reply(
        status,
        {
            **API_HEADERS,
            "Content-Type": JSON_TYPE,
            "Cache-Control": "no-store",
            **(headers or {}),
        },
        body,
    )


def error_reply(exc: EdgechatError, headers: Mapping[str, str] | None = None) -> Reply:
    return json_reply(exc.status, exc.to_json(), {**exc.headers(), **(headers or {})})


def stream_reply(produce: Callable[[Sink], Awaitable[None]], headers: Mapping[str, str]) -> Reply:
    return Reply(
        200,
        {
            **API_HEADERS,
            "Content-Type": SSE_TYPE,
            "Cache-Control": "no-cache, no-transform",
            # Asks buffering proxies in front of the Worker to pass events through.
            "X-Accel-Buffering": "no",
            **headers,
        },
        stream=produce,
    )


_DEFAULT_PORTS = {"http": 80, "https": 443}


def normalize_origin(text: str) -> str | None:
    """``scheme://host[:port]`` in canonical form (lower case, default port
    dropped), or None when ``text`` is not an http(s) origin."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if (
        scheme not in _DEFAULT_PORTS
        or not parts.hostname
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        return None
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    origin = f"{scheme}://{host}"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        origin += f":{port}"
    return origin


# The largest seq a list's query names: below 2^53 - 1, past which Pyodide
# hands the binding a BigInt, which D1 refuses.
LARGEST_SEQ = 2**52


def seq_window(query: Mapping[str, str]) -> tuple[int, int]:
    """A list paged by seq, newest write first: ``since`` (only what was
    written after that seq; 0: everything) and ``before`` (the previous
    page's ``next``; the largest seq: from the newest)."""
    since = whole_param(query, "since", 0, 0, LARGEST_SEQ)
    return since, whole_param(query, "before", LARGEST_SEQ, 1, LARGEST_SEQ)


def whole_param(query: Mapping[str, str], name: str, default: int, low: int, high: int) -> int:
    """A query parameter that is a whole number from ``low`` to ``high``
    (``default`` when absent); raises ``BadRequest`` naming it."""
    raw = query.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 16 or not low <= int(raw) <= high:
        raise BadRequest(public=f"{name} must be a whole number from {low} to {high}.")
    return int(raw)
