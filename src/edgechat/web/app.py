"""The Worker's HTTP surface: a routing table and its handlers.

Everything here is plain Python over ``Incoming``/``Reply`` and the protocols
in ``ports``; ``platform.py`` adapts the Workers runtime to it. A question's
answer is ``pipeline``'s.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

from edgechat.answer import pipeline
from edgechat.answer.candidates import Cooling
from edgechat.apis import embeddings, responses
from edgechat.apis import openai as openai_api
from edgechat.apis.body import body_cap, json_object, parse_document
from edgechat.apis.chat import ChatFraming
from edgechat.apis.chat_body import parse_chat_request
from edgechat.apis.embeddings_body import parse_embeddings_request
from edgechat.apis.openai_body import parse_openai_request
from edgechat.apis.responses_body import parse_responses_request
from edgechat.config import presets
from edgechat.config.settings import Settings
from edgechat.core import json_body
from edgechat.core.errors import (
    BadRequest,
    ClientError,
    EdgechatError,
    FileTooLarge,
    Gone,
    HistoryUnavailable,
    MethodNotAllowed,
    Misconfigured,
    NotFound,
    PayloadTooLarge,
    PreconditionRequired,
    SignInRequired,
    StoreUnavailable,
    UnsupportedMediaType,
)
from edgechat.core.http import API_HEADERS, Incoming, Reply, error_reply, json_reply
from edgechat.core.models import Model, catalog_json
from edgechat.core.ports import Blobs, Database, DatabaseError, KvError, Platform, Schedule
from edgechat.core.requests import Limits, OpenAIRequest
from edgechat.history import files, shares
from edgechat.history import store as history
from edgechat.history.conversations import check_conversation, is_image_id
from edgechat.media import documents, speech, transcription
from edgechat.media.images import IMAGE_TYPES
from edgechat.users import budget, identity, usage
from edgechat.users.identity import AccessKeys, User
from edgechat.web import guards
from edgechat.web.context import Context

__all__ = ["ROUTES", "AccessKeys", "Cooling", "SettingsOnce", "handle"]


Handler = Callable[[Context], Awaitable[Reply]]


async def healthz(ctx: Context) -> Reply:
    return json_reply(200, {"status": "ok"})


async def models(ctx: Context) -> Reply:
    s = ctx.settings
    return json_reply(200, catalog_json(s.models, s.default_model))


async def limits(ctx: Context) -> Reply:
    # The page reads its limits here, so the server is their one source.
    return json_reply(200, ctx.settings.limits.to_json())


async def api_presets(ctx: Context) -> Reply:
    # The page offers these when a conversation starts; their prompts stay here.
    return json_reply(200, presets.presets_json(ctx.settings.presets))


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
    body = await _body(ctx, await _who(ctx))
    request = parse_chat_request(
        body, settings.limits, settings.models, settings.default_model, settings.presets
    )
    request = await documents.attach(ctx.platform.ai, request, settings.limits, settings.models)
    return await pipeline.answer(ctx, request, ChatFraming(ctx.request_id), cors)


# What both of the OpenAI API's answer routes hand their framings: the
# request id, the model asked for, the output token cap.
Facts = tuple[str, Model, int]


async def _openai_question(
    ctx: Context, parse: Callable[[bytes, Limits, Sequence[str], str], OpenAIRequest]
) -> tuple[OpenAIRequest, Facts, int, dict[str, str]]:
    """A ``/v1`` question through the checks and ``parse``: the request,
    its facts, the time it was asked and the CORS headers."""
    settings = ctx.settings
    cors = _cors(ctx)
    body = await _body(ctx, await _who(ctx, api=True))
    parsed = parse(body, settings.limits, settings.models, settings.default_model)
    chat = await documents.attach(ctx.platform.ai, parsed.chat, settings.limits, settings.models)
    if chat is not parsed.chat:  # documents were attached
        parsed = dataclasses.replace(parsed, chat=chat)
    facts = (ctx.request_id, chat.model, chat.max_tokens)
    return parsed, facts, int(time.time()), cors


async def completions(ctx: Context) -> Reply:
    """``POST /v1/chat/completions``: the OpenAI API over the same pipeline."""
    parsed, facts, created, cors = await _openai_question(ctx, parse_openai_request)
    if not parsed.stream:
        whole = openai_api.CompletionFraming(*facts, created=created)
        return await pipeline.document(ctx, parsed.chat, whole, cors)
    chunks = openai_api.ChunkFraming(*facts, include_usage=parsed.include_usage, created=created)
    return await pipeline.answer(ctx, parsed.chat, chunks, cors)


async def v1_responses(ctx: Context) -> Reply:
    """``POST /v1/responses``: the Responses API over the same pipeline."""
    parsed, facts, created, cors = await _openai_question(ctx, parse_responses_request)
    if not parsed.stream:
        whole = responses.ResponseDocument(*facts, created=created)
        return await pipeline.document(ctx, parsed.chat, whole, cors)
    events = responses.ResponseEvents(*facts, created=created)
    return await pipeline.answer(ctx, parsed.chat, events, cors)


async def v1_embeddings(ctx: Context) -> Reply:
    """``POST /v1/embeddings``: one binding call for the request's texts."""
    settings = ctx.settings
    cors = _cors(ctx)
    body = await _body(ctx, await _who(ctx, api=True))
    request = parse_embeddings_request(body, settings.limits)
    ctx.log["model"] = request.model.id
    ctx.log["inputs"] = len(request.texts)
    options = pipeline.ai_options(ctx, refresh=False)
    vectors, tokens = await embeddings.embed(
        ctx.platform.ai, request, options, settings.total_timeout_s
    )
    return json_reply(200, embeddings.embeddings_json(request, vectors, tokens), cors)


async def api_documents(ctx: Context) -> Reply:
    """``POST /api/documents``: one file part checked and converted as
    ``/chat`` would, and what the page shows of it (its tokens)."""
    settings = ctx.settings
    _cors(ctx)
    body = await _body(ctx, await _who(ctx))
    file = parse_document(body, settings.limits)
    return json_reply(200, await documents.describe(ctx.platform.ai, file, settings.limits))


async def api_speech(ctx: Context) -> Reply:
    """``POST /api/speech``: Markdown read aloud, as MP3."""
    return await _speak(ctx, await _who(ctx), speech.parse_speech)


async def v1_speech(ctx: Context) -> Reply:
    """``POST /v1/audio/speech``: the same in OpenAI's shape."""
    return await _speak(ctx, await _who(ctx, api=True), speech.parse_openai_speech)


async def _speak(ctx: Context, user: User, parse: Callable[[Any, int], tuple[str, str]]) -> Reply:
    _cors(ctx)
    body = await _body(ctx, user)
    limits = ctx.settings.limits
    text, lang = parse(json_object(body, limits), limits.max_speech_chars)
    data = await speech.speak(ctx.platform.ai, text, lang, {})
    ctx.log["audio_bytes"] = len(data)
    headers = {**API_HEADERS, "Content-Type": "audio/mpeg", "Cache-Control": "no-store"}
    return Reply(200, {**headers, **ctx.reply_headers}, data)


async def api_transcribe(ctx: Context) -> Reply:
    """``POST /api/transcribe``: the recorded audio as the body; its
    language, when known, as ``Content-Language`` (``en`` or ``zh``)."""
    _cors(ctx)
    data = await _audio_body(ctx, await _who(ctx), 0)
    limits = ctx.settings.limits
    transcription.check_audio(data, "The audio", limits.max_audio_bytes, limits.max_audio_seconds)
    spoken = transcription.language(ctx.request.headers.get("content-language"))
    return json_reply(200, await transcription.transcribe(ctx.platform.ai, data, spoken))


async def v1_transcriptions(ctx: Context) -> Reply:
    """``POST /v1/audio/transcriptions``: OpenAI's multipart form."""
    _cors(ctx)
    body = await _audio_body(ctx, await _who(ctx, api=True), 64 << 10)
    limits = ctx.settings.limits
    form = transcription.parse_form(ctx.request.headers.get("content-type", ""), body)
    data = form["file"]
    transcription.check_audio(data, "file", limits.max_audio_bytes, limits.max_audio_seconds)
    spoken = transcription.language(form.get("language"))
    result = await transcription.transcribe(ctx.platform.ai, data, spoken, form.get("prompt"))
    if form["response_format"] == "text":
        headers = {**API_HEADERS, "Content-Type": "text/plain; charset=utf-8"}
        return Reply(200, {**headers, **ctx.reply_headers}, result["text"].encode())
    if form["response_format"] == "verbose_json":
        return json_reply(200, {"task": "transcribe", **result})
    return json_reply(200, {"text": result["text"]})


async def _audio_body(ctx: Context, user: User, extra: int) -> bytes:
    """An audio upload's body, after the rate limit, within MAX_AUDIO_BYTES
    (and ``extra`` bytes of form around it)."""
    await _check_rate(ctx, user)
    return await ctx.platform.read_body(ctx.settings.limits.max_audio_bytes + extra)


async def v1_models(ctx: Context) -> Reply:
    await _who(ctx, api=True)
    return json_reply(200, openai_api.models_json(ctx.settings.models))


async def api_usage(ctx: Context) -> Reply:
    """The last ``?days=`` UTC days' (today alone by default) requests,
    tokens, dollars and Neurons per day, user and model: the asking user's
    own answers, or everyone's for an admin (``ADMINS``)."""
    user = await _who(ctx)
    days = _usage_days(ctx.request.query)
    kv = ctx.platform.kv
    if kv is None:
        raise NotFound(
            public="Usage is counted in the CACHE KV namespace, which is not bound.",
            detail="no CACHE binding",
        )
    try:
        body = await usage.read_days(
            kv,
            usage.usage_days(ctx.cooling.wall(), days),
            (lambda _: True) if user.admin else user.id.__eq__,
        )
    except KvError as exc:
        raise StoreUnavailable(detail=f"list: {exc}") from exc
    body["viewer"] = {"user": user.id, "admin": user.admin}
    return json_reply(200, body)


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
    user = await _who(ctx)
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


async def _who(ctx: Context, *, api: bool = False) -> User:
    """Who the request is (``identity``); raises what refuses it."""
    rules = ctx.settings.identity
    ctx.user = await identity.identify(
        ctx.request, rules, ctx.platform.verifier, ctx.access_keys, api=api
    )
    ctx.log["user"] = ctx.user.id
    return ctx.user


async def _body(ctx: Context, user: User) -> bytes:
    """The checks every POST of a question passes before it may cost
    anything (who asks is checked by the caller), then its body."""
    guards.check_json(ctx.request)
    await _check_rate(ctx, user)
    return await ctx.platform.read_body(body_cap(ctx.settings.limits, ctx.settings.models))


async def _check_rate(ctx: Context, user: User) -> None:
    """The rate limit: per user when the request says who it is, else per address."""
    known = None if user.via == "anonymous" else user.id
    await guards.check_rate(ctx.platform.rate_limiter, guards.rate_limit_key(ctx.request, known))


def _cors(ctx: Context) -> dict[str, str]:
    cors = guards.cors_headers(guards.cors_origin(ctx.request, ctx.settings))
    # An allowed cross-site caller must be able to read our errors too.
    ctx.reply_headers.update(cors)
    return cors


# --- conversations on the server (history.py) and share links (shares.py) --

# A conversation's id in a URL: the page's ids (UUIDs) and more, nothing to escape.
_CONVERSATION_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
# The field names a refusal of a conversation body may use to say where.
_CONVERSATION_FIELDS = frozenset(
    (
        *("id", "title", "updated", "pick", "preset", "nodes", "parent", "role", "content"),
        *("reasoning", "status", "stats", "error", "moderation", "categories", "message"),
        *("images", "type", "width", "height"),
    )
)


async def _history(ctx: Context) -> tuple[Database, str]:
    """The ``DB`` database and the signed-in user's id; refuses anonymous
    clients (their conversations stay in the browser) and cross-site callers."""
    _cors(ctx)
    user = await _who(ctx)
    if user.via == "anonymous":
        raise SignInRequired(detail="history without an identity")
    db = ctx.platform.history
    if db is None:
        raise NotFound(
            public="Conversations are kept on the server in the DB database, which is not bound.",
            detail="no DB binding",
        )
    return db, user.id


def _query(ctx: Context) -> dict[str, str]:
    pairs = parse_qsl(ctx.request.query, keep_blank_values=True)
    query = dict(pairs)
    if len(query) != len(pairs):
        raise BadRequest(public="A query parameter is given twice.")
    return query


def _now_ms(ctx: Context) -> int:
    return int(ctx.cooling.wall() * 1000)


def _stored(exc: DatabaseError) -> HistoryUnavailable:
    return HistoryUnavailable(detail=f"history: {exc}")


async def api_conversations(ctx: Context) -> Reply:
    """``GET /api/conversations``: the user's conversations, newest write
    first (``history.list_page``)."""
    db, user = await _history(ctx)
    query = _query(ctx)
    days = ctx.settings.history_retention_days
    try:
        if days is not None:
            await history.expire(db, user, _now_ms(ctx), days)
        page = await history.list_page(db, user, query)
    except DatabaseError as exc:
        raise _stored(exc) from exc
    headers = {**API_HEADERS, "Content-Type": "application/json", "Cache-Control": "no-store"}
    return Reply(200, {**headers, **ctx.reply_headers}, page.to_json_bytes())


def _conversation_id(ctx: Context) -> str:
    if _CONVERSATION_ID.fullmatch(ctx.param) is None:
        raise BadRequest(public="A conversation id is 1 to 100 letters, digits, '.', '_' or '-'.")
    return ctx.param


async def conversation_get(ctx: Context) -> Reply:
    db, user = await _history(ctx)
    cid = _conversation_id(ctx)
    try:
        found = await history.get(db, user, cid)
    except DatabaseError as exc:
        raise _stored(exc) from exc
    if found is None:
        raise NotFound(public="No such conversation.", detail=f"get {cid}")
    version, body = found
    tag = {"ETag": history.etag(version)}
    if body is None:
        ctx.reply_headers.update(tag)
        raise Gone(public="This conversation was deleted.", detail=f"tombstone {cid}")
    if history.version_of(ctx.request.headers.get("if-none-match", "")) == version:
        return Reply(304, {**tag, "Cache-Control": "no-store", **ctx.reply_headers})
    headers = {**API_HEADERS, "Content-Type": "application/json", "Cache-Control": "no-store"}
    return Reply(200, {**headers, **tag, **ctx.reply_headers}, body.encode())


async def _conversation_json(ctx: Context, most: int) -> Any:
    """A JSON body of conversations (``most`` bytes at most), parsed by the
    JSON rules; a refusal names the conversation's fields."""
    guards.check_json(ctx.request)
    body = await ctx.platform.read_body(most)
    return json_body.loads(
        body,
        max_depth=ctx.settings.limits.max_json_depth,
        max_text_bytes=most,
        names=_CONVERSATION_FIELDS,
    )


async def conversation_put(ctx: Context) -> Reply:
    """``PUT /api/conversations/<id>``: the whole conversation, checked by
    the import rules (``conversations``), written if its precondition holds."""
    db, user = await _history(ctx)
    cid = _conversation_id(ctx)
    want = history.precondition(ctx.request.headers)
    limits = ctx.settings.limits
    data = await _conversation_json(ctx, limits.max_conversation_bytes)
    conversation = check_conversation(data, cid)
    quota = history.Quota(limits.max_conversations, limits.max_history_bytes)
    try:
        version, seq, created = await history.put(
            db, user, cid, conversation, want, quota, _now_ms(ctx)
        )
    except DatabaseError as exc:
        raise _stored(exc) from exc
    tag = history.etag(version)
    return json_reply(201 if created else 200, {"id": cid, "etag": tag, "seq": seq}, {"ETag": tag})


def _batch_write(item: Any, k: int) -> tuple[str, dict[str, Any], history.Precondition]:
    """One write of a batch: ``{"conversation": flat, "if_match": etag | "*"}``
    or ``{"conversation": flat, "if_none_match": "*"}``, as its headers would
    say it to ``PUT /api/conversations/<id>``."""
    if not isinstance(item, dict) or "conversation" not in item:
        raise BadRequest(public=f"put[{k}] must be an object with a conversation.")
    for key in item:
        if key not in ("conversation", "if_match", "if_none_match"):
            raise BadRequest(public=f"put[{k}] takes conversation, if_match or if_none_match.")
    said = {name: item.get(name) for name in ("if_match", "if_none_match")}
    if not all(value is None or isinstance(value, str) for value in said.values()):
        raise BadRequest(public=f"put[{k}]'s if_match and if_none_match must be strings.")
    headers = {name.replace("_", "-"): value for name, value in said.items() if value is not None}
    conversation = item["conversation"]
    cid = conversation.get("id") if isinstance(conversation, dict) else None
    if not isinstance(cid, str) or _CONVERSATION_ID.fullmatch(cid) is None:
        raise BadRequest(public=f"put[{k}].conversation.id must be a conversation id.")
    return cid, check_conversation(conversation, cid), history.precondition(headers)


async def conversations_batch(ctx: Context) -> Reply:
    """``POST /api/conversations`` ``{"put": [write, ...]}``: several
    conversations written in one request (a device's first sync), each as
    its own ``PUT`` would be and answered in order; a refused one (its
    version, a limit, a field) leaves the others written."""
    db, user = await _history(ctx)
    limits = ctx.settings.limits
    data = await _conversation_json(ctx, limits.max_batch_bytes)
    items = data.get("put") if isinstance(data, dict) and data.keys() == {"put"} else None
    if not isinstance(items, list) or not items:
        raise BadRequest(public='A batch is {"put": [...]}, one write or more.')
    if len(items) > limits.max_batch_conversations:
        raise BadRequest(
            public=f"A batch writes at most {limits.max_batch_conversations} conversations."
        )
    results: list[dict[str, Any] | None] = [None] * len(items)
    writes: list[tuple[str, dict[str, Any], history.Precondition]] = []
    places: list[int] = []
    for k, item in enumerate(items):
        try:
            writes.append(_batch_write(item, k))
            places.append(k)
        except ClientError as exc:
            results[k] = {"status": exc.status, **exc.to_json()}
    quota = history.Quota(
        limits.max_conversations, limits.max_history_bytes, limits.max_conversation_bytes
    )
    try:
        outcomes = await history.put_many(db, user, writes, quota, _now_ms(ctx))
    except DatabaseError as exc:
        raise _stored(exc) from exc
    for k, (cid, _, _), outcome in zip(places, writes, outcomes, strict=True):
        if isinstance(outcome, ClientError):
            results[k] = {"id": cid, "status": outcome.status, **outcome.to_json()}
        else:
            version, seq, created = outcome
            tag = history.etag(version)
            results[k] = {"id": cid, "status": 201 if created else 200, "etag": tag, "seq": seq}
    return json_reply(200, {"results": results})


async def conversation_delete(ctx: Context) -> Reply:
    """``DELETE /api/conversations/<id>`` with ``If-Match``: a tombstone."""
    db, user = await _history(ctx)
    cid = _conversation_id(ctx)
    want = history.precondition(ctx.request.headers, creating_allowed=False)
    blobs = ctx.platform.files
    try:
        named = await files.named_by(db, user, cid) if blobs is not None else []
        version, seq = await history.remove(db, user, cid, want, _now_ms(ctx))
        if blobs is not None:
            await files.forget_unnamed(db, blobs, user, named)
    except DatabaseError as exc:
        raise _stored(exc) from exc
    tag = history.etag(version)
    return json_reply(200, {"id": cid, "etag": tag, "seq": seq, "deleted": True}, {"ETag": tag})


async def my_data(ctx: Context) -> Reply:
    """``GET /api/my-data``: everything the server holds of the user."""
    db, user = await _history(ctx)
    try:
        body = await history.export(db, user)
        kept = await files.mine(db, user)
    except DatabaseError as exc:
        raise _stored(exc) from exc
    # Each image's description; its bytes are at /api/files/<id>.
    body = body[:-1] + b',"files":' + json.dumps(kept, separators=(",", ":")).encode() + b"}"
    headers = {
        **API_HEADERS,
        "Content-Type": "application/json",
        "Cache-Control": "no-store",
        "Content-Disposition": 'attachment; filename="edgechat-my-data.json"',
    }
    return Reply(200, {**headers, **ctx.reply_headers}, body)


async def my_data_delete(ctx: Context) -> Reply:
    """``DELETE /api/my-data`` with ``If-Match: *``: all of it deleted."""
    db, user = await _history(ctx)
    if ctx.request.headers.get("if-match", "").strip() != "*":
        raise PreconditionRequired(
            public="Deleting everything needs If-Match: * (it cannot be undone)."
        )
    try:
        if ctx.platform.files is not None:
            await files.erase(db, ctx.platform.files, user)
        await history.erase(db, user, _now_ms(ctx))
    except DatabaseError as exc:
        raise _stored(exc) from exc
    return Reply(204, {**API_HEADERS, "Cache-Control": "no-store", **ctx.reply_headers})


async def api_shares(ctx: Context) -> Reply:
    """``GET /api/shares``: my links (not revoked), newest first."""
    db, user = await _history(ctx)
    try:
        links = await shares.mine(db, user, _now_ms(ctx))
    except DatabaseError as exc:
        raise _stored(exc) from exc
    return json_reply(200, {"shares": links})


async def share_create(ctx: Context) -> Reply:
    """``POST /api/shares`` ``{"conversation": id, "days": n?}``: a link to a copy."""
    db, user = await _history(ctx)
    guards.check_json(ctx.request)
    limits = ctx.settings.limits
    data = json_object(await ctx.platform.read_body(4096), limits)
    for key in data:
        if key not in ("conversation", "days", "images"):
            raise BadRequest(public="A share takes conversation, days and images only.")
    cid = data.get("conversation")
    if not isinstance(cid, str) or _CONVERSATION_ID.fullmatch(cid) is None:
        raise BadRequest(public="conversation must be the id of one of your conversations.")
    days = data.get("days", shares.DEFAULT_DAYS)
    if type(days) is not int or not 1 <= days <= limits.max_share_days:
        raise BadRequest(public=f"days must be a whole number from 1 to {limits.max_share_days}.")
    with_images = data.get("images", False)
    if type(with_images) is not bool:
        raise BadRequest(public="images must be true or false.")
    blobs = _bucket(ctx) if with_images else None
    try:
        link = await shares.create(db, user, cid, days, limits.max_shares, _now_ms(ctx))
        if blobs is not None:
            link["images"] = await _share_images(ctx, db, blobs, user, link["id"])
    except DatabaseError as exc:
        raise _stored(exc) from exc
    return json_reply(201, link)


async def share_revoke(ctx: Context) -> Reply:
    db, user = await _history(ctx)
    if not shares.is_share_id(ctx.param):
        raise NotFound(public="No such share link.", detail="not a share id")
    try:
        await shares.revoke(db, user, ctx.param)
        if ctx.platform.files is not None:
            await files.unshare(db, ctx.platform.files, user, ctx.param)
    except DatabaseError as exc:
        raise _stored(exc) from exc
    return Reply(204, {**API_HEADERS, "Cache-Control": "no-store", **ctx.reply_headers})


async def shared_page(ctx: Context) -> Reply:
    """``GET /s/<id>``: the shared copy, read-only, for anyone with the link."""
    db = ctx.platform.history
    row = None
    if db is not None and shares.is_share_id(ctx.param):
        try:
            row = await shares.read(db, ctx.param)
        except DatabaseError as exc:
            raise _stored(exc) from exc
    status, body = shares.page(row, _now_ms(ctx))
    headers = shares.headers(row) if status == 200 else shares.HEADERS
    return Reply(status, {**headers, **ctx.reply_headers}, body)


# --- images of conversations on the server (files.py) ------------------------


def _bucket(ctx: Context) -> Blobs:
    blobs = ctx.platform.files
    if blobs is None:
        raise NotFound(
            public="Images are kept on the server in the FILES bucket, which is not bound.",
            detail="no FILES binding",
        )
    return blobs


def _file_id(text: str) -> str:
    if not is_image_id(text):
        raise BadRequest(public="An image id is 1 to 100 letters, digits, '.', '_' or '-'.")
    return text


def _file_quota(limits: Limits) -> files.Quota:
    return files.Quota(limits.max_files, limits.max_files_bytes)


async def _share_images(ctx: Context, db: Database, blobs: Blobs, user: str, sid: str) -> int:
    """The new link's copies of its images; on a refusal the link goes too."""
    limits = ctx.settings.limits
    try:
        return await files.share_images(
            db, blobs, user, sid, _file_quota(limits), limits.max_share_images, _now_ms(ctx)
        )
    except EdgechatError:
        await shares.revoke(db, user, sid)
        raise


# An image's reply: its own type, never sniffed, kept by the browser alone.
def _image_reply(ctx: Context, found: tuple[bytes, str], headers: Mapping[str, str]) -> Reply:
    data, kind = found
    reply_headers = {
        **headers,
        "Content-Type": kind if kind in IMAGE_TYPES else "application/octet-stream",
        "X-Content-Type-Options": "nosniff",
        "Content-Length": str(len(data)),
    }
    return Reply(200, {**reply_headers, **ctx.reply_headers}, data)


async def file_put(ctx: Context) -> Reply:
    """``PUT /api/files/<id>``: one of my images, its bytes as the body and
    its type as ``Content-Type``."""
    db, user = await _history(ctx)
    blobs = _bucket(ctx)
    fid = _file_id(ctx.param)
    kind = ctx.request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if kind not in IMAGE_TYPES:
        raise UnsupportedMediaType(
            public=f"Send the image's bytes with its Content-Type: one of {', '.join(IMAGE_TYPES)}."
        )
    limits = ctx.settings.limits
    try:
        data = await ctx.platform.read_body(limits.max_file_bytes)
    except PayloadTooLarge as exc:
        raise FileTooLarge(limit=limits.max_file_bytes, detail=str(exc)) from exc
    try:
        described, created = await files.upload(
            db, blobs, user, fid, kind, data, _file_quota(limits), _now_ms(ctx)
        )
    except DatabaseError as exc:
        raise _stored(exc) from exc
    return json_reply(201 if created else 200, described)


async def file_get(ctx: Context) -> Reply:
    """``GET /api/files/<id>``: one of my images (another user's is 404)."""
    _, user = await _history(ctx)
    blobs = _bucket(ctx)
    found = await files.read(blobs, user, _file_id(ctx.param))
    if found is None:
        raise NotFound(public="No such image.", detail="get of a missing file")
    return _image_reply(ctx, found, {**API_HEADERS, "Cache-Control": "private"})


async def shared_image(ctx: Context) -> Reply:
    """``GET /s/<id>/images/<image>``: an image of a link made with its images."""
    sid, _, fid = ctx.param.partition("/images/")
    db, blobs = ctx.platform.history, ctx.platform.files
    found = None
    if db is not None and blobs is not None and shares.is_share_id(sid) and is_image_id(fid):
        try:
            found = await files.read_shared(db, blobs, sid, fid, _now_ms(ctx))
        except DatabaseError as exc:
            raise _stored(exc) from exc
    if found is None:
        status, body = shares.page(None, _now_ms(ctx))
        return Reply(status, {**shares.HEADERS, **ctx.reply_headers}, body)
    return _image_reply(ctx, found, shares.IMAGE_REPLY_HEADERS)


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
    "/api/files/": {"GET": file_get, "PUT": file_put},
    "/s/": {"GET": shared_page},
}

# (prefix, middle → method → handler): ``<prefix><a><middle><b>``, one
# segment each; ``ctx.param`` is ``<a><middle><b>``.
NESTED: Mapping[tuple[str, str], Mapping[str, Handler]] = {
    ("/s/", "/images/"): {"GET": shared_image},
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
    (``history.purge``), their images too (``files.purge``). Writes one log
    line; raises when the settings, the database or the bucket fail, so the
    platform records the run as failed."""
    started = time.monotonic()
    record: dict[str, object] = {
        "request_id": uuid.uuid4().hex,
        "event": "scheduled",
        "cron": cron,
    }
    try:
        current = (settings or SettingsOnce()).get(schedule)
        db = schedule.history
        if db is None:
            record["skipped"] = "no DB binding"
        else:
            days = current.history_retention_days
            purged = await history.purge(db, now_ms, days)
            # After the conversations: an image they named is unnamed now.
            if schedule.files is not None:
                gone, later = await files.purge(db, schedule.files, now_ms, days)
                purged["files"] = gone
                if later:
                    purged["files_owners_left"] = later
            record["purged"] = purged
    except (EdgechatError, DatabaseError) as exc:
        record["error_detail"] = str(exc)
        raise
    finally:
        record["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
        print(json.dumps(record, separators=(",", ":")))
