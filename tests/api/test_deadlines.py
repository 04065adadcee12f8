"""Deadlines and heartbeats over HTTP, on a runner with small ones (FIRST_TOKEN_TIMEOUT_S,
IDLE_TIMEOUT_S, TOTAL_TIMEOUT_S, HEARTBEAT_S): no request can hang, the upstream is
aborted, and a silent model still keeps the connection visibly alive."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.api.checks import (
    GLM,
    assert_done,
    assert_error_event,
    assert_meta,
    assert_stream_headers,
    post_chat,
    user,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.api.sse import PING

DEADLINES = {
    "FIRST_TOKEN_TIMEOUT_S": "1.5",
    "IDLE_TIMEOUT_S": "1.2",
    "TOTAL_TIMEOUT_S": "3",
    "HEARTBEAT_S": "0.2",
}


def delta(content: str) -> str:
    choice = {"index": 0, "delta": {"content": content} if content else {}}
    body = {"id": "c1", "object": "chat.completion.chunk", "choices": [choice]}
    return f"data: {json.dumps(body)}\n\n"


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(DEADLINES)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def assert_aborted(server: Server) -> None:
    calls = server.ai.wait_for_calls(1, timeout=5)
    assert len(calls) == 1, calls
    assert calls[0]["aborted"] is True, calls[0]


def test_first_token_deadline(server: Server, client: httpx.Client) -> None:
    # Chunks keep coming (so the idle deadline never fires) but none has text.
    server.ai.script({"chunks": [c for _ in range(20) for c in (delta(""), {"delay_ms": 400})]})
    chat = post_chat(client, user("hi"), limit_s=15)
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_meta(parsed, GLM)
    assert parsed.of("token") == []
    data = assert_error_event(parsed, "deadline_exceeded")
    assert data["retryable"] is True
    assert_aborted(server)


def test_first_token_deadline_on_a_model_that_never_answers(
    server: Server, client: httpx.Client
) -> None:
    server.ai.script({"chunks": [{"stall": True}]})
    parsed = post_chat(client, user("hi"), limit_s=15).events
    assert parsed.names == ["meta", "error"]
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server)


def test_idle_deadline_keeps_the_text_so_far(server: Server, client: httpx.Client) -> None:
    server.ai.script({"chunks": [delta("Start"), delta(" of it"), {"stall": True}]})
    parsed = post_chat(client, user("hi"), limit_s=15).events
    assert " ".join(parsed.names) in ("meta token error", "meta token token error")
    assert parsed.text() == "Start of it"
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server)


def test_total_deadline_on_a_model_that_never_stops(server: Server, client: httpx.Client) -> None:
    words = [f" w{i}" for i in range(40)]
    server.ai.script({"chunks": [c for word in words for c in (delta(word), {"delay_ms": 300})]})
    parsed = post_chat(client, user("hi"), limit_s=20).events
    text = parsed.text()
    assert text, "no token before the total deadline"
    assert "".join(words).startswith(text)
    assert text != "".join(words)
    assert parsed.names[-1] == "error"
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server)


def test_heartbeat_while_the_model_is_silent(server: Server, client: httpx.Client) -> None:
    server.ai.script(
        {
            "chunks": [
                {"delay_ms": 900},
                delta("After a pause"),
                {"delay_ms": 900},
                delta(", more."),
                'data: {"response":"","usage":{"prompt_tokens":3,"completion_tokens":2,'
                '"total_tokens":5}}\n\n',
                "data: [DONE]\n\n",
            ]
        }
    )
    parsed = post_chat(client, user("hi"), limit_s=15).events
    assert parsed.text() == "After a pause, more."
    assert_done(parsed, GLM)
    items = parsed.items
    first_token = next(i for i, item in enumerate(items) if item != PING and item.name == "token")
    assert PING in items[1:first_token], "no ping while waiting for the first token"
    second_token = next(
        i
        for i, item in enumerate(items)
        if i > first_token and item != PING and item.name == "token"
    )
    assert PING in items[first_token:second_token], "no ping during a silent gap"


def test_quick_answer_is_untouched_by_small_deadlines(server: Server, client: httpx.Client) -> None:
    server.ai.script({"reply": {"content": "quick answer"}})
    parsed = post_chat(client, user("hi"), limit_s=15).events
    assert parsed.text() == "quick answer"
    assert_done(parsed, GLM)
    assert server.ai.wait_for_calls(1)[0]["aborted"] is False
