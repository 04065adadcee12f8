"""``/v1`` streams that Python forwards in batches (the framing rewrites the
model's events; ``ports.Forward``), over HTTP on a runner with small
deadlines: a silence mid-answer shorter than the idle deadline ends
normally; a longer one, or an answer that outlasts the total deadline, ends
the stream with the API's own error, keeps the text so far and aborts the
upstream; a client that goes away mid-answer aborts it too."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest

from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.api.test_disconnect import assert_aborted_promptly
from tests.kit.upstream import DONE, native_chunk, openai_chunk, usage

TOKEN = "test-token-v1-batches"
IDLE_S = 1.0
SETTINGS = {
    "API_TOKEN": TOKEN,
    "CACHE_MODE": "off",
    "FIRST_TOKEN_TIMEOUT_S": "2.5",
    "IDLE_TIMEOUT_S": str(IDLE_S),
    "TOTAL_TIMEOUT_S": "6",
}
AUTH = {"authorization": f"Bearer {TOKEN}"}
GLM = "@cf/zai-org/glm-4.7-flash"
HELLO = [{"role": "user", "content": "hi"}]
BEFORE: list[Any] = [openai_chunk(content="Before"), openai_chunk(content=" the pause")]
AFTER: list[Any] = [
    openai_chunk(content=", after it."),
    openai_chunk(finish_reason="stop", usage=usage(3, 4)),
    native_chunk("", usage=usage(3, 4)),
    DONE,
]


def pause(seconds: float) -> dict[str, int]:
    return {"delay_ms": round(seconds * 1000)}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS, rate_limited=False)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def stream(client: httpx.Client, path: str) -> list[dict[str, Any]]:
    """The ``data:`` objects of a streamed ``path`` answer, in order."""
    body: dict[str, Any] = (
        {"model": GLM, "input": "hi", "stream": True}
        if path == "/v1/responses"
        else {"model": GLM, "messages": HELLO, "stream": True}
    )
    response = client.post(path, json=body, headers=AUTH, timeout=15)
    assert response.status_code == 200, response.text
    data = [
        line[len("data: ") :]
        for line in response.text.split("\n")
        if line.startswith("data: ") and line != "data: [DONE]"
    ]
    return [json.loads(item) for item in data]


def chunk_text(chunks: list[dict[str, Any]]) -> str:
    return "".join(
        choice["delta"].get("content") or ""
        for chunk in chunks
        for choice in chunk.get("choices", [])
    )


def test_a_silence_shorter_than_the_idle_deadline_ends_the_completion_normally(
    server: Server, client: httpx.Client
) -> None:
    server.ai.script({"chunks": [*BEFORE, pause(IDLE_S / 2), *AFTER]})
    chunks = stream(client, "/v1/chat/completions")
    assert chunk_text(chunks) == "Before the pause, after it."
    assert not any("error" in chunk for chunk in chunks)
    reasons = [c.get("finish_reason") for chunk in chunks for c in chunk.get("choices", [])]
    assert [reason for reason in reasons if reason] == ["stop"]
    assert server.ai.wait_for_calls(1)[0]["aborted"] is False


def test_a_silence_past_the_idle_deadline_ends_the_completion_with_an_error(
    server: Server, client: httpx.Client
) -> None:
    server.ai.script({"chunks": [*BEFORE, pause(IDLE_S + 0.8), *AFTER]})
    chunks = stream(client, "/v1/chat/completions")
    assert chunk_text(chunks) == "Before the pause"
    assert chunks[-1]["error"]["code"] == "deadline_exceeded", chunks[-1]
    (call,) = server.ai.wait_for_calls(1)
    assert call["aborted"] is True


def test_a_silence_past_the_idle_deadline_fails_the_response(
    server: Server, client: httpx.Client
) -> None:
    server.ai.script({"chunks": [*BEFORE, pause(IDLE_S + 0.8), *AFTER]})
    events = stream(client, "/v1/responses")
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert text == "Before the pause"
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "deadline_exceeded"
    (call,) = server.ai.wait_for_calls(1)
    assert call["aborted"] is True


def test_a_model_that_never_stops_meets_the_total_deadline(
    server: Server, client: httpx.Client
) -> None:
    # A word every 0.2 s keeps the idle deadline away: the total one ends it.
    words = [f" w{i}" for i in range(100)]
    chunks: list[Any] = []
    for word in words:
        chunks += [openai_chunk(content=word), pause(0.2)]
    server.ai.script({"chunks": chunks})
    got = stream(client, "/v1/chat/completions")
    assert got[-1]["error"]["code"] == "deadline_exceeded", got[-1]
    text = chunk_text(got)
    said = "".join(words)
    assert text
    assert said.startswith(text)
    assert text != said
    (call,) = server.ai.wait_for_calls(1)
    assert call["aborted"] is True


def test_a_client_that_goes_away_mid_completion_aborts_the_upstream(
    server: Server, client: httpx.Client
) -> None:
    chunks: list[Any] = []
    for i in range(200):
        chunks += [openai_chunk(content=f" word{i}"), pause(0.05)]
    server.ai.script({"chunks": chunks})
    body = {"model": GLM, "messages": HELLO, "stream": True}
    seen = b""
    with client.stream("POST", "/v1/chat/completions", json=body, headers=AUTH) as response:
        assert response.status_code == 200
        raw = response.iter_raw()
        # Past the first words: the forwarded batches have begun.
        while seen.count(b"word") < 5:
            seen += next(raw)
        assert server.ai.calls() == [], "the upstream call ended before the client let go"
        let_go = time.time() * 1000
        response.close()
    assert_aborted_promptly(server.ai, let_go)
