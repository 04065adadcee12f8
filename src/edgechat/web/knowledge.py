"""Knowledge bases (``/api/knowledge``): a signed-in user's bases and their
documents, each document ingested after the reply (``knowledge.ingest``,
in ``waitUntil``) and resumed while its progress is read; and a question's
passages (``/chat``'s ``knowledge``, the OpenAI API's ``edgechat.knowledge``).

They need the ``DB`` database, the ``FILES`` bucket (the documents'
originals) and the ``VECTORS`` index; without one of them the routes
answer ``404`` saying which.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

from edgechat.answer import billing, embedding, pipeline
from edgechat.answer.context import Context
from edgechat.apis.body import document_body_cap, json_object, parse_document
from edgechat.config.settings import Settings
from edgechat.core.errors import (
    AdminRequired,
    BadRequest,
    KnowledgeUnavailable,
    NotFound,
    SignInRequired,
)
from edgechat.core.http import API_HEADERS, Reply, json_reply
from edgechat.core.ids import is_random_id, new_id
from edgechat.core.ports import (
    Ai,
    BlobError,
    Blobs,
    Database,
    DatabaseError,
    Schedule,
    Vectors,
    VectorsError,
)
from edgechat.core.requests import ChatRequest
from edgechat.knowledge import ingest, retrieve, store
from edgechat.knowledge.ingest import Embed, Ingestion
from edgechat.media.documents import PLAIN_TYPES
from edgechat.web import guards
from edgechat.web.steps import allow_cors, check_rate, who

__all__ = [
    "base_delete",
    "base_get",
    "base_patch",
    "document_delete",
    "document_get",
    "documents_get",
    "documents_post",
    "erase",
    "knowledge_get",
    "knowledge_post",
    "resume_stalled",
    "with_passages",
]

MAX_NAME_CHARS = store.MAX_NAME_CHARS


class _Stores:
    __slots__ = ("blobs", "db", "user", "vectors")

    def __init__(self, db: Database, blobs: Blobs, vectors: Vectors, user: str) -> None:
        self.db, self.blobs, self.vectors, self.user = db, blobs, vectors, user


def _unbound(what: str, binding: str) -> NotFound:
    return NotFound(
        public=f"Knowledge bases keep their {what} in the {binding} binding, which is not bound.",
        detail=f"no {binding} binding",
    )


async def _stores(ctx: Context) -> _Stores:
    """The bindings and the signed-in user; refuses anonymous clients and
    cross-site callers."""
    allow_cors(ctx)
    user = await who(ctx)
    if user.via == "anonymous":
        raise SignInRequired(
            public="Knowledge bases are kept on the server for a signed-in user only "
            "(Cloudflare Access or a named key).",
            detail="knowledge without an identity",
        )
    db, blobs, vectors = ctx.platform.history, ctx.platform.files, ctx.platform.vectors()
    if db is None:
        raise _unbound("bases", "DB")
    if blobs is None:
        raise _unbound("documents", "FILES")
    if vectors is None:
        raise _unbound("vectors", "VECTORS")
    return _Stores(db, blobs, vectors, user.id)


def _failed(exc: Exception) -> KnowledgeUnavailable:
    return KnowledgeUnavailable(detail=f"knowledge: {type(exc).__name__}: {exc}")


_STORE_ERRORS = (DatabaseError, BlobError, VectorsError)


def _now_ms(ctx: Context) -> int:
    return int(ctx.cooling.wall() * 1000)


def _quota(ctx: Context) -> store.Quota:
    limits = ctx.settings.limits
    return store.Quota(
        limits.max_knowledge_bases,
        limits.max_knowledge_documents,
        limits.max_knowledge_chunks,
        limits.max_knowledge_bytes,
    )


def _base_id(text: str) -> str:
    if not is_random_id(text):
        raise NotFound(public="No such knowledge base.", detail="not a base id")
    return text


def _name(value: Any) -> str:
    if (
        type(value) is not str
        or not 0 < len(value.strip()) <= MAX_NAME_CHARS
        or any(ord(c) < 32 or ord(c) == 127 for c in value)
    ):
        raise BadRequest(
            public=f"name must be 1 to {MAX_NAME_CHARS} characters, no control characters."
        )
    return value.strip()


class _Payer:
    """Who pays for an embedding call, and where it is counted."""

    __slots__ = ("clock", "request_id", "settings", "stores", "user")

    def __init__(
        self,
        stores: billing.Stores,
        settings: Settings,
        user: str | None,
        request_id: str,
        clock: Callable[[], float],
    ) -> None:
        self.stores, self.settings, self.user = stores, settings, user
        self.request_id, self.clock = request_id, clock


def _embedder(
    ai: Ai,
    payer: _Payer,
    options: dict[str, Any],
    later: Callable[[Awaitable[None]], None] | None,
) -> Embed:
    """Embeddings (bge-m3, ``answer.embedding``), each call paid for by the
    payer like any embedding: counted before the vectors are handed back,
    or through ``later`` (``waitUntil``: after the reply)."""
    calls = itertools.count(1)

    async def embed(texts: list[str]) -> list[list[float]]:
        timeout = payer.settings.total_timeout_s
        embedded = await embedding.embed(ai, texts, timeout_s=timeout, options=options)
        # Each call is its own row of the day's usage, which is kept by
        # request id: the request's answer, or its other calls, would
        # otherwise replace it.
        work = billing.count(
            payer.stores,
            payer.settings,
            embedding.bill_of(embedded),
            user=payer.user,
            request_id=f"{payer.request_id}:k{next(calls)}",
            clock=payer.clock,
        )
        if later is None:
            await work
        else:
            later(work)
        return embedded.vectors

    return embed


def embedder(ctx: Context, ai: Ai, *, after_reply: bool) -> Embed:
    """The knowledge bases' embeddings for this request's user: counted once
    the reply is out (a question's), or at once (``after_reply``: an
    ingestion, which already runs after it)."""
    user = None if ctx.user is None else ctx.user.id
    payer = _Payer(ctx.platform, ctx.settings, user, ctx.request_id, ctx.cooling.wall)
    options = pipeline.ai_options(ctx, refresh=False)
    return _embedder(ai, payer, options, None if after_reply else ctx.platform.wait_until)


def _rules(settings: Settings) -> ingest.Rules:
    return ingest.Rules(
        settings.knowledge_chunk_tokens,
        settings.knowledge_chunk_overlap,
        settings.limits.max_knowledge_chunks,
    )


def _ingestion(ctx: Context, stores: _Stores) -> Ingestion:
    ai = ctx.platform.ai_after_reply
    embed = embedder(ctx, ai, after_reply=True)
    rules = _rules(ctx.settings)
    return Ingestion(stores.db, stores.blobs, stores.vectors, ai, embed, rules, ctx.cooling.wall)


# Documents one scheduled run takes up: a run is up to ten batches of three
# subrequests, and the hourly run's other steps need theirs, within the
# Free plan's 50 (https://developers.cloudflare.com/workers/platform/limits/).
RESUMED_PER_RUN = 1


async def resume_stalled(
    schedule: Schedule, settings: Settings, now_ms: int, clock: Callable[[], float], run_id: str
) -> list[dict[str, Any]]:
    """The cron run's part: takes up the ingestion nobody looked at since it
    stopped (``RESUMED_PER_RUN`` documents, the longest waiting first),
    paid for by each document's owner. What each run did, for the log."""
    db, blobs, vectors = schedule.history, schedule.files, schedule.vectors()
    if db is None or blobs is None or vectors is None:
        return []
    records = []
    for row in await store.stalled(db, now_ms, RESUMED_PER_RUN):
        payer = _Payer(schedule, settings, row["user"], run_id, clock)
        embed = _embedder(schedule.ai, payer, {}, None)
        work = Ingestion(db, blobs, vectors, schedule.ai, embed, _rules(settings), clock)
        records.append(await ingest.run(work, row["id"]))
    return records


def _start(ctx: Context, work: Ingestion, did: str) -> None:
    """Runs an ingestion of ``did`` after the reply, with a log line of its own."""
    ctx.platform.wait_until(_logged(ctx.request_id, ingest.run(work, did)))


async def _logged(request_id: str, work: Awaitable[dict[str, Any]]) -> None:
    record: dict[str, Any] = {"request_id": request_id, "event": "knowledge_ingest"}
    try:
        record.update(await work)
    except Exception as exc:
        # A store failing on the claim: the next look at the progress tries again.
        record["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(record, ensure_ascii=False, separators=(",", ":")))


# --- bases -------------------------------------------------------------------


async def knowledge_get(ctx: Context) -> Reply:
    """``GET /api/knowledge``: my bases, and those shared with everyone."""
    stores = await _stores(ctx)
    try:
        bases = await store.list_bases(stores.db, stores.user)
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    return json_reply(200, {"bases": bases})


async def knowledge_post(ctx: Context) -> Reply:
    """``POST /api/knowledge`` ``{"name"}``: a new base of mine."""
    stores = await _stores(ctx)
    guards.check_json(ctx.request)
    data = json_object(await ctx.platform.read_body(4096), ctx.settings.limits)
    if not data.keys() <= {"name"}:
        raise BadRequest(public="A knowledge base takes a name only.")
    name = _name(data.get("name"))
    try:
        base = await store.create_base(
            stores.db, stores.user, new_id(), name, _quota(ctx), _now_ms(ctx)
        )
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    return json_reply(201, base)


async def base_get(ctx: Context) -> Reply:
    """``GET /api/knowledge/<base>``: one base I may read."""
    stores = await _stores(ctx)
    bid = _base_id(ctx.param)
    try:
        row = await store.base_for_reader(stores.db, stores.user, bid)
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    return json_reply(200, store.base_json(row, stores.user))


async def base_patch(ctx: Context) -> Reply:
    """``PATCH /api/knowledge/<base>`` ``{"shared": bool}``: an admin shares
    their base with every user, or stops."""
    stores = await _stores(ctx)
    bid = _base_id(ctx.param)
    guards.check_json(ctx.request)
    data = json_object(await ctx.platform.read_body(4096), ctx.settings.limits)
    shared = data.get("shared")
    if data.keys() != {"shared"} or type(shared) is not bool:
        raise BadRequest(public='A change of a knowledge base is {"shared": true or false}.')
    user = ctx.user
    if user is None or not user.admin:
        raise AdminRequired(public="Only an admin (ADMINS) may share a knowledge base.")
    try:
        await store.share_base(stores.db, stores.user, bid, shared)
        row = await store.base_for_reader(stores.db, stores.user, bid)
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    return json_reply(200, store.base_json(row, stores.user))


async def base_delete(ctx: Context) -> Reply:
    """``DELETE /api/knowledge/<base>``: my base, its documents, their
    chunks, vectors and originals."""
    stores = await _stores(ctx)
    bid = _base_id(ctx.param)
    try:
        await store.base_for_owner(stores.db, stores.user, bid)
        docs = await store.owned_documents(stores.db, stores.user, bid)
        await _forget(stores, docs, store.forget_base(stores.user, bid))
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    return Reply(204, {**API_HEADERS, "Cache-Control": "no-store", **ctx.reply_headers})


async def _forget(
    stores: _Stores, docs: list[dict[str, Any]], statements: list[tuple[str, list[Any]]]
) -> None:
    """The documents' vectors and originals, then their rows (``statements``):
    a failure midway leaves the rows, so the delete can be tried again."""
    await ingest.delete_vectors(stores.vectors, store.vector_ids(docs))
    keys = [store.object_key(stores.user, doc["id"]) for doc in docs]
    if keys:
        await stores.blobs.delete(keys)
    await stores.db.batch(statements)


# --- documents -----------------------------------------------------------------


async def documents_get(ctx: Context) -> Reply:
    """``GET /api/knowledge/<base>/documents``: the base's documents and
    each one's progress; an ingestion that stopped midway goes on."""
    stores = await _stores(ctx)
    bid = _base_id(ctx.param)
    try:
        base = await store.base_for_reader(stores.db, stores.user, bid)
        rows = await store.documents(stores.db, bid)
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    now = _now_ms(ctx)
    stalled = [
        row["id"]
        for row in rows
        if row["state"] in store.IN_PROGRESS and int(row.get("lease") or 0) < now
    ]
    if stalled and base["user"] == stores.user:
        work = _ingestion(ctx, stores)
        for did in stalled:
            _start(ctx, work, did)
    return json_reply(200, {"documents": [store.document_json(row) for row in rows]})


async def documents_post(ctx: Context) -> Reply:
    """``POST /api/knowledge/<base>/documents``: one file part, as
    ``/api/documents`` takes it, added to my base: ``202`` with the document
    pending; its ingestion runs after the reply."""
    stores = await _stores(ctx)
    bid = _base_id(ctx.param)
    guards.check_json(ctx.request)
    user = ctx.user
    assert user is not None
    await check_rate(ctx, user)
    # Its ingestion embeds every chunk at the user's cost: refused once the
    # day's budget is spent, as an embedding call is (no provider embeds).
    spent = pipeline.spend_check(ctx, pinned=True)
    if spent is not None:
        await spent
    limits = ctx.settings.limits
    most = limits.max_knowledge_document_bytes
    body = await ctx.platform.read_body(document_body_cap(limits, most))
    file = parse_document(body, limits, most, "MAX_KNOWLEDGE_DOCUMENT_BYTES")
    if file.kind in PLAIN_TYPES and not file.data.decode("utf-8-sig").strip():
        raise BadRequest(public=f"{file.name} has no text to read.")
    did = new_id()
    now = _now_ms(ctx)
    try:
        await store.add_document(
            stores.db, stores.user, bid, did, file.name, file.kind, len(file.data), _quota(ctx), now
        )
        try:
            await stores.blobs.put(store.object_key(stores.user, did), file.data, file.kind)
        except BlobError:
            await stores.db.batch(store.forget_document(stores.user, did))
            raise
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    _start(ctx, _ingestion(ctx, stores), did)
    row = {
        "id": did,
        "base": bid,
        "name": file.name,
        "type": file.kind,
        "bytes": len(file.data),
        "state": "pending",
        "chunks": 0,
        "embedded": 0,
        "created": now,
        "updated": now,
    }
    return json_reply(202, store.document_json(row))


def _document_ids(ctx: Context) -> tuple[str, str]:
    bid, _, did = ctx.param.partition("/documents/")
    if not is_random_id(bid) or not is_random_id(did):
        raise NotFound(public="No such document.", detail="not a document id")
    return bid, did


async def document_get(ctx: Context) -> Reply:
    """``GET /api/knowledge/<base>/documents/<id>``: my document's original."""
    stores = await _stores(ctx)
    bid, did = _document_ids(ctx)
    try:
        row = await store.document(stores.db, stores.user, bid, did)
        found = await stores.blobs.get(store.object_key(stores.user, did))
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    if found is None:
        raise NotFound(public="This document's original is gone (its ingestion failed).")
    data, kind = found
    headers = {
        **API_HEADERS,
        "Content-Type": kind,
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": f'attachment; filename="{row["name"]}"',
        "Cache-Control": "private, no-store",
    }
    return Reply(200, {**headers, **ctx.reply_headers}, data)


async def document_delete(ctx: Context) -> Reply:
    """``DELETE /api/knowledge/<base>/documents/<id>``: my document, its
    chunks, vectors and original."""
    stores = await _stores(ctx)
    bid, did = _document_ids(ctx)
    try:
        row = await store.document(stores.db, stores.user, bid, did)
        await _forget(stores, [row], store.forget_document(stores.user, did))
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    return Reply(204, {**API_HEADERS, "Cache-Control": "no-store", **ctx.reply_headers})


# --- my data --------------------------------------------------------------------


async def erase(ctx: Context, db: Database, user: str) -> list[tuple[str, list[Any]]]:
    """Deletes all my documents' vectors (and originals, when the bucket is
    bound; ``history.files.erase`` lists the prefix as well): the statements
    that then delete the rows, for the caller's transaction."""
    vectors = ctx.platform.vectors()
    docs = await store.all_documents(db, user)
    if vectors is not None:
        await ingest.delete_vectors(vectors, store.vector_ids(docs))
    blobs = ctx.platform.files
    if blobs is not None and docs:
        await blobs.delete([store.object_key(user, doc["id"]) for doc in docs])
    return store.erase_statements(user)


# --- a question's passages -------------------------------------------------------


async def with_passages(
    ctx: Context, request: ChatRequest
) -> tuple[ChatRequest, list[dict[str, Any]] | None]:
    """``request`` with its knowledge base's passages attached, and the
    sources the reply carries (None: no base named)."""
    if request.knowledge is None:
        return request, None
    started = time.monotonic()
    user = ctx.user
    if user is None or user.via == "anonymous":
        raise SignInRequired(
            public="Knowledge bases are for a signed-in user only.", detail="knowledge anonymous"
        )
    db, vectors = ctx.platform.history, ctx.platform.vectors()
    if db is None or vectors is None:
        raise _unbound("bases", "DB" if db is None else "VECTORS")
    try:
        found = await retrieve.retrieve(
            db,
            vectors,
            embedder(ctx, ctx.platform.ai, after_reply=False),
            user.id,
            request.knowledge,
            retrieve.question_of(request),
            ctx.settings.knowledge_top_k,
            ctx.settings.knowledge_context_tokens,
        )
    except _STORE_ERRORS as exc:
        raise _failed(exc) from exc
    ctx.log["knowledge_ms"] = round((time.monotonic() - started) * 1000, 1)
    ctx.log["knowledge_passages"] = len(found.passages)
    return retrieve.attach(request, found), found.sources()
