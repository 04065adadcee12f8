from __future__ import annotations

import asyncio
import json

import pytest

from edgechat.core.errors import EdgechatError, MethodNotAllowed, NotFound, RateLimited
from edgechat.core.faults import UpstreamBusy
from edgechat.core.http import (
    API_HEADERS,
    Reply,
    error_reply,
    json_reply,
    normalize_origin,
    stream_reply,
)
from edgechat.core.ports import Sink
from tests.unit.fakes import FakeSink

SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
}


def test_api_headers_forbid_rendering_framing_and_sniffing() -> None:
    # Read what the headers mean rather than compare them with a copy of themselves.
    csp = {
        directive.split()[0]: directive.split()[1:]
        for directive in API_HEADERS["Content-Security-Policy"].split(";")
    }
    assert csp["default-src"] == ["'none'"]  # nothing loads, nothing runs
    assert csp["frame-ancestors"] == ["'none'"]
    assert API_HEADERS["X-Frame-Options"] == "DENY"
    assert API_HEADERS["X-Content-Type-Options"] == "nosniff"
    assert API_HEADERS["Referrer-Policy"] == "no-referrer"


async def _no_stream(sink: object) -> None:
    return None


def test_every_kind_of_reply_carries_the_api_headers_and_its_media_type() -> None:
    replies = [
        (json_reply(200, {}), "application/json"),
        (error_reply(NotFound()), "application/json"),
        (stream_reply(_no_stream, {}), "text/event-stream; charset=utf-8"),
    ]
    for reply, media_type in replies:
        assert reply.headers.items() >= API_HEADERS.items()
        assert reply.headers["Content-Type"] == media_type


def test_json_reply_is_compact_utf8_json_with_api_headers() -> None:
    reply = json_reply(200, {"status": "ok", "text": "你好"})
    assert reply.status == 200
    assert reply.body == '{"status":"ok","text":"你好"}'.encode()
    assert reply.headers == {
        **SECURITY,
        "Content-Type": "application/json",
        "Cache-Control": "no-store",
    }
    assert reply.stream is None


def test_json_reply_extra_headers_are_added() -> None:
    reply = json_reply(201, [1, 2], {"X-Request-Id": "abc"})
    assert reply.body == b"[1,2]"
    assert reply.headers["X-Request-Id"] == "abc"
    assert reply.headers["Content-Type"] == "application/json"


def test_error_reply_carries_the_public_error_only() -> None:
    reply = error_reply(NotFound(detail="no route for /secret-path"))
    assert reply.status == 404
    assert json.loads(reply.body) == {"error": {"code": "not_found", "message": "Not found."}}
    assert b"secret" not in reply.body
    assert reply.headers["Content-Type"] == "application/json"
    assert "Retry-After" not in reply.headers


def test_error_reply_of_an_unexpected_failure_is_generic() -> None:
    reply = error_reply(EdgechatError(detail="KeyError: 'AI' binding missing"))
    assert reply.status == 500
    assert json.loads(reply.body) == {
        "error": {
            "code": "internal_error",
            "message": "Something went wrong on our side. Please try again.",
        }
    }


def test_error_reply_adds_the_errors_headers() -> None:
    assert error_reply(RateLimited()).headers["Retry-After"] == "60"
    assert error_reply(UpstreamBusy(detail="3040")).headers["Retry-After"] == "10"
    reply = error_reply(MethodNotAllowed(allow=("GET", "HEAD")))
    assert reply.status == 405
    assert reply.headers["Allow"] == "GET, HEAD"


def test_error_reply_merges_extra_headers() -> None:
    reply = error_reply(RateLimited(), {"Vary": "Origin"})
    assert reply.headers["Vary"] == "Origin"
    assert reply.headers["Retry-After"] == "60"


def test_stream_reply_headers_and_producer() -> None:
    async def produce(sink: Sink) -> None:
        await sink.write(b"event: x\ndata: {}\n\n")

    reply = stream_reply(produce, {"X-Request-Id": "r1"})
    assert reply.status == 200
    assert reply.body == b""
    assert reply.headers == {
        **SECURITY,
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache, no-transform",
        "X-Accel-Buffering": "no",
        "X-Request-Id": "r1",
    }
    assert reply.stream is produce
    sink = FakeSink()
    asyncio.run(reply.stream(sink))
    assert sink.body == b"event: x\ndata: {}\n\n"


def test_reply_defaults_to_an_empty_body() -> None:
    reply = Reply(204, {})
    assert reply.body == b""
    assert reply.stream is None


@pytest.mark.parametrize(
    ("text", "origin"),
    [
        ("https://Chat.Example.com", "https://chat.example.com"),
        ("https://chat.example.com:443/", "https://chat.example.com"),
        ("http://localhost:8787", "http://localhost:8787"),
        ("http://[::1]:80", "http://[::1]"),
        ("ftp://chat.example.com", None),
        ("https://user@chat.example.com", None),
        ("https://chat.example.com/path", None),
        ("https://chat.example.com?q=1", None),
        ("https://chat.example.com:99999", None),
        ("chat.example.com", None),
    ],
)
def test_normalize_origin(text: str, origin: str | None) -> None:
    assert normalize_origin(text) == origin


@pytest.mark.parametrize(
    ("text", "sent"),
    [
        # An emoji's two halves, each decoded from its own chunk: one character again.
        ("\ud83d" + "\ude00", "\U0001f600"),
        ("cut \ud83d", "cut \ufffd"),
        ("\ude00\ud83d", "\ufffd\ufffd"),  # the wrong order is no pair
        ("plain 你好", "plain 你好"),
    ],
)
def test_a_json_reply_with_surrogates_is_repaired_not_a_failure(text: str, sent: str) -> None:
    reply = json_reply(200, {"content": text, text: 1})
    assert json.loads(reply.body.decode("utf-8")) == {"content": sent, sent: 1}
