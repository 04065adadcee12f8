"""The shadow trials kept in ``USAGE_DB`` (table ``shadow_trials``, made
by the first statement that finds it missing, like ``spend``), and their
summary for ``GET /api/usage``.

A row is one trial: the models, each answer's time to first token, pace and
cost, the challenger's failure if it failed, and the judge's verdict. It
holds no prompt and no answer text.
"""

from __future__ import annotations

import statistics
from collections.abc import Awaitable
from dataclasses import astuple, dataclass, fields
from typing import Any

from edgechat.core.ports import Database
from edgechat.users import budget

__all__ = ["MAX_READ", "SCHEMA", "Row", "record", "summary"]

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS shadow_trials (day TEXT NOT NULL, request_id TEXT NOT NULL, "
    "primary_model TEXT NOT NULL, challenger TEXT NOT NULL, judge TEXT NOT NULL, "
    "primary_ttft_ms REAL, primary_tps REAL, primary_usd REAL, "
    "challenger_ttft_ms REAL, challenger_tps REAL, challenger_usd REAL, challenger_error TEXT, "
    "verdict TEXT, judge_usd REAL, judge_error TEXT, PRIMARY KEY (day, request_id))"
)

# The summary reads at most this many trials, the latest first; the body
# says when there were more.
MAX_READ = 5_000


@dataclass(frozen=True, slots=True)
class Row:
    """One trial, as kept (its fields are the table's columns, in order).
    ``challenger_error`` is the failed challenger's error code; ``verdict``
    is ``challenger``, ``primary``, ``tie``, or None (no verdict);
    ``judge_error`` the judge's error code when its call failed."""

    day: str
    request_id: str
    primary_model: str
    challenger: str
    judge: str
    primary_ttft_ms: float | None
    primary_tps: float | None
    primary_usd: float | None
    challenger_ttft_ms: float | None = None
    challenger_tps: float | None = None
    challenger_usd: float | None = None
    challenger_error: str | None = None
    verdict: str | None = None
    judge_usd: float | None = None
    judge_error: str | None = None


_COLUMNS = [f.name for f in fields(Row)]
INSERT = (
    f"INSERT OR REPLACE INTO shadow_trials ({', '.join(_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _COLUMNS)})"
)
READ = (
    "SELECT primary_ttft_ms, primary_tps, primary_usd, challenger_ttft_ms, challenger_tps, "
    "challenger_usd, challenger_error, verdict FROM shadow_trials "
    "WHERE day >= ?1 AND day <= ?2 AND challenger = ?3 AND judge = ?4 "
    "ORDER BY day DESC LIMIT ?5"
)


def record(db: Database, row: Row) -> Awaitable[list[list[dict[str, Any]]]]:
    """Keeps ``row``, sent now; raises ``DatabaseError``."""
    return budget.batch(db, [(INSERT, list(astuple(row)))], (SCHEMA,))


async def summary(
    db: Database,
    days: list[str],
    *,
    challenger: str,
    judge: str,
    rate: float,
    cap_usd: float | None,
) -> dict[str, Any]:
    """The trials of ``days`` (oldest first) on this challenger and judge,
    and today's spend against the cap (today is the last day); raises
    ``DatabaseError``."""
    today = days[-1]
    read = budget.batch(db, [(READ, [days[0], today, challenger, judge, MAX_READ + 1])], (SCHEMA,))
    spent, _ = await budget.spent(db, today, budget.SHADOW)
    rows = (await read)[0]
    complete = len(rows) <= MAX_READ
    rows = rows[:MAX_READ]
    answered = [row for row in rows if row["challenger_error"] is None]
    verdicts = [row["verdict"] for row in answered]
    wins, losses, ties = (verdicts.count(v) for v in ("challenger", "primary", "tie"))
    return {
        "challenger_model": challenger,
        "judge_model": judge,
        "rate": rate,
        "trials": len(rows),
        "failed": len(rows) - len(answered),
        "wins": wins,
        "losses": losses,
        "ties": ties,
        "no_verdict": len(answered) - wins - losses - ties,
        "primary": _medians(rows, "primary"),
        "challenger": _medians(answered, "challenger"),
        "today": {"day": today, "spent_usd": round(spent.usd, 8), "cap_usd": cap_usd},
        "complete": complete,
    }


def _medians(rows: list[dict[str, Any]], side: str) -> dict[str, float | None]:
    """The median time to first token, pace and cost of one side's answers."""
    return {
        "ttft_ms": _median(rows, f"{side}_ttft_ms", 1),
        "tokens_per_s": _median(rows, f"{side}_tps", 1),
        "usd": _median(rows, f"{side}_usd", 8),
    }


def _median(rows: list[dict[str, Any]], column: str, digits: int) -> float | None:
    values = [row[column] for row in rows if isinstance(row[column], int | float)]
    return round(float(statistics.median(values)), digits) if values else None
