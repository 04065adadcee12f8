from __future__ import annotations

import asyncio
import json

from edgechat.errors import (
    EdgechatError,
    MethodNotAllowed,
    NotFound,
    RateLimited,
    UpstreamBusy,
)
from edgechat.http import (
    API_HEADERS,
    JSON_TYPE,
    SSE_TYPE,
    Reply,
    error_reply,
    json_reply,
    stream_reply,
)
from edgechat.ports import Sink

from .fakes import FakeSink

SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
}


def test_api_headers_forbid_rendering_framing_and_sniffing() -> None:
    assert dict(API_HEADERS) == SECURITY


def test_content_types() -> None:
    assert JSON_TYPE == "application/json"
    assert SSE_TYPE == "text/event-stream; charset=utf-8"


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
    reply = error_reply(EdgechatError("KeyError: 'AI' binding missing"))
    assert reply.status == 500
    assert json.loads(reply.body) == {
        "error": {
            "code": "internal_error",
            "message": "Something went wrong on our side. Please try again.",
        }
    }


def test_error_reply_adds_the_errors_headers() -> None:
    assert error_reply(RateLimited()).headers["Retry-After"] == "60"
    assert error_reply(UpstreamBusy("3040")).headers["Retry-After"] == "10"
    reply = error_reply(MethodNotAllowed(("GET", "HEAD")))
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
