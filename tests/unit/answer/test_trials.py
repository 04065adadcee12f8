"""The shadow trials kept in D1 (``trials``), over SQLite as D1 runs it:
the rows, and their summary for ``/api/usage``."""

from __future__ import annotations

import asyncio
from dataclasses import astuple
from typing import Any

from edgechat.answer import trials
from edgechat.users import budget
from tests.unit.fakes import FakeDb

GLM, KIMI, LLAMA = (
    "@cf/zai-org/glm-4.7-flash",
    "@cf/moonshotai/kimi-k2.6",
    "@cf/meta/llama-3.1-8b-instruct-fp8",
)
DAYS = ["2026-12-01", "2026-12-02", "2026-12-03"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def trial(n: int, day: str = DAYS[-1], **more: Any) -> trials.Row:
    return trials.Row(
        day=day,
        request_id=f"req-{n}",
        primary_model=GLM,
        challenger=more.pop("challenger", KIMI),
        judge=more.pop("judge", LLAMA),
        primary_ttft_ms=100.0 * n,
        primary_tps=10.0 * n,
        primary_usd=0.001 * n,
        **{
            "challenger_ttft_ms": 200.0 * n,
            "challenger_tps": 20.0 * n,
            "challenger_usd": 0.002 * n,
            **more,
        },
    )


def summary(db: FakeDb, days: list[str] = DAYS) -> dict[str, Any]:
    found: dict[str, Any] = run(
        trials.summary(db, days, challenger=KIMI, judge=LLAMA, rate=0.1, cap_usd=0.5)
    )
    return found


def test_the_summary_counts_the_verdicts_and_takes_the_medians() -> None:
    db = FakeDb()
    for row in (
        trial(1, verdict="challenger"),
        trial(2, verdict="challenger", day=DAYS[0]),
        trial(3, verdict="primary"),
        trial(4, verdict="tie"),
        trial(5, verdict=None),  # the judge said something else
        trial(
            6,
            challenger_error="model_busy",
            challenger_ttft_ms=None,
            challenger_tps=None,
            challenger_usd=0.0,
        ),
    ):
        run(trials.record(db, row))
    run(budget.reserve(db, DAYS[-1], budget.SHADOW, budget.Spend(0.0123, 0.0), 0.5))
    found = summary(db)
    assert found == {
        "challenger_model": KIMI,
        "judge_model": LLAMA,
        "rate": 0.1,
        "trials": 6,
        "failed": 1,
        "wins": 2,
        "losses": 1,
        "ties": 1,
        "no_verdict": 1,
        # Every trial's answer; the challenger's where it answered (1 to 5).
        "primary": {"ttft_ms": 350.0, "tokens_per_s": 35.0, "usd": 0.0035},
        "challenger": {"ttft_ms": 600.0, "tokens_per_s": 60.0, "usd": 0.006},
        "today": {"day": DAYS[-1], "spent_usd": 0.0123, "cap_usd": 0.5},
        "complete": True,
    }


def test_the_summary_reads_the_days_asked_and_the_models_now_set() -> None:
    db = FakeDb()
    run(trials.record(db, trial(1, day="2026-11-30", verdict="tie")))  # before the days
    run(trials.record(db, trial(2, challenger=GLM, verdict="tie")))  # another challenger
    run(trials.record(db, trial(3, judge=GLM, verdict="tie")))  # another judge
    run(trials.record(db, trial(4, verdict="primary")))
    found = summary(db)
    assert (found["trials"], found["losses"], found["ties"]) == (1, 1, 0)
    assert summary(db, DAYS[-1:])["trials"] == 1


def test_with_no_trials_the_medians_are_null() -> None:
    found = summary(FakeDb())  # the tables are made by the read
    assert found["trials"] == 0
    assert (
        found["primary"]
        == found["challenger"]
        == {
            "ttft_ms": None,
            "tokens_per_s": None,
            "usd": None,
        }
    )
    assert found["today"] == {"day": DAYS[-1], "spent_usd": 0.0, "cap_usd": 0.5}


def test_a_row_holds_no_text_and_a_trial_is_kept_once() -> None:
    db = FakeDb()
    run(trials.record(db, trial(1, verdict="tie")))
    run(trials.record(db, trial(1, verdict="primary")))  # the same request again
    rows = db.connection.execute("SELECT * FROM shadow_trials").fetchall()
    assert len(rows) == 1
    assert rows[0]["verdict"] == "primary"
    columns = [column[1] for column in db.connection.execute("PRAGMA table_info(shadow_trials)")]
    assert not {"prompt", "messages", "answer", "content", "text"} & set(columns)


def test_past_the_most_read_the_summary_says_it_is_of_the_latest() -> None:
    db = FakeDb()
    run(trials.record(db, trial(0, day=DAYS[0], verdict="primary")))  # the oldest
    rows = [astuple(trial(n, verdict="challenger")) for n in range(1, trials.MAX_READ + 1)]
    db.connection.executemany(trials.INSERT, rows)
    found = summary(db)
    assert (found["trials"], found["complete"]) == (trials.MAX_READ, False)
    assert (found["wins"], found["losses"]) == (trials.MAX_READ, 0)  # the oldest left out
