from __future__ import annotations

import asyncio
import hashlib

import pytest

from edgechat.config.settings import Settings
from edgechat.core.errors import Forbidden, RateLimited, UnsupportedMediaType
from edgechat.core.http import Incoming
from edgechat.web import guards
from tests.unit.fakes import FakeRateLimiter

SELF = "https://chat.example.com"
PARTNER = "https://partner.example.org"


def incoming(**headers: str) -> Incoming:
    return Incoming(
        method="POST",
        path="/chat",
        origin=SELF,
        headers={name.replace("_", "-"): value for name, value in headers.items()},
    )


WITH_PARTNER = Settings(allowed_origins=(PARTNER,))
WITH_TOKEN = Settings(api_token="s3cret-token")


# --- cors_origin ---------------------------------------------------------------


def test_requests_without_origin_are_not_cross_site() -> None:
    assert guards.cors_origin(incoming(), Settings()) is None


@pytest.mark.parametrize("fetch_site", ["same-origin", "none"])
def test_same_origin_fetch_metadata_is_accepted(fetch_site: str) -> None:
    assert guards.cors_origin(incoming(sec_fetch_site=fetch_site), Settings()) is None


@pytest.mark.parametrize(
    "origin", [SELF, "HTTPS://Chat.Example.com", "https://chat.example.com:443"]
)
def test_same_origin_requests_get_no_cors_origin(origin: str) -> None:
    assert guards.cors_origin(incoming(origin=origin), Settings()) is None


@pytest.mark.parametrize(
    "origin",
    [
        PARTNER,
        "https://evil.example",
        "http://chat.example.com",  # another scheme is another origin
        "https://chat.example.com:8443",
        "https://chat.example.com.evil.example",
        "not an origin",
    ],
)
def test_cross_site_origins_are_refused_unless_allowed(origin: str) -> None:
    with pytest.raises(Forbidden) as raised:
        guards.cors_origin(incoming(origin=origin), Settings())
    assert raised.value.status == 403
    assert raised.value.code == "cross_site_request"


@pytest.mark.parametrize("origin", [PARTNER, "HTTPS://PARTNER.example.org:443"])
def test_allowed_origin_is_returned_in_canonical_form(origin: str) -> None:
    assert guards.cors_origin(incoming(origin=origin), WITH_PARTNER) == PARTNER


def test_other_origins_stay_refused_when_one_is_allowed() -> None:
    with pytest.raises(Forbidden):
        guards.cors_origin(incoming(origin="https://evil.example"), WITH_PARTNER)


def test_null_origin_is_refused_even_with_allowed_origins() -> None:
    with pytest.raises(Forbidden):
        guards.cors_origin(incoming(origin="null"), WITH_PARTNER)


@pytest.mark.parametrize("fetch_site", ["cross-site", "same-site"])
def test_cross_site_fetch_without_origin_is_refused(fetch_site: str) -> None:
    with pytest.raises(Forbidden):
        guards.cors_origin(incoming(sec_fetch_site=fetch_site), WITH_PARTNER)


def test_cors_headers() -> None:
    assert guards.cors_headers(None) == {}
    assert guards.cors_headers(PARTNER) == {
        "Access-Control-Allow-Origin": PARTNER,
        "Vary": "Origin",
    }


# --- check_json ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON ;charset=UTF-8"],
)
def test_json_content_types_pass(content_type: str) -> None:
    guards.check_json(incoming(content_type=content_type))


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"content_type": ""},
        {"content_type": "text/plain"},
        {"content_type": "application/x-www-form-urlencoded"},
        {"content_type": "multipart/form-data; boundary=x"},
        {"content_type": "application/json-patch+json"},
        {"content_type": "text/json"},
    ],
)
def test_other_content_types_are_unsupported(headers: dict[str, str]) -> None:
    with pytest.raises(UnsupportedMediaType) as raised:
        guards.check_json(incoming(**headers))
    assert raised.value.status == 415


# --- rate limiting ---------------------------------------------------------------------


def test_rate_limit_key_is_the_client_ip_without_a_token() -> None:
    request = incoming(cf_connecting_ip="203.0.113.7", authorization="Bearer made-up")
    assert guards.rate_limit_key(request, None) == "ip:203.0.113.7"


def test_rate_limit_key_without_ip() -> None:
    assert guards.rate_limit_key(incoming(), None) == "ip:unknown"


def test_rate_limit_key_is_a_hash_of_a_verified_user() -> None:
    key = guards.rate_limit_key(incoming(cf_connecting_ip="203.0.113.7"), "key:ci")
    assert key == "user:" + hashlib.sha256(b"key:ci").hexdigest()[:32]
    assert "ci" not in key.removeprefix("user:")


def test_check_rate_asks_the_limiter_with_the_key() -> None:
    limiter = FakeRateLimiter(allow=1)
    asyncio.run(guards.check_rate(limiter, "ip:203.0.113.7"))
    assert limiter.keys == ["ip:203.0.113.7"]
    with pytest.raises(RateLimited) as raised:
        asyncio.run(guards.check_rate(limiter, "ip:203.0.113.7"))
    assert raised.value.status == 429
    assert raised.value.headers() == {"Retry-After": "60"}


def test_check_rate_without_a_limiter_allows() -> None:
    asyncio.run(guards.check_rate(None, "ip:203.0.113.7"))
