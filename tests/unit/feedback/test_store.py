"""Votes and ratings in the project's migrations on CPython's SQLite (D1
is SQLite): the body rules, what a vote counts (each finished answer, each
pair it orders), a rating replaced rather than added, the list's pages,
and everything of a user's erased with its counts."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from edgechat.answer.framing import Outcome
from edgechat.core.errors import AlreadyVoted, AnswerUnfinished, BadRequest, NotFound
from edgechat.feedback import comparisons, store
from edgechat.feedback.comparisons import Asked
from edgechat.feedback.store import Rating, Vote, parse
from tests.unit.fakes import FakeDb, model, usage

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"
GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")
NOW = 1_795_000_000.0
ANNS = "WHERE user = 'ann'"
BOARDS = ("board_votes", "board_pairs", "board_models")


def run[T](work: Any) -> T:
    return asyncio.run(work)  # type: ignore[no-any-return]


@pytest.fixture
def db() -> FakeDb:
    made = FakeDb()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        made.connection.executescript(path.read_text())
    return made


def comparison(db: FakeDb, user: str, *ends: bool | None, blind: bool = False) -> str:
    """A comparison of GLM, Kimi (and Llama), each slot ended as ``ends``
    says: True done, False failed, None not asked."""
    models = (GLM, KIMI, LLAMA)[: len(ends)]
    made = run(comparisons.create(db, user, Asked(models, blind), 1000, answering="r"))
    cid: str = made["id"]
    for slot, done in enumerate(ends):
        if done is None:
            db.connection.execute(
                "UPDATE comparison_slots SET state = 'open' WHERE comparison = ? AND slot = ?",
                (cid, slot),
            )
            continue
        outcome = Outcome(model=models[slot], usage=usage(10, 20), ttft_ms=100.0)
        outcome.ended_ms = 1100.0
        end = comparisons.ended(outcome) if done else comparisons.Ended(False, error="model_busy")
        run(comparisons.record(db, user, cid, slot, "r", end, NOW))
    return cid


def rows(db: FakeDb, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in db.connection.execute(sql)]


def test_a_vote_and_a_rating_are_told_apart_by_their_fields() -> None:
    assert parse({"comparison": "Q" * 24, "choice": 2}, 500) == Vote("Q" * 24, "2")
    assert parse({"comparison": "Q" * 24, "choice": "both_bad"}, 500) == Vote("Q" * 24, "both_bad")
    rating = parse(
        {"conversation": "c1", "node": "n.1", "rating": "down", "model": "kimi", "tags": ["slow"]},
        500,
    )
    assert rating == Rating("c1", "n.1", "down", KIMI.id, ("slow",), None)
    assert isinstance(rating, Rating)
    assert rating.id == "c1/n.1"


@pytest.mark.parametrize(
    "body",
    [
        {"comparison": "Q" * 24, "choice": 3},
        {"comparison": "Q" * 24, "choice": True},
        {"comparison": "Q" * 24, "choice": "0"},
        {"comparison": "Q" * 24},
        {"conversation": "c1", "node": "n1"},
        {"conversation": "c1", "node": "n1", "rating": "up", "tags": ["slow", "slow"]},
        {"conversation": "c1", "node": "n1", "rating": "up", "tags": "slow"},
        {"conversation": "c1", "node": "n1", "rating": "up", "text": "x" * 11},
        {"conversation": "", "node": "n1", "rating": "up"},
    ],
)
def test_a_malformed_body_is_refused(body: dict[str, Any]) -> None:
    with pytest.raises(BadRequest):
        parse(body, 10)


def test_a_three_way_vote_counts_each_answer_and_the_pairs_it_orders(db: FakeDb) -> None:
    cid = comparison(db, "ann", True, True, True)
    voted = run(store.vote(db, "ann", Vote(cid, "1"), NOW, "v1"))
    assert voted["comparison"]["vote"] == 1
    assert rows(
        db, f"SELECT model, votes, wins, losses, ties FROM board_votes {ANNS} ORDER BY model"
    ) == [
        (LLAMA.id, 1, 0, 1, 0),
        (KIMI.id, 1, 1, 0, 0),
        (GLM.id, 1, 0, 1, 0),
    ]
    # Kimi over each other; GLM and Llama were not ordered between themselves.
    assert rows(db, f"SELECT a, b, a_wins, b_wins, ties FROM board_pairs {ANNS} ORDER BY a, b") == [
        (LLAMA.id, KIMI.id, 0, 1, 0),
        (KIMI.id, GLM.id, 1, 0, 0),
    ]


def test_a_tie_and_both_bad_tie_every_pair_of_the_finished_answers(db: FakeDb) -> None:
    tie = comparison(db, "ann", True, False, True)
    run(store.vote(db, "ann", Vote(tie, "tie"), NOW, "v1"))
    bad = comparison(db, "ann", True, True, blind=True)
    run(store.vote(db, "ann", Vote(bad, "both_bad"), NOW, "v2"))
    assert rows(
        db, f"SELECT blind, a, b, a_wins, b_wins, ties FROM board_pairs {ANNS} ORDER BY blind"
    ) == [
        (0, LLAMA.id, GLM.id, 0, 0, 1),
        (1, KIMI.id, GLM.id, 0, 0, 1),
    ]
    assert rows(
        db, f"SELECT blind, model, ties, both_bad FROM board_votes {ANNS} ORDER BY blind, model"
    ) == [
        (0, LLAMA.id, 1, 0),
        (0, GLM.id, 1, 0),
        (1, KIMI.id, 0, 1),
        (1, GLM.id, 0, 1),
    ]


def test_a_refused_vote_says_why_and_counts_nothing(db: FakeDb) -> None:
    cid = comparison(db, "ann", True, False, None)
    with pytest.raises(NotFound):
        run(store.vote(db, "bob", Vote(cid, "0"), NOW, "v1"))
    with pytest.raises(AnswerUnfinished):  # one finished answer is no choice
        run(store.vote(db, "ann", Vote(cid, "0"), NOW, "v1"))
    with pytest.raises(BadRequest):
        run(store.vote(db, "ann", Vote(comparison(db, "ann", True, True), "2"), NOW, "v1"))
    assert rows(db, "SELECT COUNT(*) FROM board_votes") == [(0,)]  # the account's neither
    assert rows(db, "SELECT COUNT(*) FROM feedback") == [(0,)]
    done = comparison(db, "ann", True, True)
    run(store.vote(db, "ann", Vote(done, "0"), NOW, "v2"))
    with pytest.raises(AlreadyVoted):
        run(store.vote(db, "ann", Vote(done, "1"), NOW, "v3"))
    assert rows(db, f"SELECT SUM(votes), SUM(wins) FROM board_votes {ANNS}") == [(2, 1)]
    # The account's rows say the same: Ann is everyone here.
    assert rows(db, "SELECT SUM(votes), SUM(wins) FROM board_votes WHERE user = '*'") == [(2, 1)]


def test_an_answer_still_under_way_asks_the_voter_to_retry_in_a_moment(db: FakeDb) -> None:
    made = run(comparisons.create(db, "ann", Asked((GLM, KIMI)), 1000, answering="r"))
    with pytest.raises(AnswerUnfinished) as refused:
        run(store.vote(db, "ann", Vote(made["id"], "0"), NOW, "v1"))
    assert refused.value.retry_after == 1


def test_a_rating_replaces_the_answers_earlier_one_and_moves_its_count(db: FakeDb) -> None:
    up = Rating("c1", "n1", "up", GLM.id)
    item, new = run(store.rate(db, "ann", up, NOW, "r1"))
    assert new
    assert item["seq"] == 1
    item, new = run(
        store.rate(
            db, "ann", Rating("c1", "n1", "down", GLM.id, ("slow",), "Slow."), NOW + 60, "r2"
        )
    )
    assert not new
    assert (item["seq"], item["created"], item["updated"]) == (
        2,
        int(NOW * 1000),
        int(NOW * 1000) + 60_000,
    )
    assert rows(db, f"SELECT up, down FROM board_models {ANNS}") == [(0, 1)]
    run(store.rate(db, "ann", Rating("c1", "n1", "down", None), NOW, "r3"))  # no model: not counted
    assert rows(db, f"SELECT up, down FROM board_models {ANNS}") == [(0, 0)]
    run(store.rate(db, "bob", up, NOW, "r4"))
    assert rows(db, "SELECT user, up, down FROM board_models ORDER BY user") == [
        ("*", 1, 0),
        ("ann", 0, 0),
        ("bob", 1, 0),
    ]


def test_the_list_pages_newest_first_and_syncs_since_a_seq(db: FakeDb) -> None:
    for k in range(5):
        run(store.rate(db, "ann", Rating("c1", f"n{k}", "up"), NOW, f"r{k}"))
    run(store.rate(db, "ann", Rating("c2", "n0", "down"), NOW, "r5"))
    run(store.rate(db, "bob", Rating("c1", "n0", "down"), NOW, "r6"))
    first = run(store.list_page(db, "ann", {"limit": "4"}))
    assert [f["seq"] for f in first["feedback"]] == [6, 5, 4, 3]
    assert (first["seq"], first["next"]) == (6, 3)
    rest = run(store.list_page(db, "ann", {"limit": "4", "before": "3"}))
    assert [f["seq"] for f in rest["feedback"]] == [2, 1]
    assert rest["next"] is None
    since = run(store.list_page(db, "ann", {"since": "4"}))
    assert [f["node"] for f in since["feedback"]] == ["n0", "n4"]
    c2 = run(store.list_page(db, "ann", {"conversation": "c2"}))
    assert [(f["conversation"], f["rating"]) for f in c2["feedback"]] == [("c2", "down")]
    with pytest.raises(BadRequest):
        run(store.list_page(db, "ann", {"conversation": "a b"}))
    with pytest.raises(BadRequest):
        run(store.list_page(db, "ann", {"sort": "x"}))


def test_erase_takes_everything_of_the_users_and_only_theirs(db: FakeDb) -> None:
    for user in ("ann", "bob"):
        cid = comparison(db, user, True, True)
        run(store.vote(db, user, Vote(cid, "0"), NOW, f"v-{user}"))
        run(store.rate(db, user, Rating("c1", "n1", "up", GLM.id), NOW, f"r-{user}"))
    account = {t: rows(db, f"SELECT * FROM {t} WHERE user = 'bob'") for t in BOARDS}
    run(store.erase(db, "ann"))
    for table in ("comparisons", "feedback"):
        assert rows(db, f"SELECT DISTINCT user FROM {table}") == [("bob",)], table
    for table in BOARDS:
        assert rows(db, f"SELECT DISTINCT user FROM {table} ORDER BY user") == [("*",), ("bob",)]
        # The account's counts are Bob's alone, as if Ann had never voted.
        mine = [row[1:] for row in account[table]]
        assert [row[1:] for row in rows(db, f"SELECT * FROM {table} WHERE user = '*'")] == mine
    assert rows(db, "SELECT COUNT(*) FROM comparison_slots") == [(2,)]
    kept = run(store.export(db, "bob"))
    assert [f["kind"] for f in kept["feedback"]] == ["vote", "rating"]
    assert [s["model"] for s in kept["comparisons"][0]["slots"]] == [GLM.id, KIMI.id]
    assert run(store.export(db, "ann")) == {"feedback": [], "comparisons": []}
