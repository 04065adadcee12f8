"""Each user's knowledge bases and their documents in D1 (the ``DB``
binding; ``migrations/0004_knowledge.sql``), and where a document's
original bytes are kept in the ``FILES`` bucket.

A base is its owner's: every statement that reads or changes one names the
caller's id (``user = ?``), except the read of a base an admin shared with
everyone (``shared = 1``), which any signed-in user may list and ask but
never change. Another user's base is never told apart from a missing one
(404).

The user's limits are in the statements that add: a base is made only
while the user has fewer than ``MAX_KNOWLEDGE_BASES``; a document is kept
only while they have fewer than ``MAX_KNOWLEDGE_DOCUMENTS`` and its bytes
keep them within ``MAX_KNOWLEDGE_BYTES`` (failed documents do not count:
nothing of them is left but their row). A document's chunks are counted
against ``MAX_KNOWLEDGE_CHUNKS`` once it is cut (``ingest``), in the
statement that stores them. D1 runs one statement at a time, so two
uploads at once cannot overshoot a limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from edgechat.core.errors import KnowledgeFull, NotFound, TooManyBases, TooManyDocuments
from edgechat.core.ids import user_prefix
from edgechat.core.ports import Database

__all__ = [
    "IN_PROGRESS",
    "Quota",
    "add_document",
    "all_documents",
    "base_for_owner",
    "base_for_reader",
    "base_json",
    "create_base",
    "document",
    "document_json",
    "documents",
    "erase_statements",
    "export",
    "forget_base",
    "forget_document",
    "list_bases",
    "object_key",
    "owned_documents",
    "share_base",
    "stalled",
    "vector_ids",
]

# The states of a document still being ingested.
IN_PROGRESS = ("pending", "converting", "embedding")
MAX_NAME_CHARS = 100


@dataclass(frozen=True, slots=True)
class Quota:
    bases: int
    documents: int
    chunks: int
    bytes: int


def object_key(user: str, document: str) -> str:
    """A document's original in ``FILES``: under the user's prefix, beside
    their images (``history.files``), so deleting everything of theirs
    finds it by listing the prefix too."""
    return f"{user_prefix(user)}k/{document}"


_BASE_COLUMNS = "b.id, b.user, b.name, b.shared, b.created"
_BASE_STATS = (
    "(SELECT COUNT(*) FROM knowledge_documents d WHERE d.base = b.id) AS documents, "
    "(SELECT COALESCE(SUM(d.chunks), 0) FROM knowledge_documents d "
    "WHERE d.base = b.id AND d.state = 'ready') AS chunks"
)
_CREATE = (
    "INSERT INTO knowledge_bases (id, user, name, shared, created) "
    "SELECT ?1, ?2, ?3, 0, ?4 "
    "WHERE (SELECT COUNT(*) FROM knowledge_bases WHERE user = ?2) < ?5 RETURNING id"
)
_LIST = (
    f"SELECT {_BASE_COLUMNS}, {_BASE_STATS} FROM knowledge_bases b "
    "WHERE b.user = ?1 OR b.shared = 1 ORDER BY b.created"
)
_OWNED = f"SELECT {_BASE_COLUMNS} FROM knowledge_bases b WHERE b.id = ?1 AND b.user = ?2"
_READABLE = (
    f"SELECT {_BASE_COLUMNS}, {_BASE_STATS} FROM knowledge_bases b "
    "WHERE b.id = ?1 AND (b.user = ?2 OR b.shared = 1)"
)
_SHARE = "UPDATE knowledge_bases SET shared = ?3 WHERE id = ?1 AND user = ?2 RETURNING id"
_DOCUMENT_COLUMNS = (
    "id, base, name, type, bytes, state, chunks, embedded, error, lease, created, updated"
)
_DOCUMENTS = (
    f"SELECT {_DOCUMENT_COLUMNS} FROM knowledge_documents WHERE base = ?1 ORDER BY created, id"
)
_OWNED_DOCUMENTS = "SELECT id, chunks, state FROM knowledge_documents WHERE base = ?1 AND user = ?2"
_LIVE = "user = ?2 AND state <> 'failed'"
_ADD = (
    "INSERT INTO knowledge_documents "
    "(id, base, user, name, type, bytes, state, created, updated) "
    "SELECT ?1, ?3, ?2, ?4, ?5, ?6, 'pending', ?7, ?7 "
    "WHERE EXISTS (SELECT 1 FROM knowledge_bases WHERE id = ?3 AND user = ?2) "
    f"AND (SELECT COUNT(*) FROM knowledge_documents WHERE {_LIVE}) < ?8 "
    f"AND (SELECT COALESCE(SUM(bytes), 0) FROM knowledge_documents WHERE {_LIVE}) + ?6 <= ?9 "
    "RETURNING id"
)
_STATE = (
    f"SELECT (SELECT COUNT(*) FROM knowledge_documents WHERE {_LIVE}) AS documents, "
    "EXISTS (SELECT 1 FROM knowledge_bases WHERE id = ?1 AND user = ?2) AS base"
)
_DOCUMENT = (
    f"SELECT {_DOCUMENT_COLUMNS} FROM knowledge_documents WHERE id = ?1 AND base = ?2 AND user = ?3"
)
_FORGET_DOCUMENT = "DELETE FROM knowledge_documents WHERE id = ?1 AND user = ?2"
_FORGET_CHUNKS = "DELETE FROM knowledge_chunks WHERE document = ?1 AND user = ?2"
_FORGET_BASE = "DELETE FROM knowledge_bases WHERE id = ?1 AND user = ?2"
_FORGET_BASE_DOCUMENTS = "DELETE FROM knowledge_documents WHERE base = ?1 AND user = ?2"
_FORGET_BASE_CHUNKS = "DELETE FROM knowledge_chunks WHERE base = ?1 AND user = ?2"
_EVERYTHING = (
    "SELECT d.id, d.base, d.name, d.type, d.bytes, d.state, d.chunks, d.created "
    "FROM knowledge_documents d WHERE d.user = ?1 ORDER BY d.created, d.id"
)
_MY_BASES = "SELECT id, name, shared, created FROM knowledge_bases WHERE user = ?1 ORDER BY created"


def _base_json(row: dict[str, Any], user: str) -> dict[str, Any]:
    base = {
        "id": row["id"],
        "name": row["name"],
        "shared": bool(row["shared"]),
        "mine": row["user"] == user,
        "created": int(row["created"]),
    }
    if "documents" in row:
        base["documents"] = int(row["documents"])
        base["chunks"] = int(row["chunks"])
    return base


def document_json(row: dict[str, Any]) -> dict[str, Any]:
    """A document as the API shows it: its state and progress."""
    state = str(row["state"])
    found: dict[str, Any] = {
        "id": row["id"],
        "base": row["base"],
        "name": row["name"],
        "type": row["type"],
        "bytes": int(row["bytes"]),
        "state": state,
        "chunks": int(row["chunks"]),
        "embedded": int(row["embedded"]),
        "created": int(row["created"]),
        "updated": int(row["updated"]),
    }
    if row.get("error") is not None:
        found["error"] = row["error"]
    return found


async def create_base(
    db: Database, user: str, bid: str, name: str, quota: Quota, now_ms: int
) -> dict[str, Any]:
    """Makes the user's base ``bid`` named ``name``; raises ``TooManyBases``."""
    made = (await db.batch([(_CREATE, [bid, user, name, now_ms, quota.bases])]))[0]
    if not made:
        raise TooManyBases(limit=quota.bases)
    row = {"id": bid, "user": user, "name": name, "shared": 0, "created": now_ms}
    return {**_base_json(row, user), "documents": 0, "chunks": 0}


async def list_bases(db: Database, user: str) -> list[dict[str, Any]]:
    """The user's bases and those shared with everyone, oldest first."""
    rows = (await db.batch([(_LIST, [user])]))[0]
    return [_base_json(row, user) for row in rows]


async def base_for_reader(db: Database, user: str, bid: str) -> dict[str, Any]:
    """A base the user may read and ask (theirs, or shared), with its
    owner's id as ``user``; ``NotFound`` otherwise."""
    rows = (await db.batch([(_READABLE, [bid, user])]))[0]
    if not rows:
        raise NotFound(public="No such knowledge base.", detail=f"base {bid}")
    return rows[0]


async def base_for_owner(db: Database, user: str, bid: str) -> dict[str, Any]:
    """The user's own base ``bid``; ``NotFound`` otherwise (a shared base is
    changed by its owner alone)."""
    rows = (await db.batch([(_OWNED, [bid, user])]))[0]
    if not rows:
        raise NotFound(public="No such knowledge base.", detail=f"owned base {bid}")
    return rows[0]


def base_json(row: dict[str, Any], user: str) -> dict[str, Any]:
    """A base as the API shows it to ``user``."""
    return _base_json(row, user)


async def share_base(db: Database, user: str, bid: str, shared: bool) -> None:
    """Shares the user's base with everyone, or stops (an admin's call)."""
    done = (await db.batch([(_SHARE, [bid, user, int(shared)])]))[0]
    if not done:
        raise NotFound(public="No such knowledge base.", detail=f"share {bid}")


async def documents(db: Database, bid: str) -> list[dict[str, Any]]:
    """The documents of base ``bid`` (read access checked by the caller)."""
    return (await db.batch([(_DOCUMENTS, [bid])]))[0]


async def document(db: Database, user: str, bid: str, did: str) -> dict[str, Any]:
    """The user's document ``did`` of their base ``bid``; ``NotFound`` otherwise."""
    rows = (await db.batch([(_DOCUMENT, [did, bid, user])]))[0]
    if not rows:
        raise NotFound(public="No such document.", detail=f"document {did}")
    return rows[0]


async def owned_documents(db: Database, user: str, bid: str) -> list[dict[str, Any]]:
    """Each document of the user's base: its id, chunks and state."""
    return (await db.batch([(_OWNED_DOCUMENTS, [bid, user])]))[0]


async def add_document(
    db: Database,
    user: str,
    bid: str,
    did: str,
    name: str,
    kind: str,
    size: int,
    quota: Quota,
    now_ms: int,
) -> None:
    """Keeps a row for the user's new document ``did`` in their base
    ``bid``, pending; raises ``NotFound`` (no such base of theirs),
    ``TooManyDocuments`` or ``KnowledgeFull``."""
    params = [did, user, bid, name, kind, size, now_ms, quota.documents, quota.bytes]
    if (await db.batch([(_ADD, params)]))[0]:
        return
    state = (await db.batch([(_STATE, [bid, user])]))[0][0]
    if not state["base"]:
        raise NotFound(public="No such knowledge base.", detail=f"add to {bid}")
    if int(state["documents"]) >= quota.documents:
        raise TooManyDocuments(limit=quota.documents)
    raise KnowledgeFull(limit=quota.bytes)


def forget_document(user: str, did: str) -> list[tuple[str, list[Any]]]:
    """The statements that delete a document's row and chunks."""
    return [(_FORGET_CHUNKS, [did, user]), (_FORGET_DOCUMENT, [did, user])]


def forget_base(user: str, bid: str) -> list[tuple[str, list[Any]]]:
    """The statements that delete a base, its documents and their chunks."""
    return [
        (_FORGET_BASE_CHUNKS, [bid, user]),
        (_FORGET_BASE_DOCUMENTS, [bid, user]),
        (_FORGET_BASE, [bid, user]),
    ]


async def export(db: Database, user: str) -> list[dict[str, Any]]:
    """My data: the user's bases, each with its documents (their originals
    are at ``GET /api/knowledge/<base>/documents/<id>``)."""
    bases, docs = await db.batch([(_MY_BASES, [user]), (_EVERYTHING, [user])])
    by_base: dict[str, list[dict[str, Any]]] = {row["id"]: [] for row in bases}
    for row in docs:
        by_base.setdefault(row["base"], []).append(
            {
                "id": row["id"],
                "name": row["name"],
                "type": row["type"],
                "bytes": int(row["bytes"]),
                "state": row["state"],
                "chunks": int(row["chunks"]),
                "created": int(row["created"]),
            }
        )
    return [
        {
            "id": row["id"],
            "name": row["name"],
            "shared": bool(row["shared"]),
            "created": int(row["created"]),
            "documents": by_base[row["id"]],
        }
        for row in bases
    ]


_ALL_DOCUMENTS = "SELECT id, chunks FROM knowledge_documents WHERE user = ?1"
_ERASE = (
    "DELETE FROM knowledge_chunks WHERE user = ?1",
    "DELETE FROM knowledge_documents WHERE user = ?1",
    "DELETE FROM knowledge_bases WHERE user = ?1",
)


async def all_documents(db: Database, user: str) -> list[dict[str, Any]]:
    """Every document of the user's: its id and chunks (their vectors' ids)."""
    return (await db.batch([(_ALL_DOCUMENTS, [user])]))[0]


_STALLED = (
    "SELECT id, user FROM knowledge_documents "
    "WHERE state IN ('pending', 'converting', 'embedding') AND lease < ?1 "
    "ORDER BY updated LIMIT ?2"
)


async def stalled(db: Database, now_ms: int, most: int) -> list[dict[str, Any]]:
    """Documents whose ingestion stopped and no run holds: the longest waiting first."""
    return (await db.batch([(_STALLED, [now_ms, most])]))[0]


def erase_statements(user: str) -> list[tuple[str, list[Any]]]:
    """The statements that delete all the user's bases, documents and chunks."""
    return [(sql, [user]) for sql in _ERASE]


def vector_ids(rows: list[dict[str, Any]]) -> list[str]:
    """The ids of the vectors of documents ``rows`` (each ``id``, ``chunks``)."""
    return [f"{row['id']}:{n}" for row in rows for n in range(int(row["chunks"]))]
