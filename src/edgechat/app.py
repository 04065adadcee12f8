"""The Worker's HTTP surface: a routing table, the handlers, the request log.

Everything here is plain Python over ``Incoming``/``Reply`` and the protocols
in ``ports``; ``platform.py`` adapts the Workers runtime to it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from edgechat import guards
from edgechat.chat import ChatSession, Outcome
from edgechat.config import Settings
from edgechat.errors import EdgechatError, MethodNotAllowed, Misconfigured, NotFound
from edgechat.http import Incoming, Reply, error_reply, json_reply, stream_reply
from edgechat.models import catalog_json
from edgechat.ports import Platform, Sink
from edgechat.validation import parse_chat_request


@dataclass(slots=True)
class Context:
    request: Incoming
    platform: Platform
    settings: Settings
    request_id: str
    started: float
    log: dict[str, object]
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
    lim = ctx.settings.limits
    return json_reply(
        200,
        {
            "max_body_bytes": lim.max_body_bytes,
            "max_messages": lim.max_messages,
            "max_message_chars": lim.max_message_chars,
            "max_total_chars": lim.max_total_chars,
            "default_output_tokens": lim.default_output_tokens,
            "max_output_tokens": lim.max_output_tokens,
        },
    )


async def page(ctx: Context) -> Reply:
    # The page is a static asset served before the Worker runs; reaching here
    # means it is missing from the deployment.
    raise NotFound(detail="index.html not among the static assets")


async def chat_preflight(ctx: Context) -> Reply:
    origin = guards.cors_origin(ctx.request, ctx.settings)
    if origin is None:
        # Browsers only preflight cross-site requests; a same-origin one needs none.
        return Reply(204, {"Allow": "POST, OPTIONS"})
    return Reply(
        204,
        {
            **guards.cors_headers(origin),
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": "content-type, authorization",
            "Access-Control-Max-Age": "600",
        },
    )


async def chat(ctx: Context) -> Reply:
    request, settings = ctx.request, ctx.settings
    cors = guards.cors_headers(guards.cors_origin(request, settings))
    # An allowed cross-site caller must be able to read our errors too.
    ctx.reply_headers.update(cors)
    token = guards.check_token(request, settings)
    guards.check_json(request)
    await guards.check_rate(ctx.platform.rate_limiter, guards.rate_limit_key(request, token))
    body = await ctx.platform.read_body(settings.limits.max_body_bytes)
    chat_request = parse_chat_request(
        body, settings.limits, settings.models, settings.default_model
    )
    if settings.log_prompts:
        ctx.log["prompt"] = chat_request.messages[-1].content
    session = ChatSession(chat_request, settings, ctx.platform.ai, request_id=ctx.request_id)
    try:
        await session.open()
    finally:
        _log_outcome(ctx.log, session.outcome)

    async def produce(sink: Sink) -> None:
        await session.pump(sink)
        _log_outcome(ctx.log, session.outcome)
        _emit(ctx, 200)

    return stream_reply(produce, {**cors, "X-Request-Id": ctx.request_id})


# (path → method → handler). HEAD is answered wherever GET is.
ROUTES: Mapping[str, Mapping[str, Handler]] = {
    "/": {"GET": page},
    "/chat": {"POST": chat, "OPTIONS": chat_preflight},
    "/api/models": {"GET": models},
    "/api/limits": {"GET": limits},
    "/healthz": {"GET": healthz},
}


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
    request: Incoming, platform: Platform, settings: SettingsOnce | None = None
) -> Reply:
    """Answers one request. Never raises: every failure becomes an error reply.
    Without ``settings`` the ``[vars]`` are read for this request alone."""
    ctx = Context(
        request=request,
        platform=platform,
        settings=Settings(),
        request_id=uuid.uuid4().hex,
        started=time.monotonic(),
        log={"route": request.path, "method": request.method},
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
        reply = error_reply(exc, ctx.reply_headers)
        ctx.log["error_code"] = exc.code
        if exc.status >= 500 or type(exc) is EdgechatError:
            ctx.log["error_detail"] = str(exc)
    except Exception as exc:
        # A bug or a bad configuration: generic outward, detailed in the log.
        failure = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
        reply = error_reply(failure)
        ctx.log["error_code"] = failure.code
        ctx.log["error_detail"] = str(failure)
    reply.headers.setdefault("X-Request-Id", ctx.request_id)
    if reply.stream is None:
        _emit(ctx, reply.status)
    return reply


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


def _emit(ctx: Context, status: int) -> None:
    """One structured line per request (Workers Logs indexes JSON lines)."""
    record = {
        "request_id": ctx.request_id,
        **ctx.log,
        "status": status,
        "duration_ms": round((time.monotonic() - ctx.started) * 1000, 1),
    }
    print(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
