"""The Worker's HTTP surface: a routing table, the handlers, the request log.

Everything here is plain Python over ``Incoming``/``Reply`` and the protocols
in ``ports``; ``platform.py`` adapts the Workers runtime to it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from edgechat import cache, guards, moderation, openai_api, usage
from edgechat.chat import ChatFraming, ChatSession, Cooling, Framing, Outcome
from edgechat.config import Settings
from edgechat.errors import (
    ContentRefused,
    EdgechatError,
    MethodNotAllowed,
    Misconfigured,
    ModerationUnavailable,
    NotFound,
    StoreUnavailable,
)
from edgechat.http import Incoming, Reply, error_reply, json_reply, stream_reply
from edgechat.models import catalog_json
from edgechat.ports import KvError, Platform, Sink
from edgechat.providers import ProviderAi
from edgechat.requests import ChatRequest
from edgechat.validation import body_cap, parse_chat_request, parse_openai_request


@dataclass(slots=True)
class Context:
    request: Incoming
    platform: Platform
    settings: Settings
    request_id: str
    started: float
    log: dict[str, object]
    # The isolate's models cooling down after a capacity or quota failure.
    cooling: Cooling = field(default_factory=Cooling)
    # Headers for whatever reply this request gets, error replies included.
    reply_headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Context], Awaitable[Reply]]


async def healthz(ctx: Context) -> Reply:
    return json_reply(200, {"status": "ok"})


async def models(ctx: Context) -> Reply:
    s = ctx.settings
    return json_reply(200, catalog_json(s.models, s.default_model))


async def limits(ctx: Context) -> Reply:
    # The page reads its limits here, so the server is their one source.
    return json_reply(200, ctx.settings.limits.to_json())


async def page(ctx: Context) -> Reply:
    # The page is a static asset served before the Worker runs; reaching here
    # means it is missing from the deployment.
    raise NotFound(detail="index.html not among the static assets")


async def preflight(ctx: Context) -> Reply:
    origin = guards.cors_origin(ctx.request, ctx.settings)
    if origin is None:
        # Browsers only preflight cross-site requests; a same-origin one needs none.
        return Reply(204, {"Allow": "POST, OPTIONS"})
    return Reply(
        204,
        {
            **guards.cors_headers(origin),
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": "content-type, authorization, cache-control",
            "Access-Control-Max-Age": "600",
        },
    )


async def chat(ctx: Context) -> Reply:
    settings = ctx.settings
    cors = _cors(ctx)
    body = await _body(ctx, guards.check_token(ctx.request, settings))
    chat_request = parse_chat_request(
        body, settings.limits, settings.models, settings.default_model
    )
    return await _answer(ctx, chat_request, ChatFraming, cors, stream=True)


async def completions(ctx: Context) -> Reply:
    """``POST /v1/chat/completions``: the OpenAI API over the same session."""
    settings = ctx.settings
    cors = _cors(ctx)
    body = await _body(ctx, guards.check_api_token(ctx.request, settings))
    parsed = parse_openai_request(body, settings.limits, settings.models, settings.default_model)
    chat_request = parsed.chat
    created = int(time.time())
    framing: Callable[[ChatSession], Framing]
    if parsed.stream:

        def framing(session: ChatSession) -> Framing:
            return openai_api.ChunkFraming(
                session, include_usage=parsed.include_usage, created=created
            )
    else:

        def framing(session: ChatSession) -> Framing:
            return openai_api.CompletionFraming(session, created=created)

    return await _answer(ctx, chat_request, framing, cors, stream=parsed.stream)


async def v1_models(ctx: Context) -> Reply:
    guards.check_api_token(ctx.request, ctx.settings)
    return json_reply(200, openai_api.models_json(ctx.settings.models))


async def api_usage(ctx: Context) -> Reply:
    """Today's (UTC) requests, tokens, dollars and Neurons per model."""
    guards.check_token(ctx.request, ctx.settings)
    kv = ctx.platform.kv
    if kv is None:
        raise NotFound(
            public="Usage is counted in the CACHE KV namespace, which is not bound.",
            detail="no CACHE binding",
        )
    try:
        return json_reply(200, await usage.read_day(kv, usage.day_of()))
    except KvError as exc:
        raise StoreUnavailable(detail=f"list: {exc}") from exc


async def _body(ctx: Context, token: str | None) -> bytes:
    """The checks every POST of a question passes before it may cost
    anything (its token is checked by the caller), then its body."""
    request = ctx.request
    guards.check_json(request)
    await guards.check_rate(ctx.platform.rate_limiter, guards.rate_limit_key(request, token))
    return await ctx.platform.read_body(body_cap(ctx.settings.limits, ctx.settings.models))


def _cors(ctx: Context) -> dict[str, str]:
    cors = guards.cors_headers(guards.cors_origin(ctx.request, ctx.settings))
    # An allowed cross-site caller must be able to read our errors too.
    ctx.reply_headers.update(cors)
    return cors


async def _answer(
    ctx: Context,
    chat_request: ChatRequest,
    framing: Callable[[ChatSession], Framing],
    headers: dict[str, str],
    *,
    stream: bool,
) -> Reply:
    """One answer for either endpoint: from the cache, or from the model
    (with fallback and deadlines, in ``ChatSession``), then kept and counted
    after the reply."""
    settings, platform = ctx.settings, ctx.platform
    if settings.log_prompts:
        ctx.log["prompt"] = chat_request.messages[-1].content
    kv = platform.kv
    refresh = "no-cache" in ctx.request.headers.get("cache-control", "").lower()
    key = (
        cache.cache_key(chat_request, settings)
        if kv is not None and cache.wants_cache(chat_request, settings)
        else None
    )
    options = _ai_options(settings, refresh=refresh)
    check_answer = None
    if settings.moderate_output and framing is ChatFraming:

        async def check_answer(answer: str) -> moderation.Verdict:
            turns = moderation.conversation(chat_request, answer)
            return await moderation.check(platform.ai, turns, options)

    session = ChatSession(
        chat_request,
        settings,
        platform.ai,
        request_id=ctx.request_id,
        framing=framing,
        ai_options=options,
        record=key is not None,
        providers=ProviderAi(platform.fetch, settings.providers) if settings.providers else None,
        cooling=ctx.cooling,
        check_answer=check_answer,
        sleep=platform.sleep,
    )
    # The input check runs while the model starts; nothing is released
    # before its verdict.
    guard = None
    turns = moderation.conversation(chat_request) if settings.moderate_input else []
    if turns:
        guard = asyncio.ensure_future(moderation.check(platform.ai, turns, options))
    elif settings.moderate_input:
        # Llama Guard reads text; a conversation of images alone has none.
        ctx.log["moderation"] = "skipped: no text"
    headers = {**headers, "X-Request-Id": ctx.request_id}
    try:
        hit = None
        if key is not None and kv is not None:
            if not refresh:
                hit = await cache.lookup(kv, key, settings.models, ctx.log)
            ctx.log["cache"] = headers["X-Edgechat-Cache"] = (
                "hit" if hit else "refresh" if refresh else "miss"
            )
        if hit is not None:
            session.replay(hit.model, cache.CachedUpstream(hit.body))
        await _open_after_verdict(ctx, session, guard, opened=hit is not None)
    finally:
        if guard is not None and not guard.done():
            guard.cancel()

    if not stream:
        try:
            await session.complete()
        finally:
            _log_outcome(ctx.log, session.outcome)
        _keep(ctx, session, key)
        completion = session.framing
        assert isinstance(completion, openai_api.CompletionFraming)
        return json_reply(200, completion.completion(), headers)

    async def produce(sink: Sink) -> None:
        await session.pump(sink)
        _log_outcome(ctx.log, session.outcome)
        _emit(ctx, 200)
        _keep(ctx, session, key)

    return stream_reply(produce, headers)


async def _open_after_verdict(
    ctx: Context,
    session: ChatSession,
    guard: asyncio.Future[moderation.Verdict] | None,
    *,
    opened: bool,
) -> None:
    """Opens the session (unless a cache hit did) while the input check runs,
    then keeps the verdict: unsafe refuses the request and aborts the call."""
    if guard is None:
        # No check to wait for: no task either (each one costs Pyodide's
        # event loop a few turns on the way to the first byte).
        try:
            if not opened:
                await session.open()
        finally:
            _log_outcome(ctx.log, session.outcome)
        return
    opening = None if opened else asyncio.ensure_future(session.open())
    try:
        await _input_verdict(ctx, guard)
        if opening is not None:
            await opening
    except BaseException:
        if opening is not None:
            opening.cancel()
            # Awaited even when done: a failed call's exception is retrieved.
            with contextlib.suppress(BaseException):
                await opening
        await session.abandon()
        raise
    finally:
        _log_outcome(ctx.log, session.outcome)


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


def _ai_options(settings: Settings, *, refresh: bool) -> dict[str, object]:
    if settings.ai_gateway_id is None:
        return {}
    return {
        "gateway": {
            "id": settings.ai_gateway_id,
            "skipCache": refresh,
            "cacheTtl": settings.cache_ttl_s,
        }
    }


def _keep(ctx: Context, session: ChatSession, key: str | None) -> None:
    """After the answer: store it in the cache and count it, in the background."""
    kv, outcome = ctx.platform.kv, session.outcome
    if kv is None or outcome.model is None or outcome.error is not None or outcome.client_gone:
        return
    if key is not None and outcome.model.provider is None:
        body = session.recorded()
        if body is not None:
            ctx.platform.wait_until(
                cache.store(kv, key, body, outcome.model, ctx.settings.cache_ttl_s, ctx.request_id)
            )
    if not ctx.settings.count_usage:
        return
    counts = outcome.usage
    ctx.platform.wait_until(
        usage.count(
            kv,
            model=outcome.model,
            prompt_tokens=counts["prompt_tokens"] if counts else 0,
            completion_tokens=counts["completion_tokens"] if counts else 0,
            cost_usd=outcome.cost_usd() or 0.0,
            cached=outcome.cached,
            request_id=ctx.request_id,
        )
    )


# (path → method → handler). HEAD is answered wherever GET is.
ROUTES: Mapping[str, Mapping[str, Handler]] = {
    "/": {"GET": page},
    "/chat": {"POST": chat, "OPTIONS": preflight},
    "/api/models": {"GET": models},
    "/api/limits": {"GET": limits},
    "/api/usage": {"GET": api_usage},
    "/v1/chat/completions": {"POST": completions, "OPTIONS": preflight},
    "/v1/models": {"GET": v1_models},
    "/healthz": {"GET": healthz},
}

# Routes that speak the OpenAI API, errors included.
OPENAI_PREFIX = "/v1/"


def _allowed(methods: Mapping[str, Handler]) -> tuple[str, ...]:
    names = list(methods)
    if "GET" in methods:
        names.insert(names.index("GET") + 1, "HEAD")
    return tuple(names)


class SettingsOnce:
    """The settings of one isolate: its ``[vars]`` do not change while it
    lives, so they are read on the first request and kept. A bad value is not
    kept: every request reports it until the configuration is fixed."""

    __slots__ = ("_settings",)

    def __init__(self) -> None:
        self._settings: Settings | None = None

    def get(self, platform: Platform) -> Settings:
        if self._settings is None:
            try:
                self._settings = Settings.from_vars(platform.var)
            except ValueError as exc:
                raise Misconfigured(detail=str(exc)) from exc
        return self._settings


async def handle(
    request: Incoming,
    platform: Platform,
    settings: SettingsOnce | None = None,
    cooling: Cooling | None = None,
) -> Reply:
    """Answers one request. Never raises: every failure becomes an error reply.
    ``settings`` and ``cooling`` are the isolate's (``entry.py``); without
    them the ``[vars]`` are read, and models cool down, for this request alone."""
    ctx = Context(
        request=request,
        platform=platform,
        settings=Settings(),
        request_id=uuid.uuid4().hex,
        started=time.monotonic(),
        log={"route": request.path, "method": request.method},
        cooling=cooling or Cooling(),
    )
    try:
        ctx.settings = (settings or SettingsOnce()).get(platform)
        methods = ROUTES.get(request.path)
        if methods is None:
            raise NotFound(detail=f"no route for {request.path}")
        handler = methods.get("GET" if request.method == "HEAD" else request.method)
        if handler is None:
            raise MethodNotAllowed(allow=_allowed(methods))
        reply = await handler(ctx)
    except EdgechatError as exc:
        reply = _error_reply(ctx, exc)
        ctx.log["error_code"] = exc.code
        if exc.status >= 500 or type(exc) is EdgechatError:
            ctx.log["error_detail"] = str(exc)
    except Exception as exc:
        # A bug or a bad configuration: generic outward, detailed in the log.
        failure = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
        reply = _error_reply(ctx, failure)
        ctx.log["error_code"] = failure.code
        ctx.log["error_detail"] = str(failure)
    reply.headers.setdefault("X-Request-Id", ctx.request_id)
    if reply.stream is None:
        _emit(ctx, reply.status)
    return reply


def _error_reply(ctx: Context, exc: EdgechatError) -> Reply:
    if ctx.request.path.startswith(OPENAI_PREFIX):
        status, body = openai_api.error_body(exc)
        return json_reply(status, body, {**exc.headers(), **ctx.reply_headers})
    return error_reply(exc, ctx.reply_headers)


def _log_outcome(log: dict[str, object], outcome: Outcome) -> None:
    if outcome.model is not None:
        log["model"] = outcome.model.id
    if outcome.fallback_from is not None:
        log["fallback_from"] = outcome.fallback_from.id
    if outcome.error is not None:
        log["error_code"] = outcome.error.code
        log["error_detail"] = str(outcome.error)
    if outcome.ttft_ms is not None:
        log["ttft_ms"] = outcome.ttft_ms
    if outcome.usage is not None:
        log["prompt_tokens"] = outcome.usage["prompt_tokens"]
        log["completion_tokens"] = outcome.usage["completion_tokens"]
    if outcome.finish_reason is not None:
        log["finish_reason"] = outcome.finish_reason
    if outcome.client_gone:
        # Whatever failed after the client left is a consequence of its leaving.
        log["error_code"] = "client_closed"
    if outcome.truncated:
        log["truncated"] = True
    if outcome.cached:
        log["cached"] = True
    if outcome.moderation is not None:
        verdict = outcome.moderation
        log["answer_moderation"] = (
            "safe" if verdict.safe else "unsafe:" + ",".join(verdict.categories)
        )
    if outcome.moderation_error is not None:
        log["answer_moderation_error"] = outcome.moderation_error


def _emit(ctx: Context, status: int) -> None:
    """One structured line per request (Workers Logs indexes JSON lines)."""
    record = {
        "request_id": ctx.request_id,
        **ctx.log,
        "status": status,
        "duration_ms": round((time.monotonic() - ctx.started) * 1000, 1),
    }
    print(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
