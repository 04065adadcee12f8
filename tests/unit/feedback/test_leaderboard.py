"""The leaderboard from its counts: blind and open votes apart, the 👍
share, dollars per 1,000 answers, the order; and its queries, one user's or
everyone's (the account's rows), on the migrations: the medians of the
latest answers taken in SQL, their sample bounded and read from an index
alone."""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path

import pytest

from edgechat.feedback import leaderboard
from edgechat.feedback.bradley_terry import Pair, fit
from tests.unit.fakes import FakeDb, model

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"
GLM, KIMI, LLAMA = model("glm").id, model("kimi").id, model("llama").id


def migrated() -> FakeDb:
    db = FakeDb()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        db.connection.executescript(path.read_text())
    return db


def test_the_board_counts_blind_and_open_apart_and_sums_each_model() -> None:
    votes = [
        {"blind": 1, "model": GLM, "votes": 3, "wins": 2, "losses": 1, "ties": 0, "both_bad": 0},
        {"blind": 1, "model": KIMI, "votes": 3, "wins": 1, "losses": 2, "ties": 0, "both_bad": 0},
        {"blind": 0, "model": KIMI, "votes": 1, "wins": 0, "losses": 0, "ties": 0, "both_bad": 1},
        {"blind": 0, "model": LLAMA, "votes": 1, "wins": 0, "losses": 0, "ties": 0, "both_bad": 1},
    ]
    pairs = [
        {"blind": 1, "a": KIMI, "b": GLM, "a_wins": 1, "b_wins": 2, "ties": 0},
        {"blind": 0, "a": LLAMA, "b": KIMI, "a_wins": 0, "b_wins": 0, "ties": 1},
    ]
    models = [
        {
            "model": GLM,
            "answers": 3,
            "failed": 1,
            "priced": 2,
            "cost_usd": 0.004,
            "up": 3,
            "down": 1,
        },
        {
            "model": KIMI,
            "answers": 4,
            "failed": 0,
            "priced": 0,
            "cost_usd": 0.0,
            "up": 0,
            "down": 0,
        },
    ]
    speeds = {GLM: {"ttft_ms": 400.0, "tokens_per_s": 50.0}}
    board = leaderboard.assemble(votes, pairs, models, speeds)
    assert [m["model"] for m in board["models"]] == [GLM, KIMI, LLAMA]
    glm, kimi, llama = board["models"]
    blind = fit([Pair(KIMI, GLM, 1, 2)])
    assert glm["blind"] == {
        "votes": 3,
        "wins": 2,
        "losses": 1,
        "ties": 0,
        "both_bad": 0,
        "rating": blind[GLM].rating,
        "rating_low": blind[GLM].low,
        "rating_high": blind[GLM].high,
    }
    assert glm["open"]["votes"] == 0
    assert glm["open"]["rating"] is None
    assert kimi["open"]["both_bad"] == 1
    assert kimi["open"]["rating"] == llama["open"]["rating"] == 1000.0
    assert llama["blind"]["rating"] is None
    assert (glm["up"], glm["down"], glm["up_share"]) == (3, 1, 0.75)
    assert kimi["up_share"] is None
    assert glm["usd_per_1000"] == pytest.approx(2.0)
    assert kimi["usd_per_1000"] is None
    assert glm["ttft_ms"] == 400.0
    assert glm["tokens_per_s"] == 50.0
    assert kimi["ttft_ms"] is None
    assert (glm["answers"], glm["failed"]) == (3, 1)
    assert llama["answers"] == 0
    assert glm["label"] == model("glm").label
    assert board["method"]["name"] == "bradley_terry"


def test_the_queries_read_one_users_counts_or_the_accounts_from_the_first_day() -> None:
    db = migrated()
    insert = "INSERT INTO board_votes VALUES (?, ?, 0, ?, 1, 1, 0, 0, 0)"
    for user, day in (("ann", "2026-12-01"), ("ann", "2026-12-07"), ("*", "2026-12-07")):
        db.connection.execute(insert, (user, day, GLM))
    ann = asyncio.run(leaderboard.board(db, "2026-12-02", "ann"))
    assert ann["models"][0]["open"]["wins"] == 1
    everyone = asyncio.run(leaderboard.board(db, "2026-12-02", None))
    assert everyone["models"][0]["open"]["wins"] == 1
    longer = asyncio.run(leaderboard.board(db, "2026-11-01", "ann"))
    assert longer["models"][0]["open"]["wins"] == 2


def test_the_medians_are_the_latest_answers_in_the_span_read_from_an_index() -> None:
    db = migrated()
    day_ms = 1_796_860_800_000  # 2026-12-10
    rows = [
        (f"c{k}", 0, "ann" if k % 2 else "bob", GLM, "done", day_ms + k, float(k), 10.0)
        for k in range(leaderboard.SAMPLE + 500)
    ]
    rows.append(("old", 0, "ann", GLM, "done", day_ms - 86_400_000, 1e9, 1.0))
    rows.append(("failed", 0, "ann", GLM, "failed", day_ms, None, None))
    db.connection.executemany(
        "INSERT INTO comparison_slots (comparison, slot, user, model, state, finished, ttft_ms, "
        "tokens_per_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    everyone = asyncio.run(leaderboard.board(db, "2026-12-10", None))["models"]
    newest = sorted(range(leaderboard.SAMPLE + 500), reverse=True)[: leaderboard.SAMPLE]
    assert everyone[0]["ttft_ms"] == statistics.median_low(newest)
    assert everyone[0]["tokens_per_s"] == 10.0
    anns = asyncio.run(leaderboard.board(db, "2026-12-10", "ann"))["models"]
    mine = [k for k in range(leaderboard.SAMPLE + 500) if k % 2][-leaderboard.SAMPLE :]
    assert anns[0]["ttft_ms"] == statistics.median_low(mine)
    # A model without a finished answer in the span has no median.
    llama = asyncio.run(leaderboard.board(db, "2026-12-11", None))["models"]
    assert llama == []
    # Every speed query reads its index alone (covering): no table row.
    for whose in ("ann", None):
        for statement, params in leaderboard.statements("2026-12-10", whose)[3:]:
            bound = {str(k): v for k, v in enumerate(params, 1)}
            plan = db.connection.execute("EXPLAIN QUERY PLAN " + statement, bound).fetchall()
            used = " ".join(str(tuple(row)) for row in plan)
            index = "slots_done_by_user" if whose else "slots_done_by_model"
            assert f"COVERING INDEX {index}" in used, used
