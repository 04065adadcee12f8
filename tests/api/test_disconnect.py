"""A client that goes away cancels the upstream call: the emulator's log shows the
call aborted within 2 s of the connection closing (an abandoned answer stops
being generated and billed)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.api.checks import GLM, assert_meta, assert_stream_headers, user
from tests.api.sse import Event, SSEParser
from tests.harness import EmulatorControl


def delta(content: str) -> str:
    choice = {"index": 0, "delta": {"content": content}}
    return f"data: {json.dumps({'object': 'chat.completion.chunk', 'choices': [choice]})}\n\n"


def read_then_close(
    client: httpx.Client, ai: EmulatorControl, until: str, limit_s: float = 15.0
) -> float:
    """Reads events until one called ``until`` arrives, then drops the connection.

    Returns the moment of the close, in epoch milliseconds (the emulator's clock).
    """
    deadline = time.monotonic() + limit_s
    parser = SSEParser()
    with client.stream("POST", "/chat", json=user("hi")) as response:
        assert_stream_headers(response)
        for chunk in response.iter_raw():
            new = parser.feed(chunk)
            if any(isinstance(item, Event) and item.name == until for item in new):
                assert_meta(parser.parsed, GLM)
                assert ai.calls() == [], "the upstream call ended before the disconnect"
                # Abandoning the body iterator closes the connection.
                closed = time.time() * 1000
                break
            assert time.monotonic() < deadline, f"no {until} event within {limit_s} s"
        else:
            pytest.fail(f"the stream closed before a {until} event")
    return closed


def assert_aborted_promptly(ai: EmulatorControl, closed_ms: float) -> None:
    calls = ai.wait_for_calls(1, timeout=5)
    assert len(calls) == 1, "the upstream call was not ended within 5 s of the disconnect"
    call = calls[0]
    assert call["aborted"] is True, call
    assert call["t_end"] >= closed_ms - 50, (call["t_end"], closed_ms)
    assert call["t_end"] - closed_ms <= 2000, (call["t_end"], closed_ms)


def test_disconnect_while_the_model_is_silent_aborts_the_upstream(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script({"chunks": [{"stall": True}]})
    closed = read_then_close(client, ai, "meta")
    assert_aborted_promptly(ai, closed)


def test_disconnect_while_tokens_stream_aborts_the_upstream(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    chunks: list[object] = []
    for i in range(200):
        chunks += [delta(f" word{i}"), {"delay_ms": 100}]
    ai.script({"chunks": chunks})
    closed = read_then_close(client, ai, "token")
    assert_aborted_promptly(ai, closed)


def test_server_keeps_serving_after_a_disconnect(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script({"match": {"contains": "stall"}, "chunks": [{"stall": True}]})
    with client.stream("POST", "/chat", json=user("stall")) as response:
        assert_stream_headers(response)
        next(response.iter_raw())
    assert ai.wait_for_calls(1, timeout=5)[0]["aborted"] is True
    answer = client.post("/chat", json=user("hello again"))
    assert answer.status_code == 200
    parser = SSEParser()
    parser.feed(answer.content)
    assert parser.close().final.name == "done"
