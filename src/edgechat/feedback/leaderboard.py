"""The leaderboard: per model, over the last ``days`` UTC days, its votes
(wins, losses, ties, "both bad") and its rating with an interval, blind
votes and open ones counted apart; its 👍 share; the median time to first
token and tokens per second of its comparison answers; dollars per 1,000
of them.

It reads the counts the writes keep (``board_*``, one row per user, day
and model or pair), never the votes: four grouped queries in one batch,
whose rows read grow with users, days and models, not with votes
(``bench/leaderboard.py`` measures 100,000 votes). The ratings are fitted
to the pairs' counts (``bradley_terry``); medians come from the speed
histograms (``comparisons.bucket``: within 2 %).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from edgechat.core.models import find
from edgechat.core.ports import Database
from edgechat.feedback import bradley_terry
from edgechat.feedback.bradley_terry import Pair
from edgechat.feedback.comparisons import BUCKETS_PER_E

__all__ = ["DEFAULT_DAYS", "MAX_DAYS", "METHOD", "assemble", "board", "median", "statements"]

DEFAULT_DAYS = 30
MAX_DAYS = 365

# What the ratings are, as the response names them.
METHOD: Mapping[str, Any] = {
    "name": "bradley_terry",
    "fit": "newton",
    "scale": "elo",
    "mean": bradley_terry.MEAN,
    "points_per_tenfold_odds": bradley_terry.SCALE,
    "prior_wins": bradley_terry.PRIOR_WINS,
    "prior_losses": bradley_terry.PRIOR_WINS,
    "tie": bradley_terry.TIE,
    "both_bad": "tie",
    "interval": 0.95,
}

_VOTES = (
    "SELECT blind, model, SUM(votes) AS votes, SUM(wins) AS wins, SUM(losses) AS losses, "
    "SUM(ties) AS ties, SUM(both_bad) AS both_bad FROM board_votes {where} GROUP BY blind, model"
)
_PAIRS = (
    "SELECT blind, a, b, SUM(a_wins) AS a_wins, SUM(b_wins) AS b_wins, SUM(ties) AS ties "
    "FROM board_pairs {where} GROUP BY blind, a, b"
)
_MODELS = (
    "SELECT model, SUM(answers) AS answers, SUM(failed) AS failed, SUM(priced) AS priced, "
    "SUM(cost_usd) AS cost_usd, SUM(up) AS up, SUM(down) AS down "
    "FROM board_models {where} GROUP BY model"
)
_SPEED = (
    "SELECT model, metric, bucket, SUM(n) AS n FROM board_speed {where} "
    "GROUP BY model, metric, bucket"
)


def statements(first_day: str, user: str | None) -> list[tuple[str, list[Any]]]:
    """The board's four queries: from ``first_day`` (UTC, ``YYYY-MM-DD``)
    on, one user's counts or (None) everyone's."""
    where = "WHERE day >= ?1" if user is None else "WHERE user = ?2 AND day >= ?1"
    params: list[Any] = [first_day] if user is None else [first_day, user]
    return [(sql.format(where=where), params) for sql in (_VOTES, _PAIRS, _MODELS, _SPEED)]


async def board(db: Database, first_day: str, user: str | None) -> dict[str, Any]:
    """The leaderboard from ``first_day`` on: one user's or everyone's."""
    votes, pairs, models, speed = await db.batch(statements(first_day, user))
    return assemble(votes, pairs, models, speed)


def median(histogram: Mapping[int, int]) -> float | None:
    """The (lower) median of values counted in ``comparisons.bucket``'s
    buckets: the middle of its bucket, within 2 % of the true value."""
    total = sum(histogram.values())
    if not total:
        return None
    rank = (total + 1) // 2
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= rank:
            return math.exp((bucket + 0.5) / BUCKETS_PER_E)
    raise AssertionError("unreachable: the ranks add up to the total")


_NO_VOTES = {"votes": 0, "wins": 0, "losses": 0, "ties": 0, "both_bad": 0}


def _side(counts: Mapping[str, Any] | None, rated: bradley_terry.Rated | None) -> dict[str, Any]:
    side: dict[str, Any] = {name: int(counts[name]) if counts else 0 for name in _NO_VOTES}
    side["rating"] = None if rated is None else rated.rating
    side["rating_low"] = None if rated is None else rated.low
    side["rating_high"] = None if rated is None else rated.high
    return side


def assemble(
    votes: Sequence[Mapping[str, Any]],
    pairs: Sequence[Mapping[str, Any]],
    models: Sequence[Mapping[str, Any]],
    speed: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The board from its four queries' rows: ``{"method", "models": [...]}``,
    best blind rating first (then open rating, then id)."""
    sides = ("blind", "open")
    counted: dict[str, dict[str, Mapping[str, Any]]] = {side: {} for side in sides}
    for row in votes:
        counted["blind" if row["blind"] else "open"][row["model"]] = row
    ratings = {}
    for side in sides:
        blind = side == "blind"
        ratings[side] = bradley_terry.fit(
            Pair(row["a"], row["b"], row["a_wins"], row["b_wins"], row["ties"])
            for row in pairs
            if bool(row["blind"]) == blind
        )
    per_model = {row["model"]: row for row in models}
    histograms: dict[tuple[str, str], dict[int, int]] = {}
    for row in speed:
        histograms.setdefault((row["model"], row["metric"]), {})[int(row["bucket"])] = int(row["n"])
    names = {*per_model, *counted["blind"], *counted["open"], *(m for m, _ in histograms)}
    listed = []
    for name in names:
        row = per_model.get(name, {})
        up, down = int(row.get("up") or 0), int(row.get("down") or 0)
        priced = int(row.get("priced") or 0)
        ttft = median(histograms.get((name, "ttft"), {}))
        pace = median(histograms.get((name, "tps"), {}))
        known = find(name)
        listed.append(
            {
                "model": name,
                "label": name if known is None else known.label,
                "blind": _side(counted["blind"].get(name), ratings["blind"].get(name)),
                "open": _side(counted["open"].get(name), ratings["open"].get(name)),
                "up": up,
                "down": down,
                "up_share": round(up / (up + down), 4) if up + down else None,
                "answers": int(row.get("answers") or 0),
                "failed": int(row.get("failed") or 0),
                "ttft_ms": None if ttft is None else round(ttft, 1),
                "tokens_per_s": None if pace is None else round(pace, 2),
                "usd_per_1000": round(1000 * row["cost_usd"] / priced, 6) if priced else None,
            }
        )

    def rank(entry: dict[str, Any]) -> tuple[float, float, str]:
        blind, open_ = entry["blind"]["rating"], entry["open"]["rating"]
        return (
            -blind if blind is not None else math.inf,
            -open_ if open_ is not None else math.inf,
            entry["model"],
        )

    listed.sort(key=rank)
    return {"method": dict(METHOD), "models": listed}
