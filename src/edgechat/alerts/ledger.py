"""Each alert's claim and state, in the ``alerts`` table of ``USAGE_DB``.

One row per (day, subject, threshold), its primary key: whoever inserts it
sends the alert (``INSERT … ON CONFLICT DO NOTHING RETURNING``: a statement
is one transaction in SQLite, so of the answers and the cron run that find
a threshold at once exactly one gets the row back). A row is

- ``pending`` while a sender holds it: its ``next_at`` is the end of that
  hold (``LEASE_S``), after which the cron run takes it over (a sender that
  died: the isolate was evicted, or ``waitUntil``'s 30 s ran out);
- ``sent`` once the hook took it (2xx);
- ``failed`` when a round of attempts did not get through: ``next_at`` is
  when the cron run tries again, or null once it gave up.

The cron run takes due rows with one ``UPDATE … RETURNING`` (their
``next_at`` moved past the new hold), so two runs never send one alert
twice. The table is created like ``spend`` is (``budget.batch``), and rows
older than ``KEEP_DAYS`` are deleted by the cron run.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, cast

from edgechat.alerts.rules import Alert, Kind, Subject, Unit, amount
from edgechat.core.errors import utc_iso
from edgechat.core.ports import Database
from edgechat.users import budget
from edgechat.users.usage import MAX_USAGE_DAYS

__all__ = ["LEASE_S", "Held", "Outcome", "claim", "existing", "read", "settle", "take_due"]

State = Literal["pending", "sent", "failed"]

# How long a sender holds a claim before the cron run may take it over:
# well past the 30 s ``waitUntil`` gives an answer's sender, and the cron's
# own rounds.
LEASE_S = 120.0
# Days a row is kept: those ``/api/usage?days=`` may ask for, and one more.
KEEP_DAYS = MAX_USAGE_DAYS + 1

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS alerts (day TEXT NOT NULL, kind TEXT NOT NULL, "
    "user TEXT NOT NULL, unit TEXT NOT NULL, threshold INTEGER NOT NULL, "
    "spent REAL NOT NULL, cap REAL NOT NULL, state TEXT NOT NULL, "
    "attempts INTEGER NOT NULL DEFAULT 0, next_at REAL, updated_at REAL NOT NULL, "
    "error TEXT, PRIMARY KEY (day, kind, user, unit, threshold))",
    # The cron run's question, "which rows are due?", without a scan.
    "CREATE INDEX IF NOT EXISTS alerts_due ON alerts (next_at) WHERE next_at IS NOT NULL",
)

_KEY = "day = ? AND kind = ? AND user = ? AND unit = ? AND threshold = ?"
CLAIM = (
    "INSERT INTO alerts (day, kind, user, unit, threshold, spent, cap, state, attempts, "
    "next_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', 0, ?, ?) "
    "ON CONFLICT DO NOTHING RETURNING attempts"
)
TAKE_DUE = (
    "UPDATE alerts SET state = 'pending', next_at = ?1, updated_at = ?2 WHERE rowid IN "
    "(SELECT rowid FROM alerts WHERE next_at IS NOT NULL AND next_at <= ?2 "
    "ORDER BY next_at LIMIT ?3) "
    "RETURNING day, kind, user, unit, threshold, spent, cap, attempts"
)
SETTLE = (
    "UPDATE alerts SET state = ?, attempts = ?, next_at = ?, updated_at = ?, error = ? "
    f"WHERE {_KEY}"
)
EXISTING = "SELECT day, kind, user, unit, threshold FROM alerts WHERE day >= ? AND day <= ?"
PURGE = "DELETE FROM alerts WHERE day < ?"
_COLUMNS = (
    "day, kind, user, unit, threshold, spent, cap, state, attempts, next_at, updated_at, error"
)
_ORDER = "ORDER BY day, kind, user, unit, threshold"
READ_ALL = f"SELECT {_COLUMNS} FROM alerts WHERE day >= ? AND day <= ? {_ORDER}"
READ_MINE = (
    f"SELECT {_COLUMNS} FROM alerts WHERE day >= ? AND day <= ? AND kind = 'user' AND user = ? "
    f"{_ORDER}"
)


@dataclass(frozen=True, slots=True)
class Held:
    """An alert this sender holds, and the attempts made at it before."""

    alert: Alert
    attempts: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """A round of attempts at a held alert: its state after, its attempts
    in all, when the next round is due (None: none), the last failure, and
    when the round ended."""

    held: Held
    state: State
    attempts: int
    next_at: float | None
    error: str | None
    at: float


async def claim(db: Database, alerts: list[Alert], now: float) -> list[Held]:
    """The alerts this call inserted (the others were someone's already);
    raises ``DatabaseError``."""
    if not alerts:
        return []
    statements = [
        (CLAIM, [*alert.key, alert.spent, alert.subject.limit, now + LEASE_S, now])
        for alert in alerts
    ]
    results = await budget.batch(db, statements, SCHEMA)
    return [Held(alert, 0) for alert, rows in zip(alerts, results, strict=True) if rows]


async def take_due(db: Database, now: float, most: int) -> list[Held]:
    """At most ``most`` alerts whose next round is due (failed ones, and
    pending ones whose sender's hold ran out), now held by this call."""
    if most <= 0:
        return []
    rows = (await budget.batch(db, [(TAKE_DUE, [now + LEASE_S, now, most])], SCHEMA))[0]
    return [Held(_alert(row), int(row["attempts"])) for row in rows]


async def existing(db: Database, first: str, last: str) -> set[tuple[str, str, str, str, int]]:
    """The keys (``Alert.key``) of the alerts of days ``first`` to ``last``."""
    rows = (await budget.batch(db, [(EXISTING, [first, last])], SCHEMA))[0]
    return {
        (str(r["day"]), str(r["kind"]), str(r["user"]), str(r["unit"]), int(r["threshold"]))
        for r in rows
    }


async def settle(
    db: Database, outcomes: Iterable[Outcome], purge_before: str | None = None
) -> None:
    """Writes each round's outcome; with ``purge_before``, deletes the days before it."""
    statements: list[tuple[str, list[Any]]] = [
        (SETTLE, [o.state, o.attempts, o.next_at, o.at, o.error, *o.held.alert.key])
        for o in outcomes
    ]
    if purge_before is not None:
        statements.append((PURGE, [purge_before]))
    if statements:
        await budget.batch(db, statements, SCHEMA)


def read(
    db: Database, first: str, last: str, user: str | None
) -> Awaitable[list[dict[str, object]]]:
    """The alerts of days ``first`` to ``last``, as ``/api/usage`` shows
    them: everyone's (``user`` None, for an admin) or ``user``'s own
    budget's alone; read from now."""
    statement = (READ_ALL, [first, last]) if user is None else (READ_MINE, [first, last, user])
    sent = budget.batch(db, [statement], SCHEMA)

    async def shown() -> list[dict[str, object]]:
        return [_shown(row) for row in (await sent)[0]]

    return shown()


def _alert(row: dict[str, Any]) -> Alert:
    subject = Subject(
        cast(Kind, row["kind"]), str(row["user"]), cast(Unit, row["unit"]), float(row["cap"])
    )
    return Alert(str(row["day"]), subject, int(row["threshold"]), float(row["spent"]))


def _shown(row: dict[str, Any]) -> dict[str, object]:
    alert = _alert(row)
    subject = alert.subject
    next_at = row["next_at"]
    return {
        "day": alert.day,
        "kind": subject.kind,
        "user": subject.user if subject.kind == "user" else None,
        "unit": subject.unit,
        "threshold": alert.threshold,
        "spent": amount(alert.spent, subject.unit),
        "limit": amount(subject.limit, subject.unit),
        "state": row["state"],
        "attempts": int(row["attempts"]),
        "updated_at": utc_iso(float(row["updated_at"])),
        "next_attempt_at": None if next_at is None else utc_iso(float(next_at)),
        "error": row["error"],
    }
