"""The Worker's HTTP surface: the routing table, and one request's way through it.

Everything here is plain Python over ``Incoming``/``Reply`` and the protocols
in ``core.ports``; ``edgechat.platform`` adapts the Workers runtime to it.
The handlers are one module per capability: ``site`` (health, catalog,
limits, presets, CORS preflight), ``answers`` (``/chat`` and ``/v1``'s
answers), ``media`` (documents, speech, transcription), ``account`` (who
asks, usage), ``history`` (conversations, share links, images on the
server), ``compare`` (comparisons, votes and ratings, the leaderboard);
``steps`` holds what they all do first.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping

from edgechat.alerts import send
from edgechat.alerts.rules import policy_of
from edgechat.answer.candidates import Cooling
from edgechat.answer.context import Context
from edgechat.apis import openai as openai_api
from edgechat.config.settings import Settings
from edgechat.core.errors import EdgechatError, MethodNotAllowed, Misconfigured, NotFound
from edgechat.core.http import Incoming, Reply, error_reply, json_reply
from edgechat.core.ports import DatabaseError, Platform, Schedule
from edgechat.history import files
from edgechat.history import store as history
from edgechat.users.identity import AccessKeys
from edgechat.web.account import api_usage, me
from edgechat.web.answers import chat, completions, v1_embeddings, v1_models, v1_responses
from edgechat.web.compare import (
    api_leaderboard,
    comparison_create,
    comparison_get,
    feedback_list,
    feedback_post,
)
from edgechat.web.history import (
    api_conversations,
    api_shares,
    conversation_delete,
    conversation_get,
    conversation_put,
    conversations_batch,
    file_get,
    file_put,
    my_data,
    my_data_delete,
    share_create,
    share_revoke,
    shared_image,
    shared_page,
)
from edgechat.web.knowledge import (
    base_delete,
    base_get,
    base_patch,
    document_delete,
    document_get,
    documents_get,
    documents_post,
    knowledge_get,
    knowledge_post,
    resume_stalled,
)
from edgechat.web.media import (
    api_documents,
    api_speech,
    api_transcribe,
    v1_speech,
    v1_transcriptions,
)
from edgechat.web.site import api_presets, healthz, limits, models, page, preflight, preflight_for

__all__ = ["ROUTES", "AccessKeys", "Cooling", "SettingsOnce", "handle", "scheduled"]


Handler = Callable[[Context], Awaitable[Reply]]


# (path → method → handler). HEAD is answered wherever GET is.
ROUTES: Mapping[str, Mapping[str, Handler]] = {
    "/": {"GET": page},
    "/chat": {"POST": chat, "OPTIONS": preflight},
    "/api/models": {"GET": models},
    "/api/limits": {"GET": limits},
    "/api/presets": {"GET": api_presets},
    "/api/documents": {"POST": api_documents, "OPTIONS": preflight},
    "/api/speech": {"POST": api_speech, "OPTIONS": preflight},
    "/api/transcribe": {"POST": api_transcribe, "OPTIONS": preflight},
    "/api/usage": {"GET": api_usage},
    "/api/me": {"GET": me},
    "/api/conversations": {"GET": api_conversations, "POST": conversations_batch},
    "/api/shares": {"GET": api_shares, "POST": share_create},
    "/api/my-data": {"GET": my_data, "DELETE": my_data_delete},
    "/api/comparisons": {"POST": comparison_create, "OPTIONS": preflight},
    "/api/feedback": {
        "GET": feedback_list,
        "POST": feedback_post,
        "OPTIONS": preflight_for("GET, HEAD, POST, OPTIONS"),
    },
    "/api/leaderboard": {"GET": api_leaderboard},
    "/api/knowledge": {"GET": knowledge_get, "POST": knowledge_post},
    "/v1/chat/completions": {"POST": completions, "OPTIONS": preflight},
    "/v1/responses": {"POST": v1_responses, "OPTIONS": preflight},
    "/v1/embeddings": {"POST": v1_embeddings, "OPTIONS": preflight},
    "/v1/models": {"GET": v1_models},
    "/v1/audio/speech": {"POST": v1_speech, "OPTIONS": preflight},
    "/v1/audio/transcriptions": {"POST": v1_transcriptions, "OPTIONS": preflight},
    "/healthz": {"GET": healthz},
}


# (prefix → method → handler): the path's rest, one segment, is ``ctx.param``;
# the log names the route by its prefix (a share link's id is a secret).
PREFIXED: Mapping[str, Mapping[str, Handler]] = {
    "/api/conversations/": {
        "GET": conversation_get,
        "PUT": conversation_put,
        "DELETE": conversation_delete,
    },
    "/api/shares/": {"DELETE": share_revoke},
    "/api/comparisons/": {"GET": comparison_get},
    "/api/files/": {"GET": file_get, "PUT": file_put},
    "/api/knowledge/": {"GET": base_get, "PATCH": base_patch, "DELETE": base_delete},
    "/s/": {"GET": shared_page},
}


# (prefix, middle → method → handler): ``<prefix><a><middle><b>``, one
# segment each; ``ctx.param`` is ``<a><middle><b>``.
NESTED: Mapping[tuple[str, str], Mapping[str, Handler]] = {
    ("/s/", "/images/"): {"GET": shared_image},
    ("/api/knowledge/", "/documents/"): {"GET": document_get, "DELETE": document_delete},
}


# (prefix, suffix → method → handler): ``<prefix><a><suffix>``, one segment;
# ``ctx.param`` is ``<a>``.
SUFFIXED: Mapping[tuple[str, str], Mapping[str, Handler]] = {
    ("/api/knowledge/", "/documents"): {"GET": documents_get, "POST": documents_post},
}


# Routes that speak the OpenAI API, errors included.
OPENAI_PREFIX = "/v1/"


def _allowed(methods: Mapping[str, Handler]) -> tuple[str, ...]:
    names = list(methods)
    if "GET" in methods:
        names.insert(names.index("GET") + 1, "HEAD")
    return tuple(names)


def _prefixed(ctx: Context) -> Mapping[str, Handler] | None:
    for prefix, methods in PREFIXED.items():
        rest = ctx.request.path.removeprefix(prefix)
        if rest != ctx.request.path and rest and "/" not in rest:
            ctx.param = rest
            ctx.log["route"] = prefix + "*"
            return methods
    for (prefix, middle), methods in NESTED.items():
        rest = ctx.request.path.removeprefix(prefix)
        first, found, last = rest.partition(middle)
        if rest != ctx.request.path and found and first and last and "/" not in first + last:
            ctx.param = rest
            ctx.log["route"] = f"{prefix}*{middle}*"
            return methods
    for (prefix, suffix), methods in SUFFIXED.items():
        rest = ctx.request.path.removeprefix(prefix)
        first = rest.removesuffix(suffix)
        if rest != ctx.request.path and first != rest and first and "/" not in first:
            ctx.param = first
            ctx.log["route"] = f"{prefix}*{suffix}"
            return methods
    return None


class SettingsOnce:
    """The settings of one isolate: its ``[vars]`` do not change while it
    lives, so they are read on the first request and kept. A bad value is not
    kept: every request reports it until the configuration is fixed."""

    __slots__ = ("_settings",)

    def __init__(self) -> None:
        self._settings: Settings | None = None

    def get(self, platform: Platform | Schedule) -> Settings:
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
    access_keys: AccessKeys | None = None,
) -> Reply:
    """Answers one request. Never raises: every failure becomes an error reply.
    ``settings``, ``cooling`` and ``access_keys`` are the isolate's
    (``entry.py``); without them the ``[vars]`` are read, models cool down
    and Access's keys are fetched for this request alone."""
    ctx = Context(
        request=request,
        platform=platform,
        settings=Settings(),
        request_id=uuid.uuid4().hex,
        started=time.monotonic(),
        log={"route": request.path, "method": request.method},
        cooling=cooling or Cooling(),
        access_keys=access_keys or AccessKeys(),
    )
    try:
        ctx.settings = (settings or SettingsOnce()).get(platform)
        methods = ROUTES.get(request.path)
        if methods is None:
            methods = _prefixed(ctx)
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
        ctx.emit(reply.status)
    return reply


def _error_reply(ctx: Context, exc: EdgechatError) -> Reply:
    if ctx.request.path.startswith(OPENAI_PREFIX):
        status, body = openai_api.error_body(exc)
        return json_reply(status, body, {**exc.headers(), **ctx.reply_headers})
    return error_reply(exc, ctx.reply_headers)


async def scheduled(
    schedule: Schedule, settings: SettingsOnce | None, now_ms: int, cron: str
) -> None:
    """A Cron Trigger's run (``[triggers] crons``): every user's history held
    to ``HISTORY_RETENTION_DAYS`` and every expired link's copy deleted
    (``history.purge``), their images too (``files.purge``); then the spend
    alerts reached without one yet, and those due again (``alerts.send.sweep``);
    then a knowledge base's ingestion that stopped (``web.knowledge.resume_stalled``).
    Writes one log line; raises when the settings, a database or the
    bucket fail (after trying the rest), so the platform records the run as
    failed."""
    started = time.monotonic()
    record: dict[str, object] = {
        "request_id": uuid.uuid4().hex,
        "event": "scheduled",
        "cron": cron,
    }
    failure: Exception | None = None
    try:
        current = (settings or SettingsOnce()).get(schedule)
        for step in (_purge, _alert, _ingest):
            try:
                await step(schedule, current, now_ms, started, record)
            except (EdgechatError, DatabaseError) as exc:
                record.setdefault("error_detail", str(exc))
                failure = failure or exc
    except EdgechatError as exc:
        record["error_detail"] = str(exc)
        raise
    finally:
        record["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
        print(json.dumps(record, separators=(",", ":")))
    if failure is not None:
        raise failure


async def _purge(
    schedule: Schedule, current: Settings, now_ms: int, started: float, record: dict[str, object]
) -> None:
    db = schedule.history
    if db is None:
        record["skipped"] = "no DB binding"
        return
    days = current.history_retention_days
    purged = await history.purge(db, now_ms, days)
    # After the conversations: an image they named is unnamed now.
    if schedule.files is not None:
        gone, later = await files.purge(db, schedule.files, now_ms, days)
        purged["files"] = gone
        if later:
            purged["files_owners_left"] = later
    record["purged"] = purged


async def _alert(
    schedule: Schedule, current: Settings, now_ms: int, started: float, record: dict[str, object]
) -> None:
    policy = policy_of(current)
    if policy is None or schedule.db is None:
        return

    def clock() -> float:
        # The run's time, moving on while it sends.
        return now_ms / 1000 + (time.monotonic() - started)

    record["alerts"] = await send.sweep(schedule.db, schedule.outbound, policy, clock)


async def _ingest(
    schedule: Schedule, current: Settings, now_ms: int, started: float, record: dict[str, object]
) -> None:
    """Knowledge bases' ingestions that stopped while nobody looked (a
    look at the documents takes them up too: ``web.knowledge``)."""

    def clock() -> float:
        return now_ms / 1000 + (time.monotonic() - started)

    done = await resume_stalled(schedule, current, now_ms, clock, str(record["request_id"]))
    if done:
        record["knowledge"] = done
