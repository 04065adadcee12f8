"""The leaderboard from its counts: medians from the speed histograms,
blind and open votes apart, the 👍 share, dollars per 1,000 answers, the
order; and its queries, one user's or everyone's, on the migrations."""

from __future__ import annotations

import asyncio
import math
import random
import statistics
from pathlib import Path

import pytest

from edgechat.feedback import leaderboard
from edgechat.feedback.bradley_terry import Pair, fit
from edgechat.feedback.comparisons import bucket
from tests.unit.fakes import FakeDb, model

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"
GLM, KIMI, LLAMA = model("glm").id, model("kimi").id, model("llama").id


def test_a_median_from_the_histogram_is_within_2_percent() -> None:
    draw = random.Random(7)
    for _ in range(50):
        values = [math.exp(draw.uniform(2, 9)) for _ in range(draw.randint(1, 40))]
        histogram: dict[int, int] = {}
        for value in values:
            histogram[bucket(value)] = histogram.get(bucket(value), 0) + 1
        true = statistics.median_low(values)
        found = leaderboard.median(histogram)
        assert found is not None
        assert abs(found - true) / true < 0.021
    assert leaderboard.median({}) is None


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
    speed = [
        {"model": GLM, "metric": "ttft", "bucket": bucket(400.0), "n": 3},
        {"model": GLM, "metric": "tps", "bucket": bucket(50.0), "n": 2},
    ]
    board = leaderboard.assemble(votes, pairs, models, speed)
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
    assert glm["ttft_ms"] == pytest.approx(400, rel=0.021)
    assert glm["tokens_per_s"] == pytest.approx(50, rel=0.021)
    assert (glm["answers"], glm["failed"]) == (3, 1)
    assert llama["answers"] == 0
    assert glm["label"] == model("glm").label
    assert board["method"]["name"] == "bradley_terry"


def test_the_queries_read_one_users_counts_or_everyones_from_the_first_day() -> None:
    db = FakeDb()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        db.connection.executescript(path.read_text())
    insert = "INSERT INTO board_votes VALUES (?, ?, 0, ?, 1, 1, 0, 0, 0)"
    for user, day in (("ann", "2026-12-01"), ("ann", "2026-12-07"), ("bob", "2026-12-07")):
        db.connection.execute(insert, (user, day, GLM))
    ann = asyncio.run(leaderboard.board(db, "2026-12-02", "ann"))
    assert ann["models"][0]["open"]["wins"] == 1
    everyone = asyncio.run(leaderboard.board(db, "2026-12-02", None))
    assert everyone["models"][0]["open"]["wins"] == 2
    longer = asyncio.run(leaderboard.board(db, "2026-11-01", None))
    assert longer["models"][0]["open"]["wins"] == 3
