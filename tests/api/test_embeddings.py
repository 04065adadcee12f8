"""``POST /v1/embeddings`` paid for like an answer, over HTTP: the input
tokens reported in ``usage`` (bge-m3's binding counts none: edgechat's
estimate), their cost added to the user's day and the account's Neurons
(``/api/me``, ``DAILY_NEURON_LIMIT``) and to ``/api/usage``, and the call
refused once a budget is spent, as an answer is."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.api.conftest import Server, ServerPool

BGE_M3 = "@cf/baai/bge-m3"
# https://developers.cloudflare.com/workers-ai/platform/pricing/: $0.012 per M input tokens.
USD_PER_TOKEN = 0.012 / 1e6
NEURONS_PER_USD = 1000 / 0.011
ANN = "ann-token-3b8e1f0c7d2a9546"
BO = "bo-token-91c6a4e0f2d7b385"
# Four texts of 8,000 ASCII characters (MAX_MESSAGE_CHARS, 32,000 in all:
# MAX_TOTAL_CHARS): 2,000 tokens each by the estimate, 8,000 in all, about
# 8.7 Neurons.
BIG = [f"{n} " + "edge computing " * 533 for n in range(4)]
BIG_TOKENS = 8_000


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def server(servers: ServerPool) -> Server:
    # Bo's own budget is a millionth of a dollar: one embedding of 100 tokens passes it.
    return servers.get(
        {"API_KEYS": f"ann:{ANN},bo:{BO}", "KEY_DAILY_USD": "bo:0.000001"}, rate_limited=False
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def embed(http: httpx.Client, token: str, texts: list[str]) -> httpx.Response:
    body = {"model": "bge-m3", "input": texts}
    return http.post("/v1/embeddings", json=body, headers=auth(token))


def budget(http: httpx.Client, token: str) -> dict[str, Any]:
    me = http.get("/api/me", headers=auth(token))
    assert me.status_code == 200, me.text
    found: dict[str, Any] = me.json()["budget"]
    return found


def bge_row(http: httpx.Client, token: str) -> dict[str, Any]:
    """Today's ``/api/usage`` entry of bge-m3 for the user (zeros before any)."""
    reply = http.get("/api/usage?days=1", headers=auth(token))
    assert reply.status_code == 200, reply.text
    models = {m["model"]: m for m in reply.json()["models"]}
    zero = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    row: dict[str, Any] = models.get(BGE_M3, zero)
    return row


Counts = dict[str, Any]


def assert_openai_error(response: httpx.Response, code: str) -> None:
    """A 429 in the OpenAI error shape, as every ``/v1`` route refuses, saying when it resets."""
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert (error["code"], error["type"], error["param"]) == (code, "rate_limit_error", None)
    assert error["resets_at"].endswith("T00:00:00Z")


def once(read: Callable[[], Counts], done: Callable[[Counts], bool]) -> Counts:
    """``read()`` once ``done`` says it shows the count written after the
    reply; bounded, never a guessed sleep."""
    deadline = time.monotonic() + 15
    while True:
        value = read()
        if done(value):
            return value
        assert time.monotonic() < deadline, f"never counted: {value}"
        time.sleep(0.05)


def test_the_input_tokens_are_reported_and_added_to_the_day_and_to_usage(
    http: httpx.Client, server: Server
) -> None:
    before, row_before = budget(http, ANN), bge_row(http, ANN)
    reply = embed(http, ANN, BIG)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["usage"] == {"prompt_tokens": BIG_TOKENS, "total_tokens": BIG_TOKENS}
    assert [len(item["embedding"]) for item in body["data"]] == [1024] * 4
    call = server.ai.wait_for_call(lambda c: c["inputs"] == {"text": BIG})
    assert call is not None
    assert call["model"] == BGE_M3
    cost = BIG_TOKENS * USD_PER_TOKEN
    after = once(lambda: budget(http, ANN), lambda b: b["usd"] > before["usd"])
    assert after["usd"] - before["usd"] == pytest.approx(cost, rel=1e-6)
    # /api/me rounds Neurons to whole ones: 8.7 more.
    assert after["neurons"] - before["neurons"] == pytest.approx(cost * NEURONS_PER_USD, abs=1)
    row = once(lambda: bge_row(http, ANN), lambda r: r["requests"] > row_before["requests"])
    assert row["requests"] - row_before["requests"] == 1
    assert row["prompt_tokens"] - row_before["prompt_tokens"] == BIG_TOKENS
    assert row["completion_tokens"] == 0
    assert row["cost_usd"] - row_before["cost_usd"] == pytest.approx(cost, rel=1e-6)


def test_a_user_past_their_budget_is_refused_embeddings(http: httpx.Client) -> None:
    spent = budget(http, BO)["usd"]
    if spent < 0.000001:
        # 400 characters: 100 tokens, $0.0000012, over Bo's $0.000001.
        first = embed(http, BO, ["edge " * 80])
        assert first.status_code == 200, first.text
        assert first.json()["usage"]["prompt_tokens"] == 100
        once(lambda: budget(http, BO), lambda b: b["usd"] >= 0.000001)
    refused = embed(http, BO, ["edge"])
    assert_openai_error(refused, "budget_exhausted")
    assert 0 < int(refused.headers["retry-after"]) <= 86_400
    # Ann's budget is her own.
    assert embed(http, ANN, ["edge"]).status_code == 200


def test_the_account_past_its_neurons_is_refused_embeddings(servers: ServerPool) -> None:
    limited = servers.get({"API_KEYS": f"ann:{ANN}", "DAILY_NEURON_LIMIT": "5"}, rate_limited=False)
    with httpx.Client(base_url=limited.url, timeout=30.0) as http:
        if budget(http, ANN)["neurons"] < 5:
            # About 8.7 Neurons: the account's day passes its 5.
            first = embed(http, ANN, BIG)
            assert first.status_code == 200, first.text
            once(lambda: budget(http, ANN), lambda b: b["neurons"] >= 5)
        refused = embed(http, ANN, ["edge"])
        assert_openai_error(refused, "quota_exhausted")
