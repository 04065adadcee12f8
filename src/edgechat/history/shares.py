"""Share links: a read-only copy of a conversation at ``/s/<id>``.

``POST /api/shares`` copies the user's conversation **as it is now** (from
``history``'s row, in the same statement that checks it is theirs) into the
``shares`` table under an id of 144 random bits (``core.ids``): later
edits never reach the copy,
and nobody finds a link by trying ids. A link lives ``days`` (default
``DEFAULT_DAYS``, at most ``MAX_SHARE_DAYS``); ``DELETE /api/shares/<id>``
revokes it (the copy is deleted, the row stays so the link says it is gone).

``/s/<id>`` needs no identity: the id is the capability. The page it
answers is plain HTML made here, every character of the conversation
escaped, with no script at all (``Content-Security-Policy: default-src
'none'``), ``noindex`` (header and meta), no referrer (the link leaves no
trace in the sites it links to) and ``no-store`` (a revoke is immediate).
An answer from a knowledge base lists the passages it cites under it
(``stats.sources``), and each ``[n]`` of its text links to its passage: a
plain link to an anchor, which needs no script.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from edgechat.core import ids
from edgechat.core.errors import NotFound, TooManyShares, utc_iso
from edgechat.core.ports import Database

__all__ = [
    "DEFAULT_DAYS",
    "HEADERS",
    "ID_BYTES",
    "IMAGE_HEADERS",
    "IMAGE_REPLY_HEADERS",
    "create",
    "headers",
    "is_share_id",
    "mine",
    "new_id",
    "page",
    "read",
    "revoke",
]

DEFAULT_DAYS = 30
ID_BYTES = ids.ID_BYTES
DAY_MS = 86_400_000

_CREATE = (
    "INSERT INTO shares (id, user, conversation, title, created, expires, body) "
    "SELECT ?1, ?2, id, title, ?4, ?5, body FROM conversations "
    "WHERE user = ?2 AND id = ?3 AND body IS NOT NULL "
    "AND (SELECT COUNT(*) FROM shares WHERE user = ?2 AND body IS NOT NULL AND expires > ?4) < ?6 "
    "RETURNING id, expires"
)
_OWNS = "SELECT 1 AS found FROM conversations WHERE user = ?1 AND id = ?2 AND body IS NOT NULL"
_MINE = (
    "SELECT id, conversation, title, created, expires FROM shares "
    "WHERE user = ?1 AND body IS NOT NULL ORDER BY created DESC"
)
_REVOKE = (
    "UPDATE shares SET body = NULL WHERE id = ?1 AND user = ?2 AND body IS NOT NULL RETURNING id"
)
# ``shown``: the ids of the images the link copied (files.py's rows of
# it), as JSON; the page shows those and no other.
_READ = (
    "SELECT id, title, created, expires, body, images, "
    "(SELECT json_group_array(f.id) FROM files f WHERE f.share = ?1) AS shown "
    "FROM shares WHERE id = ?1"
)


# A link's id is one of core.ids' (144 random bits).
new_id = ids.new_id
is_share_id = ids.is_random_id


async def create(
    db: Database, user: str, conversation: str, days: int, most: int, now_ms: int
) -> dict[str, Any]:
    """A new link to a copy of the user's ``conversation``; raises
    ``NotFound`` (no such live conversation of theirs) or ``TooManyShares``."""
    sid = new_id()
    expires = now_ms + days * DAY_MS
    params = [sid, user, conversation, now_ms, expires, most]
    made = (await db.batch([(_CREATE, params)]))[0]
    if not made:
        owns = (await db.batch([(_OWNS, [user, conversation])]))[0]
        if not owns:
            raise NotFound(public="No such conversation.", detail="share of a missing conversation")
        raise TooManyShares(limit=most)
    return {"id": sid, "url": f"/s/{sid}", "created": now_ms, "expires": expires}


async def mine(db: Database, user: str, now_ms: int) -> list[dict[str, Any]]:
    """The user's links not revoked, newest first, each saying whether it expired."""
    rows = (await db.batch([(_MINE, [user])]))[0]
    return [
        {
            "id": row["id"],
            "url": f"/s/{row['id']}",
            "conversation": row["conversation"],
            "title": row["title"],
            "created": row["created"],
            "expires": row["expires"],
            "expired": row["expires"] <= now_ms,
        }
        for row in rows
    ]


async def revoke(db: Database, user: str, sid: str) -> None:
    """Deletes the link's copy; ``NotFound`` when it is not the user's live link."""
    if not (await db.batch([(_REVOKE, [sid, user])]))[0]:
        raise NotFound(public="No such share link.", detail="revoke of a link not theirs")


async def read(db: Database, sid: str) -> dict[str, Any] | None:
    """The link's row (``body`` None once revoked), or None."""
    rows = (await db.batch([(_READ, [sid])]))[0]
    return rows[0] if rows else None


def _thread(conversation: dict[str, Any]) -> list[dict[str, Any]]:
    """The messages shown, following the picks (``tree.js``'s ``thread``)."""
    nodes = conversation.get("nodes", [])
    children: dict[int | None, list[int]] = {}
    for k, node in enumerate(nodes):
        children.setdefault(node["parent"], []).append(k)
    out: list[dict[str, Any]] = []
    parent: int | None = None
    pick = conversation.get("pick", 0)
    while versions := children.get(parent):
        k = versions[min(pick, len(versions) - 1)]
        out.append(nodes[k])
        parent, pick = k, nodes[k].get("pick", 0)
    return out


_STYLE = (
    "body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;"
    "color:#1b1b1f;background:#fff}h1{font-size:1.4rem}h2{font-size:.9rem;margin:1.5rem 0 .25rem;"
    "color:#555}pre{white-space:pre-wrap;word-wrap:break-word;font:inherit;margin:0}"
    "footer{margin-top:2rem;color:#666;font-size:.85rem}"
    "h3{font-size:.85rem;margin:.75rem 0 .25rem}ol{padding-left:1.25rem;font-size:.9rem}"
    "li:target{outline:2px solid #6b8afd;outline-offset:2px}"
    "img{display:block;max-width:100%;height:auto;margin:.25rem 0}"
    "@media (prefers-color-scheme:dark){body{background:#17171a;color:#e6e6ea}h2{color:#aaa}}"
)

_CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; {images}"
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)

# The page's headers: no script, no index, no referrer, nothing kept.
HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "X-Robots-Tag": "noindex, nofollow",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": _CSP.format(images=""),
}


# With the link's images (``"images": true``): they, and nothing else, load
# from this origin (``/s/<id>/images/<image>``).
IMAGE_HEADERS = {**HEADERS, "Content-Security-Policy": _CSP.format(images="img-src 'self'; ")}

# An image of a link (``/s/<id>/images/<image>``): the page's rules, its own type.
IMAGE_REPLY_HEADERS = {k: v for k, v in HEADERS.items() if k != "Content-Type"}


def headers(row: dict[str, Any] | None) -> dict[str, str]:
    """The page's headers: images allowed only when the link shows them."""
    return IMAGE_HEADERS if row is not None and row.get("images") else HEADERS


def _images(sid: str, message: dict[str, Any], shown: set[str]) -> str:
    # An image the link holds no copy of (never uploaded) is left out, not
    # shown broken.
    return "".join(
        f'<img src="/s/{sid}/images/{html.escape(image["id"])}" alt="" '
        f'width="{int(image["width"])}" height="{int(image["height"])}">'
        for image in message.get("images", ())
        if image["id"] in shown
    )


# The citations the page links (static/js/sources.js): [1] to [99].
_CITE = re.compile(r"\[(\d{1,2})\]")


def _answer(message: dict[str, Any], k: int) -> str:
    """An answer's text, escaped; with knowledge sources, each ``[n]`` that
    names one links to its passage, listed after the text."""
    text = html.escape(message["content"])
    sources = (message.get("stats") or {}).get("sources") or []
    if not sources:
        return f"<pre>{text}</pre>"

    def link(match: re.Match[str]) -> str:
        n = int(match[1])
        return f'<a href="#m{k}-s{n}">{match[0]}</a>' if 1 <= n <= len(sources) else match[0]

    items = "".join(
        f'<li id="m{k}-s{source["n"]}"><strong>{html.escape(source["name"])}</strong>, '
        f"passage {int(source['chunk']) + 1}<pre>{html.escape(source['text'])}</pre></li>"
        for source in sources
    )
    return f"<pre>{_CITE.sub(link, text)}</pre><h3>Sources</h3><ol>{items}</ol>"


def _document(title: str, body: str) -> bytes:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="robots" content="noindex, nofollow">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>"
    ).encode()


def page(row: dict[str, Any] | None, now_ms: int) -> tuple[int, bytes]:
    """``/s/<id>``'s status and HTML for the link's row."""
    if row is None:
        return 404, _document(
            "No such link", "<h1>No such link</h1><p>This share link does not exist.</p>"
        )
    # Expiry first: an expired link's copy is deleted too (by the retention
    # purge), and its page must still say it expired, not that it was revoked.
    if row["expires"] <= now_ms:
        when = utc_iso(row["expires"] / 1000)
        return 410, _document(
            "Link expired",
            f"<h1>This link has expired</h1><p>It was shared until {when}. "
            "Ask its owner for a new one.</p>",
        )
    if row["body"] is None:
        return 410, _document(
            "Link revoked",
            "<h1>This link was revoked</h1><p>Its owner stopped sharing this conversation; "
            "the copy is deleted.</p>",
        )
    conversation = json.loads(row["body"])
    title = conversation.get("title") or "A conversation"
    parts = [f"<h1>{html.escape(title)}</h1>"]
    shown = set(json.loads(row.get("shown") or "[]")) if row.get("images") else set()
    for k, message in enumerate(_thread(conversation)):
        if message["role"] == "user":
            images = _images(row["id"], message, shown)
            parts.append(f"<h2>User</h2>{images}<pre>{html.escape(message['content'])}</pre>")
        else:
            parts.append(f"<h2>Assistant</h2>{_answer(message, k)}")
    until = utc_iso(row["expires"] / 1000)
    parts.append(f"<footer>A read-only copy, shared with edgechat until {until}.</footer>")
    return 200, _document(title, "".join(parts))
