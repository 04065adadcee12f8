"""The leaderboard: per model, over the last ``days`` UTC days, its votes
(wins, losses, ties, "both bad") and its rating with an interval, blind
votes and open ones counted apart; its 👍 share; the median time to first
token and tokens per second of its comparison answers; dollars per 1,000
of them.

It reads the counts the writes keep (``board_*``: one row per day and
model, or pair, for the user; everyone's in the account's rows, user
``*``), never the votes: three grouped queries whose rows read grow with
days and models, not with votes. The medians are those of each model's
latest ``SAMPLE`` finished answers in the span (all of them when fewer;
the lower of the middle two), read from an index that holds what they
measured: one query a model of the catalog, each answering one row of two
JSON arrays (a Worker on the Free plan has 10 ms of CPU: a thousand rows
crossing into Python one by one would spend them; one string each is
parsed in C). All in one batch
(``bench/leaderboard.py`` measures 100,000 votes). The ratings are fitted
to the pairs' counts (``bradley_terry``).
"""

from __future__ import annotations

import calendar
import json
import math
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

from edgechat.core.models import CATALOG, find
from edgechat.core.ports import Database
from edgechat.feedback import bradley_terry
from edgechat.feedback.bradley_terry import Pair
from edgechat.users.budget import ACCOUNT

__all__ = [
    "DEFAULT_DAYS",
    "MAX_DAYS",
    "METHOD",
    "SAMPLE",
    "assemble",
    "board",
    "from_results",
    "statements",
]

DEFAULT_DAYS = 30
MAX_DAYS = 365
# The latest finished answers of a model its medians are taken from.
SAMPLE = 501

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
    # The speed medians: of each model's latest answers, at most this many.
    "median_of_latest": SAMPLE,
}

_VOTES = (
    "SELECT blind, model, SUM(votes) AS votes, SUM(wins) AS wins, SUM(losses) AS losses, "
    "SUM(ties) AS ties, SUM(both_bad) AS both_bad FROM board_votes "
    "WHERE user = ?1 AND day >= ?2 GROUP BY blind, model"
)
_PAIRS = (
    "SELECT blind, a, b, SUM(a_wins) AS a_wins, SUM(b_wins) AS b_wins, SUM(ties) AS ties "
    "FROM board_pairs WHERE user = ?1 AND day >= ?2 GROUP BY blind, a, b"
)
_MODELS = (
    "SELECT model, SUM(answers) AS answers, SUM(failed) AS failed, SUM(priced) AS priced, "
    "SUM(cost_usd) AS cost_usd, SUM(up) AS up, SUM(down) AS down "
    "FROM board_models WHERE user = ?1 AND day >= ?2 GROUP BY model"
)
# A model's latest finished answers, what they measured as two JSON arrays
# (the indexes slots_done_by_model and slots_done_by_user hold these
# columns: no row of the table is read, and the subquery streams into the
# aggregate).
_SPEED = (
    "SELECT json_group_array(ttft_ms) AS ttft_ms, json_group_array(tokens_per_s) "
    "AS tokens_per_s FROM (SELECT ttft_ms, tokens_per_s FROM comparison_slots "
    "WHERE {user}model = ?1 AND state = 'done' AND finished >= ?2 "
    "ORDER BY finished DESC LIMIT ?3)"
)


def statements(first_day: str, user: str | None) -> list[tuple[str, list[Any]]]:
    """The board's queries: from ``first_day`` (UTC, ``YYYY-MM-DD``) on, one
    user's or (None) everyone's: the counts, then each catalog model's speeds."""
    whose = ACCOUNT if user is None else user
    counts = [(sql, [whose, first_day]) for sql in (_VOTES, _PAIRS, _MODELS)]
    since_ms = calendar.timegm(time.strptime(first_day, "%Y-%m-%d")) * 1000
    speed = _SPEED.format(user="" if user is None else "user = ?4 AND ")
    extra = [] if user is None else [user]
    return counts + [(speed, [model.id, since_ms, SAMPLE, *extra]) for model in CATALOG]


async def board(db: Database, first_day: str, user: str | None) -> dict[str, Any]:
    """The leaderboard from ``first_day`` on: one user's or everyone's."""
    return from_results(await db.batch(statements(first_day, user)))


def from_results(results: Sequence[Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """The board from the rows of ``statements``' queries."""
    votes, pairs, models, *speeds = results
    paces = {}
    for model, rows in zip(CATALOG, speeds, strict=True):
        medians = {name: _median(rows[0][name]) for name in ("ttft_ms", "tokens_per_s")}
        if medians["ttft_ms"] is not None:
            paces[model.id] = medians
    return assemble(votes, pairs, models, paces)


def _median(values: str) -> float | None:
    """The lower median of a JSON array of numbers and nulls (None: no number)."""
    numbers = [value for value in json.loads(values) if value is not None]
    return statistics.median_low(numbers) if numbers else None


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
    speeds: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    """The board from its queries' rows (``speeds``: each model's median
    ``ttft_ms`` and ``tokens_per_s``): ``{"method", "models": [...]}``, best
    blind rating first (then open rating, then id)."""
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
    names = {*per_model, *counted["blind"], *counted["open"], *speeds}
    listed = []
    for name in names:
        row = per_model.get(name, {})
        up, down = int(row.get("up") or 0), int(row.get("down") or 0)
        priced = int(row.get("priced") or 0)
        ttft = speeds.get(name, {}).get("ttft_ms")
        pace = speeds.get(name, {}).get("tokens_per_s")
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
