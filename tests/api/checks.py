"""Shared assertions and requests of the black-box suite (edgechat's HTTP contract).

Streams are read with the one parser every suite shares (``tests/kit/sse.py``):
``meta``, then the model's own events byte for byte, then one ``done`` or
``error``. Upstream bytes for emulator ``chunks`` scripts come from
``tests/kit/upstream.py``; a test can then find every one of them, unchanged,
in the body the client got.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx

from tests.api.conftest import Server
from tests.harness import EmulatorControl
from tests.kit.sse import MODEL, PING, Parsed, SSEParser

GLM = "@cf/zai-org/glm-4.7-flash"
KIMI = "@cf/moonshotai/kimi-k2.6"
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"

SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"
SSE_CACHE_CONTROL = "no-cache, no-transform"

PING_BYTES = f"{PING}\n\n".encode()

# What must never reach a client in edgechat's own words: binding names,
# exception text, tracebacks, the system prompt.
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


# --- upstream bytes (the common ones are tests/kit/upstream.py) -----------------------


def chunk_of(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    """An OpenAI ``chat.completion.chunk`` event with any delta - a role alone,
    the ``reasoning`` alias, a null content - and any extra fields (``id``,
    ``usage``): shapes a real stream has that the kit's builder does not write."""
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    if finish is not None:
        choice["finish_reason"] = finish
    body = {"id": "c1", "object": "chat.completion.chunk", "choices": [choice], **extra}
    return f"data: {json.dumps(body)}\n\n"


def b64(data: bytes) -> dict[str, str]:
    """A ``chunks`` entry of exactly these bytes."""
    return {"b64": base64.b64encode(data).decode()}


def script_bytes(chunks: list[Any]) -> bytes:
    """The bytes a ``chunks`` script sends (pauses send nothing)."""
    data = b""
    for chunk in chunks:
        if isinstance(chunk, str):
            data += chunk.encode()
        elif "b64" in chunk:
            data += base64.b64decode(chunk["b64"])
        else:
            assert set(chunk) == {"delay_ms"}, f"not bytes: {chunk}"
    return data


# --- assertions on replies -------------------------------------------------------------


def assert_no_leak(text: str, *markers: str) -> None:
    for pattern in _LEAKS:
        assert not pattern.search(text), f"{pattern.pattern!r} leaked in {text!r}"
    for marker in markers:
        assert marker not in text, f"{marker!r} leaked in {text!r}"


def assert_no_leak_in_our_events(parsed: Parsed, *markers: str) -> None:
    """Nothing internal in what edgechat itself wrote (meta, done, error); the
    model's events are the model's words, whatever they say."""
    for event in parsed.events:
        if event.name != MODEL:
            assert_no_leak(json.dumps(event.data, ensure_ascii=False), *markers)


def assert_error(response: httpx.Response, status: int, code: str, *markers: str) -> None:
    """An exact edgechat error response: status, JSON content type, body shape, no leak."""
    assert response.status_code == status, (response.status_code, _peek(response))
    content_type = response.headers.get("content-type", "")
    assert content_type.split(";")[0].strip() == "application/json", content_type
    assert response.headers.get("x-content-type-options") == "nosniff"
    body = response.json()
    assert set(body) == {"error"}, body
    # content_refused also names the hazard categories.
    extra = {"categories"} if code == "content_refused" else set()
    # A used-up allocation or budget says when it resets.
    daily = code in ("quota_exhausted", "budget_exhausted")
    extra |= {"resets_at"} if daily and "resets_at" in body["error"] else set()
    # A stale write names the version now; a user's limit names itself.
    extra |= {"etag"} if code == "version_conflict" else set()
    over = (
        "too_many_conversations",
        "history_full",
        "too_many_shares",
        "file_too_large",
        "files_full",
        "too_many_files",
        "too_many_share_images",
        "too_many_knowledge_bases",
        "too_many_knowledge_documents",
        "knowledge_full",
    )
    extra |= {"limit", "max"} if code in over else set()
    # A conversation or a batch over its size names its limit too; other
    # bodies over MAX_BODY_BYTES say the number in the message only.
    sized = code == "payload_too_large" and "limit" in body["error"]
    extra |= {"limit", "max"} if sized else set()
    assert set(body["error"]) == {"code", "message"} | extra, body
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


# --- one /chat exchange ------------------------------------------------------------------


@dataclass
class Chat:
    """One /chat exchange: the response, its body and, for streams, the parsed events."""

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

    @property
    def relayed(self) -> bytes:
        return relayed(self.body)


def post_chat(
    client: httpx.Client,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
    limit_s: float = 30.0,
    errors: str = "strict",
    params: dict[str, Any] | None = None,
) -> Chat:
    """POSTs to /chat (with ``params``: its query, a comparison's slot) and
    reads the whole answer, failing if it takes over ``limit_s``.

    A stream is parsed as it arrives (``errors="replace"`` for one that
    relays invalid UTF-8)."""
    deadline = time.monotonic() + limit_s
    kwargs: dict[str, Any] = {"headers": headers, "params": params}
    if content is not None:
        kwargs["content"] = content
    else:
        kwargs["json"] = body
    with client.stream("POST", "/chat", **kwargs) as response:
        if not response.headers.get("content-type", "").startswith("text/event-stream"):
            return Chat(response, response.read(), None)
        parser = SSEParser(errors=errors)
        raw = b""
        for chunk in response.iter_raw():
            raw += chunk
            parser.feed(chunk)
            assert time.monotonic() < deadline, f"/chat still streaming after {limit_s} s"
    return Chat(response, raw, parser.close())


def relayed(body: bytes) -> bytes:
    """The model's bytes as the client got them: everything between edgechat's
    ``meta`` and its closing event, less the ``: ping`` comments written before
    the model's first byte. (When the upstream stopped mid-event, the blank
    line edgechat writes before its closing event is part of this.)"""
    meta = b"event: meta\ndata: "
    assert body.startswith(meta), f"the body does not start with meta: {body[:80]!r}"
    start = body.index(b"\n\n") + 2
    # edgechat's closing event is one line of JSON, so the last "event: " starts it.
    end = body.rindex(b"event: ")
    assert end >= start, f"no closing event after meta: {body[-200:]!r}"
    assert body[:end].endswith((b"\n\n", b"\r\n\r\n", b"\r\r")), (
        f"the closing event does not follow a blank line: {body[end - 40 :]!r}"
    )
    closing = body[end:]
    assert closing.startswith((b"event: done\ndata: ", b"event: error\ndata: ")), closing
    assert closing.endswith(b"\n\n"), closing
    assert closing.count(b"\n") == 3, f"more than one event after the closing one: {closing!r}"
    model = body[start:end]
    while model.startswith(PING_BYTES):
        model = model[len(PING_BYTES) :]
    return model


def assert_relayed(chat: Chat, sent: bytes) -> None:
    """The body between ``meta`` and the closing event is exactly ``sent``, the
    model's bytes, then at most the blank line edgechat writes before its own
    event: always when ``sent`` stops mid-event, and allowed after a failure,
    when the Worker cannot tell where the model stopped."""
    got = chat.relayed
    if sent.endswith((b"\n\n", b"\r\n\r\n", b"\r\r")) or sent == b"":
        allowed = (sent, sent + b"\n\n") if chat.events.final.name == "error" else (sent,)
    else:
        allowed = (sent + b"\n\n",)
    assert got in allowed, f"relayed {got!r}, expected one of {allowed!r}"


def assert_stream_headers(response: httpx.Response) -> None:
    assert response.status_code == 200, response.status_code
    assert response.headers["content-type"] == SSE_CONTENT_TYPE
    assert response.headers["cache-control"] == SSE_CACHE_CONTROL
    assert response.headers.get("x-content-type-options") == "nosniff"


def assert_shape(parsed: Parsed, final: str = "done") -> None:
    """meta, then the model's events (if any), then the one closing event."""
    names = parsed.names
    assert names[0] == "meta", names
    assert names[-1] == final, names
    assert set(names[1:-1]) <= {MODEL}, names
    assert parsed.final.name == final


def assert_meta(parsed: Parsed, model: str) -> str:
    meta = parsed.meta
    assert set(meta) == {"request_id", "model"}, meta
    assert meta["model"] == model, meta
    assert isinstance(meta["request_id"], str), meta
    assert meta["request_id"], meta
    return str(meta["request_id"])


def assert_done(
    parsed: Parsed, model: str, *, fallback_from: str | None = None, extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The stream ended with exactly one done, from ``model``; returns its data.
    ``extra``: the optional fields this done must carry (``moderation``, ``cached``)."""
    final = parsed.final
    assert final.name == "done", f"stream ended with {final.name}: {final.data}"
    done: dict[str, Any] = final.data
    keys = {"request_id", "model", "finish_reason", "usage", "cost_usd", "ttft_ms", *extra}
    if fallback_from is not None:
        keys.add("fallback_from")
    assert set(done) == keys, done
    assert done["model"] == model, done
    assert done.get("fallback_from") == fallback_from, done
    # null when the model did not say (Llama's native stream never does).
    assert done["finish_reason"] is None or isinstance(done["finish_reason"], str), done
    usage = done["usage"]
    assert isinstance(usage, dict), done
    # cached_tokens: of the prompt, what Workers AI's prompt cache served
    # (a repeated conversation's; the emulator plays it).
    assert {"prompt_tokens", "completion_tokens", "total_tokens"} <= set(usage), usage
    assert set(usage) <= {"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens"}
    for value in usage.values():
        assert isinstance(value, int), usage
        assert not isinstance(value, bool), usage
    # A provider's answer has no price unless the operator set one.
    numbers = (
        ("ttft_ms",)
        if done["cost_usd"] is None and not model.startswith("@cf/")
        else (
            "cost_usd",
            "ttft_ms",
        )
    )
    for number in numbers:
        assert isinstance(done[number], int | float), done
        assert not isinstance(done[number], bool), done
        assert done[number] >= 0, done
    assert_no_leak_in_our_events(parsed)
    return done


# What a model's stream that breaks after its first words ends with, whatever
# the emulator was scripted to fail with: a stream that fails part way reaches
# the Worker as a broken connection, with no reason (over the emulator's RPC
# binding "ReadableStream received over RPC disconnected prematurely"; at the
# edge the binding's body fails as a network error), so the answer ends with
# edgechat's retryable ``upstream_error`` (``errors.UpstreamInterrupted``).
MID_STREAM_FAILURE = "upstream_error"


def assert_error_event(parsed: Parsed, code: str, *markers: str) -> dict[str, Any]:
    """The stream ended with exactly one error event with ``code``; returns its data."""
    final = parsed.final
    assert final.name == "error", f"stream ended with {final.name}: {final.data}"
    data: dict[str, Any] = final.data
    assert set(data) == {"code", "message", "retryable", "request_id"}, data
    assert data["code"] == code, data
    assert isinstance(data["message"], str), data
    assert data["message"].strip(), data
    assert isinstance(data["retryable"], bool), data
    assert_no_leak_in_our_events(parsed, *markers)
    return data


# --- the request log ------------------------------------------------------------------


def log_records(text: str) -> list[dict[str, Any]]:
    """The Worker's request log lines (JSON objects with a ``request_id``) in ``text``."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "request_id" in record:
            found.append(record)
    return found


def log_record(server: Server, timeout: float = 10.0, **match: Any) -> dict[str, Any]:
    """The one log record with these fields, waiting (bounded) for it to be written."""
    deadline = time.monotonic() + timeout
    while True:
        records = log_records(server.log_text())
        hits = [r for r in records if all(r.get(k) == v for k, v in match.items())]
        if hits or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    assert len(hits) == 1, f"expected one log record with {match}, got {hits}"
    return hits[0]


# --- the upstream calls ------------------------------------------------------------------


def system_then(messages: list[dict[str, Any]], call: dict[str, Any]) -> None:
    """The upstream call got the server's system prompt, then exactly ``messages``."""
    sent = call["inputs"]["messages"]
    assert sent[0]["role"] == "system", sent
    assert isinstance(sent[0]["content"], str), sent
    assert sent[0]["content"].strip(), sent
    assert sent[1:] == messages, sent
    assert "prompt" not in call["inputs"], call["inputs"]


def last_user_text(call: dict[str, Any]) -> str:
    messages = call["inputs"].get("messages") or [{}]
    return str(messages[-1].get("content", ""))


def calls_before_a_later_request(
    ai: EmulatorControl,
    client: httpx.Client,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 15.0,
) -> list[dict[str, Any]]:
    """The upstream calls logged before the call of a request sent now.

    This is how a test proves what a finished request did *not* call: any call
    it made started before the later request, so it is in this list. The later
    request must be one the server passes on to the model."""
    later = f"later-request-{uuid.uuid4().hex}"
    post_chat(client, user(later), headers=headers)
    deadline = time.monotonic() + timeout
    while True:
        calls = ai.calls()
        for index, call in enumerate(calls):
            if later in last_user_text(call):
                return calls[:index]
        assert time.monotonic() < deadline, f"the later request's call was not logged: {calls}"
        time.sleep(0.02)
