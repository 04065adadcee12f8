"""Shadow trials over HTTP (``SHADOW_MODEL``, ``SHADOW_RATE``,
``SHADOW_DAILY_USD``, ``SHADOW_JUDGE``): a sampled answer is also asked of
the challenger after the reply and judged, the trial shows in
``/api/usage`` for an admin alone, a failing challenger is a failed trial
that nobody's answer notices, and twenty answers at once never take the
trials past their daily cap."""

from __future__ import annotations

import concurrent.futures
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, KIMI, LLAMA, log_records, post_chat, user
from tests.api.conftest import Server, ServerPool

ANN = "ann-token-2b8e5f0c7d1a9463"
BOSS = "boss-token-9c4a1e7f3b5d0826"
KEYS = f"ann:{ANN},boss:{BOSS}"
QUESTION = "What is the capital of France?"
PRIMARY = "PRIMARY says Paris."
CHALLENGER = "CHALLENGER says Paris, on the Seine."

# The reservation, as docs/operating/shadow.md writes it: the challenger
# (Kimi: $0.95/M in, $4.00/M out) reads the answering model's prompt tokens
# times 1.5 and writes the request's max_tokens; the judge (Llama: $0.15/M
# in, $0.29/M out) reads at most 20,000 tokens and writes at most 16.
PROMPT_FACTOR = 1.5
JUDGE_PROMPT_TOKENS, JUDGE_OUTPUT_TOKENS = 20_000, 16
PRIMARY_PROMPT_TOKENS = 1_000
MAX_TOKENS = 2_000
CHALLENGER_WORST = (
    math.ceil(PRIMARY_PROMPT_TOKENS * PROMPT_FACTOR) * 0.95 + MAX_TOKENS * 4.00
) / 1e6
JUDGE_WORST = (JUDGE_PROMPT_TOKENS * 0.15 + JUDGE_OUTPUT_TOKENS * 0.29) / 1e6
RESERVATION = CHALLENGER_WORST + JUDGE_WORST


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def usage_of(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def script(server: Server, *, challenger: dict[str, Any] | None = None) -> None:
    """GLM answers; Kimi challenges (or does what ``challenger`` says); Llama
    judges, and always finds the challenger's answer better, wherever it
    stands: A when it is answer A, else B."""
    server.ai.script(
        {
            "match": {"model": GLM},
            "reply": {"content": PRIMARY, "usage": usage_of(PRIMARY_PROMPT_TOKENS, 10)},
        },
        {"match": {"model": KIMI}, **(challenger or {"reply": {"content": CHALLENGER}})},
        {
            "match": {"model": LLAMA, "contains": f"<answer_a>\n{CHALLENGER}"},
            "reply": {"content": "A"},
        },
        {"match": {"model": LLAMA}, "reply": {"content": "B"}},
    )


@pytest.fixture(scope="module")
def server(servers: ServerPool) -> Server:
    return servers.get(
        {
            "API_KEYS": KEYS,
            "ADMINS": "boss",
            "CACHE_MODE": "off",
            "SHADOW_MODEL": "kimi",
            "SHADOW_RATE": "1",
            "SHADOW_DAILY_USD": "5",
            "SHADOW_JUDGE": "llama",
        },
        rate_limited=False,
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    server.ai.reset()
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def shadow_of(http: httpx.Client, token: str) -> Any:
    reply = http.get("/api/usage", headers=auth(token))
    assert reply.status_code == 200, reply.text
    return reply.json()["shadow"]


def trials_once(
    http: httpx.Client, done: Callable[[dict[str, Any]], bool], timeout: float = 20.0
) -> dict[str, Any]:
    """The admin's summary once ``done`` holds (a trial is kept after its
    judge answered, in the background), bounded."""
    deadline = time.monotonic() + timeout
    while True:
        summary: dict[str, Any] = shadow_of(http, BOSS)
        if done(summary):
            return summary
        assert time.monotonic() < deadline, f"the trial was not kept: {summary}"
        time.sleep(0.05)


def models_asked(server: Server) -> list[str]:
    return [call["model"] for call in server.ai.calls()]


def test_a_sampled_answer_is_tried_on_the_challenger_and_judged(
    server: Server, http: httpx.Client
) -> None:
    script(server)
    before = shadow_of(http, BOSS)
    chat = post_chat(http, user(QUESTION), headers=auth(ANN))
    assert chat.events.final.name == "done"
    assert chat.events.text() == PRIMARY  # the challenger's answer is never shown
    summary = trials_once(http, lambda s: s["trials"] > before["trials"])
    assert summary["trials"] == before["trials"] + 1
    assert summary["wins"] == before["wins"] + 1  # the scripted judge's verdict
    assert (summary["challenger_model"], summary["judge_model"]) == (KIMI, LLAMA)
    assert summary["rate"] == 1
    assert summary["primary"]["usd"] > 0
    assert summary["challenger"]["ttft_ms"] is not None
    assert 0 < summary["today"]["spent_usd"] <= summary["today"]["cap_usd"] == 5
    # One challenger call and one judge call, after the answer.
    calls = server.ai.wait_for_calls(3)
    assert [call["model"] for call in calls] == [GLM, KIMI, LLAMA]
    primary, challenger, judge = calls
    assert challenger["inputs"]["messages"] == primary["inputs"]["messages"]
    assert challenger["t_start"] >= primary["t_end"]
    assert not challenger["aborted"]
    [asked] = judge["inputs"]["messages"]
    assert QUESTION in asked["content"]
    assert PRIMARY in asked["content"]
    assert CHALLENGER in asked["content"]
    assert judge["inputs"]["max_tokens"] == JUDGE_OUTPUT_TOKENS


def test_an_answer_on_the_openai_api_is_tried_too(server: Server, http: httpx.Client) -> None:
    script(server)
    before = shadow_of(http, BOSS)
    reply = http.post(
        "/v1/chat/completions",
        json={"model": "glm", "messages": [{"role": "user", "content": QUESTION}]},
        headers=auth(ANN),
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"] == PRIMARY
    trials_once(http, lambda s: s["trials"] > before["trials"])
    assert models_asked(server) == [GLM, KIMI, LLAMA]


def test_a_failing_challenger_is_a_failed_trial_and_the_answer_goes_on(
    server: Server, http: httpx.Client
) -> None:
    script(server, challenger={"error": "3040: Capacity temporarily exceeded"})
    before = shadow_of(http, BOSS)
    chat = post_chat(http, user(QUESTION), headers=auth(ANN))
    assert chat.events.final.name == "done"
    assert chat.events.text() == PRIMARY
    summary = trials_once(http, lambda s: s["trials"] > before["trials"])
    assert summary["failed"] == before["failed"] + 1
    assert summary["wins"] + summary["losses"] == before["wins"] + before["losses"]
    # No fallback for the challenger, no judge for a failed trial.
    assert models_asked(server) == [GLM, KIMI]
    # The next answer is as good as ever.
    script(server)
    again = post_chat(http, user("and again?"), headers=auth(ANN))
    assert again.events.text() == PRIMARY


def test_a_user_who_is_no_admin_sees_no_shadow_data(server: Server, http: httpx.Client) -> None:
    reply = http.get("/api/usage?days=30", headers=auth(ANN))
    assert reply.status_code == 200
    body = reply.json()
    assert body["viewer"]["admin"] is False
    assert body["shadow"] is None
    assert "CHALLENGER" not in reply.text
    assert KIMI not in reply.text  # trials are no user's answers
    assert shadow_of(http, BOSS) is not None


def test_twenty_answers_at_once_never_take_the_trials_past_the_cap(servers: ServerPool) -> None:
    # Room for three reservations, not four.
    cap = 3.5 * RESERVATION
    server = servers.get(
        {
            "API_KEYS": KEYS,
            "ADMINS": "boss",
            "CACHE_MODE": "off",
            "SHADOW_MODEL": "kimi",
            "SHADOW_RATE": "1",
            "SHADOW_DAILY_USD": f"{cap:.8f}",
            "SHADOW_JUDGE": "llama",
        },
        rate_limited=False,
    )
    # Each trial costs its whole reservation: however the trials overlap,
    # the day's spend grows by one reservation a trial.
    rules = [
        {
            "match": {"model": GLM},
            "reply": {"content": PRIMARY, "usage": usage_of(PRIMARY_PROMPT_TOKENS, 10)},
        },
        {
            "match": {"model": KIMI},
            "reply": {
                "content": CHALLENGER,
                "usage": usage_of(int(PRIMARY_PROMPT_TOKENS * PROMPT_FACTOR), MAX_TOKENS),
                "delay_ms": 200,
            },
        },
        {
            "match": {"model": LLAMA},
            "reply": {
                "content": "TIE",
                "usage": usage_of(JUDGE_PROMPT_TOKENS, JUDGE_OUTPUT_TOKENS),
            },
        },
    ]
    server.ai.script(*rules)
    before = len(log_records(server.log_text()))
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        body = user(QUESTION, max_tokens=MAX_TOKENS)
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            texts = list(
                pool.map(
                    lambda _: post_chat(http, body, headers=auth(ANN)).events.text(), range(20)
                )
            )
        assert texts == [PRIMARY] * 20
        # Each sampled answer logs one line once its trial is settled or refused.
        deadline = time.monotonic() + 30
        while True:
            lines = [r for r in log_records(server.log_text())[before:] if "shadow" in r]
            if len(lines) >= 20 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        outcomes = sorted(line["shadow"] for line in lines)
        allowed = math.floor(cap / RESERVATION)
        assert allowed == 3
        assert outcomes == ["over_cap"] * (20 - allowed) + ["tried"] * allowed
        asked = models_asked(server)
        assert asked.count(KIMI) == asked.count(LLAMA) == allowed
        summary = shadow_of(http, BOSS)
    assert summary["trials"] == allowed
    assert summary["ties"] == allowed
    assert summary["today"]["spent_usd"] <= summary["today"]["cap_usd"]
    assert summary["today"]["spent_usd"] == pytest.approx(allowed * RESERVATION)
