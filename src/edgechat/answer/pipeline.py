"""One answer's pipeline, for either endpoint: the response cache's lookup,
the input check beside the model call, the model (``answer.Answer``), the
reply, and what is kept after it.

The checks that may refuse a request - the input check (``MODERATION=input``)
and the daily budgets (``budget``) - start with the model call, not before
it, and nothing is released until they pass; a refusal aborts the call. What follows an answer
(storing it in the cache, counting it for ``/api/usage`` and the budgets,
the spend alerts it crossed, a shadow trial on a sampled answer: ``shadow``,
and ``ctx.after``: a comparison's slot keeping its outcome, whatever it was)
runs through ``waitUntil``: the stream never waits on storage.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Awaitable, Coroutine
from typing import Any

from edgechat.answer import affinity, billing, cache, moderation, recording, routing, shadow
from edgechat.answer.answer import Answer, CheckAnswer, Sources
from edgechat.answer.candidates import Candidates
from edgechat.answer.context import Context
from edgechat.answer.deadlines import Deadlines
from edgechat.answer.framing import Document, Framing, Outcome
from edgechat.answer.providers import ProviderAi
from edgechat.answer.upstream import Redaction
from edgechat.config.settings import Settings
from edgechat.core.errors import ContentRefused, EdgechatError, ModerationUnavailable
from edgechat.core.http import Reply, json_reply, stream_reply
from edgechat.core.models import cost_usd
from edgechat.core.ports import DatabaseError, Sink
from edgechat.core.requests import ChatRequest
from edgechat.users import budget, usage

__all__ = ["ai_options", "answer", "complete", "document", "spend_check"]


async def answer(
    ctx: Context, request: ChatRequest, framing: Framing, headers: dict[str, str]
) -> Reply:
    """The streamed reply to ``request``."""
    answered, key, trial, headers = await _kept_if_refused(
        ctx, request, _begin(ctx, request, framing, headers)
    )

    async def produce(sink: Sink) -> None:
        await answered.stream(sink)
        ctx.emit(200)
        _store_and_count(ctx, request, answered, key, trial)
        _after(ctx, answered.outcome)

    return stream_reply(produce, headers)


async def document(
    ctx: Context, request: ChatRequest, framing: Document, headers: dict[str, str]
) -> Reply:
    """The whole answer to ``request`` as one document."""
    outcome, headers = await complete(ctx, request, framing, headers)
    return json_reply(200, framing.result(outcome), headers)


async def complete(
    ctx: Context, request: ChatRequest, framing: Document, headers: dict[str, str]
) -> tuple[Outcome, dict[str, str]]:
    """The whole answer to ``request``, read: its outcome (``framing``
    holds the rest) and the reply's headers; raises what ended it."""

    async def whole() -> tuple[Outcome, dict[str, str]]:
        answered, key, trial, reply_headers = await _begin(ctx, request, framing, headers)
        await answered.whole()
        _store_and_count(ctx, request, answered, key, trial)
        _after(ctx, answered.outcome)
        return answered.outcome, reply_headers

    return await _kept_if_refused(ctx, request, whole())


async def _kept_if_refused[T](ctx: Context, request: ChatRequest, work: Awaitable[T]) -> T:
    """``work``; when it raises, the failed answer's outcome still goes to
    ``ctx.after`` (a comparison's slot keeps why it failed)."""
    try:
        return await work
    except Exception as exc:
        outcome = ctx.outcome or Outcome(model=request.model)
        if outcome.error is None:
            failure = exc if isinstance(exc, EdgechatError) else EdgechatError(detail=repr(exc))
            outcome.error = failure
        _after(ctx, outcome)
        raise


def _after(ctx: Context, outcome: Outcome) -> None:
    if ctx.after is not None:
        ctx.platform.wait_until(ctx.after(outcome))


async def _begin(
    ctx: Context, request: ChatRequest, framing: Framing, headers: dict[str, str]
) -> tuple[Answer, str | None, shadow.Trial | None, dict[str, str]]:
    """An answer that has a model (or a cached stream) behind it and passed
    the input check; raises what refused it. Returns the answer, its cache
    key, its shadow trial (if sampled) and the reply's headers."""
    settings, platform = ctx.settings, ctx.platform
    if settings.log_prompts:
        ctx.log["prompt"] = request.messages[-1].content
    refresh = "no-cache" in ctx.request.headers.get("cache-control", "").lower()
    options = ai_options(ctx, refresh=refresh)
    # A comparison's answer is the model's own, never the cache's: its
    # speed and cost are what the comparison keeps.
    key = (
        cache.cache_key(request, settings)
        if platform.kv is not None and request.slot is None and cache.wants_cache(request, settings)
        else None
    )
    answered, trial = _answer(ctx, request, framing, options, record=key is not None)
    guard = _input_check(ctx, request, options)
    spent = spend_check(ctx, pinned=request.slot is not None)
    headers = {**headers, "X-Request-Id": ctx.request_id}
    if request.route is not None:
        # The reason is the operator's printable ASCII (config.routes).
        headers["X-Edgechat-Route"] = f"{request.route.model}; {request.route.reason}"
    try:
        hit = None
        if key is not None and platform.kv is not None:
            if not refresh:
                hit = await cache.lookup(platform.kv, key, settings.models, ctx.log)
            ctx.log["cache"] = headers["X-Edgechat-Cache"] = (
                "hit" if hit else "refresh" if refresh else "miss"
            )
        if hit is not None:
            # A cached answer costs nothing: no budget to keep.
            answered.replay(hit.model, cache.CachedUpstream(hit.body))
            if spent is not None:
                spent.close()  # its read settles by itself, never awaited
                spent = None
        await _open_checked(ctx, answered, _checks(ctx, guard, spent), opened=hit is not None)
    finally:
        if guard is not None and not guard.done():
            guard.cancel()
        if spent is not None:
            spent.close()  # a no-op once it ran; else its read is dropped
    return answered, key, trial, headers


def _answer(
    ctx: Context,
    request: ChatRequest,
    framing: Framing,
    options: dict[str, object],
    *,
    record: bool,
) -> tuple[Answer, shadow.Trial | None]:
    """The answer, and its shadow trial when it is sampled for one (its
    answer is then recorded: the judge reads it)."""
    settings, platform = ctx.settings, ctx.platform
    providers = ProviderAi(platform.fetch, settings.providers) if settings.providers else None
    check_answer: CheckAnswer | None = None
    if settings.moderate_output and framing.moderates_output:

        async def check_answer(recorded: bytes | None) -> moderation.Verdict:
            if recorded is None:
                raise ValueError(f"the answer is longer than {recording.MAX_RECORDED_BYTES} bytes")
            turns = moderation.conversation(request, moderation.answer_text(recorded))
            return await moderation.check(platform.ai, turns, options)

    # The conversation's affinity goes with the model's calls alone (not the
    # input check's): Workers AI's prompt cache then serves its history.
    user_id = "" if ctx.user is None else ctx.user.id
    model_options = affinity.options_with(options, affinity.session_of(user_id, request))
    sources = Sources(platform.ai, model_options, providers, _redaction(settings))
    challenger = None
    if platform.db is not None and settings.shadow_rate > 0:
        challenger = shadow.sample(settings, request, random.random())
    trial = None if challenger is None else shadow.Trial(ctx, request, challenger, sources, options)
    answered = Answer(
        request,
        framing,
        sources,
        Candidates(request, settings, ctx.cooling, providers=providers is not None),
        Deadlines(settings, time.monotonic),
        record=record or trial is not None,
        check_answer=check_answer,
    )
    ctx.outcome = answered.outcome
    return answered, trial


def _redaction(settings: Settings) -> Redaction:
    keys = (key.token for key in settings.identity.keys)
    return Redaction([*keys, *(p.api_key for p in settings.providers)])


def _input_check(
    ctx: Context, request: ChatRequest, options: dict[str, object]
) -> asyncio.Future[moderation.Verdict] | None:
    """The input check, started; None when there is none to make."""
    if not ctx.settings.moderate_input:
        return None
    turns = moderation.conversation(request)
    if not turns:
        # Llama Guard reads text; a conversation of images alone has none.
        ctx.log["moderation"] = "skipped: no text"
        return None
    return asyncio.ensure_future(moderation.check(ctx.platform.ai, turns, options))


def _checks(
    ctx: Context,
    guard: asyncio.Future[moderation.Verdict] | None,
    spent: Coroutine[Any, Any, None] | None,
) -> Awaitable[None] | None:
    """Every verdict the answer waits for, as one awaitable that raises the
    first refusal; None when there is nothing to wait for. The budget's
    alone is a coroutine (its read is already under way: no task); with the
    input check, both run in one task."""
    if guard is None:
        return spent

    async def verdicts() -> None:
        await asyncio.gather(_input_verdict(ctx, guard), *([spent] if spent is not None else []))

    return asyncio.ensure_future(verdicts())


async def _open_checked(
    ctx: Context,
    answered: Answer,
    guard: Awaitable[None] | None,
    *,
    opened: bool,
) -> None:
    """Opens the answer (unless the cache did) while the checks run, then
    keeps their verdicts: a refusal refuses the request and aborts the call."""
    if guard is None:
        # Nothing to wait for, so no task (each costs Pyodide's event loop a
        # few turns on the way to the first byte).
        if not opened:
            await answered.open()
        return
    if not asyncio.isfuture(guard):
        await _open_then_check(answered, guard, opened=opened)
        return
    opening = None if opened else asyncio.ensure_future(answered.open())
    try:
        await guard
        if opening is not None:
            await opening
    except BaseException:
        if opening is not None:
            opening.cancel()
            # Awaited even when done: a failed call's exception is retrieved.
            with contextlib.suppress(BaseException):
                await opening
        await answered.abandon()
        raise


async def _open_then_check(answered: Answer, guard: Awaitable[None], *, opened: bool) -> None:
    """The budget's check alone: its read is I/O under way, so the model is
    asked meanwhile without a task, and the verdict kept once it is open."""
    try:
        if not opened:
            await answered.open()
    except BaseException:
        with contextlib.suppress(Exception):
            await guard  # its read was under way; nothing is left unawaited
        raise
    try:
        await guard
    except BaseException:
        await answered.abandon()
        raise


async def _input_verdict(ctx: Context, guard: asyncio.Future[moderation.Verdict]) -> None:
    try:
        verdict = await guard
    except moderation.CHECK_FAILURES as exc:
        ctx.log["moderation_error"] = f"{type(exc).__name__}: {exc}"
        if ctx.settings.moderation_fail_closed:
            raise ModerationUnavailable(detail="the input check failed") from exc
        return  # MODERATION_FAIL=open: logged, and let through
    ctx.log["moderation"] = "safe" if verdict.safe else "unsafe:" + ",".join(verdict.categories)
    if not verdict.safe:
        raise ContentRefused(categories=verdict.categories)


def spend_check(ctx: Context, *, pinned: bool = False) -> Coroutine[Any, Any, None] | None:
    """The verdict on today's spend, its read under way; None without
    limits or a store. ``pinned``: no provider may answer instead (a
    comparison's models), so the account's limit refuses too."""
    db, limits = ctx.platform.db, ctx.settings.budget
    if db is None or not limits or ctx.user is None:
        return None
    if limits.key_usd or limits.key_neurons:
        limits = limits.for_user(ctx.user.id)  # a key's own limits (KEY_DAILY_*)
    now = ctx.cooling.wall()
    day = usage.day_of(now)
    read = budget.check(db, limits, day, ctx.user.id, now, ctx.spent)
    return _budget_verdict(ctx, read, providers=bool(ctx.settings.providers) and not pinned)


async def _budget_verdict(
    ctx: Context, read: Awaitable[budget.Verdict], *, providers: bool
) -> None:
    try:
        verdict = await read
    except DatabaseError as exc:
        ctx.log["budget_error"] = f"read: {exc}"
        return  # a failed store lets the request through, logged
    if verdict.account is not None:
        # Workers AI is not asked again today (the providers may be); this
        # answer is refused unless a provider could have taken it.
        ctx.log["budget"] = "account_limit"
        assert verdict.account.resets_at is not None
        ctx.cooling.exhaust(verdict.account.resets_at)
        if not providers:
            raise verdict.account
    if verdict.user is not None:
        ctx.log["budget"] = "user_limit"
        raise verdict.user


def ai_options(ctx: Context, *, refresh: bool) -> dict[str, Any]:
    """``AI.run``'s options for this deployment: its AI Gateway, if any."""
    settings = ctx.settings
    if settings.ai_gateway_id is None:
        return {}
    return {
        "gateway": {
            "id": settings.ai_gateway_id,
            "skipCache": refresh,
            "cacheTtl": settings.cache_ttl_s,
        }
    }


def _store_and_count(
    ctx: Context,
    request: ChatRequest,
    answered: Answer,
    key: str | None,
    trial: shadow.Trial | None,
) -> None:
    """After a complete answer: count it (``billing``: its user's day, the
    account's, ``/api/usage``), make its shadow trial and store it in the
    cache, all in the background."""
    kv, outcome = ctx.platform.kv, answered.outcome
    if outcome.model is None or outcome.error is not None or outcome.client_gone:
        return
    counts = outcome.usage
    billing.charge(
        ctx,
        billing.Bill(
            outcome.model,
            outcome.cost_usd() or 0.0,
            prompt_tokens=counts["prompt_tokens"] if counts else 0,
            completion_tokens=counts["completion_tokens"] if counts else 0,
            cached_prompt_tokens=counts.get("cached_tokens", 0) if counts else 0,
            cached=outcome.cached,
            baseline_usd=_baseline_usd(ctx, request, outcome),
        ),
    )
    if trial is not None:
        trial.after(answered)
    if kv is not None and key is not None and outcome.model.provider is None:
        body = cache.keepable(answered.recording.body(), outcome)
        if body is not None:
            ctx.platform.wait_until(
                cache.store(kv, key, body, outcome.model, ctx.settings.cache_ttl_s, ctx.request_id)
            )


def _baseline_usd(ctx: Context, request: ChatRequest, outcome: Outcome) -> float | None:
    """For an answer ``auto`` routed: what its tokens would have cost on the
    baseline model (``routing.baseline``); None for any other."""
    if request.route is None or outcome.usage is None or outcome.cached:
        return None
    settings = ctx.settings
    model = routing.baseline(settings.routes, settings.default_model, settings.models)
    return None if model is None else cost_usd(model, outcome.usage)
