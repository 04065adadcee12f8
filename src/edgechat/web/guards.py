"""Checks a request must pass before it may cost anything: origin, content
type and rate limit (who asks is ``identity``'s). Each raises the matching
client error."""

from __future__ import annotations

import hashlib

from edgechat.config.settings import Settings
from edgechat.core.errors import Forbidden, RateLimited, UnsupportedMediaType
from edgechat.core.http import Incoming, normalize_origin
from edgechat.core.ports import RateLimiter

_CROSS_SITE_FETCH = frozenset(("cross-site", "same-site"))


def cors_origin(request: Incoming, settings: Settings) -> str | None:
    """The configured origin of a cross-site caller, to echo in CORS headers;
    None for same-origin requests and for clients that send no Origin.
    Raises ``Forbidden`` for any other cross-site browser request."""
    raw = request.headers.get("origin")
    if raw is not None and raw != "null":
        origin = normalize_origin(raw)
        if origin == request.origin:
            return None
        if origin is not None and origin in settings.allowed_origins:
            return origin
        raise Forbidden(detail="cross-site origin not allowed")
    # No usable Origin: browsers still say where a request came from.
    if raw == "null" or request.headers.get("sec-fetch-site") in _CROSS_SITE_FETCH:
        raise Forbidden(detail="cross-site fetch without an allowed origin")
    return None


def cors_headers(origin: str | None) -> dict[str, str]:
    if origin is None:
        return {}
    return {"Access-Control-Allow-Origin": origin, "Vary": "Origin"}


def check_json(request: Incoming) -> None:
    media_type = request.headers.get("content-type", "").partition(";")[0]
    if media_type.strip().lower() != "application/json":
        raise UnsupportedMediaType()


def rate_limit_key(request: Incoming, user_id: str | None) -> str:
    # Only a verified user (a key, an Access token) may choose the bucket;
    # otherwise a client could send a new made-up token with every request
    # to dodge the limit.
    if user_id is not None:
        return "user:" + hashlib.sha256(user_id.encode()).hexdigest()[:32]
    return "ip:" + request.headers.get("cf-connecting-ip", "unknown")


async def check_rate(limiter: RateLimiter | None, key: str) -> None:
    if limiter is not None and not await limiter.allow(key):
        raise RateLimited(detail=f"rate limit reached for {key[:9]}…")
