"""Deadlines and heartbeats over HTTP, on a runner with small ones (FIRST_TOKEN_TIMEOUT_S,
IDLE_TIMEOUT_S, TOTAL_TIMEOUT_S, HEARTBEAT_S): no request can hang, the upstream is
aborted and the stream ends with exactly one ``error``; a model silent before its
first words is covered by ``: ping``, a silence mid-answer by the idle deadline."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.checks import (
    GLM,
    LLAMA,
    assert_done,
    assert_error_event,
    assert_meta,
    assert_relayed,
    assert_shape,
    assert_stream_headers,
    chunk_of,
    post_chat,
    script_bytes,
    user,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.sse import MODEL, PING, Event
from tests.kit.upstream import DONE, native_chunk, openai_chunk

FIRST_TOKEN_S = 2.5
IDLE_S = 1.0
HEARTBEAT_S = 0.2
DEADLINES = {
    "FIRST_TOKEN_TIMEOUT_S": str(FIRST_TOKEN_S),
    "IDLE_TIMEOUT_S": str(IDLE_S),
    "TOTAL_TIMEOUT_S": "4",
    "HEARTBEAT_S": str(HEARTBEAT_S),
}
USAGE = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def pause(seconds: float) -> dict[str, int]:
    return {"delay_ms": round(seconds * 1000)}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(DEADLINES)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def assert_aborted(server: Server, calls: int = 1) -> None:
    """The ``calls`` upstream calls all ended because edgechat aborted them."""
    made = server.ai.wait_for_calls(calls, timeout=5)
    assert len(made) == calls, made
    assert all(call["aborted"] is True for call in made), made


def test_first_token_deadline(server: Server, client: httpx.Client) -> None:
    # Chunks keep coming (so the idle deadline never fires) but none has text.
    server.ai.script({"chunks": [c for _ in range(20) for c in (openai_chunk(), pause(0.4))]})
    chat = post_chat(client, user("hi"), limit_s=15)
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_meta(parsed, GLM)
    # What the model sent had no text: held back, never relayed.
    assert parsed.names == ["meta", "error"]
    assert chat.relayed == b""
    data = assert_error_event(parsed, "deadline_exceeded")
    assert data["retryable"] is True
    # GLM, then Llama (the chain): each had its own first-token deadline.
    assert_aborted(server, calls=2)


def test_first_token_deadline_on_a_model_that_never_answers(
    server: Server, client: httpx.Client
) -> None:
    server.ai.script({"chunks": [{"stall": True}]})
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert parsed.names == ["meta", "error"]
    assert parsed.pings > 0
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server, calls=2)


def test_idle_deadline_keeps_the_text_so_far(server: Server, client: httpx.Client) -> None:
    chunks: list[Any] = [openai_chunk(content="Start"), openai_chunk(content=" of it")]
    server.ai.script({"chunks": [*chunks, {"stall": True}]})
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert_shape(parsed, final="error")
    assert_relayed(chat, script_bytes(chunks))
    assert parsed.text() == "Start of it"
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server)


def test_total_deadline_on_a_model_that_never_stops(server: Server, client: httpx.Client) -> None:
    words = [f" w{i}" for i in range(40)]
    server.ai.script(
        {"chunks": [c for word in words for c in (openai_chunk(content=word), pause(0.3))]}
    )
    chat = post_chat(client, user("hi"), limit_s=20)
    parsed = chat.events
    assert_shape(parsed, final="error")
    text = parsed.text()
    assert text, "no token before the total deadline"
    assert "".join(words).startswith(text)
    assert text != "".join(words)
    # The model's first events, each as it was sent.
    sent = len(parsed.model_events)
    assert_relayed(chat, "".join(openai_chunk(content=word) for word in words[:sent]).encode())
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server)


def test_heartbeat_while_the_model_is_silent_before_its_first_words(
    server: Server, client: httpx.Client
) -> None:
    chunks: list[Any] = [
        pause(0.9),
        chunk_of({"role": "assistant"}),  # no text yet: still silent for the client
        pause(0.5),
        openai_chunk(content="After a pause"),
        openai_chunk(content=", more."),
        native_chunk("", usage=USAGE),
        DONE,
    ]
    server.ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert parsed.text() == "After a pause, more."
    assert_done(parsed, GLM)
    items = parsed.items
    first_model = next(i for i, item in enumerate(items) if isinstance(item, Event) and i > 0)
    first = items[first_model]
    assert isinstance(first, Event)
    assert first.name == MODEL
    pings = items[1:first_model]
    assert pings, "no ping while waiting for the first token"
    assert set(pings) == {PING}, pings
    assert parsed.pings == len(pings), "a ping after the model's first words"
    # The pings came before the model's bytes, which follow untouched.
    assert_relayed(chat, script_bytes(chunks))


def test_heartbeat_while_the_model_sends_bytes_without_text(
    server: Server, client: httpx.Client
) -> None:
    # Empty deltas, more often than the heartbeat: held back, so the client
    # sees nothing of them and needs the pings all the same.
    preamble: list[Any] = [chunk_of({"role": "assistant"})]
    for _ in range(8):
        preamble += [pause(HEARTBEAT_S * 0.75), openai_chunk()]
    answer: list[Any] = [openai_chunk(content="At last."), native_chunk("", usage=USAGE), DONE]
    server.ai.script({"chunks": [*preamble, *answer]})
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert parsed.text() == "At last."
    assert_done(parsed, GLM)
    # 1.2 s without a byte for the client: pings every 0.2 s, so about six.
    assert parsed.pings >= 3, f"{parsed.pings} pings while the client saw nothing for 1.2 s"
    assert_relayed(chat, script_bytes([*preamble, *answer]))


def test_the_next_models_silence_is_its_own_after_a_fallback(
    server: Server, client: httpx.Client
) -> None:
    # GLM sends a byte without text, then fails: Llama's first words come
    # later than IDLE_TIMEOUT_S after GLM's byte, within the first-token deadline.
    llama: list[Any] = [native_chunk("Llama took its time."), native_chunk("", usage=USAGE), DONE]
    server.ai.script(
        {
            "match": {"model": GLM},
            "chunks": [chunk_of({"role": "assistant"}), {"error": "3040: x"}],
        },
        {"match": {"model": LLAMA}, "chunks": [pause(IDLE_S + 0.5), *llama]},
    )
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert parsed.final.name == "done", parsed.final
    assert parsed.text() == "Llama took its time."
    assert_done(parsed, LLAMA, fallback_from=GLM)
    assert_relayed(chat, script_bytes(llama))


def test_a_silence_mid_answer_shorter_than_the_idle_deadline_ends_in_done(
    server: Server, client: httpx.Client
) -> None:
    chunks: list[Any] = [
        openai_chunk(content="Before the pause"),
        pause(IDLE_S / 2),
        openai_chunk(content=", after it."),
        openai_chunk(finish_reason="stop"),
        native_chunk("", usage=USAGE),
        DONE,
    ]
    server.ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert_shape(parsed)
    assert parsed.text() == "Before the pause, after it."
    # Nothing was written into the silence: no ping once the model has spoken.
    assert parsed.pings == 0
    assert_relayed(chat, script_bytes(chunks))
    assert assert_done(parsed, GLM)["finish_reason"] == "stop"
    assert server.ai.wait_for_calls(1)[0]["aborted"] is False


def test_a_silence_mid_answer_longer_than_the_idle_deadline_ends_in_error(
    server: Server, client: httpx.Client
) -> None:
    # The silence ends before the total deadline: only the idle one can stop it.
    before: list[Any] = [openai_chunk(content="Before the pause")]
    after: list[Any] = [openai_chunk(content=", after it."), native_chunk("", usage=USAGE), DONE]
    server.ai.script({"chunks": [*before, pause(IDLE_S + 0.8), *after]})
    chat = post_chat(client, user("hi"), limit_s=15)
    parsed = chat.events
    assert_shape(parsed, final="error")
    assert parsed.text() == "Before the pause"
    assert_relayed(chat, script_bytes(before))
    assert_error_event(parsed, "deadline_exceeded")
    assert_aborted(server)


def test_quick_answer_is_untouched_by_small_deadlines(server: Server, client: httpx.Client) -> None:
    server.ai.script({"reply": {"content": "quick answer"}})
    parsed = post_chat(client, user("hi"), limit_s=15).events
    assert_shape(parsed)
    assert parsed.text() == "quick answer"
    assert_done(parsed, GLM)
    assert server.ai.wait_for_calls(1)[0]["aborted"] is False
