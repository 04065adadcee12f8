"""Shared assertions and requests of the black-box suite (edgechat's HTTP contract)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import httpx

from tests.api.sse import Parsed, SSEParser

GLM = "@cf/zai-org/glm-4.7-flash"
KIMI = "@cf/moonshotai/kimi-k2.6"
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
SSE_CACHE_CONTROL = "no-cache, no-transform"

# What must never reach a client: binding names, exception text, tracebacks.
_LEAKS = (
    re.compile(r"\bAI\b"),
    re.compile(r"\bRATE_LIMITER\b"),
    re.compile(r"\bCACHE\b"),
    re.compile(r"\bASSETS\b"),
    re.compile(r"\benv\b"),
    re.compile(r"Traceback"),
    re.compile(r"File \""),
    re.compile(r"\w+(Error|Exception)\b"),
    re.compile(r"JsException|pyodide|PyProxy", re.IGNORECASE),
    re.compile(r"\b\d{4}: "),  # a binding error message ("3040: …")
    re.compile(r"You are a helpful"),  # the default system prompt
)


def user(text: str, **extra: Any) -> dict[str, Any]:
    """A /chat body with one user message."""
    return {"messages": [{"role": "user", "content": text}], **extra}


def assert_no_leak(text: str, *markers: str) -> None:
    for pattern in _LEAKS:
        assert not pattern.search(text), f"{pattern.pattern!r} leaked in {text!r}"
    for marker in markers:
        assert marker not in text, f"{marker!r} leaked in {text!r}"


def assert_error(response: httpx.Response, status: int, code: str, *markers: str) -> None:
    """An exact edgechat error response: status, JSON content type, body shape, no leak."""
    assert response.status_code == status, (response.status_code, _peek(response))
    content_type = response.headers.get("content-type", "")
    assert content_type.split(";")[0].strip() == "application/json", content_type
    assert response.headers.get("x-content-type-options") == "nosniff"
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message"}, body
    assert body["error"]["code"] == code, body
    message = body["error"]["message"]
    assert isinstance(message, str), body
    assert message.strip(), body
    assert_no_leak(response.text, *markers)


def _peek(response: httpx.Response) -> str:
    try:
        return response.text[:300]
    except httpx.ResponseNotRead:
        return f"(streamed {response.headers.get('content-type')})"


def assert_retry_after(response: httpx.Response) -> int:
    value = response.headers.get("retry-after")
    assert value is not None, "no Retry-After header"
    assert value.isdigit(), f"Retry-After is not a number of seconds: {value!r}"
    assert int(value) > 0, value
    return int(value)


@dataclass
class Chat:
    """One /chat exchange: the response (body read) and, for streams, the parsed events."""

    response: httpx.Response
    body: bytes
    stream: Parsed | None

    @property
    def events(self) -> Parsed:
        assert self.stream is not None, (
            f"not an event stream: {self.response.status_code} "
            f"{self.response.headers.get('content-type')} {self.body[:300]!r}"
        )
        return self.stream


def post_chat(
    client: httpx.Client,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
    limit_s: float = 30.0,
) -> Chat:
    """POSTs to /chat and reads the whole answer, failing if it takes over ``limit_s``."""
    deadline = time.monotonic() + limit_s
    kwargs: dict[str, Any] = {"headers": headers}
    if content is not None:
        kwargs["content"] = content
    else:
        kwargs["json"] = body
    with client.stream("POST", "/chat", **kwargs) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return Chat(response, response.read(), None)
        raw = b""
        for chunk in response.iter_raw():
            raw += chunk
            assert time.monotonic() < deadline, f"/chat still streaming after {limit_s} s"
    parser = SSEParser()
    parser.feed(raw)
    return Chat(response, raw, parser.close())


def assert_stream_headers(response: httpx.Response) -> None:
    assert response.status_code == 200, response.status_code
    assert response.headers["content-type"] == SSE_CONTENT_TYPE
    assert response.headers["cache-control"] == SSE_CACHE_CONTROL
    assert response.headers.get("x-content-type-options") == "nosniff"


def assert_meta(parsed: Parsed, model: str) -> str:
    meta = parsed.meta
    assert set(meta) == {"request_id", "model"}, meta
    assert meta["model"] == model, meta
    assert isinstance(meta["request_id"], str), meta
    assert meta["request_id"], meta
    return meta["request_id"]


def assert_done(parsed: Parsed, model: str, *, fallback_from: str | None = None) -> dict[str, Any]:
    """The stream ended with exactly one done, from ``model``; returns its data."""
    final = parsed.final
    assert final.name == "done", f"stream ended with {final.name}: {final.data}"
    done = final.data
    keys = {"model", "finish_reason", "usage", "cost_usd", "ttft_ms"}
    if fallback_from is not None:
        keys.add("fallback_from")
    assert set(done) == keys, done
    assert done["model"] == model, done
    assert done.get("fallback_from") == fallback_from, done
    # null when the model did not say (Llama's native stream never does).
    assert done["finish_reason"] is None or isinstance(done["finish_reason"], str), done
    usage = done["usage"]
    assert set(usage) == {"prompt_tokens", "completion_tokens", "total_tokens"}, usage
    for value in usage.values():
        assert isinstance(value, int), usage
        assert not isinstance(value, bool), usage
    for number in ("cost_usd", "ttft_ms"):
        assert isinstance(done[number], int | float), done
        assert not isinstance(done[number], bool), done
        assert done[number] >= 0, done
    return done


def assert_error_event(parsed: Parsed, code: str, *markers: str) -> dict[str, Any]:
    """The stream ended with exactly one error event with ``code``; returns its data."""
    final = parsed.final
    assert final.name == "error", f"stream ended with {final.name}: {final.data}"
    data = final.data
    assert set(data) == {"code", "message", "retryable"}, data
    assert data["code"] == code, data
    assert isinstance(data["message"], str), data
    assert data["message"].strip(), data
    assert isinstance(data["retryable"], bool), data
    assert_no_leak(data["message"], *markers)
    return data


def system_then(messages: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """The upstream call got the server's system prompt, then exactly ``messages``."""
    sent = call["inputs"]["messages"]
    assert sent[0]["role"] == "system", sent
    assert isinstance(sent[0]["content"], str), sent
    assert sent[0]["content"].strip(), sent
    assert sent[1:] == messages, sent
    assert "prompt" not in call["inputs"], call["inputs"]
