"""The request log: one JSON line per request on the Worker's stdout, with the
request id, route, status, model, fallback, error code, time to first token,
latency, token counts, finish reason and truncation, and never the prompt text
(each test sends a unique marker that must not appear anywhere in the runner's
output)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from tests.api.checks import (
    GLM,
    LLAMA,
    assert_done,
    assert_meta,
    assert_stream_headers,
    chunk_of,
    log_record,
    log_records,
    post_chat,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.sse import SSEParser
from tests.kit.upstream import DONE, native_chunk, openai_chunk


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get({})


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def marker() -> str:
    return f"PROMPT-MARKER-{uuid.uuid4().hex}"


def asking(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def assert_number(record: dict[str, Any], key: str) -> None:
    value = record.get(key)
    assert isinstance(value, int | float), (key, record)
    assert not isinstance(value, bool), (key, record)
    assert value >= 0, (key, record)


def test_a_streamed_answer_is_logged_without_the_prompt(
    server: Server, client: httpx.Client
) -> None:
    secret = marker()
    body = {
        "messages": [
            {"role": "user", "content": f"first {secret}"},
            {"role": "assistant", "content": f"reply {secret}"},
            {"role": "user", "content": f"Please repeat {secret}"},
        ]
    }
    chat = post_chat(client, body)
    parsed = chat.events
    request_id = assert_meta(parsed, GLM)
    assert chat.response.headers["x-request-id"] == request_id
    done = assert_done(parsed, GLM)
    assert secret in parsed.text(), "the emulator echoes the question back"
    record = log_record(server, request_id=request_id)
    assert record["route"] == "/chat"
    assert record["status"] == 200
    assert record["model"] == GLM
    assert record.get("error_code") is None
    assert record.get("fallback_from") is None
    assert_number(record, "ttft_ms")
    assert record["ttft_ms"] == done["ttft_ms"]
    assert_number(record, "duration_ms")
    assert record["prompt_tokens"] == done["usage"]["prompt_tokens"]
    assert record["completion_tokens"] == done["usage"]["completion_tokens"]
    assert record["finish_reason"] == done["finish_reason"] == "stop"
    assert "truncated" not in record, record
    assert secret not in server.log_text()


def test_a_refused_request_is_logged_without_the_prompt(
    server: Server, client: httpx.Client
) -> None:
    secret = marker()
    chat = post_chat(client, {"messages": [{"role": "system", "content": secret}]})
    assert chat.response.status_code == 400
    request_id = chat.response.headers.get("x-request-id")
    match = {"request_id": request_id} if request_id else {"status": 400}
    record = log_record(server, **match)
    assert record["route"] == "/chat"
    assert record["status"] == 400
    assert record["error_code"] == "invalid_request"
    assert_number(record, "duration_ms")
    assert isinstance(record["request_id"], str)
    assert record["request_id"]
    assert secret not in server.log_text()


def test_an_upstream_failure_is_logged_with_its_code(server: Server, client: httpx.Client) -> None:
    secret = marker()
    server.ai.script({"error": "3040: Capacity temporarily exceeded"})
    chat = post_chat(client, asking(secret))
    assert chat.response.status_code == 503
    record = log_record(server, request_id=chat.response.headers["x-request-id"])
    assert record["route"] == "/chat"
    assert record["status"] == 503
    assert record["error_code"] == "model_busy"
    assert_number(record, "duration_ms")
    assert secret not in server.log_text()


def test_a_mid_stream_failure_is_logged_with_its_code(server: Server, client: httpx.Client) -> None:
    secret = marker()
    server.ai.script(
        {"chunks": [openai_chunk(content="Half"), {"error": "3040: Capacity temporarily exceeded"}]}
    )
    parsed = post_chat(client, asking(secret)).events
    request_id = assert_meta(parsed, GLM)
    assert parsed.final.name == "error"
    record = log_record(server, request_id=request_id)
    assert record["status"] == 200
    assert record["model"] == GLM
    # The stream broke off, reason unknown to the Worker (a stream that fails
    # part way carries none); the log says how it broke.
    assert record["error_code"] == "upstream_error"
    assert "disconnected prematurely" in record["error_detail"]
    assert_number(record, "ttft_ms")
    assert secret not in server.log_text()


def test_an_answer_cut_off_mid_event_is_logged_as_truncated(
    server: Server, client: httpx.Client
) -> None:
    secret = marker()
    server.ai.script(
        {"chunks": [chunk_of({"role": "assistant"}), openai_chunk(content="Cut"), 'data: {"choi']}
    )
    chat = post_chat(client, asking(secret))
    parsed = chat.events
    request_id = assert_meta(parsed, GLM)
    assert parsed.text() == "Cut"
    assert parsed.final.name in ("done", "error")
    record = log_record(server, request_id=request_id)
    assert record["status"] == 200
    assert record["model"] == GLM
    assert record["truncated"] is True
    assert "finish_reason" not in record, record
    assert secret not in server.log_text()


def test_a_complete_relayed_answer_is_logged_with_its_finish_and_tokens(
    server: Server, client: httpx.Client
) -> None:
    # Long enough that the closing chunks arrive while the platform relays.
    usage = {"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33}
    words = [openai_chunk(content=f" w{i}") for i in range(30)]
    server.ai.script(
        {
            "chunks": [
                *words,
                {"delay_ms": 200},
                openai_chunk(finish_reason="length"),
                native_chunk("", usage=usage),
            ]
        }
    )
    parsed = post_chat(client, asking(marker())).events
    done = assert_done(parsed, GLM)
    record = log_record(server, request_id=parsed.meta["request_id"])
    assert record["finish_reason"] == done["finish_reason"] == "length"
    assert record["prompt_tokens"] == 11
    assert record["completion_tokens"] == 22
    assert "truncated" not in record, record


def test_a_fallback_is_logged(server: Server, client: httpx.Client) -> None:
    secret = marker()
    server.ai.script({"match": {"model": GLM}, "error": "3040: Capacity temporarily exceeded"})
    parsed = post_chat(client, asking(secret)).events
    assert_done(parsed, LLAMA, fallback_from=GLM)
    record = log_record(server, request_id=parsed.meta["request_id"])
    assert record["status"] == 200
    assert record["model"] == LLAMA
    assert record["fallback_from"] == GLM
    assert secret not in server.log_text()


def test_a_client_that_left_is_logged_as_closed(server: Server, client: httpx.Client) -> None:
    secret = marker()
    server.ai.script(
        {
            "chunks": [
                c for i in range(100) for c in (openai_chunk(content=f" w{i}"), {"delay_ms": 100})
            ]
        }
    )
    parser = SSEParser()
    with client.stream("POST", "/chat", json=asking(secret)) as response:
        assert_stream_headers(response)
        chunks = response.iter_raw()
        while not parser.parsed.model_events:
            parser.feed(next(chunks))
        request_id = response.headers["x-request-id"]
        response.close()
    assert server.ai.wait_for_calls(1, timeout=10)[0]["aborted"] is True
    record = log_record(server, request_id=request_id)
    assert record["status"] == 200
    assert record["model"] == GLM
    assert record["error_code"] == "client_closed"
    assert_number(record, "ttft_ms")
    assert secret not in server.log_text()


def test_one_line_per_request(server: Server, client: httpx.Client) -> None:
    before = len(log_records(server.log_text()))
    ids = [assert_meta(post_chat(client, asking("x")).events, GLM) for _ in range(3)]
    for request_id in ids:
        log_record(server, request_id=request_id)
    health = client.get("/healthz")
    assert health.status_code == 200
    log_record(server, request_id=health.headers["x-request-id"])
    # All four are written: nothing else was.
    assert len(log_records(server.log_text())) == before + 4


def test_done_marker_is_not_needed_for_a_complete_log(server: Server, client: httpx.Client) -> None:
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    server.ai.script(
        {
            "chunks": [
                openai_chunk(content="ok"),
                openai_chunk(finish_reason="stop"),
                native_chunk("", usage=usage),
            ]
        }
    )
    parsed = post_chat(client, asking("x")).events
    assert not parsed.saw_done_marker
    assert_done(parsed, GLM)
    record = log_record(server, request_id=parsed.meta["request_id"])
    assert record["finish_reason"] == "stop"
    assert "truncated" not in record
    # And with the marker but no finish reason: complete too.
    server.ai.script({"chunks": [openai_chunk(content="ok"), native_chunk("", usage=usage), DONE]})
    parsed = post_chat(client, asking("y")).events
    record = log_record(server, request_id=parsed.meta["request_id"])
    assert "finish_reason" not in record
    assert "truncated" not in record


@pytest.mark.parametrize("model", ["glm", "llama"])
def test_a_whole_json_answer_is_not_logged_as_truncated(
    server: Server, client: httpx.Client, model: str
) -> None:
    # One complete JSON document instead of a stream: nothing of it can be missing.
    counts = {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    whole: dict[str, Any] = {"response": "Whole.", "usage": counts}
    if model == "glm":
        message = {"role": "assistant", "content": "Whole."}
        whole = {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}
        whole["usage"] = counts
    server.ai.script({"json": whole})
    parsed = post_chat(client, {**asking("x"), "model": model}).events
    assert parsed.text() == "Whole."
    model_id = {"glm": GLM, "llama": LLAMA}[model]
    assert assert_done(parsed, model_id)["usage"] == counts
    record = log_record(server, request_id=parsed.meta["request_id"])
    assert record["completion_tokens"] == 3
    assert "truncated" not in record, record
