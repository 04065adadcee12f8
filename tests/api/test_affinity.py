"""Prompt caching over HTTP: every model call carries the conversation's
``x-session-affinity`` (the binding's ``extraHeaders``, seen in the
emulator's log), the emulator plays cached tokens when a session's prompt
repeats, and edgechat prices them at the model's cached rate in the answer's
``cost_usd`` and in ``/api/usage``."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, KIMI, assert_error, post_chat
from tests.api.conftest import Server, ServerPool

ANN = "ann-token-3b8e61f0c9d27a45"
BO = "bo-token-95c0d7a2e41b6f83"
HEADER = "x-session-affinity"
# Kimi K2.6's list prices, $ per million tokens: input, cached input, output
# (cloudflare-docs src/content/workers-ai-models/kimi-k2.6.json).
KIMI_IN, KIMI_CACHED, KIMI_OUT = 0.95, 0.16, 4.00


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get({"API_KEYS": f"ann:{ANN},bo:{BO}", "CACHE_MODE": "off"}, rate_limited=False)


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def affinity_of(call: dict[str, Any]) -> str:
    value = call["options"]["extraHeaders"][HEADER]
    assert re.fullmatch(r"ec-[0-9a-f]{32}", value), value
    return str(value)


def turns(*texts: str) -> list[dict[str, str]]:
    """A conversation: user and assistant turns alternating, a user's last."""
    roles = ("user", "assistant")
    return [{"role": roles[n % 2], "content": text} for n, text in enumerate(texts)]


def chat_turn(http: httpx.Client, token: str, conversation: str | None, *texts: str) -> Any:
    body: dict[str, Any] = {"messages": turns(*texts), "model": "kimi"}
    if conversation is not None:
        body["conversation"] = conversation
    chat = post_chat(http, body, headers=auth(token))
    assert chat.response.status_code == 200, chat.body[:300]
    done = chat.events.final
    assert done.name == "done", done
    return done.data


def test_a_conversation_keeps_one_affinity_and_its_history_is_priced_cached(
    server: Server, http: httpx.Client
) -> None:
    name = f"conv-{uuid.uuid4()}"
    first = chat_turn(http, ANN, name, "What is prefix caching?")
    assert "cached_tokens" not in first["usage"]  # a session's first call is cold
    second = chat_turn(
        http, ANN, name, "What is prefix caching?", "Reusing a prompt's start.", "Why does it help?"
    )
    one, two = server.ai.wait_for_calls(2)
    assert one["model"] == two["model"] == KIMI
    assert affinity_of(one) == affinity_of(two)
    usage = second["usage"]
    # The system prompt and the first question came back unchanged.
    assert 0 < usage["cached_tokens"] < usage["prompt_tokens"]
    fresh = usage["prompt_tokens"] - usage["cached_tokens"]
    expected = (
        fresh * KIMI_IN
        + usage["cached_tokens"] * KIMI_CACHED
        + usage["completion_tokens"] * KIMI_OUT
    ) / 1e6
    assert second["cost_usd"] == pytest.approx(expected, abs=1e-8)
    full = (usage["prompt_tokens"] * KIMI_IN + usage["completion_tokens"] * KIMI_OUT) / 1e6
    assert second["cost_usd"] < full


def test_conversations_and_users_each_have_their_own_affinity(
    server: Server, http: httpx.Client
) -> None:
    name = f"conv-{uuid.uuid4()}"
    chat_turn(http, ANN, name, "Hello")
    chat_turn(http, ANN, f"conv-{uuid.uuid4()}", "Hello")
    bos = chat_turn(http, BO, name, "Hello")  # the same name from another user
    ann, other, bo = (affinity_of(call) for call in server.ai.wait_for_calls(3))
    assert len({ann, other, bo}) == 3
    # Bo's prompt is Ann's first, word for word; in her session it would
    # have been served from her cache.
    assert "cached_tokens" not in bos["usage"]


def test_without_a_name_the_first_messages_name_the_conversation(
    server: Server, http: httpx.Client
) -> None:
    opening = f"A question {uuid.uuid4()}"
    chat_turn(http, ANN, None, opening)
    chat_turn(http, ANN, None, opening, "An answer.", "A follow-up")
    chat_turn(http, ANN, None, f"Another question {uuid.uuid4()}")
    first, later, another = (affinity_of(call) for call in server.ai.wait_for_calls(3))
    assert first == later != another


def test_v1_uses_the_user_field_else_the_first_messages(server: Server, http: httpx.Client) -> None:
    def complete(messages: list[dict[str, str]], **extra: Any) -> dict[str, Any]:
        body = {"model": "glm", "messages": messages, **extra}
        reply = http.post("/v1/chat/completions", json=body, headers=auth(ANN))
        assert reply.status_code == 200, reply.text
        return dict(reply.json())

    system = {"role": "system", "content": f"You answer briefly. {uuid.uuid4()}"}
    question = {"role": "user", "content": "Hi"}
    complete([system, question], user="agent-7")
    complete([{"role": "user", "content": "Unrelated"}], user="agent-7")
    complete([system, question])
    complete([system, question, {"role": "assistant", "content": "Hello."}, question])
    named, same_name, unnamed, unnamed_later = (
        affinity_of(call) for call in server.ai.wait_for_calls(4)
    )
    assert all(call["model"] == GLM for call in server.ai.calls())
    assert named == same_name
    assert unnamed == unnamed_later != named


def test_usage_counts_cached_prompt_tokens_at_the_cached_rate(
    server: Server, http: httpx.Client
) -> None:
    name = f"conv-{uuid.uuid4()}"
    chat_turn(http, BO, name, "Tell me about caches")
    second = chat_turn(http, BO, name, "Tell me about caches", "They keep things.", "More?")
    cached = second["usage"]["cached_tokens"]
    assert cached > 0

    deadline = time.monotonic() + 15
    while True:
        body = http.get("/api/usage", headers=auth(BO)).json()
        kimi = next((m for m in body["models"] if m["model"] == KIMI), None)
        if kimi is not None and kimi["cached_prompt_tokens"] >= cached:
            break
        assert time.monotonic() < deadline, f"the cached tokens were not counted: {body}"
        time.sleep(0.05)
    assert body["total"]["cached_prompt_tokens"] >= cached


@pytest.mark.parametrize(
    "conversation",
    [7, "", "x" * 129, ["a"], None],
    ids=["number", "empty", "too-long", "list", "null"],
)
def test_a_conversation_name_that_is_no_short_string_is_refused(
    http: httpx.Client, conversation: Any
) -> None:
    body = {"messages": turns("Hi"), "conversation": conversation}
    reply = http.post("/chat", json=body, headers=auth(ANN))
    if conversation is None:  # null is as good as absent
        assert reply.status_code == 200
        return
    assert_error(reply, 400, "invalid_request")
    assert (
        "conversation must be a string of 1 to 128 characters" in reply.json()["error"]["message"]
    )
