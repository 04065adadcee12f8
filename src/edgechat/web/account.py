"""The asking user's own account: who they are and their budget
(``GET /api/me``), and the answers counted per day (``GET /api/usage``,
with the shadow trials' summary for an admin).
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.parse
from collections.abc import Awaitable
from typing import Any

from edgechat.alerts import ledger
from edgechat.answer import trials
from edgechat.answer.context import Context
from edgechat.core.errors import BadRequest, NotFound, StoreUnavailable
from edgechat.core.http import Reply, json_reply
from edgechat.core.models import find
from edgechat.core.ports import DatabaseError, KvError
from edgechat.users import budget, usage
from edgechat.users.identity import User
from edgechat.web.steps import who

__all__ = ["api_usage", "me"]


async def api_usage(ctx: Context) -> Reply:
    """The last ``?days=`` UTC days' (today alone by default) requests,
    tokens, dollars and Neurons per day, user and model, and their spend
    alerts: the asking user's own, or everyone's for an admin (``ADMINS``),
    who also gets the shadow trials of those days (``shadow``: null for
    anyone else, or without trials)."""
    user = await who(ctx)
    days = _usage_days(ctx.request.query)
    kv = ctx.platform.kv
    if kv is None:
        raise NotFound(
            public="Usage is counted in the CACHE KV namespace, which is not bound.",
            detail="no CACHE binding",
        )
    span = usage.usage_days(ctx.cooling.wall(), days)
    # The alerts' read is under way while KV is listed and the trials read.
    alerts = _alerts(ctx, user, span[0], span[-1])
    counted = usage.read_days(kv, span, (lambda _: True) if user.admin else user.id.__eq__)
    try:
        body, shadow = await asyncio.gather(counted, _shadow(ctx, span, admin=user.admin))
    except KvError as exc:
        if alerts is not None:
            with contextlib.suppress(DatabaseError):
                await alerts  # under way already: let it settle, unused
        raise StoreUnavailable(detail=f"list: {exc}") from exc
    except DatabaseError as exc:
        if alerts is not None:
            with contextlib.suppress(DatabaseError):
                await alerts  # under way already: let it settle, unused
        raise StoreUnavailable(detail=f"shadow trials: {exc}") from exc
    try:
        body["alerts"] = [] if alerts is None else await alerts
    except DatabaseError as exc:
        raise StoreUnavailable(detail=f"alerts: {exc}") from exc
    body["viewer"] = {"user": user.id, "admin": user.admin}
    body["shadow"] = shadow
    return json_reply(200, body)


async def _shadow(ctx: Context, days: list[str], *, admin: bool) -> dict[str, Any] | None:
    """The shadow trials' summary, for an admin of a deployment with a
    challenger and a ``USAGE_DB``; else None."""
    settings, db = ctx.settings, ctx.platform.db
    challenger = None if settings.shadow_model is None else find(settings.shadow_model)
    judge = find(settings.shadow_judge)
    if not admin or db is None or challenger is None or judge is None:
        return None
    return await trials.summary(
        db,
        days,
        challenger=challenger.id,
        judge=judge.id,
        rate=settings.shadow_rate,
        cap_usd=settings.shadow_daily_usd,
    )


def _alerts(
    ctx: Context, user: User, first: str, last: str
) -> Awaitable[list[dict[str, object]]] | None:
    """The spend alerts of the days shown, read from now: an admin sees
    every alert, a user only those of their own budget (the account's and
    the shadow trials' spend are the operator's). None without alerts
    (``ALERT_WEBHOOK``) or their store: no query."""
    db = ctx.platform.db
    if db is None or ctx.settings.alert_webhook is None:
        return None
    return ledger.read(db, first, last, None if user.admin else user.id)


def _usage_days(query: str) -> int:
    """``?days=``: a whole number of days from 1 to ``MAX_USAGE_DAYS``, 1 if absent."""
    values = urllib.parse.parse_qs(query, keep_blank_values=True).get("days")
    if values is None:
        return 1
    text = values[-1] if len(values) == 1 else ""
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= usage.MAX_USAGE_DAYS):
        raise BadRequest(
            public=f"days must be a whole number from 1 to {usage.MAX_USAGE_DAYS}, given once."
        )
    return int(text)


async def me(ctx: Context) -> Reply:
    """``GET /api/me``: who the page is talking to, and what they may do."""
    user = await who(ctx)
    body = user.to_json()
    db, limits = ctx.platform.db, ctx.settings.budget.for_user(user.id)
    if db is not None and ctx.settings.budget:
        now = ctx.cooling.wall()
        day = usage.day_of(now)
        try:
            mine, _ = await budget.spent(db, day, user.id)
        except DatabaseError as exc:
            raise StoreUnavailable(detail=f"spend: {exc}") from exc
        body["budget"] = budget.status(limits, mine, day, now)
    return json_reply(200, body)
