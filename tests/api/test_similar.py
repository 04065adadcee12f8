"""The semantic cache over HTTP, on workerd with the emulated Vectorize.

The model is scripted to take its time before its first byte (as a real one
does, hundreds of ms) wherever a test wants the lookup to win the race; a
miss's model answers at once. Every test asks as a user of its own (the
index lives as long as the runner), so no test sees another's answers. What
the index was asked is read from the emulator's log (``server.vectors``).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, KIMI, post_chat, user
from tests.api.conftest import ClientFactory, Server, ServerPool, openai_client
from tests.kit.images import data_url, png

USERS = ("ann", "bo", "cy", "di", "ed", "flo", "gus", "hal", "ivy", "jo", "kit", "lu")
TOKENS = {name: f"tok-similar-{name}-0123456789" for name in USERS}
# The model's first byte, when the lookup should come first.
SLOW_MS = 2500
BGE_M3 = "@cf/baai/bge-m3"


@pytest.fixture
def server(servers: ServerPool) -> Server:
    keys = ",".join(f"{name}:{token}" for name, token in TOKENS.items())
    return servers.get(
        {
            "API_KEYS": keys,
            "SEMANTIC_CACHE": "user",
            "CACHE_MODE": "off",
            "MODELS": "glm,kimi,llama",
        },
        rate_limited=False,
    )


def auth(name: str, **more: str) -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[name]}", **more}


def tag() -> str:
    """A word of this test's own, so no two tests' questions are near."""
    return "zq" + uuid.uuid4().hex[:8]


def slow_model(server: Server) -> None:
    """Chat models take SLOW_MS before their first byte; bge-m3 answers at once."""
    server.ai.script({"match": {"model": GLM}, "delay_ms": SLOW_MS})


def wait_for(check: Any, what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)
    return found


def kept(server: Server, upserts: int = 1) -> None:
    """Waits until the answer's vector is upserted and shows in queries
    (storing runs after the reply, and the index applies it later still)."""
    wait_for(
        lambda: len(server.vectors.calls("upsert")) >= upserts, "the answer's vector being kept"
    )
    server.vectors.wait_until_applied()


def answered(server: Server, http: httpx.Client, name: str, text: str) -> Any:
    """Asks ``text`` as ``name``; the model answers at once, and the answer is kept."""
    upserts = len(server.vectors.calls("upsert"))
    chat = post_chat(http, user(text), headers=auth(name))
    assert "cached" not in chat.events.final.data
    kept(server, upserts + 1)
    return chat


def owners(server: Server) -> list[str]:
    return [query["filter"]["owner"] for query in server.vectors.queries()]


def test_a_paraphrase_is_answered_from_the_kept_answer(
    server: Server, new_client: ClientFactory
) -> None:
    http = new_client(server.url)
    word = tag()
    first = answered(server, http, "ann", f"How do I keep a sourdough starter alive, {word}?")
    slow_model(server)
    started = time.monotonic()
    again = post_chat(
        http, user(f"how to keep my sourdough starter alive {word}"), headers=auth("ann")
    )
    took_s = time.monotonic() - started
    done = again.events.final.data
    cached = done["cached"]
    assert cached["kind"] == "similar"
    assert cached["question"] == f"How do I keep a sourdough starter alive, {word}?"
    assert 0.85 <= cached["score"] <= 1
    assert done["cost_usd"] == 0
    assert done["model"] == GLM
    assert again.events.text() == first.events.text()
    # The model was asked (the race) and left before its first byte.
    assert took_s < SLOW_MS / 1000
    # Every query carried the user's filter on the indexed properties.
    for query in server.vectors.queries():
        assert set(query["filter"]) == {"kind", "owner", "scope"}
        assert query["filter"]["kind"] == "answer"
        assert query["unindexed"] == []
    assert len(set(owners(server))) == 1


def test_an_unrelated_question_misses(server: Server, new_client: ClientFactory) -> None:
    http = new_client(server.url)
    word = tag()
    answered(server, http, "bo", f"How do I keep a sourdough starter alive, {word}?")
    slow_model(server)
    other = post_chat(
        http, user(f"Which river flows through Budapest, {word}?"), headers=auth("bo")
    )
    assert "cached" not in other.events.final.data
    assert len(server.vectors.queries()) == 2


def test_another_users_similar_question_misses(server: Server, new_client: ClientFactory) -> None:
    http = new_client(server.url)
    word = tag()
    answered(server, http, "cy", f"How do I keep a sourdough starter alive, {word}?")
    slow_model(server)
    theirs = post_chat(
        http, user(f"How do I keep a sourdough starter alive, {word}?"), headers=auth("di")
    )
    assert "cached" not in theirs.events.final.data
    first, second = owners(server)
    assert first != second


def test_ask_fresh_skips_the_lookup_and_keeps_the_fresh_answer(
    server: Server, new_client: ClientFactory
) -> None:
    http = new_client(server.url)
    word = tag()
    question = f"How do I keep a sourdough starter alive, {word}?"
    answered(server, http, "ed", question)
    server.ai.script({"match": {"model": GLM}, "reply": {"content": f"Fresh {word}"}})
    queries = len(server.vectors.queries())
    fresh = post_chat(http, user(question), headers=auth("ed", **{"cache-control": "no-cache"}))
    assert "cached" not in fresh.events.final.data
    assert fresh.events.text() == f"Fresh {word}"
    assert len(server.vectors.queries()) == queries, "Ask fresh looked the question up"
    kept(server, 2)  # the fresh answer replaced the kept one
    slow_model(server)
    again = post_chat(http, user(question), headers=auth("ed"))
    assert again.events.final.data["cached"]["kind"] == "similar"
    assert again.events.text() == f"Fresh {word}"


def test_images_tools_and_high_temperatures_are_never_looked_up(
    server: Server, new_client: ClientFactory
) -> None:
    http = new_client(server.url)
    word = tag()
    picture = {"type": "image_url", "image_url": {"url": data_url(png(8, 8), "image/png")}}
    with_image = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"What is it {word}?"}, picture]}
        ],
        "model": "kimi",
    }
    assert post_chat(http, with_image, headers=auth("flo")).response.status_code == 200
    hot = user(f"Write a poem about rain {word}", temperature=1.8)
    assert post_chat(http, hot, headers=auth("flo")).response.status_code == 200
    with openai_client(server, TOKENS["flo"]) as client:
        client.chat.completions.create(
            model="glm",
            messages=[{"role": "user", "content": f"What is the weather {word}?"}],
            tools=[{"type": "function", "function": {"name": "weather", "parameters": {}}}],
            extra_body={"edgechat": {"semantic_cache": True}},
        )
    server.ai.wait_for_calls(3)
    assert server.vectors.calls() == []
    assert [c for c in server.ai.calls() if c["model"] == BGE_M3] == []
    models = {c["model"] for c in server.ai.calls()}
    assert KIMI in models


def test_the_openai_api_takes_part_only_when_asked(
    server: Server, new_client: ClientFactory
) -> None:
    word = tag()
    question = [{"role": "user", "content": f"How do I keep a sourdough starter alive, {word}?"}]
    with openai_client(server, TOKENS["gus"]) as client:
        client.chat.completions.create(model="glm", messages=question)
        assert server.vectors.calls() == []
        client.chat.completions.create(
            model="glm", messages=question, extra_body={"edgechat": {"semantic_cache": True}}
        )
        kept(server)
        slow_model(server)
        again = client.chat.completions.with_raw_response.create(
            model="glm", messages=question, extra_body={"edgechat": {"semantic_cache": True}}
        )
    assert again.parse().choices[0].message.content
    assert len(server.vectors.queries()) == 2
    assert again.parse().usage is not None


def test_usage_counts_hits_and_what_they_saved(server: Server, new_client: ClientFactory) -> None:
    http = new_client(server.url)
    word = tag()
    first = answered(server, http, "hal", f"How do I keep a sourdough starter alive, {word}?")
    slow_model(server)
    again = post_chat(
        http, user(f"how to keep my sourdough starter alive {word}"), headers=auth("hal")
    )
    assert again.events.final.data["cached"]["kind"] == "similar"

    def counted() -> dict[str, Any] | None:
        body = http.get("/api/usage", headers=auth("hal")).json()
        embeds = sum(m["requests"] for m in body["models"] if m["model"] == BGE_M3)
        return body if body["similar"]["hits"] == 1 and embeds == 2 else None

    body = wait_for(counted, "the hit and both embeddings being counted")
    # Both questions were embedded, and each embedding is paid for.
    (embedded,) = [m for m in body["models"] if m["model"] == BGE_M3]
    assert embedded["requests"] == 2
    assert embedded["prompt_tokens"] > 0
    saved = first.events.final.data["cost_usd"]
    assert body["similar"]["saved_usd"] == pytest.approx(saved)
    assert body["similar"]["saved_neurons"] == round(round(saved, 8) / 0.011 * 1000)


def test_an_embedding_is_made_once_per_question(server: Server, new_client: ClientFactory) -> None:
    http = new_client(server.url)
    word = tag()
    answered(server, http, "ivy", f"How do I keep a sourdough starter alive, {word}?")
    embeds = [c for c in server.ai.calls() if c["model"] == BGE_M3]
    assert len(embeds) == 1
    assert [c["method"] for c in server.vectors.calls()] == ["query", "upsert"]


def test_anonymous_users_take_no_part_in_the_per_user_scope(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get({"SEMANTIC_CACHE": "user", "CACHE_MODE": "off"}, rate_limited=False)
    http = new_client(server.url)
    word = tag()
    for _ in range(2):
        chat = post_chat(http, user(f"How do I keep a sourdough starter alive, {word}?"))
        assert "cached" not in chat.events.final.data
    server.ai.wait_for_calls(2)
    assert server.vectors.calls() == []
    assert '"similar":"anonymous"' in server.log_text()


def test_the_shared_scope_answers_everyone_from_everyones_answers(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get({"SEMANTIC_CACHE": "shared", "CACHE_MODE": "off"}, rate_limited=False)
    word = tag()
    first = post_chat(
        new_client(server.url), user(f"How do I keep a sourdough starter alive, {word}?")
    )
    kept(server)
    slow_model(server)
    again = post_chat(new_client(server.url), user(f"keep sourdough starter alive {word}"))
    assert again.events.final.data["cached"]["kind"] == "similar"
    assert again.events.text() == first.events.text()
    assert set(owners(server)) == {"shared"}


def test_a_comparisons_answers_are_never_looked_up(
    server: Server, new_client: ClientFactory
) -> None:
    http = new_client(server.url)
    word = tag()
    question = f"How do I keep a sourdough starter alive, {word}?"
    answered(server, http, "jo", question)
    queries = len(server.vectors.queries())
    made = http.post(
        "/api/comparisons", json={"models": ["glm", "kimi"], "blind": False}, headers=auth("jo")
    )
    assert made.status_code == 201, made.text
    for slot in range(2):
        chat = post_chat(
            http,
            user(question),
            headers=auth("jo"),
            params={"comparison": made.json()["id"], "slot": slot},
        )
        assert "cached" not in chat.events.final.data
    assert len(server.vectors.queries()) == queries
    assert len(server.vectors.calls("upsert")) == 1  # nor kept
