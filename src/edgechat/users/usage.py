"""Daily usage, counted in KV (``CACHE``) as answers complete.

Each complete answer adds one key, ``usage:v1:<UTC day>:<request id>``, whose
metadata holds its user, model and counts: one write per answer and no
read-modify-write, because KV allows one write a second to a key and
concurrent answers would overwrite each other's totals. ``GET /api/usage``
lists the keys of the days asked for (``?days=``, at most MAX_USAGE_DAYS) and
adds them up per day, user and model; a user sees their own answers, an
admin everyone's. KV is eventually consistent: an answer shows up within
about a minute, and in every location eventually.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from edgechat.core.models import EmbeddingModel, Model
from edgechat.core.ports import Kv, KvError

__all__ = [
    "MAX_USAGE_DAYS",
    "NEURONS_PER_USD",
    "count",
    "day_of",
    "next_midnight",
    "read_days",
    "usage_days",
]

PREFIX = "usage:v1:"
# Workers AI bills $0.011 per 1,000 Neurons, so a dollar at list price is
# about 90,909 Neurons; the estimate is the answer's cost in those.
NEURONS_PER_USD = 1000 / 0.011
# ``GET /api/usage?days=`` reads at most this many days, today included;
# each answer's key is kept a day longer.
MAX_USAGE_DAYS = 30
KEEP_S = (MAX_USAGE_DAYS + 1) * 86_400
# A request lists at most MAX_LIST_CALLS pages (1,000 keys each), at most
# MAX_PAGES of them for one day; the body says when a day had more.
MAX_PAGES = 20
MAX_LIST_CALLS = 60
# Workers AI's daily free allocation, account-wide (the usage page's line).
FREE_ALLOCATION_NEURONS = 10_000
# The user of answers counted before each answer named its user.
ANONYMOUS = "anonymous"


def day_of(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(time.time() if now is None else now))


def next_midnight(now: float) -> float:
    """The next 00:00 UTC after ``now`` (epoch seconds), when Workers AI's
    free allocation and edgechat's daily budgets reset. POSIX time has no
    leap seconds, so every UTC day is 86,400 of its seconds."""
    return (now // 86_400 + 1) * 86_400


async def count(
    kv: Kv,
    *,
    model: Model | EmbeddingModel,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    cached_prompt_tokens: int = 0,
    cached: bool,
    request_id: str,
    user: str = ANONYMOUS,
    baseline_usd: float | None = None,
) -> None:
    """Adds one answer (or one embedding call) to today's usage; runs after the reply.
    ``baseline_usd``: for an answer ``auto`` routed, what it would have cost
    on the baseline model."""
    metadata: dict[str, object] = {
        "model": model.id,
        "user": user,
        "prompt": prompt_tokens,
        "completion": completion_tokens,
        "prompt_cached": cached_prompt_tokens,
        "usd": cost_usd,
        "cached": cached,
    }
    if baseline_usd is not None:
        metadata["auto_base_usd"] = baseline_usd
    try:
        await kv.put(f"{PREFIX}{day_of()}:{request_id}", b"", ttl_s=KEEP_S, metadata=metadata)
    except KvError as exc:
        # After the reply: the request's log line is out, so this one says it.
        print(json.dumps({"request_id": request_id, "usage_error": f"put: {exc}"}))


# The counts every row, total and day of ``GET /api/usage`` carries.
COUNTS = (
    "requests",
    "cached",
    "prompt_tokens",
    "cached_prompt_tokens",
    "completion_tokens",
    "cost_usd",
)


def _zero() -> dict[str, Any]:
    return {name: 0.0 if name == "cost_usd" else 0 for name in COUNTS}


def _add(into: dict[str, Any], meta: dict[str, Any]) -> None:
    into["requests"] += 1
    into["cached"] += 1 if meta.get("cached") is True else 0
    into["prompt_tokens"] += _number(meta.get("prompt"))
    into["cached_prompt_tokens"] += _number(meta.get("prompt_cached"))
    into["completion_tokens"] += _number(meta.get("completion"))
    into["cost_usd"] += float(_number(meta.get("usd"), float))


def _sum(into: dict[str, Any], entry: dict[str, Any]) -> None:
    for name in COUNTS:
        into[name] += entry[name]


def _finish(entry: dict[str, Any], workers_ai_usd: float) -> dict[str, Any]:
    """Rounds the dollars and adds the Neurons: Workers AI's unit, of its
    answers alone (a provider's own API bills in its own)."""
    entry["cost_usd"] = round(entry["cost_usd"], 8)
    entry["neurons"] = round(workers_ai_usd * NEURONS_PER_USD)
    return entry


def usage_days(now: float, days: int) -> list[str]:
    """The UTC days of the ``days`` days ending with today, oldest first."""
    return [day_of(now - back * 86_400) for back in range(days - 1, -1, -1)]


async def _read_one(
    kv: Kv, day: str, pages: int, visible: Callable[[str], bool]
) -> tuple[list[tuple[str, str, dict[str, Any]]], bool]:
    """The visible answers of ``day`` as (user, model, metadata), reading
    at most ``pages`` pages; and whether that was all of them."""
    found: list[tuple[str, str, dict[str, Any]]] = []
    cursor: str | None = None
    for _ in range(pages):
        keys, cursor = await kv.list(f"{PREFIX}{day}:", cursor)
        for _name, meta in keys:
            model = meta.get("model")
            if not isinstance(model, str):
                continue
            who = meta.get("user")
            # Answers counted before users were: the one user there was then.
            user = who if isinstance(who, str) else ANONYMOUS
            if visible(user):
                found.append((user, model, meta))
        if cursor is None:
            return found, True
    return found, False


async def read_days(
    kv: Kv, days: list[str], visible: Callable[[str], bool] = lambda _: True
) -> dict[str, Any]:
    """The body of ``GET /api/usage`` for ``days`` (oldest first), of the
    answers of the users ``visible`` lets through; raises ``KvError``.

    Each day's keys are listed at once, at most ``MAX_PAGES`` pages a day
    and ``MAX_LIST_CALLS`` in all (shared out evenly); the body says
    ``complete: false`` when a day had more."""
    pages = max(1, min(MAX_PAGES, MAX_LIST_CALLS // len(days)))
    read = await asyncio.gather(*(_read_one(kv, day, pages, visible) for day in days))
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    auto: dict[str, Any] = {"requests": 0, "cost_usd": 0.0, "baseline_usd": 0.0}
    for day, (answers, _complete) in zip(days, read, strict=True):
        for user, model, meta in answers:
            _add_auto(auto, meta)
            row = rows.get((day, user, model))
            if row is None:
                row = rows[(day, user, model)] = {
                    "day": day,
                    "user": user,
                    "model": model,
                    **_zero(),
                }
            _add(row, meta)
    ordered = sorted(rows.values(), key=lambda r: (r["day"], r["user"], r["model"]))
    groups: dict[str, dict[str, dict[str, Any]]] = {"day": {}, "user": {}, "model": {}}
    spent: dict[tuple[str, str], float] = {}  # (by, name) -> the Workers AI dollars
    total, total_ai = _zero(), 0.0
    for day in days:
        groups["day"][day] = {"day": day, **_zero()}
    for row in ordered:
        workers_ai = row["model"].startswith("@cf/")
        for by in ("day", "user", "model"):
            name = row[by]
            entry = groups[by].setdefault(name, {by: name, **_zero()})
            _sum(entry, row)
            if workers_ai:
                spent[(by, name)] = spent.get((by, name), 0.0) + row["cost_usd"]
        _sum(total, row)
        total_ai += row["cost_usd"] if workers_ai else 0.0
        _finish(row, row["cost_usd"] if workers_ai else 0.0)
    finished = {
        by: [_finish(entry, spent.get((by, name), 0.0)) for name, entry in sorted(group.items())]
        for by, group in groups.items()
    }
    return {
        "day": days[-1],
        "days": len(days),
        "from": days[0],
        "models": finished["model"],
        "users": finished["user"],
        "daily": finished["day"],
        "rows": ordered,
        "total": _finish(total, total_ai),
        "free_allocation_neurons": FREE_ALLOCATION_NEURONS,
        "auto": _auto_savings(auto),
        "complete": all(complete for _, complete in read),
        "note": "Counted in KV as answers complete: eventually consistent, "
        "an answer may take a minute to show.",
    }


def _add_auto(into: dict[str, Any], meta: dict[str, Any]) -> None:
    """An answer ``auto`` routed: what it cost, beside its baseline's cost."""
    base = meta.get("auto_base_usd")
    if type(base) not in (int, float):
        return
    into["requests"] += 1
    into["cost_usd"] += float(_number(meta.get("usd"), float))
    into["baseline_usd"] += float(_number(base, float))


def _auto_savings(auto: dict[str, Any]) -> dict[str, Any]:
    cost, base = round(auto["cost_usd"], 8), round(auto["baseline_usd"], 8)
    return {**auto, "cost_usd": cost, "baseline_usd": base, "saved_usd": round(base - cost, 8)}


def _number(value: object, kind: type = int) -> Any:
    if type(value) in (int, float) and value >= 0:  # type: ignore[operator]
        return kind(value)
    return kind(0)
