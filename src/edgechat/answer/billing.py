"""What a complete answer or an embedding costs, counted once it is done:
its dollars (and, for Workers AI, their Neurons) on its user's day and the
account's (``USAGE_DB``: the daily budgets, ``DAILY_NEURON_LIMIT``, and the
spend alerts it crossed; ``users.budget``, ``alerts.send``), and its counts
in the day's usage (``CACHE``: ``/api/usage``; ``users.usage``). One path
for both, so that every embedding (``/v1/embeddings``, the semantic cache's
questions, a knowledge base's chunks) is paid for like any answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from edgechat.alerts import send
from edgechat.answer.context import Context
from edgechat.config.settings import Settings
from edgechat.core.models import EmbeddingModel, Model
from edgechat.core.ports import Database, Kv, Outbound
from edgechat.users import budget, usage

__all__ = ["Bill", "Stores", "charge", "count"]


@dataclass(frozen=True, slots=True)
class Bill:
    """One answer's or embedding's counts and cost at list price."""

    model: Model | EmbeddingModel
    cost_usd: float
    prompt_tokens: int
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    # Replayed from the response cache (it cost nothing).
    cached: bool = False
    # For an answer ``auto`` routed: what it would have cost on the baseline model.
    baseline_usd: float | None = None


class Stores(Protocol):
    """Where a bill is counted: a request's platform has them all; a run
    with no request (a queue's consumer) may hand its own."""

    @property
    def db(self) -> Database | None: ...

    @property
    def kv(self) -> Kv | None: ...

    @property
    def outbound(self) -> Outbound: ...


async def count(
    stores: Stores,
    settings: Settings,
    bill: Bill,
    *,
    user: str | None,
    request_id: str,
    clock: Callable[[], float],
) -> None:
    """Counts ``bill`` for ``user`` (None: nobody asked, the anonymous
    usage row): on the user's and the account's day when it cost anything
    and a user is known, and in ``/api/usage`` unless ``COUNT_USAGE`` is
    off. Never raises (each store logs its failure)."""
    work = _counting(stores, settings, bill, user, request_id, clock)
    if work is not None:
        await work


def charge(ctx: Context, bill: Bill) -> None:
    """Counts ``bill`` for the request's user after the reply (``waitUntil``;
    nothing is left to run when there is nothing to count)."""
    user = None if ctx.user is None else ctx.user.id
    work = _counting(ctx.platform, ctx.settings, bill, user, ctx.request_id, ctx.cooling.wall)
    if work is not None:
        ctx.platform.wait_until(work)


def _counting(
    stores: Stores,
    settings: Settings,
    bill: Bill,
    user: str | None,
    request_id: str,
    clock: Callable[[], float],
) -> Awaitable[None] | None:
    work: list[Awaitable[None]] = []
    if stores.db is not None and user is not None and bill.cost_usd:
        spend = budget.spend_of(bill.model, bill.cost_usd)
        day = usage.day_of(clock())
        work.append(
            send.counted(stores.db, stores.outbound, settings, day, user, spend, clock, request_id)
        )
    if stores.kv is not None and settings.count_usage:
        work.append(
            usage.count(
                stores.kv,
                model=bill.model,
                baseline_usd=bill.baseline_usd,
                prompt_tokens=bill.prompt_tokens,
                completion_tokens=bill.completion_tokens,
                cached_prompt_tokens=bill.cached_prompt_tokens,
                cost_usd=bill.cost_usd,
                cached=bill.cached,
                request_id=request_id,
                user=usage.ANONYMOUS if user is None else user,
            )
        )
    if len(work) <= 1:
        return work[0] if work else None
    return _together(work)


async def _together(work: list[Awaitable[None]]) -> None:
    await asyncio.gather(*work)
