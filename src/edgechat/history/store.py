"""Each user's conversations in D1 (the ``DB`` binding; ``migrations/``).

A row per (user, conversation): the checked conversation's JSON
(``conversations``), a ``version`` (its ETag; every write adds one) and a
``seq`` (every write of the user's takes their highest + 1, so a list
``since`` a seq is exactly what changed after it). A delete leaves a
tombstone: the row without its body, with a new version and seq, so every
device learns of it.

Every write is **one conditional statement**: the precondition (``If-Match``
a version, ``If-Match: *``, ``If-None-Match: *``) and the user's limits
(``MAX_CONVERSATIONS`` live conversations, ``MAX_HISTORY_BYTES`` in all) are
in its ``WHERE``, so two devices writing at once cannot both win and no limit
is overshot: D1 runs one statement at a time. Only a refused write reads the
row again, to say why (``412``, ``409``, ``413``).

Another user's conversation is never named in a statement: every one has
``user = ?1``, the caller's id from ``identity``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from edgechat.core.errors import (
    BadRequest,
    ClientError,
    ConversationTooLarge,
    HistoryFull,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    TooManyConversations,
)
from edgechat.core.http import seq_window, whole_param
from edgechat.core.ports import Database

__all__ = [
    "MAX_PAGE",
    "Page",
    "Precondition",
    "Quota",
    "erase",
    "erase_statements",
    "etag",
    "expire",
    "export",
    "get",
    "list_page",
    "precondition",
    "purge",
    "put",
    "put_many",
    "remove",
    "version_of",
]

# The most rows a list gives at once; with bodies, fewer.
MAX_PAGE = 200
MAX_PAGE_WITH_BODIES = 50
DEFAULT_PAGE = 50


@dataclass(frozen=True, slots=True)
class Quota:
    conversations: int
    bytes: int
    # The stored JSON of one conversation (a batch's writes; a PUT's body is
    # held to it as it is read).
    each: int | None = None


@dataclass(frozen=True, slots=True)
class Precondition:
    """What a write requires of the row: ``create`` (``If-None-Match: *``),
    any live version (``If-Match: *``, ``version`` None) or that version."""

    create: bool = False
    version: int | None = None


def etag(version: int) -> str:
    return f'"{version}"'


def version_of(tag: str) -> int | None:
    """The version an ETag names, or None. ``W/`` is taken off: a proxy
    that compresses a reply (Cloudflare does) weakens its ETag, and a
    version names one body either way."""
    tag = tag.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    if len(tag) < 3 or tag[0] != '"' or tag[-1] != '"' or not tag[1:-1].isdigit():
        return None
    return int(tag[1:-1]) if len(tag) <= 20 else None


def precondition(headers: Any, *, creating_allowed: bool = True) -> Precondition:
    """The write's precondition from ``If-Match`` / ``If-None-Match``;
    ``PreconditionRequired`` without one (a write that does not say which
    version it replaces could silently undo another device's)."""
    match = headers.get("if-match")
    none_match = headers.get("if-none-match")
    if match is not None:
        if match.strip() == "*":
            return Precondition()
        version = version_of(match)
        if version is None:
            raise BadRequest(public='If-Match must be an ETag this server gave ("3") or *.')
        return Precondition(version=version)
    if none_match is not None and creating_allowed:
        if none_match.strip() != "*":
            raise BadRequest(public="If-None-Match must be * (create only).")
        return Precondition(create=True)
    raise PreconditionRequired()


_LIVE = "SELECT 1 FROM conversations WHERE user = ?1 AND id = ?2 AND body IS NOT NULL"
_PUT = (
    "INSERT INTO conversations (user, id, version, seq, changed, updated, title, bytes, body) "
    "SELECT ?1, ?2, "
    "COALESCE((SELECT version FROM conversations WHERE user = ?1 AND id = ?2), 0) + 1, "
    "COALESCE((SELECT MAX(seq) FROM conversations WHERE user = ?1), 0) + 1, "
    "?3, ?4, ?5, ?6, ?7 "
    "WHERE {condition} "
    "AND (SELECT COUNT(*) FROM conversations "
    "WHERE user = ?1 AND id <> ?2 AND body IS NOT NULL) < ?8 "
    "AND (SELECT COALESCE(SUM(bytes), 0) FROM conversations "
    "WHERE user = ?1 AND id <> ?2) + ?6 <= ?9 "
    "ON CONFLICT (user, id) DO UPDATE SET version = excluded.version, seq = excluded.seq, "
    "changed = excluded.changed, updated = excluded.updated, title = excluded.title, "
    "bytes = excluded.bytes, body = excluded.body "
    "RETURNING version, seq"
)
_CONDITIONS = {
    "create": f"NOT EXISTS ({_LIVE})",
    "any": f"EXISTS ({_LIVE})",
    "version": f"EXISTS ({_LIVE} AND version = ?10)",
}
_STATE = (
    "SELECT (SELECT version FROM conversations WHERE user = ?1 AND id = ?2) AS version, "
    f"EXISTS ({_LIVE}) AS live, "
    "(SELECT COUNT(*) FROM conversations WHERE user = ?1 AND id <> ?2 AND body IS NOT NULL) "
    "AS count, "
    "(SELECT COALESCE(SUM(bytes), 0) FROM conversations WHERE user = ?1 AND id <> ?2) AS bytes"
)
_REMOVE = (
    "UPDATE conversations SET version = version + 1, "
    "seq = (SELECT MAX(seq) FROM conversations WHERE user = ?1) + 1, "
    "changed = ?3, title = '', bytes = 0, body = NULL "
    "WHERE user = ?1 AND id = ?2 AND body IS NOT NULL{condition} RETURNING version, seq"
)
_GET = "SELECT version, body FROM conversations WHERE user = ?1 AND id = ?2"
_LIST = (
    "SELECT id, version, seq, title, updated, body IS NULL AS deleted{body} "
    "FROM conversations WHERE user = ?1 AND seq > ?2 AND seq < ?3{live} "
    "ORDER BY seq DESC LIMIT ?4"
)
_TOP = "SELECT COALESCE(MAX(seq), 0) AS seq FROM conversations WHERE user = ?1"
# HISTORY_RETENTION_DAYS: what was last written before the cutoff goes, and
# an expired link's copy with it.
_EXPIRE = "DELETE FROM conversations WHERE user = ?1 AND changed < ?2"
_EXPIRE_SHARES = "UPDATE shares SET body = NULL WHERE user = ?1 AND expires <= ?2"
# My data: everything of the user's, and all of it deleted.
_EVERYTHING = "SELECT id, version, body FROM conversations WHERE user = ?1 ORDER BY seq"
# Live links only, as GET /api/shares lists them: a revoked one keeps its row
# (its page says it was revoked) but shares nothing any more.
_MY_SHARES = (
    "SELECT id, conversation, title, created, expires FROM shares "
    "WHERE user = ?1 AND body IS NOT NULL"
)
_ERASE = (
    "UPDATE conversations SET version = version + 1, "
    "seq = (SELECT MAX(seq) FROM conversations WHERE user = ?1) + 1, "
    "changed = ?2, title = '', bytes = 0, body = NULL WHERE user = ?1 AND body IS NOT NULL"
)
_ERASE_SHARES = "DELETE FROM shares WHERE user = ?1"


def _write(
    user: str,
    cid: str,
    conversation: dict[str, Any],
    want: Precondition,
    quota: Quota,
    now_ms: int,
) -> tuple[str, list[Any], int]:
    """The one conditional statement that writes ``conversation``: its SQL,
    its parameters and the stored JSON's size."""
    body = json.dumps(conversation, ensure_ascii=False, separators=(",", ":"))
    size = len(body.encode())
    kind = "create" if want.create else "any" if want.version is None else "version"
    params: list[Any] = [
        user,
        cid,
        now_ms,
        conversation["updated"],
        conversation["title"],
        size,
        body,
        quota.conversations,
        quota.bytes,
    ]
    if kind == "version":
        params.append(want.version)
    return _PUT.format(condition=_CONDITIONS[kind]), params, size


def _refusal(state: dict[str, Any], want: Precondition, quota: Quota, size: int) -> ClientError:
    """Why a write was refused, from the row's state read after it."""
    live, current = bool(state["live"]), state["version"]
    if (want.create and live) or (not want.create and not live):
        return PreconditionFailed(current=current if live else None)
    if want.version is not None and current != want.version:
        return PreconditionFailed(current=current)
    if not live and state["count"] >= quota.conversations:
        return TooManyConversations(limit=quota.conversations)
    if state["bytes"] + size > quota.bytes:
        return HistoryFull(limit=quota.bytes)
    # Nothing refuses it now: another write came between the two reads.
    return PreconditionFailed(current=current if live else None)


async def put(
    db: Database,
    user: str,
    cid: str,
    conversation: dict[str, Any],
    want: Precondition,
    quota: Quota,
    now_ms: int,
) -> tuple[int, int, bool]:
    """Writes ``conversation`` (checked) if ``want`` holds and the quota
    allows: its new version and seq, and whether it was new. Raises
    ``PreconditionFailed``, ``TooManyConversations`` or ``HistoryFull``."""
    outcome = (await put_many(db, user, [(cid, conversation, want)], quota, now_ms))[0]
    if isinstance(outcome, ClientError):
        raise outcome
    return outcome


async def put_many(
    db: Database,
    user: str,
    writes: Sequence[tuple[str, dict[str, Any], Precondition]],
    quota: Quota,
    now_ms: int,
) -> list[tuple[int, int, bool] | ClientError]:
    """Each of ``writes`` (id, checked conversation, precondition) in order,
    in one transaction of conditional statements: each one's new version,
    seq and whether it was new, or why it was refused (a refused one leaves
    the others as they are; a later one sees the earlier ones' effect on
    the quota). Only the refused are read again, to say why."""
    statements = [_write(user, cid, c, want, quota, now_ms) for cid, c, want in writes]
    why: dict[int, ClientError] = {}
    if quota.each is not None:
        for k, (_, _, size) in enumerate(statements):
            if size > quota.each:
                why[k] = ConversationTooLarge(
                    limit=quota.each, detail=f"{writes[k][0]}: {size} bytes"
                )
    run = [k for k in range(len(writes)) if k not in why]
    written = await db.batch([statements[k][:2] for k in run]) if run else []
    results = dict(zip(run, written, strict=True))
    refused = [k for k in run if not results[k]]
    states = await db.batch([(_STATE, [user, writes[k][0]]) for k in refused]) if refused else []
    for k, rows in zip(refused, states, strict=True):
        why[k] = _refusal(rows[0], writes[k][2], quota, statements[k][2])
    return [why.get(k) or _written(results[k][0], writes[k][2].create) for k in range(len(writes))]


def _written(row: dict[str, Any], created: bool) -> tuple[int, int, bool]:
    return int(row["version"]), int(row["seq"]), created


async def remove(
    db: Database, user: str, cid: str, want: Precondition, now_ms: int
) -> tuple[int, int]:
    """Leaves a tombstone for a live conversation: its version and seq.
    Raises ``NotFound`` (none, or deleted) or ``PreconditionFailed``."""
    condition = "" if want.version is None else " AND version = ?4"
    params: list[Any] = [user, cid, now_ms]
    if want.version is not None:
        params.append(want.version)
    done = (await db.batch([(_REMOVE.format(condition=condition), params)]))[0]
    if done:
        return int(done[0]["version"]), int(done[0]["seq"])
    rows = (await db.batch([(_GET, [user, cid])]))[0]
    if not rows or rows[0]["body"] is None:
        raise NotFound(public="No such conversation.", detail=f"delete {cid}")
    raise PreconditionFailed(current=int(rows[0]["version"]))


async def get(db: Database, user: str, cid: str) -> tuple[int, str | None] | None:
    """A conversation's version and JSON (None: a tombstone), or None."""
    rows = (await db.batch([(_GET, [user, cid])]))[0]
    if not rows:
        return None
    return int(rows[0]["version"]), rows[0]["body"]


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a list, as ``GET /api/conversations`` sends it."""

    rows: list[dict[str, Any]]
    top: int
    next: int | None

    def to_json_bytes(self) -> bytes:
        """The reply's body. A row's stored JSON goes in as it is (it was
        written by ``put``), never parsed again."""
        items = []
        for row in self.rows:
            item = {
                "id": row["id"],
                "etag": etag(int(row["version"])),
                "seq": int(row["seq"]),
                "title": row["title"],
                "updated": row["updated"],
            }
            text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
            if row["deleted"]:
                text = text[:-1] + ',"deleted":true}'
            elif row.get("body") is not None:
                text = text[:-1] + ',"conversation":' + row["body"] + "}"
            items.append(text)
        head = {"seq": self.top, "next": self.next}
        tail = json.dumps(head, separators=(",", ":"))[1:]
        return ('{"conversations":[' + ",".join(items) + "]," + tail).encode()


async def expire(db: Database, user: str, now_ms: int, days: int) -> None:
    """Deletes the user's conversations not written for ``days`` (rows,
    tombstones included), and the copies of their expired links."""
    cutoff = now_ms - days * 86_400_000
    await db.batch([(_EXPIRE, [user, cutoff]), (_EXPIRE_SHARES, [user, now_ms])])


# The scheduled purge (a Cron Trigger, ``app.scheduled``): the same rules
# for every user at once, counted first so the log says what went.
_OLD = "SELECT COUNT(*) AS n FROM conversations WHERE changed < ?1"
_PURGE_OLD = "DELETE FROM conversations WHERE changed < ?1"
_EXPIRED = "SELECT COUNT(*) AS n FROM shares WHERE expires <= ?1 AND body IS NOT NULL"
_PURGE_EXPIRED = "UPDATE shares SET body = NULL WHERE expires <= ?1 AND body IS NOT NULL"


async def purge(db: Database, now_ms: int, days: int | None) -> dict[str, int]:
    """Every user's expired links' copies, and with ``days``
    (``HISTORY_RETENTION_DAYS``) their conversations not written for that
    long, rows and tombstones: what ``expire`` does for one user when they
    list, for everyone, so an account nobody opens again is purged too.
    Returns how many of each went."""
    statements: list[tuple[str, list[Any]]] = [
        (_EXPIRED, [now_ms]),
        (_PURGE_EXPIRED, [now_ms]),
    ]
    if days is not None:
        cutoff = now_ms - days * 86_400_000
        statements += [(_OLD, [cutoff]), (_PURGE_OLD, [cutoff])]
    results = await db.batch(statements)
    purged = {"expired_share_copies": int(results[0][0]["n"])}
    if days is not None:
        purged["conversations"] = int(results[2][0]["n"])
    return purged


async def export(db: Database, user: str) -> bytes:
    """Everything the server holds of the user: ``{"user", "conversations":
    [flat conversation, with its "etag"], "shares": [...]}`` (stored JSON
    spliced in, not parsed again)."""
    rows, links = await db.batch([(_EVERYTHING, [user]), (_MY_SHARES, [user])])
    items = [
        row["body"][:-1] + ',"etag":' + json.dumps(etag(int(row["version"]))) + "}"
        for row in rows
        if row["body"] is not None
    ]
    head = json.dumps({"format": "edgechat-server", "version": 1, "user": user})[:-1]
    tail = json.dumps(links, ensure_ascii=False, separators=(",", ":"))
    return (head + ',"conversations":[' + ",".join(items) + '],"shares":' + tail + "}").encode()


def erase_statements(user: str, now_ms: int) -> list[tuple[str, list[Any]]]:
    """The statements that delete all the user's conversations and share
    links: each conversation's content goes, leaving a tombstone (its id
    and version, nothing of what it said) so the user's other devices
    delete their copies too; every link is deleted outright."""
    return [(_ERASE, [user, now_ms]), (_ERASE_SHARES, [user])]


async def erase(db: Database, user: str, now_ms: int) -> None:
    """``erase_statements``, in one transaction."""
    await db.batch(erase_statements(user, now_ms))


async def list_page(db: Database, user: str, query: dict[str, str]) -> Page:
    """The user's conversations, newest write first. ``since``: only those
    written after that seq, tombstones included (what a device must learn);
    without it, only live ones. ``before``: the ``next`` of the previous
    page. ``limit``: rows a page. ``bodies=1``: each conversation whole."""
    for name in query:
        if name not in ("since", "before", "limit", "bodies"):
            raise BadRequest(public="The list takes since, before, limit and bodies only.")
    bodies = query.get("bodies") in ("1", "true")
    if "bodies" in query and query["bodies"] not in ("0", "1", "true", "false"):
        raise BadRequest(public="bodies must be 1 or 0.")
    most = MAX_PAGE_WITH_BODIES if bodies else MAX_PAGE
    limit = whole_param(query, "limit", min(DEFAULT_PAGE, most), 1, most)
    since, before = seq_window(query)
    sql = _LIST.format(
        body=", body" if bodies else "",
        live="" if "since" in query else " AND body IS NOT NULL",
    )
    rows, top = await db.batch([(sql, [user, since, before, limit + 1]), (_TOP, [user])])
    more = len(rows) > limit
    rows = rows[:limit]
    return Page(rows, int(top[0]["seq"]), int(rows[-1]["seq"]) if more else None)
