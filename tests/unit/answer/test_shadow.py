"""Shadow trials (``shadow``): which answers are sampled, what a trial may
cost, and, through ``app.handle`` with SQLite as D1, one trial after the
reply: the challenger and the judge asked once each, the verdict read
back, the reservation settled to the cost, and the summary on
``/api/usage`` for an admin alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from edgechat.answer import judge, shadow
from edgechat.config.settings import Settings
from edgechat.core.faults import UpstreamBusy, UpstreamInterrupted
from edgechat.core.http import Incoming
from edgechat.core.models import cost_usd
from edgechat.core.requests import ChatRequest, Message
from edgechat.users import budget
from edgechat.users.usage import NEURONS_PER_USD
from edgechat.web import app
from tests.unit.fakes import (
    Fail,
    FakeAi,
    FakeDb,
    FakeKv,
    FakePlatform,
    FakeSink,
    chat_request,
    model,
    native_stream,
    openai_stream,
    usage,
)

GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")
ON = Settings(shadow_model="kimi", shadow_rate=0.25, shadow_daily_usd=1.0)


# --- which answers are tried --------------------------------------------------------------


def test_an_answer_is_sampled_when_the_draw_falls_within_the_rate() -> None:
    asked = chat_request(GLM)
    assert shadow.sample(ON, asked, 0.0) is KIMI
    assert shadow.sample(ON, asked, 0.2499) is KIMI
    assert shadow.sample(ON, asked, 0.25) is None
    assert shadow.sample(ON, asked, 0.99) is None
    every = Settings(shadow_model="kimi", shadow_rate=1.0, shadow_daily_usd=1.0)
    assert shadow.sample(every, asked, 0.999999) is KIMI


def test_nothing_is_sampled_without_trials() -> None:
    asked = chat_request(GLM)
    assert shadow.sample(Settings(), asked, 0.0) is None
    assert shadow.sample(Settings(shadow_model="kimi"), asked, 0.0) is None  # rate 0


def test_the_challenger_is_not_tried_against_itself_nor_on_what_it_cannot_read() -> None:
    assert shadow.sample(ON, chat_request(KIMI), 0.0) is None
    on_llama = Settings(shadow_model="llama", shadow_rate=1.0, shadow_daily_usd=1.0)
    picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    with_image = ChatRequest(
        messages=(Message("user", "what is this?", parts=(picture,)),),
        model=model("glm-5.3-flash"),
        temperature=None,
        max_tokens=64,
        reasoning=None,
    )
    assert shadow.sample(on_llama, with_image, 0.0) is None  # Llama sees no images
    assert shadow.sample(ON, with_image, 0.0) is KIMI  # Kimi does


# --- what a trial may cost ------------------------------------------------------------


def test_the_worst_case_is_the_challenger_s_prompt_and_output_and_the_judge_s() -> None:
    worst = shadow.worst_case(KIMI, LLAMA, prompt_tokens=1_000, max_tokens=1_024)
    # Kimi: 1,500 prompt tokens at $0.95/M, 1,024 out at $4.00/M.
    assert worst.challenger == pytest.approx((1_500 * 0.95 + 1_024 * 4.00) / 1e6)
    # Llama judging: 20,000 in at $0.15/M, 16 out at $0.29/M.
    assert worst.judge == pytest.approx((20_000 * 0.15 + 16 * 0.29) / 1e6)
    assert worst.usd == pytest.approx(worst.challenger + worst.judge)
    # A fraction of a prompt token counts as a whole one.
    odd = shadow.worst_case(KIMI, LLAMA, prompt_tokens=1_001, max_tokens=1)
    assert odd.challenger == pytest.approx((1_502 * 0.95 + 4.00) / 1e6)
    # Never below what an answer within those bounds is counted at
    # (``cost_usd``, rounded to the 1e-8 dollar), float noise or not.
    for tokens in range(0, 30_000, 7):
        worst = shadow.worst_case(GLM, LLAMA, prompt_tokens=tokens, max_tokens=tokens)
        most = {
            "prompt_tokens": -(-tokens * 3 // 2),
            "completion_tokens": tokens,
            "total_tokens": 0,
        }
        counted = cost_usd(GLM, most)
        assert counted is not None
        assert counted <= worst.challenger <= counted + 1e-8


def test_a_trial_fits_in_what_waituntil_allows_after_a_response() -> None:
    assert shadow.WAIT_UNTIL_S == 30.0  # Cloudflare's limit
    assert shadow.TRIAL_DEADLINE_S + shadow.SETTLE_S <= shadow.WAIT_UNTIL_S
    assert 0 < shadow.JUDGE_S < shadow.TRIAL_DEADLINE_S


# --- one trial, through app.handle --------------------------------------------------------

KEY = "tok-0123456789abcdef"
BOSS = "boss-0123456789abcdef"
QUESTION = "What is the capital of France?"
ASKED = [{"role": "user", "content": QUESTION}]
PRIMARY_TEXT = "Paris, on the Seine."
CHALLENGER_TEXT = "The capital of France is Paris."
VARS = {
    "API_KEYS": f"ann:{KEY},boss:{BOSS}",
    "ADMINS": "boss",
    "SHADOW_MODEL": "kimi",
    "SHADOW_RATE": "1",
    "SHADOW_DAILY_USD": "1",
    "SHADOW_JUDGE": "llama",
    "CACHE_MODE": "off",
}


# What the scripted challenger and judge cost.
CHALLENGER_USD = (1_200 * 0.95 + 50 * 4.00) / 1e6
JUDGE_USD = (300 * 0.15 + 1 * 0.29) / 1e6


def script(challenger: Any = None, judged: Any = "A", primary: Any = None) -> FakeAi:
    """GLM answers, Kimi challenges, Llama judges; each may be replaced."""
    return FakeAi(
        {
            GLM.id: primary or openai_stream(("content", PRIMARY_TEXT), usage=usage(1_000, 100)),
            KIMI.id: challenger
            or openai_stream(("content", CHALLENGER_TEXT), usage=usage(1_200, 50)),
            LLAMA.id: native_stream(judged, usage=usage(300, 1))
            if isinstance(judged, str)
            else judged,
        }
    )


def serve(
    where: FakePlatform,
    path: str = "/chat",
    body: dict[str, Any] | None = None,
    token: str = KEY,
    method: str = "POST",
) -> tuple[int, bytes]:
    where.body = json.dumps(body or {"messages": [{"role": "user", "content": QUESTION}]}).encode()

    async def go() -> tuple[int, bytes]:
        headers = {"content-type": "application/json", "authorization": f"Bearer {token}"}
        reply = await app.handle(Incoming(method, path, "https://chat.example", headers), where)
        sink = FakeSink()
        if reply.stream is not None:
            await reply.stream(sink)
        await where.settle()
        return reply.status, reply.body or sink.body

    return asyncio.run(go())


def platform(ai: FakeAi, db: FakeDb | None = None, **more: str) -> FakePlatform:
    return FakePlatform(vars={**VARS, **more}, ai=ai, db=db or FakeDb(), kv=FakeKv())


def trial_rows(db: FakeDb) -> list[dict[str, Any]]:
    rows = db.connection.execute("SELECT * FROM shadow_trials").fetchall()
    return [dict(row) for row in rows]


def spend(db: FakeDb, user: str) -> tuple[int, float] | None:
    if not _has_table(db, "spend"):
        return None
    row = db.connection.execute("SELECT requests, usd FROM spend WHERE user = ?", (user,))
    found = row.fetchone()
    return None if found is None else (found[0], found[1])


def shadow_lines(out: str) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in out.splitlines() if line.startswith("{"))
    return [line for line in lines if "shadow" in line]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/chat", None),
        ("/v1/chat/completions", {"model": "glm", "messages": ASKED}),
        ("/v1/chat/completions", {"model": "glm", "stream": True, "messages": ASKED}),
    ],
)
def test_a_sampled_answer_is_tried_on_the_challenger_and_judged_after_the_reply(
    path: str, body: dict[str, Any] | None, capsys: pytest.CaptureFixture[str]
) -> None:
    ai, db = script(), FakeDb()
    status, reply = serve(platform(ai, db), path, body)
    assert status == 200
    assert PRIMARY_TEXT.encode() in reply
    assert CHALLENGER_TEXT.encode() not in reply  # never shown
    assert ai.models_called == [GLM.id, KIMI.id, LLAMA.id]
    # The challenger was asked the same conversation, alone (no fallback).
    challenger_messages = ai.calls[1].inputs["messages"]
    assert challenger_messages[-1] == {"role": "user", "content": QUESTION}
    assert challenger_messages == ai.calls[0].inputs["messages"]
    # The judge saw the conversation and both answers, and answered A.
    judged = ai.calls[2].inputs
    assert judged["max_tokens"] == judge.MAX_OUTPUT_TOKENS
    assert judged["temperature"] == 0.0
    [asked] = judged["messages"]
    prompt = asked["content"]
    assert f"<conversation>\nUser: {QUESTION}\n</conversation>" in prompt
    challenger_first = prompt.index(CHALLENGER_TEXT) < prompt.index(PRIMARY_TEXT)
    [row] = trial_rows(db)
    assert row["verdict"] == ("challenger" if challenger_first else "primary")
    assert (row["primary_model"], row["challenger"], row["judge"]) == (GLM.id, KIMI.id, LLAMA.id)
    assert row["primary_usd"] == pytest.approx((1_000 * 0.06 + 100 * 0.40) / 1e6)
    challenger_usd, judge_usd = CHALLENGER_USD, JUDGE_USD
    assert row["challenger_usd"] == pytest.approx(challenger_usd)
    assert row["judge_usd"] == pytest.approx(judge_usd)
    assert row["challenger_ttft_ms"] is not None
    assert row["primary_ttft_ms"] is not None
    assert (row["challenger_error"], row["judge_error"]) == (None, None)
    # No text of the conversation or the answers is kept.
    assert not any(
        text in str(value) for value in row.values() for text in ("Paris", "France", "capital")
    )
    # The reservation became the cost, on *shadow and on the account.
    assert spend(db, budget.SHADOW) == (1, pytest.approx(challenger_usd + judge_usd))
    primary_usd = row["primary_usd"]
    assert spend(db, budget.ACCOUNT) == (2, pytest.approx(primary_usd + challenger_usd + judge_usd))
    neurons = db.connection.execute(
        "SELECT neurons FROM spend WHERE user = ?", (budget.SHADOW,)
    ).fetchone()[0]
    assert neurons == pytest.approx((challenger_usd + judge_usd) * NEURONS_PER_USD)
    [line] = shadow_lines(capsys.readouterr().out)
    assert line["shadow"] == "tried"
    assert line["verdict"] == row["verdict"]
    assert line["usd"] == pytest.approx(challenger_usd + judge_usd)


def test_the_trial_asks_on_the_binding_the_client_s_leaving_does_not_abort() -> None:
    # The request's binding is aborted with the client, whose signal may
    # fire once the reply is out; the trial runs after it, on the other.
    answering, after = script(), script()
    where = platform(answering)
    where.after_reply = after
    status, _ = serve(where)
    assert status == 200
    assert answering.models_called == [GLM.id]
    assert after.models_called == [KIMI.id, LLAMA.id]


def test_the_judge_s_other_answers_are_no_verdict() -> None:
    db = FakeDb()
    serve(platform(script(judged="A, clearly"), db))
    [row] = trial_rows(db)
    assert row["verdict"] is None
    assert row["judge_error"] is None
    assert row["judge_usd"] is not None


def test_a_failing_challenger_is_recorded_as_failed_and_the_answer_is_untouched() -> None:
    db = FakeDb()
    ai = script(challenger=UpstreamBusy(detail="3040: busy", binding_code=3040))
    status, reply = serve(platform(ai, db))
    assert status == 200
    assert PRIMARY_TEXT.encode() in reply
    assert ai.models_called == [GLM.id, KIMI.id]  # no judge, no fallback
    [row] = trial_rows(db)
    assert (row["challenger_error"], row["verdict"], row["challenger_usd"]) == (
        "model_busy",
        None,
        0.0,
    )
    assert spend(db, budget.SHADOW) == (1, 0.0)  # the reservation went back whole


def test_a_challenger_broken_off_counts_at_its_worst_case() -> None:
    db = FakeDb()
    broken = [*openai_stream(("content", "The capital"), usage=None, done=False)]
    ai = script(challenger=[*broken, Fail(UpstreamInterrupted(detail="reset"))])
    serve(platform(ai, db))
    [row] = trial_rows(db)
    assert row["challenger_error"] == UpstreamInterrupted.code
    worst = shadow.worst_case(KIMI, LLAMA, 1_000, 1_024)
    assert row["challenger_usd"] == pytest.approx(worst.challenger)
    assert spend(db, budget.SHADOW) == (1, pytest.approx(worst.challenger))


def test_a_trial_past_the_cap_is_not_tried(capsys: pytest.CaptureFixture[str]) -> None:
    db = FakeDb()
    worst = shadow.worst_case(KIMI, LLAMA, 1_000, 1_024).usd
    where = platform(script(), db, SHADOW_DAILY_USD=str(worst * 0.99))
    assert serve(where)[0] == 200
    assert where.ai.models_called == [GLM.id]
    assert not _has_table(db, "shadow_trials")
    assert spend(db, budget.SHADOW) is None
    [line] = shadow_lines(capsys.readouterr().out)
    assert line["shadow"] == "over_cap"
    assert line["reserve_usd"] == pytest.approx(worst)


def test_the_cap_counts_what_earlier_trials_spent() -> None:
    db = FakeDb()
    worst = shadow.worst_case(KIMI, LLAMA, 1_000, 1_024).usd
    actual = CHALLENGER_USD + JUDGE_USD
    # Room for a reservation beside one trial's cost, not beside two.
    cap = worst + 1.5 * actual
    asked = []
    for _ in range(3):
        ai = script()
        serve(platform(ai, db, SHADOW_DAILY_USD=str(cap)))
        asked.append(len(ai.models_called))
    assert asked == [3, 3, 1]
    assert spend(db, budget.SHADOW) == (2, pytest.approx(2 * actual))


@pytest.mark.parametrize(
    ("vars", "body"),
    [
        ({}, {"model": "kimi", "messages": [{"role": "user", "content": QUESTION}]}),
        ({"SHADOW_RATE": "0"}, None),
        ({"SHADOW_MODEL": "", "SHADOW_RATE": "0"}, None),
    ],
    ids=["the-challenger-answered", "rate-0", "no-challenger"],
)
def test_no_trial(vars: dict[str, str], body: dict[str, Any] | None) -> None:
    db = FakeDb()
    ai = script()
    assert serve(platform(ai, db, **vars), body=body)[0] == 200
    assert ai.models_called in ([GLM.id], [KIMI.id])
    assert spend(db, budget.SHADOW) is None


def test_a_failed_answer_is_not_tried() -> None:
    db = FakeDb()
    busy = UpstreamBusy(detail="3040", binding_code=3040)
    ai = script(primary=busy, judged=busy)  # GLM, then its fallback Llama
    serve(platform(ai, db))
    assert KIMI.id not in ai.models_called
    assert spend(db, budget.SHADOW) is None


def _has_table(db: FakeDb, name: str) -> bool:
    found = db.connection.execute("SELECT name FROM sqlite_master WHERE name = ?", (name,))
    return found.fetchone() is not None


# --- the summary on /api/usage ----------------------------------------------------------


def usage_body(where: FakePlatform, token: str) -> dict[str, Any]:
    status, body = serve(where, "/api/usage", None, token, "GET")
    assert status == 200, body
    found: dict[str, Any] = json.loads(body)
    return found


def test_an_admin_sees_the_trials_and_a_user_does_not() -> None:
    db = FakeDb()
    serve(platform(script(), db))
    boss = usage_body(platform(script(), db), BOSS)["shadow"]
    assert boss["challenger_model"] == KIMI.id
    assert boss["judge_model"] == LLAMA.id
    assert (boss["trials"], boss["failed"], boss["wins"] + boss["losses"]) == (1, 0, 1)
    assert boss["today"]["cap_usd"] == 1.0
    assert boss["today"]["spent_usd"] == pytest.approx(CHALLENGER_USD + JUDGE_USD)
    assert boss["challenger"]["usd"] == pytest.approx(CHALLENGER_USD)
    assert usage_body(platform(script(), db), KEY)["shadow"] is None
    # Without a challenger, nobody gets a summary.
    assert (
        usage_body(platform(script(), db, SHADOW_MODEL="", SHADOW_RATE="0"), BOSS)["shadow"] is None
    )


def test_an_answer_s_pace_is_its_output_tokens_from_first_words_to_end() -> None:
    from edgechat.answer.framing import Outcome

    paced = Outcome(usage=usage(10, 50), ttft_ms=500.0, ended_ms=2_500.0)
    assert paced.tokens_per_s() == 25.0
    assert Outcome(usage=usage(10, 50), ttft_ms=500.0, ended_ms=500.0).tokens_per_s() is None
    assert Outcome(usage=None, ttft_ms=500.0, ended_ms=900.0).tokens_per_s() is None


def test_an_answer_without_text_is_not_tried() -> None:
    # Thinking alone (or tool calls alone): nothing for the judge to compare.
    db = FakeDb()
    ai = script(primary=openai_stream(("reasoning", "Hmm."), usage=usage(1_000, 3)))
    assert serve(platform(ai, db))[0] == 200
    assert ai.models_called == [GLM.id]
    assert spend(db, budget.SHADOW) is None
