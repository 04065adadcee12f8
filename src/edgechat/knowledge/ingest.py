"""A document's ingestion, after the reply: its text (``toMarkdown``, or
as it is for Markdown and plain text), cut into chunks (``chunks``), each
chunk embedded (bge-m3, charged to its owner like any embedding) and
upserted into the ``VECTORS`` index, then ready.

It runs in ``waitUntil`` (``web.knowledge``), not in a queue: see
docs/operating/knowledge.md for why. A run may be cut short (the 30 s
``waitUntil`` allows, an isolate that goes away, a model that fails), so
every step is kept in the document's row in D1 and a later run takes up
where the last one stopped:

- a run first **claims** the document: one statement sets its ``lease``
  (``LEASE_MS`` from now) where no other run holds one, so two runs never
  work on one document; every later write names that lease, so a run that
  lost it writes nothing;
- ``converting``: the text is cut and its chunks stored in D1 in one
  transaction with the state ``embedding`` and the chunk count, held to
  ``MAX_KNOWLEDGE_CHUNKS`` in the same statement: the chunks are counted
  once, whatever happens after;
- ``embedding`` ``n`` of ``m``: chunks are embedded ``BATCH`` at a time in
  order and upserted under ids ``<document>:<n>`` (an upsert of an id
  replaces it, so a batch done twice leaves one vector each), and
  ``embedded`` moves on after each batch; a run does at most
  ``BATCHES_PER_RUN`` batches (the Free plan's 50 subrequests an
  invocation) and lets go of the lease;
- ``ready`` when every chunk is in the index.

A failure that may pass (the model, D1, the bucket or the index failing)
leaves the document where it was for the next run (``resume``, which
``GET .../documents`` calls while the page watches the progress), and after
``MAX_ATTEMPTS`` runs without progress it is given up. A document that can
never be ingested (no text, a converter that cannot read it, over
``MAX_KNOWLEDGE_CHUNKS``) is ``failed`` with the reason, and everything
made of it goes: its vectors, its chunks and its original. A document
deleted while a run works on it is noticed at the run's next write, and
the vectors that run just upserted are deleted too.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from edgechat.core.errors import BadRequest, EdgechatError
from edgechat.core.ids import owner_tag
from edgechat.core.ports import (
    Ai,
    BlobError,
    Blobs,
    Database,
    DatabaseError,
    Vectors,
    VectorsError,
)
from edgechat.core.requests import DocumentFile
from edgechat.knowledge import store
from edgechat.knowledge.chunks import split
from edgechat.media.documents import text_of

__all__ = ["BATCH", "Embed", "Ingestion", "Rules", "delete_vectors", "run"]

# Embeds several texts at once (bge-m3 takes a list), charged to the user.
Embed = Callable[[list[str]], Awaitable[list[list[float]]]]

# A run's hold on a document: longer than waitUntil's 30 s, so a run cut
# short is taken over once it has surely stopped.
LEASE_MS = 60_000
# Chunks embedded and upserted at once, and batches a run does: each batch
# is an embedding call, an upsert and a D1 write, so a run stays within the
# Free plan's 50 subrequests an invocation
# (https://developers.cloudflare.com/workers/platform/limits/).
BATCH = 16
BATCHES_PER_RUN = 10
# A run stops starting batches after this long (waitUntil's 30 s).
RUN_S = 20.0
# Runs in a row without progress before a document is given up.
MAX_ATTEMPTS = 3
# Vectorize takes at most 1,000 vectors an upsert from a Worker
# (https://developers.cloudflare.com/vectorize/platform/limits/); deletes
# are sent in the same sizes.
MAX_IDS = 1_000
# D1 keeps a statement's text and a bound string within limits
# (https://developers.cloudflare.com/d1/platform/limits/): chunks go in
# several statements of one transaction, each this many characters of JSON at most.
MAX_STATEMENT_CHARS = 500_000


@dataclass(frozen=True, slots=True)
class Rules:
    chunk_tokens: int
    chunk_overlap: int
    max_chunks: int


@dataclass(frozen=True, slots=True)
class Ingestion:
    """What a run needs: the stores, the converter, the embedder, the rules."""

    db: Database
    blobs: Blobs
    vectors: Vectors
    ai: Ai
    embed: Embed
    rules: Rules
    clock: Callable[[], float]  # wall time, s


class _GiveUp(Exception):
    """The document can never be ingested: ``reason`` says why, to its owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _Lost(Exception):
    """The run's lease is gone (another run took over, or the document was deleted)."""


_CLAIM = (
    "UPDATE knowledge_documents SET lease = ?2, attempts = attempts + 1, updated = ?3, "
    "state = CASE WHEN state = 'pending' THEN 'converting' ELSE state END "
    "WHERE id = ?1 AND state IN ('pending', 'converting', 'embedding') AND lease < ?3 "
    "RETURNING id, base, user, name, type, bytes, state, chunks, embedded, attempts"
)
_CUT = (
    "UPDATE knowledge_documents SET state = 'embedding', chunks = ?2, embedded = 0, "
    "updated = ?3, attempts = 0, error = NULL "
    "WHERE id = ?1 AND state = 'converting' AND lease = ?4 "
    "AND (SELECT COALESCE(SUM(chunks), 0) FROM knowledge_documents "
    "WHERE user = ?5 AND id <> ?1 AND state <> 'failed') + ?2 <= ?6 RETURNING id"
)
_KEEP_CHUNKS = (
    "INSERT INTO knowledge_chunks (document, n, user, base, tokens, text) "
    "SELECT ?1, json_extract(value, '$.n'), ?2, ?3, json_extract(value, '$.tokens'), "
    "json_extract(value, '$.text') FROM json_each(?4) "
    "WHERE EXISTS (SELECT 1 FROM knowledge_documents "
    "WHERE id = ?1 AND state = 'embedding' AND lease = ?5) "
    "ON CONFLICT (document, n) DO UPDATE SET tokens = excluded.tokens, text = excluded.text"
)
_HELD = "SELECT state FROM knowledge_documents WHERE id = ?1 AND lease = ?2"
_NEXT = "SELECT n, text FROM knowledge_chunks WHERE document = ?1 AND n >= ?2 ORDER BY n LIMIT ?3"
_PROGRESS = (
    "UPDATE knowledge_documents SET embedded = ?2, updated = ?3, attempts = 0, error = NULL, "
    "state = CASE WHEN ?2 >= chunks THEN 'ready' ELSE state END, "
    "lease = CASE WHEN ?2 >= chunks THEN 0 ELSE lease END "
    "WHERE id = ?1 AND embedded = ?4 AND lease = ?5 RETURNING state"
)
_EXISTS = "SELECT 1 FROM knowledge_documents WHERE id = ?1"
_RELEASE = "UPDATE knowledge_documents SET lease = 0, error = ?3 WHERE id = ?1 AND lease = ?2"
_FAIL = (
    "UPDATE knowledge_documents SET state = 'failed', error = ?2, chunks = 0, embedded = 0, "
    "lease = 0, updated = ?3 WHERE id = ?1"
)
_FORGET_CHUNKS = "DELETE FROM knowledge_chunks WHERE document = ?1"


async def delete_vectors(vectors: Vectors, ids: list[str]) -> None:
    """Deletes the vectors ``ids``, ``MAX_IDS`` a call. Raises ``VectorsError``."""
    for k in range(0, len(ids), MAX_IDS):
        await vectors.delete_by_ids(ids[k : k + MAX_IDS])


async def run(work: Ingestion, did: str) -> dict[str, Any]:
    """One run on document ``did``: what it did, for the log line
    (``state``: where it left the document; ``skipped`` when another run
    holds it or it needs none)."""
    started = time.monotonic()
    now_ms = int(work.clock() * 1000)
    lease = now_ms + LEASE_MS
    claimed = (await work.db.batch([(_CLAIM, [did, lease, now_ms])]))[0]
    if not claimed:
        return {"document": did, "skipped": True}
    row = claimed[0]
    record: dict[str, Any] = {"document": did, "attempt": int(row["attempts"])}
    try:
        if row["state"] == "converting":
            row = await _convert(work, row, lease)
            record["chunks"] = row["chunks"]
        state = await _embed(work, row, lease, started, record)
    except _GiveUp as exc:
        await _give_up(work, did, int(row["chunks"]), exc.reason)
        state = "failed"
        record["error"] = exc.reason
    except _Lost:
        state = "lost"
    except Exception as exc:
        # A store or the model failing (or a bug): counted as a run without
        # progress, so a document that always fails is given up, not retried
        # for ever.
        record["error"] = f"{type(exc).__name__}: {exc}"
        state = await _after_failure(work, row, lease, exc)
    record["state"] = state
    record["duration_ms"] = round((time.monotonic() - started) * 1000, 1)
    return record


async def _convert(work: Ingestion, row: dict[str, Any], lease: int) -> dict[str, Any]:
    """The document's text cut and its chunks kept: its row as it now is."""
    did, user = row["id"], row["user"]
    found = await work.blobs.get(store.object_key(user, did))
    if found is None:
        raise _GiveUp("The document's original is missing: add it again.")
    file = DocumentFile(row["name"], row["name"], row["type"], found[0], 0)
    try:
        text, _ = await text_of(work.ai, file)
    except BadRequest as exc:
        raise _GiveUp(exc.public_message) from exc
    rules = work.rules
    chunks = split(text, rules.chunk_tokens, rules.chunk_overlap)
    if not chunks:
        raise _GiveUp(f"{row['name']} has no text to read.")
    now_ms = int(work.clock() * 1000)
    cut = [did, len(chunks), now_ms, lease, user, rules.max_chunks]
    statements: list[tuple[str, list[Any]]] = [(_CUT, cut)]
    for group in _groups([{"n": c.n, "tokens": c.tokens, "text": c.text} for c in chunks]):
        statements.append((_KEEP_CHUNKS, [did, user, row["base"], group, lease]))
    statements.append((_HELD, [did, lease]))
    results = await work.db.batch(statements)
    if not results[0]:
        held = results[-1]
        if not held or held[0]["state"] != "converting":
            raise _Lost()
        raise _GiveUp(
            f"{row['name']} makes {len(chunks)} chunks: your knowledge bases would hold more "
            f"than max_knowledge_chunks ({rules.max_chunks})."
        )
    return {**row, "state": "embedding", "chunks": len(chunks), "embedded": 0}


def _groups(items: list[dict[str, Any]]) -> list[str]:
    """The chunks as JSON arrays of at most ``MAX_STATEMENT_CHARS`` each."""
    groups: list[str] = []
    current: list[str] = []
    size = 0
    for item in items:
        text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        if current and size + len(text) > MAX_STATEMENT_CHARS:
            groups.append("[" + ",".join(current) + "]")
            current, size = [], 0
        current.append(text)
        size += len(text) + 1
    if current:
        groups.append("[" + ",".join(current) + "]")
    return groups


async def _embed(
    work: Ingestion, row: dict[str, Any], lease: int, started: float, record: dict[str, Any]
) -> str:
    did, total = row["id"], int(row["chunks"])
    done = int(row["embedded"])
    owner = owner_tag(row["user"])
    batches = 0
    while done < total:
        if batches >= BATCHES_PER_RUN or time.monotonic() - started > RUN_S:
            await work.db.batch([(_RELEASE, [did, lease, None])])
            return "embedding"
        chunks = (await work.db.batch([(_NEXT, [did, done, BATCH])]))[0]
        if not chunks:
            raise _GiveUp("The document's chunks are missing: add it again.")
        values = await work.embed([chunk["text"] for chunk in chunks])
        ids = [f"{did}:{chunk['n']}" for chunk in chunks]
        metadata = {"kind": "chunk", "owner": owner, "base": row["base"], "document": did}
        await work.vectors.upsert(
            [
                {"id": vid, "values": vector, "metadata": {**metadata, "chunk": chunk["n"]}}
                for vid, vector, chunk in zip(ids, values, chunks, strict=True)
            ]
        )
        moved = done + len(chunks)
        now_ms = int(work.clock() * 1000)
        written = (await work.db.batch([(_PROGRESS, [did, moved, now_ms, done, lease])]))[0]
        if not written:
            if not (await work.db.batch([(_EXISTS, [did])]))[0]:
                # Deleted meanwhile: its deletion may have missed what was just upserted.
                await delete_vectors(work.vectors, ids)
            raise _Lost()
        done = moved
        batches += 1
        record["embedded"] = done
    return "ready"


async def _after_failure(work: Ingestion, row: dict[str, Any], lease: int, exc: Exception) -> str:
    """A failure that may pass: the next run tries again, unless this was the last try."""
    did = row["id"]
    if int(row["attempts"]) >= MAX_ATTEMPTS:
        reason = f"Ingestion failed {MAX_ATTEMPTS} times in a row; add the document again."
        if isinstance(exc, EdgechatError) and exc.public_message:
            reason = f"{exc.public_message} (tried {MAX_ATTEMPTS} times)"
        try:
            await _give_up(work, did, int(row["chunks"]), reason)
        except (DatabaseError, BlobError, VectorsError):
            return str(row["state"])
        return "failed"
    note = "Interrupted; it goes on when you look again."
    with contextlib.suppress(DatabaseError):  # else the lease runs out by itself
        await work.db.batch([(_RELEASE, [did, lease, note])])
    return str(row["state"])


async def _give_up(work: Ingestion, did: str, chunks: int, reason: str) -> None:
    """Everything made of the document goes; its row stays, failed, with ``reason``."""
    await delete_vectors(work.vectors, [f"{did}:{n}" for n in range(chunks)])
    rows = (await work.db.batch([("SELECT user FROM knowledge_documents WHERE id = ?1", [did])]))[0]
    if rows:
        await work.blobs.delete([store.object_key(rows[0]["user"], did)])
    now_ms = int(work.clock() * 1000)
    await work.db.batch([(_FORGET_CHUNKS, [did]), (_FAIL, [did, reason, now_ms])])
