"""The request log: one JSON line per request on the Worker's stdout, with the
request id, route, status, model, error code, latency and token counts, and
never the prompt text (each test sends a unique marker that must not appear
anywhere in the runner's output)."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, LLAMA, assert_done, assert_meta, post_chat
from tests.api.conftest import ClientFactory, Server, ServerPool


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get({})


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def marker() -> str:
    return f"PROMPT-MARKER-{uuid.uuid4().hex}"


def records(server: Server) -> list[dict[str, Any]]:
    found = []
    for line in server.log_text().splitlines():
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


def record_where(server: Server, timeout: float = 5.0, **match: Any) -> dict[str, Any]:
    """The one log record with these fields, waiting (bounded) for it to be written."""
    deadline = time.monotonic() + timeout
    while True:
        hits = [r for r in records(server) if all(r.get(k) == v for k, v in match.items())]
        if hits or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(hits) == 1, f"expected one log record with {match}, got {hits}"
    return hits[0]


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
    done = assert_done(parsed, GLM)
    assert secret in parsed.text(), "the emulator echoes the question back"
    record = record_where(server, request_id=request_id)
    assert record["route"] == "/chat"
    assert record["status"] == 200
    assert record["model"] == GLM
    assert record.get("error_code") is None
    assert_number(record, "ttft_ms")
    assert_number(record, "duration_ms")
    assert record["prompt_tokens"] == done["usage"]["prompt_tokens"]
    assert record["completion_tokens"] == done["usage"]["completion_tokens"]
    assert secret not in server.log_text()


def test_a_refused_request_is_logged_without_the_prompt(
    server: Server, client: httpx.Client
) -> None:
    secret = marker()
    chat = post_chat(client, {"messages": [{"role": "system", "content": secret}]})
    assert chat.response.status_code == 400
    request_id = chat.response.headers.get("x-request-id")
    match = {"request_id": request_id} if request_id else {"status": 400}
    record = record_where(server, **match)
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
    chat = post_chat(client, {"messages": [{"role": "user", "content": secret}]})
    assert chat.response.status_code == 503
    record = record_where(server, status=503)
    assert record["route"] == "/chat"
    assert record["error_code"] == "model_busy"
    assert_number(record, "duration_ms")
    assert secret not in server.log_text()


def test_a_mid_stream_failure_is_logged_with_its_code(server: Server, client: httpx.Client) -> None:
    secret = marker()
    server.ai.script(
        {
            "chunks": [
                'data: {"choices":[{"index":0,"delta":{"content":"Half"}}]}\n\n',
                {"error": "3040: Capacity temporarily exceeded"},
            ]
        }
    )
    parsed = post_chat(client, {"messages": [{"role": "user", "content": secret}]}).events
    request_id = assert_meta(parsed, GLM)
    assert parsed.final.name == "error"
    record = record_where(server, request_id=request_id)
    assert record["status"] == 200
    assert record["model"] == GLM
    assert record["error_code"] == "model_busy"
    assert_number(record, "ttft_ms")
    assert secret not in server.log_text()


def test_a_fallback_is_logged(server: Server, client: httpx.Client) -> None:
    secret = marker()
    server.ai.script({"match": {"model": GLM}, "error": "3040: Capacity temporarily exceeded"})
    parsed = post_chat(client, {"messages": [{"role": "user", "content": secret}]}).events
    assert_done(parsed, LLAMA, fallback_from=GLM)
    record = record_where(server, request_id=parsed.meta["request_id"])
    assert record["status"] == 200
    assert record["model"] == LLAMA
    assert GLM in [v for k, v in record.items() if "fallback" in k], record
    assert secret not in server.log_text()


def test_one_line_per_request(server: Server, client: httpx.Client) -> None:
    before = len(records(server))
    ids = [
        assert_meta(post_chat(client, {"messages": [{"role": "user", "content": "x"}]}).events, GLM)
        for _ in range(3)
    ]
    for request_id in ids:
        record_where(server, request_id=request_id)
    assert client.get("/healthz").status_code == 200
    deadline = time.monotonic() + 5
    while len(records(server)) < before + 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(records(server)) == before + 4
