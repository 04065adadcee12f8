"""Sending spend alerts: after the answer that crossed a threshold, and
from the cron run, with retries.

After an answer (``after_answer``, in ``waitUntil`` once its spend is
counted): the thresholds it crossed are claimed (``ledger.claim``) and each
claimed alert gets a round of ``QUICK_ATTEMPTS`` POSTs, ``QUICK_WAITS_S``
apart, each bounded by ``ATTEMPT_TIMEOUT_S``. The worst round (three 5 s
POSTs and 1 s + 2 s of waits: 18 s; the alerts of one answer go at once),
plus the D1 writes, stays within the 30 s ``waitUntil`` has after the
response
(https://developers.cloudflare.com/workers/runtime-apis/context/#waituntil:
"waitUntil has a 30-second time limit"; what is unfinished is cancelled,
and a cancelled sender's claim is left ``pending`` for the cron run).

The cron run (``sweep``, hourly): every threshold reached today or
yesterday that has no alert yet (a claim an answer could not make) gets
the same round; every alert that is due (``failed`` with its next attempt
passed, or ``pending`` past its hold) gets one more POST. A failed round's
next attempt waits ``retry_delay``: 15 min after the first round, doubling,
until ``MAX_ATTEMPTS`` in all; then the alert stays ``failed``.

A 2xx is delivered; any other status, a timeout or a network failure is a
failed attempt. Nothing here raises into a request: failures are logged
(never the webhook, which is a credential) and left to the cron run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping

from edgechat.alerts import ledger, payloads
from edgechat.alerts.ledger import Held, Outcome
from edgechat.alerts.rules import Policy, policy_of, reached
from edgechat.config.settings import Settings
from edgechat.core.ports import Database, DatabaseError, Outbound, OutboundError
from edgechat.users import budget
from edgechat.users.budget import Spend
from edgechat.users.usage import day_of

__all__ = [
    "ATTEMPT_TIMEOUT_S",
    "MAX_ATTEMPTS",
    "MAX_PER_RUN",
    "QUICK_ATTEMPTS",
    "QUICK_WAITS_S",
    "after_answer",
    "retry_delay",
    "sweep",
]

Sleep = Callable[[float], Awaitable[None]]
# The wall clock, epoch seconds (``Cooling.wall``: a local run's DEV_CLOCK moves it).
Clock = Callable[[], float]

# One round: this many POSTs, these waits between them, each POST bounded.
QUICK_ATTEMPTS = 3
QUICK_WAITS_S = (1.0, 2.0)
ATTEMPT_TIMEOUT_S = 5.0
# Attempts in all (the first round's included) before an alert is given up.
MAX_ATTEMPTS = 8
# The first retry waits this long after the first round failed; each next one twice as long.
FIRST_RETRY_S = 15 * 60.0
# Alerts one cron run sends at most (Workers Free allows a run 50
# subrequests: a round of 3 POSTs each, and the D1 calls).
MAX_PER_RUN = 12


def retry_delay(attempts: int) -> float | None:
    """Seconds until the next attempt after ``attempts`` failed in all;
    None once ``MAX_ATTEMPTS`` were made. With the first round's 3: 15 min,
    30 min, 1 h, 2 h, 4 h (the hourly cron run takes each at its first run
    after it)."""
    if attempts >= MAX_ATTEMPTS:
        return None
    return FIRST_RETRY_S * 2.0 ** max(0, attempts - QUICK_ATTEMPTS)


async def counted(
    db: Database,
    outbound: Outbound,
    settings: Settings,
    day: str,
    user: str,
    spend: Spend,
    clock: Clock,
    request_id: str,
    *,
    reserved: Spend | None = None,
) -> None:
    """Adds an answer's spend to its user's and the account's day
    (``budget.count``; ``reserved``: a reservation it settles), then sends
    the alerts that spend crossed. Runs after the reply; never raises."""
    totals = await budget.count(db, day, user, spend, request_id, reserved=reserved)
    policy = policy_of(settings)
    if totals is not None and policy is not None:
        await after_answer(db, outbound, policy, day, totals, spend, clock, request_id)


async def after_answer(
    db: Database,
    outbound: Outbound,
    policy: Policy,
    day: str,
    totals: Mapping[str, Spend],
    added: Spend,
    clock: Clock,
    request_id: str,
    sleep: Sleep = asyncio.sleep,
) -> None:
    """The alerts an answer's spend (``added`` to each of ``totals``, the
    rows' totals after it) crossed, each claimed and sent once. Runs after
    the reply; never raises."""
    try:
        crossed = reached(policy, day, totals, added)
        if not crossed:
            return
        held = await ledger.claim(db, crossed, clock())
        outcomes = await asyncio.gather(
            *(_round(outbound, policy, h, QUICK_ATTEMPTS, sleep, clock) for h in held)
        )
        await ledger.settle(db, outcomes)
        if outcomes:
            _log({"request_id": request_id, "event": "alerts", "alerts": _summary(outcomes)})
    except Exception as exc:
        # After the reply: nothing is left to fail but this line.
        _log({"request_id": request_id, "event": "alerts", "alert_error": _error(exc)})


async def sweep(
    db: Database,
    outbound: Outbound,
    policy: Policy,
    clock: Clock,
    sleep: Sleep = asyncio.sleep,
) -> dict[str, object]:
    """The cron run's alerts: those reached without one yet, and those due
    again. Returns what it did, for the run's log line; raises
    ``DatabaseError``."""
    now = clock()
    today, yesterday = day_of(now), day_of(now - 86_400)
    found = await budget.spent_on(db, yesterday, today)
    have = await ledger.existing(db, yesterday, today)
    missing = [
        alert
        for day, totals in sorted(found.items())
        for alert in reached(policy, day, totals)
        if alert.key not in have
    ][:MAX_PER_RUN]
    fresh = await ledger.claim(db, missing, now)
    due = await ledger.take_due(db, now, MAX_PER_RUN - len(fresh))
    outcomes = await asyncio.gather(
        *(_round(outbound, policy, h, QUICK_ATTEMPTS, sleep, clock) for h in fresh),
        *(_round(outbound, policy, h, 1, sleep, clock) for h in due),
    )
    await ledger.settle(db, outcomes, purge_before=day_of(now - ledger.KEEP_DAYS * 86_400))
    return {"claimed": len(fresh), "retried": len(due), "alerts": _summary(outcomes)}


async def _round(
    outbound: Outbound, policy: Policy, held: Held, attempts: int, sleep: Sleep, clock: Clock
) -> Outcome:
    """Up to ``attempts`` POSTs of ``held``'s alert, until one is delivered."""
    body = payloads.body(held.alert, policy.format)
    error = None
    made = 0
    for made in range(1, attempts + 1):
        if made > 1:
            await sleep(QUICK_WAITS_S[min(made - 2, len(QUICK_WAITS_S) - 1)])
        try:
            status = await outbound.post(policy.webhook, payloads.HEADERS, body, ATTEMPT_TIMEOUT_S)
        except OutboundError as exc:
            error = f"no answer: {exc}"
            continue
        if 200 <= status < 300:
            return Outcome(held, "sent", held.attempts + made, None, None, clock())
        error = f"HTTP {status}"
    total, now = held.attempts + made, clock()
    delay = retry_delay(total)
    return Outcome(held, "failed", total, None if delay is None else now + delay, error, now)


def _summary(outcomes: list[Outcome]) -> list[dict[str, object]]:
    """Each alert's outcome for the log: whose, which threshold, how it went."""
    return [
        {
            "kind": o.held.alert.subject.kind,
            "user": o.held.alert.subject.user,
            "unit": o.held.alert.subject.unit,
            "threshold": o.held.alert.threshold,
            "state": o.state,
            "attempts": o.attempts,
            **({"error": o.error} if o.error else {}),
        }
        for o in outcomes
    ]


def _error(exc: Exception) -> str:
    # A database error's detail is D1's own text; any other is a bug, named by its type.
    return f"{exc}" if isinstance(exc, DatabaseError) else type(exc).__name__


def _log(record: dict[str, object]) -> None:
    print(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
