"""Who pays: each user's daily budget, and the account's daily Neurons.

Every complete answer adds what it cost at list price (``cost_usd``, and
for a Workers AI model the Neurons that is, $0.011 per 1,000) to two rows
of the ``USAGE_DB`` D1 database: the user's for the UTC day, and the
account's (user ``*``). One statement writes both rows, an atomic upsert
(``INSERT … VALUES (…), (…) ON CONFLICT DO UPDATE SET usd = usd +
excluded.usd``; a statement is one transaction in SQLite): concurrent
answers never lose a count, which KV (eventually consistent, one write a
second per key) cannot promise. The table is created by the first statement that finds it missing.

Before an answer is released its user's row and the account's are read,
**while** the model is asked (``pipeline`` starts both at once): past
``USER_DAILY_USD`` or ``USER_DAILY_NEURONS`` the request gets ``429
budget_exhausted``; past ``DAILY_NEURON_LIMIT`` no Workers AI model may
answer (the providers may), and without providers it is ``429
quota_exhausted``. Both last until 00:00 UTC.

The read sees only answers already finished, so answers running at once
can overshoot a limit: by at most what those answers cost (docs/operating/budgets.md).
A store that fails is logged and lets the request through: a D1 outage must
not stop every chat.

Shadow trials (``answer.shadow``) keep their day in the row of user
``*shadow`` (``SHADOW``): before a trial, its worst case is **reserved**
with one conditional upsert that refuses to pass ``SHADOW_DAILY_USD``
(``reserve``); after it, the reservation is taken back and what the trial
cost is counted like an answer, on ``*shadow`` and on the account
(``count`` with ``reserved``), so ``DAILY_NEURON_LIMIT`` sees it too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any

from edgechat.core.errors import BudgetExhausted, utc_iso
from edgechat.core.faults import UpstreamQuotaExhausted
from edgechat.core.models import EmbeddingModel, Model
from edgechat.core.ports import Database, DatabaseError
from edgechat.users.usage import NEURONS_PER_USD, next_midnight

__all__ = [
    "ACCOUNT",
    "SHADOW",
    "Limits",
    "Spend",
    "Verdict",
    "batch",
    "check",
    "count",
    "reserve",
    "spend_of",
    "spent",
    "spent_on",
    "spent_percent",
    "status",
]

# The account-wide row: every user's answers together.
ACCOUNT = "*"
# The shadow trials' row: what they spent today (in dollars and Neurons),
# the reservations of the trials under way included. No user id starts
# with "*" (identity: "key:", "access:", "anonymous").
SHADOW = "*shadow"

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS spend (day TEXT NOT NULL, user TEXT NOT NULL, "
    "requests INTEGER NOT NULL DEFAULT 0, usd REAL NOT NULL DEFAULT 0, "
    "neurons REAL NOT NULL DEFAULT 0, PRIMARY KEY (day, user))"
)
# The user's row and the account's, in one statement: one statement to bind
# and send per answer.
ADD = (
    "INSERT INTO spend (day, user, requests, usd, neurons) "
    "VALUES (?, ?, 1, ?, ?), (?, ?, 1, ?, ?) "
    "ON CONFLICT (day, user) DO UPDATE SET requests = requests + 1, "
    "usd = usd + excluded.usd, neurons = neurons + excluded.neurons "
    # The totals after this answer, so what it crossed is known without a read.
    "RETURNING user, usd, neurons"
)
READ = "SELECT user, usd, neurons FROM spend WHERE day = ? AND user IN (?, ?)"
# A reservation against a cap, in one statement (one transaction): the row
# is made or grown only while it stays within ?5. The SELECT's WHERE also
# guards the day's first reservation (an INSERT with no conflict), and
# keeps SQLite's upsert unambiguous after a SELECT
# (https://www.sqlite.org/lang_upsert.html, "Parsing Ambiguity"). A row
# comes back only when the reservation was made.
RESERVE = (
    "INSERT INTO spend (day, user, requests, usd, neurons) "
    "SELECT ?1, ?2, 0, ?3, ?4 WHERE ?3 <= ?5 "
    "ON CONFLICT (day, user) DO UPDATE SET usd = spend.usd + excluded.usd, "
    "neurons = spend.neurons + excluded.neurons WHERE spend.usd + excluded.usd <= ?5 "
    "RETURNING usd"
)
# A reservation taken back (the actual cost is then added by ADD).
RELEASE = (
    "UPDATE spend SET usd = max(usd - ?3, 0), neurons = max(neurons - ?4, 0) "
    "WHERE day = ?1 AND user = ?2"
)
READ_DAYS = "SELECT day, user, usd, neurons FROM spend WHERE day >= ? AND day <= ?"


@dataclass(frozen=True, slots=True)
class Limits:
    """The daily limits in effect (None: no such limit), and the named keys'
    own (``KEY_DAILY_USD``, ``KEY_DAILY_NEURONS``): ``(user id, limit)``
    pairs, a limit of None lifting the key's."""

    user_usd: float | None = None
    user_neurons: int | None = None
    account_neurons: int | None = None
    key_usd: tuple[tuple[str, float | None], ...] = ()
    key_neurons: tuple[tuple[str, int | None], ...] = ()

    def __bool__(self) -> bool:
        limits = (self.user_usd, self.user_neurons, self.account_neurons)
        keys = (limit for _, limit in (*self.key_usd, *self.key_neurons))
        return any(v is not None for v in (*limits, *keys))

    def for_user(self, user_id: str) -> Limits:
        """The limits ``user_id`` spends against: a key's own where it has them."""
        usd = next((limit for user, limit in self.key_usd if user == user_id), self.user_usd)
        neurons = next(
            (limit for user, limit in self.key_neurons if user == user_id), self.user_neurons
        )
        return Limits(usd, neurons, self.account_neurons)


@dataclass(frozen=True, slots=True)
class Spend:
    usd: float = 0.0
    neurons: float = 0.0


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the read found: the user over budget, the account over its
    Neurons; None when the limit holds."""

    user: BudgetExhausted | None = None
    account: UpstreamQuotaExhausted | None = None


def spend_of(model: Model | EmbeddingModel, cost_usd: float) -> Spend:
    """An answer's or an embedding's spend: Neurons only for Workers AI (a
    provider bills its own way; embeddings are all Workers AI's)."""
    workers_ai = isinstance(model, EmbeddingModel) or model.provider is None
    return Spend(cost_usd, cost_usd * NEURONS_PER_USD if workers_ai else 0.0)


def batch(
    db: Database, statements: list[tuple[str, list[Any]]], schema: tuple[str, ...] = (SCHEMA,)
) -> Awaitable[list[list[dict[str, Any]]]]:
    """``statements``, sent now; the tables (``schema``: the statements that
    create them, ``IF NOT EXISTS``) are created first where one is missing
    (a new database): statements less on every other request. The
    ``USAGE_DB`` tables of other modules (``alerts``) are made the same way."""
    sent = db.batch(statements)

    async def rows() -> list[list[dict[str, Any]]]:
        try:
            return await sent
        except DatabaseError as exc:
            if "no such table" not in str(exc):
                raise
        made: list[tuple[str, list[Any]]] = [(sql, []) for sql in schema]
        return (await db.batch([*made, *statements]))[len(made) :]

    return rows()


def spent(db: Database, day: str, user: str) -> Awaitable[tuple[Spend, Spend]]:
    """The user's and the account's spend on ``day``, read from now (the
    call is under way before it is awaited); the awaitable raises
    ``DatabaseError``."""
    sent = batch(db, [(READ, [day, user, ACCOUNT])])

    async def spends() -> tuple[Spend, Spend]:
        rows = (await sent)[0]
        found = {row["user"]: Spend(_number(row["usd"]), _number(row["neurons"])) for row in rows}
        return found.get(user, Spend()), found.get(ACCOUNT, Spend())

    return spends()


def spent_on(db: Database, first: str, last: str) -> Awaitable[dict[str, dict[str, Spend]]]:
    """Every row of days ``first`` to ``last``: day → user → spend (the
    cron run's alerts), read from now; the awaitable raises ``DatabaseError``."""
    sent = batch(db, [(READ_DAYS, [first, last])])

    async def days() -> dict[str, dict[str, Spend]]:
        found: dict[str, dict[str, Spend]] = {}
        for row in (await sent)[0]:
            spend = Spend(_number(row["usd"]), _number(row["neurons"]))
            found.setdefault(str(row["day"]), {})[str(row["user"])] = spend
        return found

    return days()


def status(limits: Limits, mine: Spend, day: str, now: float) -> dict[str, object]:
    """The user's day against their limits, for ``GET /api/me``."""
    return {
        "day": day,
        "usd": round(mine.usd, 8),
        "neurons": round(mine.neurons),
        "usd_limit": limits.user_usd,
        "neurons_limit": limits.user_neurons,
        "resets_at": utc_iso(next_midnight(now)),
    }


def check(
    db: Database,
    limits: Limits,
    day: str,
    user: str,
    now: float,
    known: tuple[Spend, Spend] | None = None,
) -> Awaitable[Verdict]:
    """The verdict on the user's and the account's spend today, read from
    now (I/O under way while the model is asked) unless it is ``known``
    already; raises ``DatabaseError``."""
    return _judge(spent(db, day, user) if known is None else _ready(known), limits, user, now)


async def _ready(spends: tuple[Spend, Spend]) -> tuple[Spend, Spend]:
    return spends


def spent_percent(limits: Limits, mine: Spend, account: Spend) -> float:
    """How much of the day's budget is spent, in percent: the most spent
    of the user's limits and the account's (0 where there is none)."""
    shares = [
        (mine.usd, limits.user_usd),
        (mine.neurons, limits.user_neurons),
        (account.neurons, limits.account_neurons),
    ]
    return max((100 * spent / limit for spent, limit in shares if limit), default=0.0)


async def _judge(
    read: Awaitable[tuple[Spend, Spend]], limits: Limits, user: str, now: float
) -> Verdict:
    mine, account = await read
    resets = next_midnight(now)
    verdict_user = None
    if (limits.user_usd is not None and mine.usd >= limits.user_usd) or (
        limits.user_neurons is not None and mine.neurons >= limits.user_neurons
    ):
        verdict_user = BudgetExhausted(detail=f"{user} spent ${mine.usd:.6f} today")
        _until(verdict_user, resets, now)
    verdict_account = None
    if limits.account_neurons is not None and account.neurons >= limits.account_neurons:
        verdict_account = UpstreamQuotaExhausted(
            detail=f"DAILY_NEURON_LIMIT reached: {account.neurons:.0f} Neurons today"
        )
        _until(verdict_account, resets, now)
    return Verdict(verdict_user, verdict_account)


def _until(exc: BudgetExhausted | UpstreamQuotaExhausted, resets_at: float, now: float) -> None:
    exc.resets_at = resets_at
    exc.retry_after = max(1, math.ceil(resets_at - now))


async def reserve(db: Database, day: str, user: str, spend: Spend, cap_usd: float) -> bool:
    """Adds ``spend`` to ``user``'s day if the day then stays within
    ``cap_usd``, atomically: whether it did. Answers at once cannot both
    take the last of the cap. Raises ``DatabaseError``."""
    found = await batch(db, [(RESERVE, [day, user, spend.usd, spend.neurons, cap_usd])])
    return bool(found[0])


async def count(
    db: Database,
    day: str,
    user: str,
    spend: Spend,
    request_id: str,
    *,
    reserved: Spend | None = None,
) -> dict[str, Spend] | None:
    """Adds one answer to the user's and the account's day; runs after the
    reply. ``reserved``: what ``reserve`` put on the user's day for it, taken
    back in the same transaction. Returns both rows' totals after it, by
    user id (``ACCOUNT`` for the account's); None when the store failed
    (logged)."""
    row = [spend.usd, spend.neurons]
    statements = [(ADD, [day, user, *row, day, ACCOUNT, *row])]
    if reserved is not None:
        statements.insert(0, (RELEASE, [day, user, reserved.usd, reserved.neurons]))
    try:
        totals = (await batch(db, statements))[-1]
    except DatabaseError as exc:
        # After the reply: the request's log line is out, so this one says it.
        print(json.dumps({"request_id": request_id, "budget_error": f"count: {exc}"}))
        return None
    return {str(r["user"]): Spend(_number(r["usd"]), _number(r["neurons"])) for r in totals}


def _number(value: object) -> float:
    return float(value) if isinstance(value, int | float) and value >= 0 else 0.0
