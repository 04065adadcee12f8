"""Ids: the server's, which nobody can guess (144 random bits, base64url,
24 characters: share links, comparisons), and the names a client gives
its own things (conversations, images, answers: ``is_client_id``).

The server's ids The bits come from
``os.urandom`` (the runtime's ``crypto.getRandomValues``) when an id is
made; ``secrets`` and ``random`` are not imported, since their generators
seed themselves at import and a Worker takes no randomness at import time
(its memory snapshot would keep it).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re

__all__ = [
    "CLIENT_ID_RULE",
    "ID_BYTES",
    "is_client_id",
    "is_random_id",
    "new_id",
    "owner_tag",
    "random_below",
    "user_prefix",
]

ID_BYTES = 18  # 144 bits, 24 base64url characters
_ID = re.compile(r"[A-Za-z0-9_-]{24}")
# A client's name for its own thing: nothing to escape in a URL or a log.
_CLIENT_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")
CLIENT_ID_RULE = "1 to 100 letters, digits, '.', '_' or '-'"


def new_id() -> str:
    """144 random bits, base64url."""
    return base64.urlsafe_b64encode(os.urandom(ID_BYTES)).decode()


def is_random_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


def random_below(n: int) -> int:
    """A random whole number from 0 to ``n`` - 1 (``n`` small: the bias of
    64 random bits modulo ``n`` is below 2^-58)."""
    return int.from_bytes(os.urandom(8), "big") % n


def is_client_id(text: str) -> bool:
    return _CLIENT_ID.fullmatch(text) is not None


def user_prefix(user: str) -> str:
    """A user's prefix in the ``FILES`` bucket: their id in base64url, which
    holds no ``/`` (their images, ``history.files``; their knowledge bases'
    documents, ``knowledge.store``)."""
    return "u/" + base64.urlsafe_b64encode(user.encode()).decode().rstrip("=") + "/"


def owner_tag(user: str) -> str:
    """The ``owner`` a user's vectors carry in the Vectorize index (their
    knowledge bases' chunks, their semantic cache's questions), by which
    every query of theirs is filtered: a digest of their id (an id may be an
    email), 22 base64url characters, within the 64
    bytes Vectorize indexes of a metadata string
    (https://developers.cloudflare.com/vectorize/platform/limits/)."""
    digest = hashlib.sha256(b"edgechat-owner:" + user.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()[:22]
