"""The images of a user's conversations on the server: the ``FILES`` R2
bucket, and a row per object in D1's ``files`` table (``migrations/``).

An image is uploaded by the page under its own id (``PUT /api/files/<id>``,
the id its conversation's user node names in ``images``) and read back by
its owner only. Its R2 key names the user's id base64url-encoded
(``u/<user>/f/<id>``): no user id can make another's prefix, and an id is
letters, digits, ``.``, ``_``, ``-`` only, so no key leaves its prefix. A
share link made with ``"images": true`` copies the images its conversation
names under the user's prefix too (``u/<user>/s/<link>/<id>``): deleting the
conversation or its images later leaves the link whole, and revoking the link
deletes the copies.

The row is written before the object, in one conditional statement that
holds the user's limits (``MAX_FILES`` images, ``MAX_FILES_BYTES`` in all,
copies included), so two uploads at once cannot overshoot them; an object
that cannot be written takes its row away again. Everything of a user's is
found from their rows (and, on ``DELETE /api/my-data``, from a listing of
their prefix as well, so nothing is left behind by a write cut short).

An image goes when nothing names it: a deleted conversation's images go
unless another live conversation of the user names them
(``forget_unnamed``); with ``HISTORY_RETENTION_DAYS``, the images no live
conversation names that are older than that go, and so do the copies of
expired or revoked links (``sweep``, for every user in the hourly
scheduled run, ``purge``; not when a user lists their conversations, where
its scan of every message would cost each list).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from edgechat.core import ids
from edgechat.core.errors import FilesFull, HistoryUnavailable, TooManyFiles, TooManyShareImages
from edgechat.core.ports import BlobError, Blobs, Database
from edgechat.media.images import check_image_bytes

__all__ = [
    "Quota",
    "erase",
    "forget_unnamed",
    "mine",
    "named_by",
    "own_key",
    "purge",
    "read",
    "read_shared",
    "share_images",
    "sweep",
    "unshare",
    "upload",
    "user_prefix",
]


@dataclass(frozen=True, slots=True)
class Quota:
    files: int
    bytes: int


# The user's R2 prefix (their knowledge bases' documents are under it too).
user_prefix = ids.user_prefix


def own_key(user: str, fid: str) -> str:
    return f"{user_prefix(user)}f/{fid}"


def _copy_prefix(user: str, sid: str) -> str:
    return f"{user_prefix(user)}s/{sid}/"


def _stored(exc: BlobError) -> HistoryUnavailable:
    return HistoryUnavailable(detail=f"files: {exc}")


# The images a stored flat conversation names (its user nodes' ``images``),
# one row ``i`` each, from the body of the table aliased ``{body}``.
_IMAGES_IN = "json_each({body}.body, '$.nodes') n, json_each(n.value, '$.images') i"
_IMAGE_ID = "json_extract(i.value, '$.id')"


def _named(user: str) -> str:
    """The ids the live conversations of the user in parameter ``user``
    name (a user node's ``images``)."""
    return (
        f"SELECT {_IMAGE_ID} FROM conversations c, {_IMAGES_IN.format(body='c')} "
        f"WHERE c.user = {user} AND c.body IS NOT NULL"
    )


_NAMED_BY = (
    f"SELECT DISTINCT {_IMAGE_ID} AS id FROM conversations c, {_IMAGES_IN.format(body='c')} "
    "WHERE c.user = ?1 AND c.id = ?2 AND c.body IS NOT NULL"
)
_EXISTS = "SELECT type, width, height, bytes, created FROM files WHERE key = ?1"
# A replacement the bucket did not take: its row says the old object again.
_RESTORE = (
    "UPDATE files SET type = ?2, width = ?3, height = ?4, bytes = ?5, created = ?6 WHERE key = ?1"
)
_RESERVE = (
    "INSERT INTO files (key, user, id, share, type, width, height, bytes, created) "
    "SELECT ?1, ?2, ?3, NULL, ?4, ?5, ?6, ?7, ?8 "
    "WHERE (SELECT COUNT(*) FROM files WHERE user = ?2 AND key <> ?1) < ?9 "
    "AND (SELECT COALESCE(SUM(bytes), 0) FROM files WHERE user = ?2 AND key <> ?1) + ?7 <= ?10 "
    "ON CONFLICT (key) DO UPDATE SET type = excluded.type, width = excluded.width, "
    "height = excluded.height, bytes = excluded.bytes, created = excluded.created "
    "RETURNING key"
)
_STATE = (
    "SELECT (SELECT COUNT(*) FROM files WHERE user = ?1 AND key <> ?2) AS count, "
    "(SELECT COALESCE(SUM(bytes), 0) FROM files WHERE user = ?1 AND key <> ?2) AS bytes"
)
_FORGET = "DELETE FROM files WHERE key = ?1"
# Many rows in one statement: D1 counts queries per invocation (50 on the
# Free plan, https://developers.cloudflare.com/d1/platform/limits/).
_FORGET_KEYS = "DELETE FROM files WHERE key IN (SELECT value FROM json_each(?1))"
_MINE = (
    "SELECT id, type, width, height, bytes, created FROM files "
    "WHERE user = ?1 AND share IS NULL ORDER BY created"
)
_UNNAMED = (
    "SELECT key FROM files WHERE user = ?1 AND share IS NULL AND id IN "
    "(SELECT value FROM json_each(?2)) AND id NOT IN (" + _named("?1") + ")"
)
# Retention's candidates (``sweep``, ``purge``): own images uploaded before
# ?1 (named or not), and copies of links that expired by ?1 or were revoked.
_OLD = "FROM files WHERE share IS NULL AND created < ?1"
_DEAD = "FROM files f JOIN shares s ON s.id = f.share WHERE (s.body IS NULL OR s.expires <= ?1)"
_UNNAMED_BEFORE = "SELECT key " + _OLD + " AND user = ?2 AND id NOT IN (" + _named("?2") + ")"
_DEAD_COPIES = "SELECT f.key " + _DEAD + " AND f.user = ?2"
# The scheduled purge's owners: who has one.
_OWNERS_OF_OLD = "SELECT DISTINCT user " + _OLD
_OWNERS_OF_DEAD_COPIES = "SELECT DISTINCT f.user " + _DEAD
_SHARED_SOURCES = (
    "SELECT key, id, bytes FROM files WHERE user = ?1 AND share IS NULL AND id IN "
    f"(SELECT {_IMAGE_ID} FROM shares s, {_IMAGES_IN.format(body='s')} "
    "WHERE s.id = ?2 AND s.user = ?1)"
)
_COPY_ROWS = (
    "INSERT INTO files (key, user, id, share, type, width, height, bytes, created) "
    "SELECT ?3 || id, user, id, ?2, type, width, height, bytes, ?4 FROM files "
    "WHERE user = ?1 AND share IS NULL AND id IN (SELECT value FROM json_each(?5)) "
    "AND (SELECT COUNT(*) FROM files WHERE user = ?1) + ?6 <= ?7 "
    "AND (SELECT COALESCE(SUM(bytes), 0) FROM files WHERE user = ?1) + ?8 <= ?9 "
    "RETURNING key, id"
)
_SHARE_WITH_IMAGES = "UPDATE shares SET images = 1 WHERE id = ?1 AND user = ?2"
_COPIES = "SELECT key FROM files WHERE user = ?1 AND share = ?2"
_SHARED = (
    "SELECT f.key, s.body IS NOT NULL AND s.expires > ?3 AND s.images = 1 AS live "
    "FROM files f JOIN shares s ON s.id = f.share WHERE f.share = ?1 AND f.id = ?2"
)
_EVERYTHING = "SELECT key FROM files WHERE user = ?1"
_FORGET_EVERYTHING = "DELETE FROM files WHERE user = ?1"


async def upload(
    db: Database,
    blobs: Blobs,
    user: str,
    fid: str,
    kind: str,
    data: bytes,
    quota: Quota,
    now_ms: int,
) -> tuple[dict[str, Any], bool]:
    """Keeps the image ``data`` of type ``kind`` (checked by its header, as
    ``media.images`` checks a data URL) as the user's ``fid``: its description
    and whether it is new. Raises ``BadRequest``, ``TooManyFiles`` or
    ``FilesFull``."""
    width, height = check_image_bytes(data, kind, "The image")
    key = own_key(user, fid)
    size = len(data)
    params = [key, user, fid, kind, width, height, size, now_ms, quota.files, quota.bytes]
    existed, written = await db.batch([(_EXISTS, [key]), (_RESERVE, params)])
    if not written:
        state = (await db.batch([(_STATE, [user, key])]))[0][0]
        if state["count"] >= quota.files:
            raise TooManyFiles(limit=quota.files)
        raise FilesFull(limit=quota.bytes)
    try:
        await blobs.put(key, data, kind)
    except BlobError as exc:
        if existed:
            old = existed[0]
            restore = [key, old["type"], old["width"], old["height"], old["bytes"], old["created"]]
            await db.batch([(_RESTORE, restore)])
        else:
            await db.batch([(_FORGET, [key])])
        raise _stored(exc) from exc
    described = {"id": fid, "type": kind, "width": width, "height": height, "bytes": size}
    return described, not existed


async def read(blobs: Blobs, user: str, fid: str) -> tuple[bytes, str] | None:
    """The user's image ``fid`` and its type, or None (another user's is
    never under their key)."""
    try:
        return await blobs.get(own_key(user, fid))
    except BlobError as exc:
        raise _stored(exc) from exc


async def mine(db: Database, user: str) -> list[dict[str, Any]]:
    """The user's own images (not the links' copies), oldest first."""
    return (await db.batch([(_MINE, [user])]))[0]


async def named_by(db: Database, user: str, cid: str) -> list[str]:
    """The ids of the images the user's live conversation ``cid`` names."""
    rows = (await db.batch([(_NAMED_BY, [user, cid])]))[0]
    return [row["id"] for row in rows if isinstance(row["id"], str)]


async def _delete(db: Database, blobs: Blobs, keys: list[str]) -> None:
    # The objects first: a row left by a failure is found again next time.
    if not keys:
        return
    try:
        await blobs.delete(keys)
    except BlobError as exc:
        raise _stored(exc) from exc
    await db.batch([(_FORGET_KEYS, [json.dumps(keys)])])


async def forget_unnamed(db: Database, blobs: Blobs, user: str, ids: list[str]) -> None:
    """Deletes those of the user's images ``ids`` that no live conversation
    of theirs names (a deleted conversation's, say)."""
    if not ids:
        return
    rows = (await db.batch([(_UNNAMED, [user, json.dumps(ids)])]))[0]
    await _delete(db, blobs, [row["key"] for row in rows])


async def sweep(db: Database, blobs: Blobs, user: str, before_ms: int | None, now_ms: int) -> int:
    """Retention: deletes the copies of the user's links that expired or
    were revoked and, with ``before_ms``, their images uploaded before then
    that no live conversation names. Returns how many objects went."""
    statements: list[tuple[str, list[Any]]] = [(_DEAD_COPIES, [now_ms, user])]
    if before_ms is not None:
        statements.append((_UNNAMED_BEFORE, [before_ms, user]))
    found = await db.batch(statements)
    keys = [row["key"] for rows in found for row in rows]
    await _delete(db, blobs, keys)
    return len(keys)


# Owners one scheduled run sweeps. Each costs about four D1 queries and R2
# calls, and an invocation may make 50 on Workers Free ("Queries per Worker
# invocation", https://developers.cloudflare.com/d1/platform/limits/; the
# Workers subrequest limit, https://developers.cloudflare.com/workers/platform/limits/):
# ten, beside the purge's own few, stay within it. The others are the next
# run's (the trigger runs hourly), and the log line counts them.
PURGE_OWNERS = 10


async def purge(db: Database, blobs: Blobs, now_ms: int, days: int | None) -> tuple[int, int]:
    """The scheduled purge's part (``app.scheduled``, after
    ``history.purge``): ``sweep`` for up to ``PURGE_OWNERS`` users who have
    a copy of a dead link or, with ``days`` (``HISTORY_RETENTION_DAYS``),
    an image older than that. Returns how many objects went, and how many
    owners are left for the next run."""
    before = now_ms - days * 86_400_000 if days is not None else None
    statements: list[tuple[str, list[Any]]] = [(_OWNERS_OF_DEAD_COPIES, [now_ms])]
    if before is not None:
        statements.append((_OWNERS_OF_OLD, [before]))
    found = await db.batch(statements)
    owners = sorted({row["user"] for rows in found for row in rows})
    gone = 0
    for user in owners[:PURGE_OWNERS]:
        gone += await sweep(db, blobs, user, before, now_ms)
    return gone, max(0, len(owners) - PURGE_OWNERS)


async def share_images(
    db: Database, blobs: Blobs, user: str, sid: str, quota: Quota, most: int, now_ms: int
) -> int:
    """Copies the images the user's new link ``sid`` shows (its copy of the
    conversation names them) and marks the link as showing them: how many
    were copied. An image the server does not hold is not shown. Raises
    ``TooManyShareImages``, ``TooManyFiles`` or ``FilesFull`` (nothing copied)."""
    sources = (await db.batch([(_SHARED_SOURCES, [user, sid])]))[0]
    if len(sources) > most:
        raise TooManyShareImages(limit=most)
    ids = [row["id"] for row in sources]
    size = sum(int(row["bytes"]) for row in sources)
    prefix = _copy_prefix(user, sid)
    params = [user, sid, prefix, now_ms, json.dumps(ids), len(ids), quota.files, size, quota.bytes]
    copies = (await db.batch([(_COPY_ROWS, params)]))[0] if ids else []
    if len(copies) < len(ids):
        counted = (await db.batch([(_STATE, [user, ""])]))[0][0]
        if counted["count"] + len(ids) > quota.files:
            raise TooManyFiles(limit=quota.files)
        raise FilesFull(limit=quota.bytes)
    missing = []  # deleted since the rows were read: not shown
    try:
        for row in copies:
            if not await blobs.copy(own_key(user, row["id"]), row["key"]):
                missing.append(row["key"])
    except BlobError as exc:
        await unshare(db, blobs, user, sid)
        raise _stored(exc) from exc
    statements = [(_SHARE_WITH_IMAGES, [sid, user])]
    if missing:
        statements.append((_FORGET_KEYS, [json.dumps(missing)]))
    await db.batch(statements)
    return len(copies)


async def unshare(db: Database, blobs: Blobs, user: str, sid: str) -> None:
    """Deletes the copies of the user's link ``sid`` (a revoke)."""
    rows = (await db.batch([(_COPIES, [user, sid])]))[0]
    await _delete(db, blobs, [row["key"] for row in rows])


async def read_shared(
    db: Database, blobs: Blobs, sid: str, fid: str, now_ms: int
) -> tuple[bytes, str] | None:
    """An image of link ``sid`` (made with its images, neither expired nor
    revoked) and its type, or None."""
    rows = (await db.batch([(_SHARED, [sid, fid, now_ms])]))[0]
    if not rows or not rows[0]["live"]:
        return None
    try:
        return await blobs.get(rows[0]["key"])
    except BlobError as exc:
        raise _stored(exc) from exc


async def erase(db: Database, blobs: Blobs, user: str) -> None:
    """Deletes every object of the user's (their images, their links'
    copies): those their rows name and whatever else is under their prefix."""
    rows = (await db.batch([(_EVERYTHING, [user])]))[0]
    keys = {row["key"] for row in rows}
    try:
        cursor: str | None = None
        while True:
            page, cursor = await blobs.list(user_prefix(user), cursor)
            keys.update(page)
            if cursor is None:
                break
        await blobs.delete(sorted(keys))
    except BlobError as exc:
        raise _stored(exc) from exc
    await db.batch([(_FORGET_EVERYTHING, [user])])
