"""``GET /api/usage`` over HTTP: ``?days=``, rows per day, user and model,
and who sees what: a user their own answers only, an admin (``ADMINS``)
everyone's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import assert_error, post_chat, user
from tests.api.conftest import Server, ServerPool

ANN = "ann-token-5d0c7e91b3a2f486"
BO = "bo-token-a1f4c8e27b90d365"
BOSS = "boss-token-6e29b0d4f7a1c853"


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def server(servers: ServerPool) -> Server:
    keys = f"ann:{ANN},bo:{BO},boss:{BOSS}"
    return servers.get(
        {"API_KEYS": keys, "ADMINS": "boss", "CACHE_MODE": "off"}, rate_limited=False
    )


@pytest.fixture(scope="module")
def answered(server: Server) -> Iterator[httpx.Client]:
    """A client, after one answer from each user (Ann two, on two models)."""
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        for token, model in ((ANN, "glm"), (ANN, "llama"), (BO, "glm"), (BOSS, "glm")):
            chat = post_chat(
                http, user(f"usage question {time.time()}", model=model), headers=auth(token)
            )
            assert chat.events.final.name == "done"
        yield http


def usage(http: httpx.Client, token: str, answers: int) -> dict[str, Any]:
    """``/api/usage?days=30`` once it counts ``answers`` answers (KV writes
    land after the reply), bounded."""
    deadline = time.monotonic() + 15
    while True:
        reply = http.get("/api/usage?days=30", headers=auth(token))
        assert reply.status_code == 200, reply.text
        body: dict[str, Any] = reply.json()
        if body["total"]["requests"] >= answers:
            return body
        assert time.monotonic() < deadline, f"the answers were not counted: {body}"
        time.sleep(0.05)


def test_a_user_sees_only_their_own_usage(answered: httpx.Client) -> None:
    usage(answered, BOSS, 4)  # all four are counted
    ann = usage(answered, ANN, 2)
    assert ann["viewer"] == {"user": "key:ann", "admin": False}
    assert {row["user"] for row in ann["rows"]} == {"key:ann"}
    assert [entry["user"] for entry in ann["users"]] == ["key:ann"]
    assert ann["total"]["requests"] == 2
    assert len(ann["models"]) == 2
    bo = usage(answered, BO, 1)
    assert {row["user"] for row in bo["rows"]} == {"key:bo"}
    assert bo["total"]["requests"] == 1
    # Nothing in the query widens it.
    for query in ("days=30&user=key:bo", "days=30&admin=true", "user=*"):
        sneaky = answered.get(f"/api/usage?{query}", headers=auth(ANN)).json()
        assert {row["user"] for row in sneaky["rows"]} <= {"key:ann"}, query
        assert "key:bo" not in str(sneaky), query


def test_an_admin_sees_everyone(answered: httpx.Client) -> None:
    boss = usage(answered, BOSS, 4)
    assert boss["viewer"] == {"user": "key:boss", "admin": True}
    assert [entry["user"] for entry in boss["users"]] == ["key:ann", "key:bo", "key:boss"]
    assert boss["total"]["requests"] == 4
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert boss["day"] == today
    assert (boss["days"], len(boss["daily"]), boss["daily"][-1]["day"]) == (30, 30, today)
    assert boss["free_allocation_neurons"] == 10_000
    for row in boss["rows"]:
        assert set(row) >= {
            "day",
            "user",
            "model",
            "requests",
            "prompt_tokens",
            "cost_usd",
            "neurons",
        }
        assert row["cost_usd"] > 0
        assert row["neurons"] == round(row["cost_usd"] / 0.011 * 1000)


def test_without_a_key_usage_is_refused(answered: httpx.Client) -> None:
    assert_error(answered.get("/api/usage?days=30"), 401, "unauthorized")
    assert_error(
        answered.get("/api/usage", headers=auth("not-a-key-at-all-00")), 401, "unauthorized"
    )


@pytest.mark.parametrize("days", ["0", "31", "-1", "1.5", "seven", ""])
def test_days_out_of_range_is_refused(answered: httpx.Client, days: str) -> None:
    reply = answered.get(f"/api/usage?days={days}", headers=auth(ANN))
    assert_error(reply, 400, "invalid_request")
    assert (
        reply.json()["error"]["message"] == "days must be a whole number from 1 to 30, given once."
    )
