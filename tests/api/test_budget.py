"""Daily budgets over HTTP: each user's spend counted in D1 (the runner's
local ``USAGE_DB``) as answers complete, a user past their budget refused
with ``429 budget_exhausted`` until 00:00 UTC while others go on, and the
account past ``DAILY_NEURON_LIMIT`` kept off Workers AI."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.api.checks import GLM, assert_error, post_chat, user
from tests.api.conftest import Server, ServerPool

ANN = "ann-token-7c41d9e0b2f85a63"
BO = "bo-token-0e92b7c5a1d46f38"
# An answer with this usage costs GLM's list price of 11,000 tokens.
BIG = {"prompt_tokens": 10_000, "completion_tokens": 1_000, "total_tokens": 11_000}
BIG_USD = (10_000 * 0.06 + 1_000 * 0.40) / 1e6


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(
        {"API_KEYS": f"ann:{ANN},bo:{BO}", "USER_DAILY_USD": "0.0005"}, rate_limited=False
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def spent_today(http: httpx.Client, token: str, more_than: float) -> dict[str, object]:
    """``/api/me``'s budget once it shows more than ``more_than`` dollars
    (the count is written after the reply); bounded, never a guessed sleep."""
    deadline = time.monotonic() + 15
    while True:
        me = http.get("/api/me", headers=auth(token))
        assert me.status_code == 200, me.text
        budget = me.json()["budget"]
        if budget["usd"] > more_than or time.monotonic() > deadline:
            return budget
        time.sleep(0.05)


def test_a_user_past_their_budget_is_refused_until_midnight_and_others_go_on(
    http: httpx.Client, server: Server
) -> None:
    server.ai.script({"reply": {"content": "A costly answer.", "usage": BIG}})
    first = post_chat(http, user("hi"), headers=auth(ANN))
    assert first.events.text() == "A costly answer."
    budget = spent_today(http, ANN, 0)
    assert budget["usd"] == pytest.approx(BIG_USD)
    assert budget["usd_limit"] == 0.0005
    assert str(budget["resets_at"]).endswith("T00:00:00Z")
    refused = http.post("/chat", json=user("again"), headers=auth(ANN))
    assert_error(refused, 429, "budget_exhausted")
    body = refused.json()["error"]
    assert body["resets_at"] == budget["resets_at"]
    assert "00:00 UTC" in body["message"]
    retry_after = int(refused.headers["retry-after"])
    assert 0 < retry_after <= 86_400
    # The model was asked beside the read, and that call was stopped.
    calls = server.ai.wait_for_calls(2)  # the stopped call is logged once the stop reaches it
    assert [call["model"] for call in calls] == [GLM, GLM]
    # Bo's budget is his own.
    other = post_chat(http, user("hi"), headers=auth(BO))
    assert other.events.text() == "A costly answer."
    assert spent_today(http, BO, 0)["usd"] == pytest.approx(BIG_USD)


def test_concurrent_answers_all_count(servers: ServerPool) -> None:
    # Twelve answers at once from one user: each adds its cost atomically.
    server = servers.get({"API_KEYS": f"bo:{BO}", "USER_DAILY_USD": "1000"}, rate_limited=False)
    server.ai.script({"reply": {"content": "ok", "usage": {**BIG, "prompt_tokens": 0}}})
    each = 1_000 * 0.40 / 1e6
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        before = spent_today(http, BO, -1)["usd"]
        with concurrent.futures.ThreadPoolExecutor(12) as pool:
            texts = list(
                pool.map(
                    lambda _: post_chat(http, user("hi"), headers=auth(BO)).events.text(),
                    range(12),
                )
            )
        assert texts == ["ok"] * 12
        assert isinstance(before, float)
        total = spent_today(http, BO, before + 11.5 * each)["usd"]
    assert total == pytest.approx(before + 12 * each)


def test_past_the_account_limit_no_workers_ai_model_is_asked(servers: ServerPool) -> None:
    server = servers.get({"DAILY_NEURON_LIMIT": "500", "COOLDOWN_MAX_S": "3600"})
    server.ai.script({"reply": {"content": "Spent the day's Neurons.", "usage": BIG}})
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        assert post_chat(http, user("hi")).events.text() == "Spent the day's Neurons."
        # 11,000 tokens of GLM are about 909 Neurons: the next read finds the
        # account past 500, once the count is in.
        deadline = time.monotonic() + 15
        while True:
            response = http.post("/chat", json=user("again"))
            if response.status_code == 429 or time.monotonic() > deadline:
                break
        assert_error(response, 429, "quota_exhausted")
        again = http.post("/chat", json=user("and again"))
        assert_error(again, 429, "quota_exhausted")
    # The isolate knows: the last request asked no model at all. (The calls
    # the earlier refusals stopped are logged when the stop reaches the
    # emulator, so they are told apart by what they asked.)
    asked = [call["inputs"]["messages"][-1]["content"] for call in server.ai.calls()]
    assert "and again" not in asked


def test_a_key_s_own_budget_replaces_the_users(servers: ServerPool) -> None:
    # Ann's key has its own, larger budget; Bo keeps USER_DAILY_USD.
    server = servers.get(
        {"API_KEYS": f"ann:{ANN},bo:{BO}", "USER_DAILY_USD": "0.0005", "KEY_DAILY_USD": "ann:0.5"},
        rate_limited=False,
    )
    server.ai.script({"reply": {"content": "A costly answer.", "usage": BIG}})
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        for token in (ANN, BO):
            assert post_chat(http, user("hi"), headers=auth(token)).events.text() == (
                "A costly answer."
            )
        ann, bo = spent_today(http, ANN, 0), spent_today(http, BO, 0)
        assert (ann["usd_limit"], bo["usd_limit"]) == (0.5, 0.0005)
        assert ann["usd"] == bo["usd"] == pytest.approx(BIG_USD)
        assert_error(
            http.post("/chat", json=user("again"), headers=auth(BO)), 429, "budget_exhausted"
        )
        again = post_chat(http, user("again"), headers=auth(ANN))
        assert again.events.text() == "A costly answer."
