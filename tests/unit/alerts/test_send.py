"""Sending spend alerts (``alerts.send``): after the answer that crossed a
threshold, and from the cron run; once each, retried with backoff, never
failing an answer, never carrying a secret or a prompt."""

from __future__ import annotations

import asyncio
import calendar
import json
from typing import Any

import pytest

from edgechat.alerts import ledger, send
from edgechat.alerts.rules import SHADOW, Policy
from edgechat.config.settings import Settings
from edgechat.core.http import Incoming
from edgechat.core.models import find
from edgechat.core.ports import OutboundError
from edgechat.users import budget
from edgechat.users.budget import Limits, Spend
from edgechat.users.usage import day_of
from edgechat.web import app
from tests.unit.fakes import (
    FakeAi,
    FakeDb,
    FakeOutbound,
    FakePlatform,
    FakeSchedule,
    FakeSink,
    openai_stream,
    usage,
)
from tests.unit.history.test_history import migrated

GLM = find("glm")
assert GLM is not None
DAY = "2026-12-02"
NOON = float(calendar.timegm((2026, 12, 2, 12, 0, 0)))
HOOK = "https://alerts.example.com/in/s3cret-path"
ANN = Limits(user_usd=1.0)


class Clock:
    """The wall clock, moved by the test; ``sleep`` moves it too."""

    def __init__(self, now: float = NOON) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def policy(limits: Limits = ANN, shadow_usd: float | None = None) -> Policy:
    return Policy(HOOK, "json", (50, 80, 100), limits, shadow_usd)


def answer(
    db: FakeDb,
    outbound: FakeOutbound,
    clock: Clock,
    usd: float,
    *,
    user: str = "key:ann",
    rules: Policy | None = None,
) -> None:
    """One answer's count, then its alerts, as the pipeline runs them."""
    spend = Spend(usd, 0.0)
    totals = run(budget.count(db, DAY, user, spend, "r"))
    run(
        send.after_answer(
            db, outbound, rules or policy(), DAY, totals, spend, clock, "r", clock.sleep
        )
    )


def states(db: FakeDb) -> list[tuple[Any, ...]]:
    found = db.connection.execute(
        "SELECT user, unit, threshold, state, attempts, next_at, error FROM alerts "
        "ORDER BY user, unit, threshold"
    )
    return [tuple(row) for row in found.fetchall()]


def test_the_retry_schedule() -> None:
    delays = [send.retry_delay(attempts) for attempts in range(3, send.MAX_ATTEMPTS + 1)]
    assert delays == [900, 1800, 3600, 7200, 14_400, None]
    assert send.MAX_ATTEMPTS == 8


def test_a_round_fits_in_what_wait_until_allows_after_the_reply() -> None:
    # waitUntil has 30 s after the response; a round's worst case, with
    # room left for the D1 writes before and after it.
    worst = send.QUICK_ATTEMPTS * send.ATTEMPT_TIMEOUT_S + sum(send.QUICK_WAITS_S)
    assert len(send.QUICK_WAITS_S) == send.QUICK_ATTEMPTS - 1
    assert worst <= 20


def test_each_threshold_is_posted_once_by_the_answer_that_crossed_it() -> None:
    db, outbound, clock = FakeDb(), FakeOutbound(), Clock()
    for usd in (0.6, 0.1, 0.2, 0.15):  # 60%, 70%, 90%, 105%
        answer(db, outbound, clock, usd)
    assert [post.body["threshold"] for post in outbound.posts] == [50, 80, 100]
    assert {post.url for post in outbound.posts} == {HOOK}
    assert outbound.bounds == [send.ATTEMPT_TIMEOUT_S] * 3
    assert [post.body["spent"] for post in outbound.posts] == pytest.approx([0.6, 0.9, 1.05])
    assert states(db) == [
        ("key:ann", "usd", 50, "sent", 1, None, None),
        ("key:ann", "usd", 80, "sent", 1, None, None),
        ("key:ann", "usd", 100, "sent", 1, None, None),
    ]


def test_a_failing_hook_is_tried_again_within_the_round() -> None:
    db, clock = FakeDb(), Clock()
    outbound = FakeOutbound([500, OutboundError("TimeoutError")])
    answer(db, outbound, clock, 0.5)
    assert len(outbound.posts) == 3
    assert outbound.posts[0].body == outbound.posts[2].body
    assert clock.slept == [1.0, 2.0]
    assert states(db) == [("key:ann", "usd", 50, "sent", 3, None, None)]


def test_a_round_that_fails_leaves_the_alert_to_the_cron_run() -> None:
    db, clock = FakeDb(), Clock()
    outbound = FakeOutbound([503, 503, OutboundError("TypeError")])
    answer(db, outbound, clock, 0.5)
    assert states(db) == [
        ("key:ann", "usd", 50, "failed", 3, NOON + 3 + 900, "no answer: TypeError")
    ]
    # Not due yet: the cron run leaves it.
    clock.now = NOON + 600
    assert run(send.sweep(db, outbound, policy(), clock, clock.sleep))["retried"] == 0
    # Due: one more POST a run, with the delay doubling after each failure.
    clock.now = NOON + 3 + 900
    outbound = FakeOutbound([500])
    done = run(send.sweep(db, outbound, policy(), clock, clock.sleep))
    assert (done["claimed"], done["retried"], len(outbound.posts)) == (0, 1, 1)
    (row,) = states(db)
    assert row[3:] == ("failed", 4, clock.now + 1800, "HTTP 500")
    clock.now += 1800
    outbound = FakeOutbound([204])
    run(send.sweep(db, outbound, policy(), clock, clock.sleep))
    assert states(db) == [("key:ann", "usd", 50, "sent", 5, None, None)]
    assert outbound.posts[0].body["threshold"] == 50


def test_an_alert_is_given_up_after_max_attempts() -> None:
    db, clock = FakeDb(), Clock()
    answer(db, FakeOutbound([500] * 3), clock, 0.5)
    for _ in range(send.MAX_ATTEMPTS):
        clock.now += 86_400 / 2
        run(send.sweep(db, FakeOutbound([500]), policy(), clock, clock.sleep))
    (row,) = states(db)
    assert row[3:6] == ("failed", send.MAX_ATTEMPTS, None)


def test_the_cron_run_sends_what_no_answer_did_and_nothing_twice() -> None:
    db, clock = FakeDb(), Clock()
    # Spent without an alert (say, the claim failed with D1 at that moment).
    run(budget.count(db, DAY, "key:ann", Spend(0.85, 9000), "r"))
    rules = policy(Limits(user_usd=1.0, account_neurons=10_000))
    outbound = FakeOutbound()
    done = run(send.sweep(db, outbound, rules, clock, clock.sleep))
    assert done["claimed"] == 4
    assert sorted((p.body["kind"], p.body["threshold"]) for p in outbound.posts) == [
        ("account", 50),
        ("account", 80),
        ("user", 50),
        ("user", 80),
    ]
    again = FakeOutbound()
    assert run(send.sweep(db, again, rules, clock, clock.sleep))["claimed"] == 0
    assert again.posts == []
    # An answer that finds them claimed sends nothing either.
    answer(db, again, clock, 0.01, rules=rules)
    assert again.posts == []


def test_the_cron_run_also_reads_yesterday() -> None:
    db, clock = FakeDb(), Clock(NOON + 86_400)  # the next day
    run(budget.count(db, DAY, "key:ann", Spend(0.5, 0), "r"))
    outbound = FakeOutbound()
    run(send.sweep(db, outbound, policy(), clock, clock.sleep))
    assert [(p.body["day"], p.body["threshold"]) for p in outbound.posts] == [(DAY, 50)]


def test_a_cron_run_sends_at_most_max_per_run() -> None:
    db, clock = FakeDb(), Clock()
    for n in range(send.MAX_PER_RUN + 3):
        run(budget.count(db, DAY, f"key:u{n}", Spend(0.5, 0), "r"))
    outbound = FakeOutbound()
    assert run(send.sweep(db, outbound, policy(), clock, clock.sleep))["claimed"] == 12
    assert len(outbound.posts) == send.MAX_PER_RUN
    rest = FakeOutbound()
    assert run(send.sweep(db, rest, policy(), clock, clock.sleep))["claimed"] == 3


def test_the_shadow_trials_cap_alerts_like_a_budget() -> None:
    db, clock, outbound = FakeDb(), Clock(), FakeOutbound()
    rules = policy(Limits(), shadow_usd=2.0)
    # What the shadow trials' count returns: their row's total after a trial.
    run(
        send.after_answer(
            db, outbound, rules, DAY, {SHADOW: Spend(1.7, 0)}, Spend(0.8, 0), clock, "r"
        )
    )
    assert [(p.body["kind"], p.body["user"], p.body["threshold"]) for p in outbound.posts] == [
        ("shadow", None, 50),
        ("shadow", None, 80),
    ]
    db.connection.execute(budget.SCHEMA)
    db.connection.execute("INSERT INTO spend (day, user, usd) VALUES (?, ?, 2.2)", (DAY, SHADOW))
    run(send.sweep(db, outbound, rules, clock, clock.sleep))
    assert [p.body["threshold"] for p in outbound.posts] == [50, 80, 100]


def test_a_failing_store_is_logged_and_never_raised(capsys: pytest.CaptureFixture[str]) -> None:
    db, clock, outbound = FakeDb(), Clock(), FakeOutbound()
    db.fail = True
    totals = {"key:ann": Spend(0.9, 0)}
    run(send.after_answer(db, outbound, policy(), DAY, totals, Spend(0.9, 0), clock, "rq1"))
    assert outbound.posts == []
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["request_id"] == "rq1"
    assert record["alert_error"].startswith("D1_ERROR")
    with pytest.raises(Exception, match="D1_ERROR"):
        run(send.sweep(db, outbound, policy(), clock, clock.sleep))


def test_the_log_never_names_the_webhook(capsys: pytest.CaptureFixture[str]) -> None:
    db, clock = FakeDb(), Clock()
    answer(db, FakeOutbound([500, 500, 500]), clock, 0.5)
    out = capsys.readouterr().out
    assert '"state":"failed"' in out
    assert '"error":"HTTP 500"' in out
    assert "s3cret" not in out
    assert "alerts.example.com" not in out


# --- through the app: an answer's reply, then its alerts; the cron run --------------

TOKEN = "tok-ann-0123456789abcdef"
PROMPT = "my private question about zebras"
BODY = json.dumps({"messages": [{"role": "user", "content": PROMPT}]}).encode()
HEADERS = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
VARS = {
    "API_KEYS": f"ann:{TOKEN}",
    "USER_DAILY_USD": "0.002",
    "DAILY_NEURON_LIMIT": "200",
    "ALERT_WEBHOOK": HOOK,
}


def chat(db: FakeDb, outbound: FakeOutbound, **more: str) -> int:
    # 1000 + 1000 tokens of GLM: $0.00046, about 42 Neurons.
    hello = openai_stream(("content", "Hi!"), usage=usage(1000, 1000))
    where = FakePlatform(
        vars={**VARS, **more}, body=BODY, ai=FakeAi({GLM.id: hello}), db=db, outbound=outbound
    )

    async def go() -> int:
        before = len(outbound.posts)
        reply = await app.handle(Incoming("POST", "/chat", "https://chat.example", HEADERS), where)
        if reply.stream is not None:
            sink = FakeSink()
            await reply.stream(sink)
            # The reply is whole before its alerts are sent, after it.
            assert b"event: done\n" in sink.body
            assert len(outbound.posts) == before
        await where.settle()
        return reply.status

    return asyncio.run(go())


def test_answers_post_each_threshold_once_without_a_token_or_a_prompt() -> None:
    db, outbound = FakeDb(), FakeOutbound()
    statuses = [chat(db, outbound) for _ in range(5)]
    # $0.00046 each against $0.002: 23%, 46%, 69% (50), 92% (80), 115% (100);
    # 42 Neurons each against 200: 21%, 42%, 63% (50), 84% (80), 105% (100).
    assert statuses == [200] * 5
    posted = [(p.body["kind"], p.body["threshold"]) for p in outbound.posts]
    assert sorted(posted) == [
        ("account", 50),
        ("account", 80),
        ("account", 100),
        ("user", 50),
        ("user", 80),
        ("user", 100),
    ]
    for post in outbound.posts:
        raw = json.dumps(post.body)
        assert TOKEN not in raw
        assert "zebras" not in raw
        assert "Hi!" not in raw
        assert post.body["user"] in ("key:ann", None)
        assert post.headers == {"content-type": "application/json"}
    # Past 100% the user is refused; the cron run finds nothing new.
    assert chat(db, outbound) == 429
    schedule = FakeSchedule(None, usage_db=db, outbound=outbound, **VARS)
    run(app.scheduled(schedule, None, int(NOON * 1000), "17 * * * *"))
    assert len(outbound.posts) == 6


def test_an_alert_that_breaks_never_fails_the_answer(capsys: pytest.CaptureFixture[str]) -> None:
    # Worse than a failing hook (retried, above): a bug in the sending.
    db = FakeDb()
    outbound = FakeOutbound([RuntimeError("a bug")])
    assert chat(db, outbound, USER_DAILY_USD="0.0005") == 200
    assert '"alert_error":"RuntimeError"' in capsys.readouterr().out
    # The claim stays pending, for the cron run once its hold runs out.
    (row,) = db.connection.execute("SELECT state FROM alerts WHERE threshold = 50").fetchall()
    assert tuple(row) == ("pending",)


def test_without_a_webhook_nothing_is_claimed() -> None:
    db, outbound = FakeDb(), FakeOutbound()
    assert chat(db, outbound, ALERT_WEBHOOK="") == 200
    assert outbound.posts == []
    assert (
        db.connection.execute("SELECT name FROM sqlite_master WHERE name = 'alerts'").fetchall()
        == []
    )


def test_the_cron_run_logs_its_alerts(capsys: pytest.CaptureFixture[str]) -> None:
    db, outbound = FakeDb(), FakeOutbound()
    today = day_of(NOON)
    run(budget.count(db, today, "key:ann", Spend(0.0011, 0), "r"))
    schedule = FakeSchedule(None, usage_db=db, outbound=outbound, **VARS)
    run(app.scheduled(schedule, None, int(NOON * 1000), "17 * * * *"))
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert record["event"] == "scheduled"
    assert record["skipped"] == "no DB binding"
    assert record["alerts"]["claimed"] == 1
    assert [p.body["threshold"] for p in outbound.posts] == [50]
    assert "s3cret" not in json.dumps(record)


def test_a_cron_run_whose_alerts_fail_still_purges_and_fails(
    capsys: pytest.CaptureFixture[str],
) -> None:
    usage_db, history_db = FakeDb(), migrated()
    usage_db.fail = True
    schedule = FakeSchedule(history_db, usage_db=usage_db, **VARS)
    with pytest.raises(Exception, match="D1_ERROR"):
        run(app.scheduled(schedule, None, int(NOON * 1000), "17 * * * *"))
    record = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert "purged" in record
    assert record["error_detail"].startswith("D1_ERROR")
    assert ledger.LEASE_S > 30


def test_a_settled_shadow_trial_sends_the_alerts_of_the_trials_cap() -> None:
    # The one count-then-alert of answers and trials (send.counted): a trial
    # settles its reservation, and what it spent crosses SHADOW_DAILY_USD's
    # thresholds like an answer crosses a user's budget.
    settings = Settings(
        alert_webhook=HOOK,
        shadow_model="kimi",
        shadow_rate=1.0,
        shadow_daily_usd=1.0,
    )
    db, outbound, clock = FakeDb(), FakeOutbound(), Clock()
    reserved = Spend(0.7, 0.0)
    assert run(budget.reserve(db, DAY, budget.SHADOW, reserved, 1.0))
    spent = Spend(0.6, 0.0)
    run(
        send.counted(
            db, outbound, settings, DAY, budget.SHADOW, spent, clock, "rq", reserved=reserved
        )
    )
    sent = [(post.body["kind"], post.body["threshold"]) for post in outbound.posts]
    assert sent == [("shadow", 50)]
    # Without trials running, the cap is not watched.
    off = Settings(alert_webhook=HOOK, shadow_model="kimi", shadow_daily_usd=1.0)
    quiet = FakeOutbound()
    run(send.counted(FakeDb(), quiet, off, DAY, budget.SHADOW, Spend(0.9, 0), clock, "rq"))
    assert quiet.posts == []
