"""Daily usage, counted in KV (``CACHE``) as answers complete.

Each complete answer adds one key, ``usage:v1:<UTC day>:<request id>``, whose
metadata holds its model and counts: one write per answer and no
read-modify-write, because KV allows one write a second to a key and
concurrent answers would overwrite each other's totals. ``GET /api/usage``
lists the day's keys and adds them up. KV is eventually consistent: an answer
shows up within about a minute, and in every location eventually.
"""

from __future__ import annotations

import json
import time
from typing import Any

from edgechat.models import Model
from edgechat.ports import Kv, KvError

__all__ = ["NEURONS_PER_USD", "count", "day_of", "next_midnight", "read_day"]

PREFIX = "usage:v1:"
# Workers AI bills $0.011 per 1,000 Neurons, so a dollar at list price is
# about 90,909 Neurons; the estimate is the answer's cost in those.
NEURONS_PER_USD = 1000 / 0.011
# Kept a week past their day; a day's keys are read at most this many pages
# (1,000 keys each) per request, and the body says when there were more.
KEEP_S = 8 * 86_400
MAX_PAGES = 20


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
    model: Model,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    cached_prompt_tokens: int = 0,
    cached: bool,
    request_id: str,
) -> None:
    """Adds one answer to today's usage; runs after the reply."""
    metadata = {
        "model": model.id,
        "prompt": prompt_tokens,
        "completion": completion_tokens,
        "prompt_cached": cached_prompt_tokens,
        "usd": cost_usd,
        "cached": cached,
    }
    try:
        await kv.put(f"{PREFIX}{day_of()}:{request_id}", b"", ttl_s=KEEP_S, metadata=metadata)
    except KvError as exc:
        # After the reply: the request's log line is out, so this one says it.
        print(json.dumps({"request_id": request_id, "usage_error": f"put: {exc}"}))


async def read_day(kv: Kv, day: str) -> dict[str, Any]:
    """The body of ``GET /api/usage`` for ``day``; raises ``KvError``."""
    per_model: dict[str, dict[str, Any]] = {}
    cursor: str | None = None
    complete = False
    for _ in range(MAX_PAGES):
        keys, cursor = await kv.list(f"{PREFIX}{day}:", cursor)
        for _name, meta in keys:
            model = meta.get("model")
            if not isinstance(model, str):
                continue
            entry = per_model.setdefault(
                model,
                {
                    "model": model,
                    "requests": 0,
                    "cached": 0,
                    "prompt_tokens": 0,
                    "cached_prompt_tokens": 0,
                    "completion_tokens": 0,
                    "cost_usd": 0.0,
                },
            )
            entry["requests"] += 1
            entry["cached"] += 1 if meta.get("cached") is True else 0
            entry["prompt_tokens"] += _number(meta.get("prompt"))
            entry["cached_prompt_tokens"] += _number(meta.get("prompt_cached"))
            entry["completion_tokens"] += _number(meta.get("completion"))
            entry["cost_usd"] += float(_number(meta.get("usd"), float))
        if cursor is None:
            complete = True
            break
    models = sorted(per_model.values(), key=lambda entry: entry["model"])
    for entry in models:
        entry["cost_usd"] = round(entry["cost_usd"], 8)
        # Neurons are Workers AI's unit; a provider's own API bills in its own.
        workers_ai = entry["model"].startswith("@cf/")
        entry["neurons"] = round(entry["cost_usd"] * NEURONS_PER_USD) if workers_ai else 0
    return {
        "day": day,
        "models": models,
        "total": {
            name: sum(entry[name] for entry in models)
            for name in (
                "requests",
                "cached",
                "prompt_tokens",
                "cached_prompt_tokens",
                "completion_tokens",
                "neurons",
            )
        }
        | {"cost_usd": round(sum(entry["cost_usd"] for entry in models), 8)},
        "complete": complete,
        "note": "Counted in KV as answers complete: eventually consistent, "
        "an answer may take a minute to show.",
    }


def _number(value: object, kind: type = int) -> Any:
    if type(value) in (int, float) and value >= 0:  # type: ignore[operator]
        return kind(value)
    return kind(0)
