"""Each alert claimed once and its state kept (``alerts.ledger``), over
SQLite as D1 runs it."""

from __future__ import annotations

import asyncio
import calendar
from typing import Any

from edgechat.alerts import ledger
from edgechat.alerts.ledger import Held, Outcome
from edgechat.alerts.rules import Alert, Subject
from edgechat.users.budget import ACCOUNT
from tests.unit.fakes import FakeDb

DAY = "2026-12-02"
NOON = float(calendar.timegm((2026, 12, 2, 12, 0, 0)))
ANN_50 = Alert(DAY, Subject("user", "key:ann", "usd", 1.0), 50, 0.5)
ANN_80 = Alert(DAY, Subject("user", "key:ann", "usd", 1.0), 80, 0.8)
BO_50 = Alert(DAY, Subject("user", "key:bo", "usd", 1.0), 50, 0.6)
ACCOUNT_50 = Alert(DAY, Subject("account", ACCOUNT, "neurons", 10_000), 50, 5000)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def rows(db: FakeDb) -> list[tuple[Any, ...]]:
    found = db.connection.execute(
        "SELECT user, threshold, state, attempts, next_at FROM alerts ORDER BY user, threshold"
    )
    return [tuple(row) for row in found.fetchall()]


def test_a_threshold_is_claimed_once() -> None:
    db = FakeDb()
    first = run(ledger.claim(db, [ANN_50, ANN_80], NOON))
    assert first == [Held(ANN_50, 0), Held(ANN_80, 0)]
    again = run(ledger.claim(db, [ANN_50, BO_50], NOON + 5))
    assert again == [Held(BO_50, 0)]
    assert rows(db) == [
        ("key:ann", 50, "pending", 0, NOON + ledger.LEASE_S),
        ("key:ann", 80, "pending", 0, NOON + ledger.LEASE_S),
        ("key:bo", 50, "pending", 0, NOON + 5 + ledger.LEASE_S),
    ]


def test_of_claims_made_at_once_exactly_one_wins() -> None:
    db = FakeDb()

    async def claims() -> list[list[Held]]:
        return list(await asyncio.gather(*(ledger.claim(db, [ANN_50], NOON) for _ in range(10))))

    won = run(claims())
    assert sum(len(held) for held in won) == 1


def test_due_alerts_are_taken_by_one_caller_and_held() -> None:
    db = FakeDb()
    (held,) = run(ledger.claim(db, [ANN_50], NOON))
    failed = Outcome(held, "failed", 3, NOON + 900, "HTTP 500", NOON + 10)
    run(ledger.settle(db, [failed]))
    assert run(ledger.take_due(db, NOON + 899, 10)) == []
    taken = run(ledger.take_due(db, NOON + 900, 10))
    assert taken == [Held(ANN_50, 3)]
    # Taken: held until the lease runs out, so no one else takes it meanwhile.
    assert rows(db) == [("key:ann", 50, "pending", 3, NOON + 900 + ledger.LEASE_S)]
    assert run(ledger.take_due(db, NOON + 901, 10)) == []


def test_a_pending_claim_whose_sender_vanished_is_taken_over() -> None:
    db = FakeDb()
    run(ledger.claim(db, [ANN_50, BO_50], NOON))
    assert run(ledger.take_due(db, NOON + ledger.LEASE_S - 1, 10)) == []
    assert len(run(ledger.take_due(db, NOON + ledger.LEASE_S, 1))) == 1  # at most `most`
    assert len(run(ledger.take_due(db, NOON + ledger.LEASE_S, 5))) == 1


def test_sent_and_given_up_alerts_are_never_due() -> None:
    db = FakeDb()
    ann, bo = run(ledger.claim(db, [ANN_50, BO_50], NOON))
    run(
        ledger.settle(
            db,
            [
                Outcome(ann, "sent", 1, None, None, NOON + 1),
                Outcome(bo, "failed", 8, None, "HTTP 404", NOON + 1),
            ],
        )
    )
    assert run(ledger.take_due(db, NOON + 86_400 * 2, 10)) == []


def test_a_user_reads_their_own_budget_s_alerts_and_an_admin_all() -> None:
    db = FakeDb()
    ann, _, _ = run(ledger.claim(db, [ANN_50, BO_50, ACCOUNT_50], NOON))
    run(ledger.settle(db, [Outcome(ann, "sent", 2, None, None, NOON + 3)]))
    mine = run(ledger.read(db, DAY, DAY, "key:ann"))
    assert mine == [
        {
            "day": DAY,
            "kind": "user",
            "user": "key:ann",
            "unit": "usd",
            "threshold": 50,
            "spent": 0.5,
            "limit": 1.0,
            "state": "sent",
            "attempts": 2,
            "updated_at": "2026-12-02T12:00:03Z",
            "next_attempt_at": None,
            "error": None,
        }
    ]
    everyone = run(ledger.read(db, DAY, DAY, None))
    assert [(a["kind"], a["user"], a["state"]) for a in everyone] == [
        ("account", None, "pending"),
        ("user", "key:ann", "sent"),
        ("user", "key:bo", "pending"),
    ]
    assert run(ledger.read(db, "2026-12-03", "2026-12-09", None)) == []


def test_reading_a_new_database_makes_the_table() -> None:
    assert run(ledger.read(FakeDb(), DAY, DAY, None)) == []
    assert run(ledger.existing(FakeDb(), DAY, DAY)) == set()


def test_settling_can_purge_old_days() -> None:
    db = FakeDb()
    old = Alert("2026-10-01", ANN_50.subject, 50, 0.5)
    run(ledger.claim(db, [old, ANN_50], NOON))
    run(ledger.settle(db, [], purge_before="2026-11-01"))
    assert run(ledger.existing(db, "2026-01-01", "2026-12-31")) == {ANN_50.key}
