"""The response cache in KV, AI Gateway options and the daily usage, over HTTP.

Every runner here starts with an empty KV namespace of its own (the runner's local
``CACHE``), so a test's entries are its own as long as its question is.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx
import openai
import pytest

from tests.api.checks import GLM, LLAMA, assert_done, last_user_text, post_chat, user
from tests.api.conftest import ClientFactory, Server, ServerPool

TOKEN = "test-token-cache-93a2"
AUTH = {"authorization": f"Bearer {TOKEN}"}
NO_CACHE = {**AUTH, "cache-control": "no-cache"}


def question() -> str:
    return f"What is a cache? {uuid.uuid4().hex[:8]}"


def calls_for(server: Server, text: str) -> list[dict[str, Any]]:
    return [call for call in server.ai.calls() if text in last_user_text(call)]


def wait_for(check: Any, what: str, timeout: float = 15.0) -> Any:
    """Polls ``check`` until it returns something truthy: KV writes happen
    after the reply (``waitUntil``), so a test waits for them to land."""
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.05)
    return found


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get({"API_TOKEN": TOKEN, "CACHE_MODE": "all"}, rate_limited=False)


@pytest.fixture
def http(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def stored(server: Server, http: httpx.Client, text: str) -> bool:
    """Whether the answer to ``text`` is in the cache yet: a request with
    that question makes no model call once it is."""
    before = len(calls_for(server, text))
    chat = post_chat(http, user(text), headers=AUTH)
    if chat.events.final.data.get("cached") is True:
        return True
    # That request was answered by the model again; it counts as a call.
    assert len(calls_for(server, text)) == before + 1
    return False


def test_chat_answers_a_repeat_question_from_the_cache(server: Server, http: httpx.Client) -> None:
    text = question()
    first = post_chat(http, user(text), headers=AUTH)
    done = assert_done(first.events, GLM)
    assert "cached" not in done
    assert first.response.headers["x-edgechat-cache"] == "miss"
    wait_for(lambda: stored(server, http, text), "storing the answer")
    calls = len(calls_for(server, text))
    again = post_chat(http, user(text), headers=AUTH)
    assert again.response.headers["x-edgechat-cache"] == "hit"
    done = again.events.final.data
    assert done["cached"] is True
    assert done["cost_usd"] == 0
    assert done["model"] == GLM
    assert done["usage"] == first.events.final.data["usage"]
    assert again.events.meta["model"] == GLM
    # The cached events are the model's, byte for byte.
    assert again.relayed == first.relayed
    assert again.events.text() == first.events.text()
    assert len(calls_for(server, text)) == calls, "a hit made a model call"


def test_no_cache_skips_the_lookup_and_refreshes(server: Server, http: httpx.Client) -> None:
    text = question()
    server.ai.script({"match": {"contains": text}, "times": 1, "reply": {"content": "first"}})
    post_chat(http, user(text), headers=AUTH)
    wait_for(lambda: stored(server, http, text), "storing the first answer")
    server.ai.script({"match": {"contains": text}, "reply": {"content": "second"}})
    fresh = post_chat(http, user(text), headers=NO_CACHE)
    assert fresh.response.headers["x-edgechat-cache"] == "refresh"
    assert fresh.events.text() == "second"
    assert "cached" not in fresh.events.final.data

    def refreshed() -> bool:
        chat = post_chat(http, user(text), headers=AUTH)
        return chat.events.final.data.get("cached") is True and chat.events.text() == "second"

    wait_for(refreshed, "the refreshed answer replacing the first")


def test_the_openai_api_shares_the_cache(server: Server) -> None:
    text = question()
    with openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as client:

        def ask(**options: Any) -> Any:
            return client.chat.completions.with_raw_response.create(
                model="llama", messages=[{"role": "user", "content": text}], **options
            )

        first = ask().parse()
        assert first.choices[0].message.content.endswith(f"«{text}»")
        raw = wait_for(
            lambda: (r := ask()).headers["x-edgechat-cache"] == "hit" and r, "a /v1 cache hit"
        )
        assert raw.parse().choices[0].message.content == first.choices[0].message.content
        assert raw.parse().usage.total_tokens == first.usage.total_tokens  # type: ignore[union-attr]
        calls = len(calls_for(server, text))
        streamed = ask(stream=True, stream_options={"include_usage": True})
        assert streamed.headers["x-edgechat-cache"] == "hit"
        chunks = list(streamed.parse())
        text_out = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text_out == first.choices[0].message.content
        assert chunks[-1].usage is not None
        assert len(calls_for(server, text)) == calls, "a hit made a model call"


def test_deterministic_mode_caches_only_temperature_0_or_a_seed(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get({"API_TOKEN": TOKEN}, rate_limited=False)  # CACHE_MODE's default
    http = new_client(server.url)
    warm, hot = question(), question()
    post_chat(http, user(hot, temperature=0), headers=AUTH)

    def hot_is_cached() -> bool:
        chat = post_chat(http, user(hot, temperature=0), headers=AUTH)
        return chat.events.final.data.get("cached") is True

    wait_for(hot_is_cached, "the temperature-0 answer being cached")
    first = post_chat(http, user(warm, temperature=0.7), headers=AUTH)
    assert "x-edgechat-cache" not in first.response.headers
    post_chat(http, user(warm, temperature=0.7), headers=AUTH)
    assert len(calls_for(server, warm)) == 2


def test_the_gateway_gets_every_call(servers: ServerPool, new_client: ClientFactory) -> None:
    server = servers.get({"AI_GATEWAY_ID": "edgechat-gw", "CACHE_TTL_S": "600"})
    http = new_client(server.url)
    post_chat(http, user("through the gateway"))
    post_chat(http, user("fresh through the gateway"), headers={"cache-control": "no-cache"})
    first, second = server.ai.wait_for_calls(2)
    assert first["options"]["gateway"] == {"id": "edgechat-gw", "skipCache": False, "cacheTtl": 600}
    assert second["options"]["gateway"] == {"id": "edgechat-gw", "skipCache": True, "cacheTtl": 600}


def test_without_a_gateway_no_gateway_option(server: Server, http: httpx.Client) -> None:
    post_chat(http, user(question()), headers=AUTH)
    (call,) = server.ai.wait_for_calls(1)
    assert "gateway" not in call["options"]


def test_usage_counts_todays_answers_per_model(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get({"API_TOKEN": TOKEN, "CACHE_MODE": "off"}, rate_limited=False)
    http = new_client(server.url)
    assert http.get("/api/usage").status_code == 401
    for model in ("glm", "glm", "llama"):
        post_chat(http, user(question(), model=model), headers=AUTH)

    def counted() -> dict[str, Any] | None:
        body = http.get("/api/usage", headers=AUTH).json()
        requests = {entry["model"]: entry["requests"] for entry in body["models"]}
        return body if requests == {GLM: 2, LLAMA: 1} else None

    body = wait_for(counted, "the three answers being counted")
    assert body["day"] == time.strftime("%Y-%m-%d", time.gmtime())
    assert body["complete"] is True
    assert "eventually consistent" in body["note"]
    for entry in body["models"]:
        assert entry["prompt_tokens"] > 0
        assert entry["completion_tokens"] > 0
        assert entry["cost_usd"] > 0
        assert entry["neurons"] == round(entry["cost_usd"] / 0.011 * 1000)
    assert body["total"]["requests"] == 3
