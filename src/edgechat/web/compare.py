"""Comparisons, feedback and the leaderboard (``feedback``):
``/api/comparisons`` (make one, read one), a comparison's answers (``POST
/chat?comparison=<id>&slot=<n>``; ``/v1/chat/completions`` with
``edgechat.compare_with``), ``/api/feedback`` (votes and ratings) and
``/api/leaderboard``.

A comparison spends like that many answers, and says so before any model
is asked (``admit``): one rate-limit token per answer, the account's
allocation and the daily budgets, refused with the reason
(``rate_limited``, ``quota_exhausted``, ``budget_exhausted``). Its answers
then take no token of their own.

An anonymous client (no identity: a deployment without keys or Access)
may compare, vote and rate, and its votes and ratings count on the
leaderboard (as the user ``anonymous``; a rating's text is not kept for
it), but it reads none of them back: every anonymous client is the same
user, so what one gave could not be told from another's
(``sign_in_required``, as for conversations on the server).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from typing import Any

from edgechat.answer import pipeline
from edgechat.answer.candidates import quota_exhausted
from edgechat.answer.context import Context
from edgechat.answer.framing import Outcome
from edgechat.apis import openai as openai_api
from edgechat.apis.body import check_fit, json_object
from edgechat.apis.chat import ChatFraming
from edgechat.core.errors import (
    AdminRequired,
    BadRequest,
    EdgechatError,
    FeedbackUnavailable,
    NotFound,
    SignInRequired,
)
from edgechat.core.http import Reply, json_reply, whole_param
from edgechat.core.ids import is_random_id
from edgechat.core.models import Model, lookup
from edgechat.core.ports import Database, DatabaseError
from edgechat.core.requests import ChatRequest, OpenAIRequest, Slot
from edgechat.feedback import comparisons, leaderboard, store
from edgechat.media import documents
from edgechat.users import usage
from edgechat.users.identity import User
from edgechat.web import guards
from edgechat.web.steps import allow_cors, check_rate, query_params, who

__all__ = [
    "admit",
    "answer_slot",
    "api_leaderboard",
    "comparison_create",
    "comparison_get",
    "feedback_list",
    "feedback_post",
    "v1_compare",
]

# A comparison's body is a few model names; a vote's a few ids.
COMPARISON_BODY_BYTES = 4096
# A rating's body: its text at most, each character escaped (\\uXXXX twice
# for one outside the BMP), and the rest.
_ESCAPED_CHAR_BYTES = 12
# An admin's ``user=`` filter: a user id as identity makes them.
_MAX_USER_ID = 320


def _store(ctx: Context) -> Database:
    db = ctx.platform.history
    if db is None:
        raise NotFound(
            public="Comparisons and feedback are kept in the DB database, which is not bound.",
            detail="no DB binding",
        )
    return db


def _unavailable(exc: DatabaseError) -> FeedbackUnavailable:
    return FeedbackUnavailable(detail=f"feedback: {exc}")


def _signed_in(user: User, what: str) -> None:
    if user.via == "anonymous":
        raise SignInRequired(
            public=f"{what} is kept for a signed-in user (Cloudflare Access or a named key) "
            "only: anonymous clients cannot be told apart.",
            detail=f"{what} without an identity",
        )


async def admit(ctx: Context, user: User, answers: int, *, taken: int = 0) -> None:
    """The checks a comparison of ``answers`` answers passes before any
    model is asked: a rate-limit token for each answer (``taken``: those the
    request took already), the account's allocation (used up, or
    ``DAILY_NEURON_LIMIT``) and the user's daily budget. Raises the first
    refusal."""
    for _ in range(answers - taken):
        await check_rate(ctx, user)
    resets = ctx.cooling.allocation_resets()
    if resets is not None:
        raise quota_exhausted(resets, ctx.cooling.wall())
    verdict = pipeline.spend_check(ctx, pinned=True)
    if verdict is not None:
        await verdict


async def comparison_create(ctx: Context) -> Reply:
    """``POST /api/comparisons`` ``{"models": [...], "blind"?, "conversation"?}``:
    a comparison, its slots ready to be answered."""
    allow_cors(ctx)
    user = await who(ctx)
    db = _store(ctx)
    guards.check_json(ctx.request)
    data = json_object(await ctx.platform.read_body(COMPARISON_BODY_BYTES), ctx.settings.limits)
    asked = comparisons.parse(data, ctx.settings.models)
    await admit(ctx, user, len(asked.models))
    try:
        made = await comparisons.create(db, user.id, asked, _now_ms(ctx))
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    ctx.log["comparison"] = made["id"]
    return json_reply(201, made)


async def comparison_get(ctx: Context) -> Reply:
    """``GET /api/comparisons/<id>``: the user's comparison, a blind one's
    models once it has its vote."""
    allow_cors(ctx)
    user = await who(ctx)
    db = _store(ctx)
    if not is_random_id(ctx.param):
        raise NotFound(public="No such comparison.", detail="not a comparison id")
    try:
        found = await comparisons.read(db, user.id, ctx.param)
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    return json_reply(200, found)


def _now_ms(ctx: Context) -> int:
    return int(ctx.cooling.wall() * 1000)


class _SlotKeeper:
    """A comparison slot's ``ctx.after``: keeps how its answer ended, once
    (the pipeline calls it however the answer ended; a failure before the
    pipeline is handed to it by ``failed``)."""

    __slots__ = ("_ctx", "_db", "_index", "_kept", "comparison")

    def __init__(self, ctx: Context, db: Database, comparison: str, index: int) -> None:
        self._ctx = ctx
        self._db = db
        self.comparison = comparison
        self._index = index
        self._kept = False

    def __call__(self, outcome: Outcome) -> Awaitable[None]:
        if self._kept:
            return _nothing()
        self._kept = True
        end = comparisons.ended(outcome)
        ctx = self._ctx
        assert ctx.user is not None
        return comparisons.record(
            self._db,
            ctx.user.id,
            self.comparison,
            self._index,
            ctx.request_id,
            end,
            ctx.cooling.wall(),
        )

    def failed(self, model: Model, exc: Exception) -> None:
        """The answer failed before the pipeline kept it: ``exc`` says why."""
        error = exc if isinstance(exc, EdgechatError) else EdgechatError(detail=repr(exc))
        self._ctx.platform.wait_until(self(Outcome(model=model, error=error)))


async def _nothing() -> None:
    return None


def _served(ctx: Context, model_id: str) -> Model:
    """The slot's model, if this deployment still serves it."""
    try:
        return lookup(model_id, ctx.settings.models)
    except EdgechatError as exc:
        raise BadRequest(
            public="The comparison's model is no longer served here.", detail=model_id
        ) from exc


async def answer_slot(ctx: Context, request: ChatRequest, cors: dict[str, str]) -> Reply:
    """``POST /chat`` answering one slot of a comparison: the slot is taken
    for this request (each takes one), its model answers (no fallback, no
    cache), a blind one's events name no model, and how it ended is kept."""
    slot = request.slot
    assert slot is not None
    assert ctx.user is not None
    db = _store(ctx)
    try:
        claimed = await comparisons.claim(db, ctx.user.id, slot, ctx.request_id)
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    ctx.log["comparison"] = f"{slot.comparison}/{slot.index}"
    keeper = _SlotKeeper(ctx, db, slot.comparison, slot.index)
    ctx.after = keeper
    try:
        model = _served(ctx, claimed.model)
        request = dataclasses.replace(
            request, model=model, slot=dataclasses.replace(slot, blind=claimed.blind)
        )
        check_fit(request, ctx.settings.models)
        settings = ctx.settings
        request = await documents.attach(ctx.platform.ai, request, settings.limits, settings.models)
        framing = ChatFraming(ctx.request_id, None, request.slot)
        return await pipeline.answer(ctx, request, framing, cors)
    except Exception as exc:
        keeper.failed(request.model, exc)  # a no-op once the pipeline kept it
        raise


async def v1_compare(
    ctx: Context, parsed: OpenAIRequest, created: int, cors: dict[str, str]
) -> Reply:
    """``POST /v1/chat/completions`` with ``edgechat.compare_with`` (its
    checks passed ``admit``): one completion whose choices are the models'
    answers, asked at once, each naming its model; ``edgechat.comparison``
    is the comparison a vote names (``POST /api/feedback``)."""
    assert ctx.user is not None
    db = _store(ctx)
    models = (parsed.chat.model, *parsed.compare_with)
    asked = comparisons.Asked(models, False, None)
    try:
        made = await comparisons.create(
            db, ctx.user.id, asked, _now_ms(ctx), answering=ctx.request_id
        )
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    cid = made["id"]
    ctx.log["comparison"] = cid

    async def one(index: int, model: Model) -> tuple[dict[str, Any], Outcome] | EdgechatError:
        keeper = _SlotKeeper(ctx, db, cid, index)
        # Each answer its own context: its own outcome and log, its own keeper.
        child = dataclasses.replace(ctx, log={}, outcome=None, after=keeper, reply_headers={})
        slot = Slot(cid, index)
        request = dataclasses.replace(parsed.chat, model=model, slot=slot)
        framing = openai_api.CompletionFraming(
            ctx.request_id, model, request.max_tokens, created=created
        )
        try:
            outcome, _ = await pipeline.complete(child, request, framing, {})
        except EdgechatError as exc:
            keeper.failed(model, exc)
            return exc
        return framing.result(outcome), outcome

    answers = await asyncio.gather(*(one(k, m) for k, m in enumerate(models)))
    ctx.log["slots"] = [
        result.code if isinstance(result, EdgechatError) else "done" for result in answers
    ]
    failures = [result for result in answers if isinstance(result, EdgechatError)]
    if len(failures) == len(answers):
        raise failures[0]
    return json_reply(200, _compared(ctx, cid, models, answers, created), cors)


def _compared(
    ctx: Context,
    cid: str,
    models: tuple[Model, ...],
    answers: list[tuple[dict[str, Any], Outcome] | EdgechatError],
    created: int,
) -> dict[str, Any]:
    """The completion of a comparison: a choice per model, in order."""
    choices = []
    total = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for index, (model, answer) in enumerate(zip(models, answers, strict=True)):
        if isinstance(answer, EdgechatError):
            _, error = openai_api.error_body(answer)
            choices.append(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": None},
                    "finish_reason": "error",
                    "model": model.id,
                    "edgechat": {"slot": index, "error": error["error"]},
                }
            )
            continue
        document, outcome = answer
        choice = {**document["choices"][0], "index": index, "model": document["model"]}
        usage_of = document["usage"]
        if usage_of is not None:
            for name in total:
                total[name] += usage_of[name]
        choice["edgechat"] = {
            "slot": index,
            "usage": usage_of,
            "ttft_ms": outcome.ttft_ms,
            "tokens_per_s": outcome.tokens_per_s(),
            "cost_usd": outcome.cost_usd(),
        }
        choices.append(choice)
    return {
        "id": "chatcmpl-" + ctx.request_id,
        "object": "chat.completion",
        "created": created,
        "model": models[0].id,
        "choices": choices,
        "usage": total,
        "edgechat": {"comparison": cid},
    }


async def feedback_post(ctx: Context) -> Reply:
    """``POST /api/feedback``: a vote on one of the user's comparisons, or a
    rating of one answer (``feedback.store``). A vote's reply reveals its
    comparison."""
    allow_cors(ctx)
    user = await who(ctx)
    db = _store(ctx)
    guards.check_json(ctx.request)
    # Each write costs rows written: one token, as a question takes.
    await check_rate(ctx, user)
    limits = ctx.settings.limits
    cap = COMPARISON_BODY_BYTES + _ESCAPED_CHAR_BYTES * limits.max_feedback_chars
    data = json_object(await ctx.platform.read_body(cap), limits)
    given = store.parse(data, limits.max_feedback_chars)
    now = ctx.cooling.wall()
    try:
        if isinstance(given, store.Vote):
            ctx.log["comparison"] = given.comparison
            voted = await store.vote(db, user.id, given, now, ctx.request_id)
            return json_reply(201, voted)
        if given.text is not None:
            _signed_in(user, "A rating's text")
        item, new = await store.rate(db, user.id, given, now, ctx.request_id)
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    return json_reply(201 if new else 200, {"feedback": item})


async def feedback_list(ctx: Context) -> Reply:
    """``GET /api/feedback``: the user's votes and ratings, newest write first."""
    allow_cors(ctx)
    user = await who(ctx)
    _signed_in(user, "Feedback")
    db = _store(ctx)
    query = query_params(ctx)
    try:
        page = await store.list_page(db, user.id, query)
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    return json_reply(200, page)


def _whose(user: User, query: dict[str, str]) -> str | None:
    """Whose votes the board counts: the user's own; an admin's everyone's
    (None) or, with ``user=``, that user's."""
    asked = query.get("user")
    if asked is not None and (
        not 0 < len(asked) <= _MAX_USER_ID or not asked.isprintable() or asked != asked.strip()
    ):
        raise BadRequest(public=f"user must be a user id of 1 to {_MAX_USER_ID} characters.")
    if user.admin:
        return asked
    if asked is not None and asked != user.id:
        raise AdminRequired(detail="a leaderboard of another user")
    return user.id


async def api_leaderboard(ctx: Context) -> Reply:
    """``GET /api/leaderboard?days=N[&user=id]``: per model, the votes and
    ratings of the last N UTC days (``feedback.leaderboard``)."""
    allow_cors(ctx)
    user = await who(ctx)
    _signed_in(user, "The leaderboard")
    db = _store(ctx)
    query = query_params(ctx)
    for name in query:
        if name not in ("days", "user"):
            raise BadRequest(public="The leaderboard takes days and user only.")
    days = whole_param(query, "days", leaderboard.DEFAULT_DAYS, 1, leaderboard.MAX_DAYS)
    whose = _whose(user, query)
    span = usage.usage_days(ctx.cooling.wall(), days)
    try:
        board = await leaderboard.board(db, span[0], whose)
    except DatabaseError as exc:
        raise _unavailable(exc) from exc
    head = {
        "days": days,
        "from": span[0],
        "to": span[-1],
        "user": whose,
        "viewer": {"user": user.id, "admin": user.admin},
    }
    return json_reply(200, {**head, **board})
