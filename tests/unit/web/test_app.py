from __future__ import annotations

import asyncio
import hashlib
import json
import re
from typing import Any

import pytest

from edgechat.core.faults import UpstreamBusy, UpstreamMisconfigured, UpstreamRateLimited
from edgechat.core.http import Incoming, Reply
from edgechat.core.models import catalog_json
from edgechat.media.documents import document_url_size
from edgechat.web import app
from tests.kit.sse import MODEL, Parsed, parse
from tests.unit.fakes import (
    STALL,
    Fail,
    FakeAi,
    FakePlatform,
    FakeRateLimiter,
    FakeSink,
    model,
    native_stream,
    usage,
)
from tests.unit.fakes import native_stream as native
from tests.unit.fakes import openai_stream as openai

SELF = "https://chat.example.com"
GLM_ID = model("glm").id
LLAMA_ID = model("llama").id
PROMPT = "my secret plans for PROMPT-MARKER"
BODY = json.dumps({"messages": [{"role": "user", "content": PROMPT}]}).encode()
JSON_HEADERS = {"content-type": "application/json", "cf-connecting-ip": "203.0.113.7"}
USAGE = usage(20, 2)
SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
}
REQUEST_ID = re.compile(r"[0-9a-f]{32}")


def incoming(method: str, path: str, headers: dict[str, str] | None = None) -> Incoming:
    return Incoming(method=method, path=path, origin=SELF, headers=headers or {})


def chat_request(headers: dict[str, str] | None = None) -> Incoming:
    return incoming("POST", "/chat", {**JSON_HEADERS, **(headers or {})})


def platform(
    *,
    ai: FakeAi | None = None,
    body: bytes = BODY,
    limiter: FakeRateLimiter | None = None,
    **vars: object,
) -> FakePlatform:
    return FakePlatform(
        vars=dict(vars),
        body=body,
        ai=ai or FakeAi({GLM_ID: openai(("content", "Hi!"), usage=USAGE)}),
        rate_limiter=limiter,
    )


def serve(
    request: Incoming,
    where: FakePlatform,
    sink: FakeSink | None = None,
    settings: app.SettingsOnce | None = None,
) -> Reply:
    """``handle`` then, for a stream, the whole body into ``sink``, as the runtime does."""

    async def run() -> Reply:
        reply = await app.handle(request, where, settings)
        if reply.stream is not None:
            await asyncio.wait_for(reply.stream(sink or FakeSink()), 1.5)
        return reply

    return asyncio.run(run())


def log_record(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    record: dict[str, Any] = json.loads(lines[0])
    return record


def error_body(reply: Reply) -> dict[str, str]:
    body = json.loads(reply.body)
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message"}
    result: dict[str, str] = body["error"]
    return result


def events(sink: FakeSink) -> Parsed:
    return parse(sink.body)


# --- routing ----------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(app.ROUTES))
def test_every_route_refuses_another_method_naming_its_own(path: str) -> None:
    other = "PATCH" if "DELETE" in app.ROUTES[path] else "DELETE"
    reply = serve(incoming(other, path), platform())
    assert reply.status == 405
    allowed = reply.headers["Allow"].split(", ")
    assert other not in allowed
    # HEAD goes wherever GET does; each method named is answered, not refused.
    assert ("HEAD" in allowed) == ("GET" in allowed)
    for method in allowed:
        if method not in ("POST", "OPTIONS"):  # these need a body or an Origin
            assert serve(incoming(method, path), platform()).status != 405, (path, method)


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_healthz(method: str, capsys: pytest.CaptureFixture[str]) -> None:
    reply = serve(incoming(method, "/healthz"), platform())
    assert reply.status == 200
    assert json.loads(reply.body) == {"status": "ok"}
    assert reply.headers == {
        **SECURITY,
        "Content-Type": "application/json",
        "Cache-Control": "no-store",
        "X-Request-Id": reply.headers["X-Request-Id"],
    }
    assert REQUEST_ID.fullmatch(reply.headers["X-Request-Id"])
    record = log_record(capsys)
    assert record["route"] == "/healthz"
    assert record["method"] == method
    assert record["status"] == 200
    assert record["request_id"] == reply.headers["X-Request-Id"]


def test_every_request_gets_its_own_id() -> None:
    first = serve(incoming("GET", "/healthz"), platform())
    second = serve(incoming("GET", "/healthz"), platform())
    assert first.headers["X-Request-Id"] != second.headers["X-Request-Id"]


def test_models_lists_the_default_catalog() -> None:
    reply = serve(incoming("GET", "/api/models"), platform())
    assert reply.status == 200
    assert json.loads(reply.body) == catalog_json(("glm", "kimi", "llama"), "glm")


def test_models_follows_the_configuration() -> None:
    reply = serve(
        incoming("GET", "/api/models"),
        platform(MODELS="llama, glm", DEFAULT_MODEL="llama", FALLBACK_CHAIN="llama"),
    )
    body = json.loads(reply.body)
    assert [(entry["alias"], entry["default"]) for entry in body] == [
        ("llama", True),
        ("glm", False),
    ]


def test_page_route_without_the_asset_is_not_found(capsys: pytest.CaptureFixture[str]) -> None:
    reply = serve(incoming("GET", "/"), platform())
    assert reply.status == 404
    assert error_body(reply) == {"code": "not_found", "message": "Not found."}
    assert log_record(capsys)["error_code"] == "not_found"


@pytest.mark.parametrize(
    "path", ["/nope", "/chat/", "/HEALTHZ", "/api/models/glm", "/<script>alert(1)</script>"]
)
def test_unknown_paths_are_not_found(path: str, capsys: pytest.CaptureFixture[str]) -> None:
    reply = serve(incoming("GET", path), platform())
    assert reply.status == 404
    assert error_body(reply) == {"code": "not_found", "message": "Not found."}
    assert path.encode() not in reply.body
    assert reply.headers["Content-Type"] == "application/json"
    assert "Allow" not in reply.headers
    record = log_record(capsys)
    assert record["status"] == 404
    assert record["error_code"] == "not_found"
    assert "error_detail" not in record  # client errors need no detail in the log


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("POST", "/healthz", "GET, HEAD"),
        ("DELETE", "/api/models", "GET, HEAD"),
        ("PUT", "/", "GET, HEAD"),
        ("OPTIONS", "/healthz", "GET, HEAD"),
        ("GET", "/chat", "POST, OPTIONS"),
        ("HEAD", "/chat", "POST, OPTIONS"),
        ("PUT", "/chat", "POST, OPTIONS"),
        ("post", "/chat", "POST, OPTIONS"),
    ],
)
def test_wrong_method_is_405_with_allow(
    method: str, path: str, allow: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = platform()
    reply = serve(incoming(method, path, JSON_HEADERS), where)
    assert reply.status == 405
    assert reply.headers["Allow"] == allow
    assert error_body(reply) == {"code": "method_not_allowed", "message": "Method not allowed."}
    assert where.ai.calls == []
    assert log_record(capsys)["status"] == 405


# --- /chat preflight ---------------------------------------------------------------


def test_same_origin_preflight_just_lists_the_methods() -> None:
    reply = serve(incoming("OPTIONS", "/chat", {"origin": SELF}), platform())
    assert reply.status == 204
    assert reply.headers["Allow"] == "POST, OPTIONS"
    assert "Access-Control-Allow-Origin" not in reply.headers


def test_preflight_from_an_allowed_origin_gets_cors_headers() -> None:
    partner = "https://partner.example.org"
    reply = serve(
        incoming("OPTIONS", "/chat", {"origin": partner}), platform(ALLOWED_ORIGINS=partner)
    )
    assert reply.status == 204
    assert reply.body == b""
    assert reply.headers == {
        "Access-Control-Allow-Origin": partner,
        "Vary": "Origin",
        "Access-Control-Allow-Methods": "POST, OPTIONS",
        "Access-Control-Allow-Headers": "content-type, authorization, cache-control",
        "Access-Control-Max-Age": "600",
        "X-Request-Id": reply.headers["X-Request-Id"],
    }


def test_preflight_from_another_origin_is_refused() -> None:
    reply = serve(incoming("OPTIONS", "/chat", {"origin": "https://evil.example"}), platform())
    assert reply.status == 403
    assert error_body(reply)["code"] == "cross_site_request"


# --- /chat -----------------------------------------------------------------------------


def test_chat_streams_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    where = platform()
    sink = FakeSink()

    async def run() -> Reply:
        reply = await app.handle(chat_request(), where)
        # The log line waits for the end of the stream.
        assert capsys.readouterr().out == ""
        assert reply.stream is not None
        await asyncio.wait_for(reply.stream(sink), 1.5)
        return reply

    reply = asyncio.run(run())
    assert reply.status == 200
    request_id = reply.headers["X-Request-Id"]
    assert reply.headers == {
        **SECURITY,
        "Content-Type": "text/event-stream; charset=utf-8",
        "Cache-Control": "no-cache, no-transform",
        "X-Accel-Buffering": "no",
        "X-Request-Id": request_id,
    }
    got = events(sink)
    # meta, the model's chunk, its usage chunk and [DONE], then done.
    assert got.names == ["meta", MODEL, MODEL, MODEL, "done"]
    assert got.meta == {"request_id": request_id, "model": GLM_ID}
    assert got.text() == "Hi!"
    assert got.saw_done_marker
    assert got.final.data["usage"] == USAGE
    assert sink.closed == 1
    # The default models include Kimi, which sees: room for four 3 MiB images.
    documents = 2 * document_url_size(2 << 20)
    images = 4 * (len("data:image/webp;base64,") + 4 * (1 << 20))
    assert where.body_reads == [65536 + documents + images]
    assert where.ai.models_called == [GLM_ID]
    assert where.ai.calls[0].inputs["messages"][1] == {"role": "user", "content": PROMPT}

    out = capsys.readouterr().out
    assert PROMPT not in out
    assert "PROMPT-MARKER" not in out
    record = json.loads(out)
    duration = record.pop("duration_ms")
    ttft = record.pop("ttft_ms")
    assert isinstance(duration, float)
    assert isinstance(ttft, float)
    assert 0 <= ttft <= duration
    assert record == {
        "request_id": request_id,
        "route": "/chat",
        "method": "POST",
        "user": "anonymous",
        "model": GLM_ID,
        "prompt_tokens": 20,
        "completion_tokens": 2,
        "finish_reason": "stop",
        "status": 200,
    }


def test_chat_logs_the_prompt_only_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    serve(chat_request(), platform(LOG_PROMPTS="true"))
    assert log_record(capsys)["prompt"] == PROMPT


def test_chat_logs_fallback_and_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM_ID: UpstreamBusy(detail="3040"), LLAMA_ID: native_stream("Hi", usage=USAGE)})
    sink = FakeSink()
    serve(chat_request(), platform(ai=ai), sink)
    done = events(sink).final
    assert done.name == "done"
    assert done.data["fallback_from"] == GLM_ID
    assert events(sink).text() == "Hi"
    record = log_record(capsys)
    assert record["model"] == LLAMA_ID
    assert record["fallback_from"] == GLM_ID
    assert "error_code" not in record


def test_chat_logs_an_error_after_the_stream_started(capsys: pytest.CaptureFixture[str]) -> None:
    failure = UpstreamMisconfigured(detail="5007: model gone")
    ai = FakeAi({GLM_ID: [*openai(("content", "Hi"), done=False), Fail(failure)]})
    sink = FakeSink()
    reply = serve(chat_request(), platform(ai=ai), sink)
    assert reply.status == 200
    got = events(sink)
    assert got.names == ["meta", MODEL, "error"]
    assert got.text() == "Hi"
    assert got.final.data == {
        "code": "model_unavailable",
        "message": UpstreamMisconfigured.public_message,
        "retryable": False,
        "request_id": got.meta["request_id"],
    }
    assert b"5007" not in sink.body
    record = log_record(capsys)
    assert record["status"] == 200
    assert record["error_code"] == "model_unavailable"
    assert record["error_detail"] == "5007: model gone"


def test_chat_logs_a_client_that_left(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM_ID: openai(*[("content", str(i)) for i in range(20)])})
    serve(chat_request(), platform(ai=ai), FakeSink(gone_after=2))
    assert ai.calls[0].cancelled
    assert log_record(capsys)["error_code"] == "client_closed"


def test_chat_from_an_allowed_origin_gets_cors_headers() -> None:
    partner = "https://partner.example.org"
    reply = serve(chat_request({"origin": partner}), platform(ALLOWED_ORIGINS=partner))
    assert reply.status == 200
    assert reply.headers["Access-Control-Allow-Origin"] == partner
    assert reply.headers["Vary"] == "Origin"


def test_chat_with_the_configured_token() -> None:
    limiter = FakeRateLimiter()
    reply = serve(
        chat_request({"authorization": "Bearer tok-123-0123456789"}),
        platform(limiter=limiter, API_TOKEN="tok-123-0123456789"),
    )
    assert reply.status == 200
    # A verified token chooses the rate-limit bucket.
    # The key's user (API_TOKEN is the key api_token) chooses the bucket.
    assert limiter.keys == ["user:" + hashlib.sha256(b"key:api_token").hexdigest()[:32]]


def test_chat_rate_limits_by_client_ip() -> None:
    limiter = FakeRateLimiter()
    serve(chat_request(), platform(limiter=limiter))
    assert limiter.keys == ["ip:203.0.113.7"]


# --- /chat refusals: status, code, headers, and nothing spent ------------------------


def refused(
    request: Incoming, where: FakePlatform, capsys: pytest.CaptureFixture[str]
) -> tuple[Reply, dict[str, Any]]:
    reply = serve(request, where)
    assert reply.stream is None
    assert where.ai.calls == []
    assert reply.headers["Content-Type"] == "application/json"
    for name, value in SECURITY.items():
        assert reply.headers[name] == value
    assert PROMPT.encode() not in reply.body
    out = capsys.readouterr().out
    assert PROMPT not in out
    record: dict[str, Any] = json.loads(out)
    assert record["status"] == reply.status
    assert record["request_id"] == reply.headers["X-Request-Id"]
    return reply, record


def test_chat_needs_json(capsys: pytest.CaptureFixture[str]) -> None:
    where = platform(limiter=FakeRateLimiter())
    reply, record = refused(chat_request({"content-type": "text/plain"}), where, capsys)
    assert reply.status == 415
    assert error_body(reply)["code"] == "unsupported_media_type"
    assert record["error_code"] == "unsupported_media_type"
    assert where.body_reads == []
    assert where.rate_limiter is not None
    assert where.rate_limiter.keys == []


def test_chat_needs_the_token_when_one_is_set(capsys: pytest.CaptureFixture[str]) -> None:
    where = platform(limiter=FakeRateLimiter(), API_TOKEN="tok-123-0123456789")
    reply, _ = refused(chat_request({"authorization": "Bearer nope"}), where, capsys)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"] == 'Bearer realm="edgechat"'
    assert error_body(reply)["code"] == "unauthorized"
    assert b"tok-123-0123456789" not in reply.body
    assert where.body_reads == []
    assert where.rate_limiter is not None
    assert where.rate_limiter.keys == []


def test_chat_refuses_cross_site_requests(capsys: pytest.CaptureFixture[str]) -> None:
    where = platform()
    reply, _ = refused(chat_request({"origin": "https://evil.example"}), where, capsys)
    assert reply.status == 403
    assert error_body(reply)["code"] == "cross_site_request"
    assert "Access-Control-Allow-Origin" not in reply.headers
    assert where.body_reads == []


def test_chat_rate_limited(capsys: pytest.CaptureFixture[str]) -> None:
    where = platform(limiter=FakeRateLimiter(allow=0))
    reply, record = refused(chat_request(), where, capsys)
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "60"
    assert error_body(reply) == {
        "code": "rate_limited",
        "message": "Too many requests. Please wait a moment and try again.",
    }
    assert record["error_code"] == "rate_limited"
    assert where.body_reads == []


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_chat_body_over_the_cap(declared: bool, capsys: pytest.CaptureFixture[str]) -> None:
    # No model of this deployment sees images: the cap is MAX_BODY_BYTES and
    # what MAX_DOCUMENTS documents take as data URLs.
    where = platform(
        body=BODY + b" " * 2000,
        MAX_BODY_BYTES="1500",
        MODELS="glm,llama",
        MAX_DOCUMENTS="1",
        MAX_DOCUMENT_BYTES="100",
    )
    where.declared_length = declared
    reply, _ = refused(chat_request(), where, capsys)
    assert reply.status == 413
    # refused while reading, not after
    assert where.body_reads == [1500 + document_url_size(100)]
    assert error_body(reply)["code"] == "payload_too_large"


def test_the_body_cap_grows_by_what_the_images_take(capsys: pytest.CaptureFixture[str]) -> None:
    # Kimi sees images: the cap grows by MAX_IMAGES data URLs of the largest
    # image, and a body of text alone is still held to MAX_BODY_BYTES.
    where = platform(
        body=BODY + b" " * 6000,
        MAX_BODY_BYTES="1500",
        MAX_IMAGES="2",
        MAX_IMAGE_BYTES="3000",
        MAX_DOCUMENTS="1",
        MAX_DOCUMENT_BYTES="100",
    )
    reply, _ = refused(chat_request(), where, capsys)
    assert reply.status == 413
    images = 2 * (len("data:image/webp;base64,") + 4000)
    assert where.body_reads == [1500 + document_url_size(100) + images]
    assert error_body(reply)["code"] == "payload_too_large"


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        json.dumps({"messages": [{"role": "system", "content": PROMPT}]}).encode(),
        json.dumps({"messages": [{"role": "user", "content": PROMPT}], "model": "gpt-4o"}).encode(),
        json.dumps({"messages": [{"role": "user", "content": PROMPT}], "stuff": PROMPT}).encode(),
    ],
)
def test_chat_invalid_bodies(body: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    reply, record = refused(chat_request(), platform(body=body), capsys)
    assert reply.status == 400
    assert error_body(reply)["code"] == "invalid_request"
    assert b"gpt-4o" not in reply.body
    assert record["error_code"] == "invalid_request"
    assert "prompt" not in record


def test_chat_model_outside_the_allow_list_never_reaches_the_binding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "model": "kimi"}).encode()
    where = platform(body=body, MODELS="glm,llama")
    reply, _ = refused(chat_request(), where, capsys)
    assert reply.status == 400


def test_chat_upstream_refusal_before_the_stream_is_a_json_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ai = FakeAi({GLM_ID: UpstreamRateLimited(detail="3021: AI binding too many requests")})
    where = platform(ai=ai)
    reply = serve(chat_request(), where)
    assert reply.stream is None
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "60"
    assert error_body(reply) == {
        "code": "upstream_rate_limited",
        "message": "The model is receiving too many requests. Please try again shortly.",
    }
    assert b"binding" not in reply.body
    assert ai.models_called == [GLM_ID]
    record = log_record(capsys)
    assert record["status"] == 429
    assert record["model"] == GLM_ID
    assert record["error_code"] == "upstream_rate_limited"
    assert record["error_detail"] == "3021: AI binding too many requests"


def test_chat_when_every_model_refuses(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM_ID: UpstreamBusy(detail="3040"), LLAMA_ID: UpstreamBusy(detail="3040 again")})
    reply = serve(chat_request(), platform(ai=ai))
    assert reply.status == 503
    assert reply.headers["Retry-After"] == "10"
    assert error_body(reply)["code"] == "model_busy"
    assert ai.models_called == [GLM_ID, LLAMA_ID]
    record = log_record(capsys)
    assert record["model"] == LLAMA_ID
    assert "fallback_from" not in record


def test_chat_binding_that_never_answers_is_a_timeout(capsys: pytest.CaptureFixture[str]) -> None:
    # Every model of the chain is asked in turn, each for its own first-token
    # deadline; when none answered, the client gets one 504.
    late = openai(("content", "late"))
    ai = FakeAi({GLM_ID: late, LLAMA_ID: late}, open_delay={GLM_ID: STALL, LLAMA_ID: STALL})
    where = platform(ai=ai, FIRST_TOKEN_TIMEOUT_S="0.2", IDLE_TIMEOUT_S="0.2", TOTAL_TIMEOUT_S="5")
    reply = serve(chat_request(), where)
    assert reply.stream is None
    assert reply.status == 504
    assert error_body(reply) == {
        "code": "deadline_exceeded",
        "message": "The model took too long to answer. Please try again.",
    }
    assert ai.models_called == [GLM_ID, LLAMA_ID]
    assert all(call.abandoned for call in ai.calls)
    record = log_record(capsys)
    assert record["status"] == 504
    assert record["error_code"] == "deadline_exceeded"


def test_a_binding_that_never_answers_gives_way_to_the_next_model() -> None:
    ai = FakeAi(
        {GLM_ID: openai(("content", "late")), LLAMA_ID: native("Hi")},
        open_delay={GLM_ID: STALL},
    )
    where = platform(ai=ai, FIRST_TOKEN_TIMEOUT_S="0.2", IDLE_TIMEOUT_S="0.2", TOTAL_TIMEOUT_S="5")
    sink = FakeSink()
    reply = serve(chat_request(), where, sink)
    assert reply.status == 200
    parsed = events(sink)
    assert parsed.text() == "Hi"
    assert parsed.final.data["model"] == LLAMA_ID
    assert parsed.final.data["fallback_from"] == GLM_ID
    assert ai.calls[0].abandoned


# --- settings: read once per isolate -------------------------------------------------


class CountingPlatform(FakePlatform):
    """Counts the ``[vars]`` look-ups."""

    var_reads: int = 0

    def var(self, name: str) -> object:
        self.var_reads += 1
        return super().var(name)


def test_settings_once_reads_the_vars_on_the_first_request_only() -> None:
    once = app.SettingsOnce()
    first = CountingPlatform(vars={"MODELS": "llama,glm", "DEFAULT_MODEL": "llama"})
    later = CountingPlatform(vars={"MODELS": "glm"})
    for where in (first, later, later):
        reply = serve(incoming("GET", "/api/models"), where, settings=once)
        # The isolate's settings are the first request's: [vars] do not change
        # while an isolate lives.
        assert [entry["alias"] for entry in json.loads(reply.body)] == ["llama", "glm"]
    assert first.var_reads > 0
    assert later.var_reads == 0


def test_without_settings_once_every_request_reads_its_vars() -> None:
    for models, aliases in (("llama", ["llama"]), ("glm,kimi", ["glm", "kimi"])):
        where = CountingPlatform(vars={"MODELS": models, "DEFAULT_MODEL": aliases[0],
                                       "FALLBACK_CHAIN": aliases[0]})  # fmt: skip
        reply = serve(incoming("GET", "/api/models"), where)
        assert [entry["alias"] for entry in json.loads(reply.body)] == aliases
        assert where.var_reads > 0


def test_settings_once_does_not_keep_a_bad_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    once = app.SettingsOnce()
    bad = serve(incoming("GET", "/healthz"), platform(MODELS="gpt-4o"), settings=once)
    assert bad.status == 500
    assert log_record(capsys)["error_detail"].startswith("MODELS")
    again = serve(incoming("GET", "/healthz"), platform(MODELS="gpt-4o"), settings=once)
    assert again.status == 500  # reported on every request until it is fixed
    capsys.readouterr()
    fixed = serve(incoming("GET", "/api/models"), platform(MODELS="llama",
                  DEFAULT_MODEL="llama", FALLBACK_CHAIN="llama"), settings=once)  # fmt: skip
    assert fixed.status == 200
    assert [entry["alias"] for entry in json.loads(fixed.body)] == ["llama"]


def test_settings_once_serves_a_whole_chat() -> None:
    once = app.SettingsOnce()
    sink = FakeSink()
    reply = serve(chat_request(), platform(), sink, settings=once)
    assert reply.status == 200
    assert events(sink).text() == "Hi!"
    assert events(sink).final.name == "done"


# --- failures of our own ---------------------------------------------------------------


def test_bad_configuration_is_a_generic_500_that_says_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reply = serve(incoming("GET", "/healthz"), platform(MODELS="gpt-4o"))
    assert reply.status == 500
    assert error_body(reply) == {
        "code": "misconfigured",
        "message": "The service is not configured correctly. Please try again later.",
    }
    assert b"MODELS" not in reply.body
    assert b"gpt-4o" not in reply.body
    assert reply.headers["X-Request-Id"]
    record = log_record(capsys)
    assert record["status"] == 500
    assert record["error_code"] == "misconfigured"
    assert record["error_detail"].startswith("MODELS lists an unknown model")


def test_an_unexpected_exception_becomes_a_generic_500(
    capsys: pytest.CaptureFixture[str],
) -> None:
    class BrokenLimiter(FakeRateLimiter):
        async def allow(self, key: str) -> bool:
            raise RuntimeError("RATE_LIMITER binding exploded")

    where = platform(limiter=BrokenLimiter())
    reply = serve(chat_request(), where)
    assert reply.status == 500
    assert error_body(reply)["code"] == "internal_error"
    assert b"RATE_LIMITER" not in reply.body
    assert where.ai.calls == []
    record = log_record(capsys)
    assert record["error_detail"] == "RuntimeError: RATE_LIMITER binding exploded"


@pytest.mark.parametrize(
    "path", sorted(path for path, methods in app.ROUTES.items() if "OPTIONS" in methods)
)
def test_a_preflight_allows_exactly_its_routes_methods(path: str) -> None:
    reply = serve(incoming("OPTIONS", path), platform())
    assert reply.status == 204
    assert reply.headers["Allow"] == ", ".join(app._allowed(app.ROUTES[path]))
