"""A client that goes away cancels the upstream call: the emulator's log shows the
call aborted soon after the moment the client let go of the connection (an
abandoned answer stops being generated and billed), whether the model was
still silent (edgechat reading its first bytes) or streaming (the relay).

workerd learns that a client went away when it next writes to it: its HTTP
server does not read a connection while a response streams (kj's
``HttpServer``; seen on workerd 1.20261117.1: a client gone during a stalled
answer is noticed at the next write, not before). While the model streams,
that is its next chunk; while it is silent, the next ``: ping``, so those
tests run with ``HEARTBEAT_S=1`` and allow one heartbeat more."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.api.checks import (
    GLM,
    assert_done,
    assert_meta,
    assert_stream_headers,
    post_chat,
    user,
)
from tests.api.conftest import ClientFactory, ServerPool
from tests.harness import EmulatorControl
from tests.kit.sse import MODEL, Event, Parsed, SSEParser
from tests.kit.upstream import openai_chunk

Until = Callable[[Parsed], bool]


def meta_arrived(parsed: Parsed) -> bool:
    return bool(parsed.events)


def words_arrived(count: int) -> Until:
    def until(parsed: Parsed) -> bool:
        return len(parsed.model_events) >= count

    return until


def read_then_let_go(
    client: httpx.Client, ai: EmulatorControl, until: Until, limit_s: float = 15.0
) -> tuple[Parsed, float]:
    """Reads the stream until ``until`` holds, then closes the connection.

    Returns what was read and the moment of the close, in epoch milliseconds
    (the emulator's clock), taken just before the client lets go."""
    deadline = time.monotonic() + limit_s
    parser = SSEParser()
    with client.stream("POST", "/chat", json=user("hi")) as response:
        assert_stream_headers(response)
        # One iterator, read by hand: the connection stays open until close().
        chunks = response.iter_raw()
        while not until(parser.parsed):
            try:
                parser.feed(next(chunks))
            except StopIteration:
                pytest.fail(f"the stream ended before the client let go: {parser.parsed.names}")
            assert time.monotonic() < deadline, f"not there within {limit_s} s"
        assert_meta(parser.parsed, GLM)
        assert ai.calls() == [], "the upstream call ended before the client let go"
        let_go = time.time() * 1000
        response.close()
    return parser.parsed, let_go


def assert_aborted_promptly(
    ai: EmulatorControl, let_go_ms: float, heartbeat_ms: float = 0
) -> dict[str, Any]:
    # The emulator logs the call the moment it is aborted; wait for that line.
    calls = ai.wait_for_calls(1, timeout=10)
    assert len(calls) == 1, "the upstream call was not ended within 10 s of the disconnect"
    call = calls[0]
    assert call["aborted"] is True, call
    assert call["t_end"] >= let_go_ms - 50, (call["t_end"], let_go_ms)
    assert call["t_end"] - let_go_ms <= 2000 + heartbeat_ms, (call["t_end"], let_go_ms)
    return call


# While the model is silent, the next write is the next heartbeat.
SILENT = {"HEARTBEAT_S": "1"}


def test_disconnect_while_the_model_is_silent_aborts_the_upstream(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get(SILENT)
    server.ai.script({"chunks": [{"stall": True}]})
    _, let_go = read_then_let_go(new_client(server.url), server.ai, meta_arrived)
    assert_aborted_promptly(server.ai, let_go, heartbeat_ms=1000)


def test_disconnect_while_bytes_are_held_back_aborts_the_upstream(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get(SILENT)
    # The model has begun (a role chunk, held back for the first words), then stalls.
    role = 'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    server.ai.script({"chunks": [role, {"stall": True}]})
    parsed, let_go = read_then_let_go(new_client(server.url), server.ai, meta_arrived)
    assert parsed.model_events == []
    assert_aborted_promptly(server.ai, let_go, heartbeat_ms=1000)


def test_disconnect_while_the_answer_streams_aborts_the_upstream(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    chunks: list[object] = []
    for i in range(200):
        chunks += [openai_chunk(content=f" word{i}"), {"delay_ms": 100}]
    ai.script({"chunks": chunks})
    # A few words in, the model's stream is relayed by the platform, not read by Python.
    parsed, let_go = read_then_let_go(client, ai, words_arrived(3))
    assert all(event.name in ("meta", MODEL) for event in parsed.events)
    assert_aborted_promptly(ai, let_go)


def test_server_keeps_serving_after_a_disconnect(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get(SILENT)
    client, ai = new_client(server.url), server.ai
    ai.script({"match": {"contains": "stall"}, "chunks": [{"stall": True}]})
    parser = SSEParser()
    with client.stream("POST", "/chat", json=user("stall")) as response:
        assert_stream_headers(response)
        parser.feed(next(response.iter_raw()))
        assert isinstance(parser.parsed.items[0], Event)
    assert ai.wait_for_calls(1, timeout=10)[0]["aborted"] is True
    answer = post_chat(client, user("hello again"))
    assert_done(answer.events, GLM)
    assert answer.events.text()
