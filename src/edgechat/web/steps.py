"""The steps every handler takes before its own work: who asks (``identity``),
the CORS headers of an allowed cross-site caller, and for a question the
checks that must pass before it may cost anything (content type, rate
limit), then its body.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from edgechat.answer import routing
from edgechat.answer.context import Context
from edgechat.apis.body import body_cap
from edgechat.core.errors import BadRequest
from edgechat.core.ports import DatabaseError
from edgechat.core.requests import ChatRequest
from edgechat.users import budget, identity, usage
from edgechat.users.identity import User
from edgechat.web import guards

__all__ = ["allow_cors", "check_rate", "query_params", "question_body", "route", "who"]


async def who(ctx: Context, *, api: bool = False) -> User:
    """Who the request is (``identity``); raises what refuses it."""
    rules = ctx.settings.identity
    ctx.user = await identity.identify(
        ctx.request, rules, ctx.platform.verifier, ctx.access_keys, api=api
    )
    ctx.log["user"] = ctx.user.id
    return ctx.user


async def question_body(ctx: Context, user: User, *, rated: bool = True) -> bytes:
    """The checks every POST of a question passes before it may cost
    anything (who asks is checked by the caller), then its body. ``rated``
    False: a comparison's answer, whose rate-limit token the comparison took."""
    guards.check_json(ctx.request)
    if rated:
        await check_rate(ctx, user)
    return await ctx.platform.read_body(body_cap(ctx.settings.limits, ctx.settings.models))


def query_params(ctx: Context) -> dict[str, str]:
    """The request's query parameters; ``BadRequest`` for one given twice."""
    pairs = parse_qsl(ctx.request.query, keep_blank_values=True)
    query = dict(pairs)
    if len(query) != len(pairs):
        raise BadRequest(public="A query parameter is given twice.")
    return query


async def check_rate(ctx: Context, user: User) -> None:
    """The rate limit: per user when the request says who it is, else per address."""
    known = None if user.via == "anonymous" else user.id
    await guards.check_rate(ctx.platform.rate_limiter, guards.rate_limit_key(ctx.request, known))


def allow_cors(ctx: Context) -> dict[str, str]:
    cors = guards.cors_headers(guards.cors_origin(ctx.request, ctx.settings))
    # An allowed cross-site caller must be able to read our errors too.
    ctx.reply_headers.update(cors)
    return cors


async def route(ctx: Context, request: ChatRequest) -> ChatRequest:
    """A question that names ``auto`` with its model chosen (``routing``);
    any other as it is. Where a budget tier may apply, the day's spend is
    read first (the one read the budget's check then reuses): the only
    thing routing waits for."""
    settings = ctx.settings
    percent = 0.0
    db, user = ctx.platform.db, ctx.user
    limits = settings.budget
    if (
        routing.wants_spend(request, settings.routes)
        and db is not None
        and user is not None
        and limits
    ):
        limits = limits.for_user(user.id)
        try:
            ctx.spent = await budget.spent(db, usage.day_of(ctx.cooling.wall()), user.id)
            percent = budget.spent_percent(limits, *ctx.spent)
        except DatabaseError as exc:
            # Routed as if nothing were spent; the budget's own check reads again.
            ctx.log["route_error"] = f"spend: {exc}"
    routed = routing.choose(request, settings.routes, settings.models, percent)
    if routed.route is not None:
        ctx.log["auto"] = f"{routed.route.model}: {routed.route.reason}"
    return routed
