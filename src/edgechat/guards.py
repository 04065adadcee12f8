"""Checks a request must pass before it may cost anything: origin, token,
content type and rate limit. Each raises the matching client error."""

from __future__ import annotations

import hashlib
import hmac

from edgechat.config import Settings
from edgechat.errors import ApiDisabled, Forbidden, RateLimited, Unauthorized, UnsupportedMediaType
from edgechat.http import Incoming, normalize_origin
from edgechat.ports import RateLimiter

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


def check_token(request: Incoming, settings: Settings) -> str | None:
    """Returns the verified bearer token when ``API_TOKEN`` is set; raises
    ``Unauthorized`` when it is set and the request lacks it."""
    expected = settings.api_token
    if expected is None:
        return None
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(
        presented.strip().encode(), expected.encode()
    ):
        raise Unauthorized(detail="missing or wrong bearer token")
    return presented.strip()


def check_api_token(request: Incoming, settings: Settings) -> str:
    """The OpenAI API's check: the token is required, so without ``API_TOKEN``
    the API is off (``ApiDisabled``) instead of open to anyone."""
    token = check_token(request, settings)
    if token is None:
        raise ApiDisabled(detail="API_TOKEN is not set")
    return token


def check_json(request: Incoming) -> None:
    media_type = request.headers.get("content-type", "").partition(";")[0]
    if media_type.strip().lower() != "application/json":
        raise UnsupportedMediaType()


def rate_limit_key(request: Incoming, token: str | None) -> str:
    # Only a verified token may choose the bucket; otherwise a client could
    # send a new made-up token with every request to dodge the limit.
    if token is not None:
        return "token:" + hashlib.sha256(token.encode()).hexdigest()[:32]
    return "ip:" + request.headers.get("cf-connecting-ip", "unknown")


async def check_rate(limiter: RateLimiter | None, key: str) -> None:
    if limiter is not None and not await limiter.allow(key):
        raise RateLimited(detail=f"rate limit reached for {key[:9]}…")
