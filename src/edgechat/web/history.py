"""Conversations on the server (``/api/conversations``, ``store``), share links
(``/api/shares``, ``/s/<id>``, ``shares``), a user's images on the server
(``/api/files``, ``files``) and everything a user keeps (``/api/my-data``,
their feedback, comparisons and knowledge bases included).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from edgechat.answer.context import Context
from edgechat.apis.body import json_object
from edgechat.core import json_body
from edgechat.core.errors import (
    BadRequest,
    BatchTooLarge,
    BodyOverLimit,
    ClientError,
    ConversationTooLarge,
    EdgechatError,
    FileTooLarge,
    Gone,
    HistoryUnavailable,
    NotFound,
    PayloadTooLarge,
    PreconditionRequired,
    SignInRequired,
    UnsupportedMediaType,
)
from edgechat.core.http import API_HEADERS, Reply, json_reply
from edgechat.core.ids import is_client_id
from edgechat.core.ports import Blobs, Database, DatabaseError, VectorsError
from edgechat.core.requests import Limits
from edgechat.feedback import store as feedback
from edgechat.history import files, shares
from edgechat.history import store as history
from edgechat.history.conversations import check_conversation, is_image_id
from edgechat.knowledge import store as knowledge_store
from edgechat.media.images import IMAGE_TYPES
from edgechat.web import guards, knowledge
from edgechat.web.steps import allow_cors, query_params, who

__all__ = [
    "api_conversations",
    "api_shares",
    "conversation_delete",
    "conversation_get",
    "conversation_put",
    "conversations_batch",
    "file_get",
    "file_put",
    "my_data",
    "my_data_delete",
    "share_create",
    "share_revoke",
    "shared_image",
    "shared_page",
]


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
    allow_cors(ctx)
    user = await who(ctx)
    if user.via == "anonymous":
        raise SignInRequired(detail="history without an identity")
    db = ctx.platform.history
    if db is None:
        raise NotFound(
            public="Conversations are kept on the server in the DB database, which is not bound.",
            detail="no DB binding",
        )
    return db, user.id


def _now_ms(ctx: Context) -> int:
    return int(ctx.cooling.wall() * 1000)


def _stored(exc: DatabaseError | VectorsError) -> HistoryUnavailable:
    return HistoryUnavailable(detail=f"history: {exc}")


async def api_conversations(ctx: Context) -> Reply:
    """``GET /api/conversations``: the user's conversations, newest write
    first (``history.list_page``)."""
    db, user = await _history(ctx)
    query = query_params(ctx)
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
    # The page's ids (UUIDs) and more, nothing to escape (core.ids).
    if not is_client_id(ctx.param):
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


async def _conversation_json(ctx: Context, most: int, too_large: type[BodyOverLimit]) -> Any:
    """A JSON body of conversations (``most`` bytes at most, else
    ``too_large``, which names its limit), parsed by the JSON rules; a
    refusal names the conversation's fields."""
    guards.check_json(ctx.request)
    try:
        body = await ctx.platform.read_body(most)
    except PayloadTooLarge as exc:
        raise too_large(limit=most, detail=str(exc)) from exc
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
    data = await _conversation_json(ctx, limits.max_conversation_bytes, ConversationTooLarge)
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


def _batch_id(item: Any) -> str | None:
    """The conversation id a write names, when it names a valid one: every
    result says which conversation it is about (None: no id to say)."""
    conversation = item.get("conversation") if isinstance(item, dict) else None
    cid = conversation.get("id") if isinstance(conversation, dict) else None
    return cid if isinstance(cid, str) and is_client_id(cid) else None


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
    cid = _batch_id(item)
    if cid is None:
        raise BadRequest(public=f"put[{k}].conversation.id must be a conversation id.")
    return cid, check_conversation(item["conversation"], cid), history.precondition(headers)


async def conversations_batch(ctx: Context) -> Reply:
    """``POST /api/conversations`` ``{"put": [write, ...]}``: several
    conversations written in one request (a device's first sync), each as
    its own ``PUT`` would be and answered in order; a refused one (its
    version, a limit, a field) leaves the others written."""
    db, user = await _history(ctx)
    limits = ctx.settings.limits
    data = await _conversation_json(ctx, limits.max_batch_bytes, BatchTooLarge)
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
            results[k] = {"id": _batch_id(item), "status": exc.status, **exc.to_json()}
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
    """``GET /api/my-data``: everything the server holds of the user: their
    conversations and links, their images' descriptions, their feedback and
    comparisons."""
    db, user = await _history(ctx)
    try:
        body = await history.export(db, user)
        kept = await files.mine(db, user)
        judged = await feedback.export(db, user)
        bases = await knowledge_store.export(db, user)
    except DatabaseError as exc:
        raise _stored(exc) from exc
    # Each image's description; its bytes are at /api/files/<id>. Each
    # knowledge base's documents likewise, at /api/knowledge/<base>/documents/<id>.
    more = {"files": kept, **judged, "knowledge": bases}
    body = (
        body[:-1] + b"," + json.dumps(more, ensure_ascii=False, separators=(",", ":"))[1:].encode()
    )
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
        # The knowledge bases' vectors first: their ids are found from the rows.
        bases = await knowledge.erase(ctx, db, user)
        if ctx.platform.files is not None:
            await files.erase(db, ctx.platform.files, user)
        # Conversations, links, feedback, comparisons and knowledge bases: one transaction.
        erased = [
            *history.erase_statements(user, _now_ms(ctx)),
            *feedback.erase_statements(user),
            *bases,
        ]
        await db.batch(erased)
    except (DatabaseError, VectorsError) as exc:
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
    if not isinstance(cid, str) or not is_client_id(cid):
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


# --- images of conversations on the server (history.files) --------------------


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
