"""Who is asking (``identity``): named keys, Cloudflare Access tokens, and
the settings behind them. Tokens are signed with real RSA keys
(``tests.kit.access``) and checked with real RS256 (``FakeVerifier``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from edgechat.config.settings import Settings
from edgechat.core.errors import ApiDisabled, IdentityUnavailable, Unauthorized
from edgechat.core.http import Incoming
from edgechat.core.ports import KeysError
from edgechat.users.identity import (
    ACCESS_REFUSED,
    MAX_ASSERTION_BYTES,
    REFETCHES,
    AccessKeys,
    User,
    identify,
    match_key,
)
from tests.kit.access import AUD, SigningKey, b64url
from tests.unit.fakes import FakeVerifier

TEAM = "https://edgechat-test.cloudflareaccess.com"
KEY = SigningKey("kid-1")
OTHER = SigningKey("kid-2")


def jwks(*keys: SigningKey) -> tuple[int, bytes]:
    return 200, json.dumps({"keys": [key.jwk() for key in keys]}).encode()


def request(**headers: str) -> Incoming:
    return Incoming("POST", "/chat", "https://chat.example", headers)


def settings(**values: str) -> Settings:
    return Settings.from_mapping(values)


ACCESS = settings(ACCESS_TEAM_DOMAIN="edgechat-test.cloudflareaccess.com", ACCESS_AUD=AUD)


def who(
    incoming: Incoming,
    s: Settings,
    verifier: FakeVerifier | None = None,
    keys: AccessKeys | None = None,
    *,
    api: bool = False,
) -> User:
    return asyncio.run(
        identify(incoming, s.identity, verifier or FakeVerifier(), keys or AccessKeys(), api=api)
    )


# --- named keys -----------------------------------------------------------------

KEYS = settings(
    API_TOKEN="the-old-single-token",
    API_KEYS="ci:ci-token-0123456789abcdef, laptop:laptop-token-0123456789",
    ADMINS="ci, ann@example.com",
)


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("Bearer ci-token-0123456789abcdef", "ci"),
        ("bearer  laptop-token-0123456789 ", "laptop"),
        ("BEARER the-old-single-token", "api_token"),
    ],
)
def test_a_key_is_its_user(header: str, name: str) -> None:
    user = who(request(authorization=header), KEYS)
    assert user == User("key:" + name, name, "key", admin=name == "ci")
    assert user.to_json() == {"user": name, "via": "key", "admin": name == "ci"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"authorization": ""},
        {"authorization": "Bearer"},
        {"authorization": "Bearer ci-token-0123456789abcde"},
        {"authorization": "Bearer ci-token-0123456789abcdefX"},
        {"authorization": "Basic ci-token-0123456789abcdef"},
        {"authorization": "ci-token-0123456789abcdef"},
        {"authorization": "Bearer Ünïcode"},
    ],
)
def test_missing_or_wrong_keys_are_unauthorized(headers: dict[str, str]) -> None:
    with pytest.raises(Unauthorized) as raised:
        who(request(**headers), KEYS)
    error = raised.value
    assert error.headers() == {"WWW-Authenticate": 'Bearer realm="edgechat"'}
    for text in (str(error), json.dumps(error.to_json())):
        assert "token-0123" not in text
        assert "single-token" not in text


def test_without_keys_or_access_everyone_is_the_anonymous_user() -> None:
    assert who(request(), Settings()).via == "anonymous"
    # A bearer token means nothing while no key is set.
    assert who(request(authorization="Bearer anything"), Settings()).id == "anonymous"


def test_the_openai_api_needs_a_key() -> None:
    with pytest.raises(ApiDisabled):
        who(request(authorization="Bearer anything"), Settings(), api=True)
    with pytest.raises(Unauthorized):
        who(request(), KEYS, api=True)
    # Even with Access: the API is for keys.
    with pytest.raises(ApiDisabled):
        who(request(**{"cf-access-jwt-assertion": good()}), ACCESS, api=True)


def test_match_key_compares_every_key() -> None:
    keys = KEYS.identity.keys
    assert [key.name for key in keys] == ["api_token", "ci", "laptop"]
    assert match_key(keys, "laptop-token-0123456789") is keys[2]
    assert match_key(keys, "") is None
    assert "laptop-token" not in repr(keys)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ci", "API_KEYS entry 1 must be name:token"),
        ("ci:short", "API_KEYS entry 1 must be name:token"),
        ("ok:0123456789abcdef0, bad name:0123456789abcdef1", "API_KEYS entry 2"),
        ("a:0123456789abcdef0,a:0123456789abcdef1", "must each be unique"),
        ("a:0123456789abcdef0,b:0123456789abcdef0", "must each be unique"),
        ("api_token:0123456789abcdef9", "must each be unique"),
    ],
)
def test_bad_api_keys_are_named_without_their_tokens(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        settings(API_KEYS=value, API_TOKEN="x" * 16)
    assert "0123456789" not in str(raised.value)


# --- Cloudflare Access ----------------------------------------------------------


def good(key: SigningKey = KEY, **claims: Any) -> str:
    return key.token(key.claims(TEAM, **claims))


def access_user(token: str, verifier: FakeVerifier | None = None, **kw: Any) -> User:
    return who(
        request(**{"cf-access-jwt-assertion": token}),
        ACCESS,
        verifier or FakeVerifier(jwks(KEY)),
        **kw,
    )


def test_a_valid_access_token_names_its_user() -> None:
    verifier = FakeVerifier(jwks(KEY))
    assert access_user(good(), verifier) == User(
        "access:ann@example.com", "ann@example.com", "access"
    )
    assert verifier.fetched == [TEAM + "/cdn-cgi/access/certs"]
    # A service token names no email: its common_name is the user.
    service = good(email=None, common_name="robot.access")
    assert access_user(service).name == "robot.access"
    # An admin by email.
    admin = settings(ACCESS_TEAM_DOMAIN=TEAM, ACCESS_AUD=AUD, ADMINS="ann@example.com")
    token = {"cf-access-jwt-assertion": good()}
    assert who(request(**token), admin, FakeVerifier(jwks(KEY))).admin


def tampered_signature() -> str:
    head, body, signature = good().split(".")
    flipped = bytearray(signature.encode())
    flipped[10] = ord("A") if flipped[10] != ord("A") else ord("B")
    return f"{head}.{body}.{flipped.decode()}"


def swapped_claims() -> str:
    head, _, signature = good().split(".")
    _, body, _ = good(email="mallory@example.com").split(".")
    return f"{head}.{body}.{signature}"


BROKEN = {
    "expired": lambda: good(exp=1_000_000_000),
    "not yet valid": lambda: good(nbf=4_000_000_000),
    "no exp": lambda: good(exp=None),
    "wrong aud": lambda: good(aud=["another-app"]),
    "wrong issuer": lambda: good(iss="https://evil.cloudflareaccess.com"),
    "no user": lambda: good(email=None, sub=None),
    "alg none": lambda: KEY.token(KEY.claims(TEAM), alg="none"),
    "HS256 with the public key": lambda: KEY.token(KEY.claims(TEAM), alg="HS256"),
    "signed by another key": lambda: OTHER.token(OTHER.claims(TEAM), header={"kid": "kid-1"}),
    "tampered signature": tampered_signature,
    "claims swapped": swapped_claims,
    "truncated": lambda: good()[:-20],
    "padded": lambda: good() + "==",
    "two parts": lambda: good().rsplit(".", 1)[0],
    "four parts": lambda: good() + ".e30",
    "huge header": lambda: KEY.token(KEY.claims(TEAM), header={"x": "a" * MAX_ASSERTION_BYTES}),
    "deep header": lambda: KEY.token(KEY.claims(TEAM), header={"x": [[[[[[1]]]]]]}),
    "header not JSON": lambda: b64url(b"{nope") + "." + good().split(".", 1)[1],
    "crit header": lambda: KEY.token(KEY.claims(TEAM), header={"crit": ["exp"]}),
    "empty": lambda: "",
    "garbage": lambda: "not-a-token",
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_every_broken_access_token_is_refused_the_same_way(kind: str) -> None:
    token = BROKEN[kind]()
    with pytest.raises(Unauthorized) as raised:
        access_user(token)
    error = raised.value
    assert (error.status, error.code, error.public_message) == (401, "unauthorized", ACCESS_REFUSED)
    if token:
        assert token not in str(error)
        assert token[-12:] not in str(error)


def test_no_token_at_all_is_refused_the_same_way() -> None:
    with pytest.raises(Unauthorized) as raised:
        who(request(), ACCESS, FakeVerifier(jwks(KEY)))
    assert raised.value.status == 401


def test_a_key_still_works_behind_access() -> None:
    both = settings(
        ACCESS_TEAM_DOMAIN=TEAM, ACCESS_AUD=AUD, API_KEYS="ci:ci-token-0123456789abcdef"
    )
    user = who(request(authorization="Bearer ci-token-0123456789abcdef"), both)
    assert user.id == "key:ci"
    with pytest.raises(Unauthorized):
        who(request(authorization="Bearer wrong-token"), both)


def test_keys_are_kept_for_the_isolate_and_refetched_for_an_unknown_kid() -> None:
    verifier = FakeVerifier(jwks(KEY), jwks(KEY, OTHER))
    keys = AccessKeys()
    assert access_user(good(), verifier, keys=keys).name == "ann@example.com"
    assert access_user(good(), verifier, keys=keys).name == "ann@example.com"
    assert len(verifier.fetched) == 1
    # The team rotated: a token of the new key makes one more fetch.
    assert access_user(good(OTHER), verifier, keys=keys).name == "ann@example.com"
    assert len(verifier.fetched) == 2


def test_an_unknown_kid_is_refused_after_a_refetch_and_refetches_are_bounded() -> None:
    verifier = FakeVerifier(jwks(KEY))
    keys = AccessKeys()
    access_user(good(), verifier, keys=keys)
    stranger = SigningKey("kid-unknown")
    for _ in range(REFETCHES + 2):
        with pytest.raises(Unauthorized):
            access_user(good(stranger), verifier, keys=keys)
    # One fetch at first, then at most REFETCHES for unknown kids a minute.
    assert len(verifier.fetched) == 1 + REFETCHES


@pytest.mark.parametrize(
    "answer",
    [
        KeysError("connection refused"),
        (503, b"down"),
        (200, b"<html>"),
        (200, b'{"keys": "none"}'),
        (200, json.dumps({"keys": [{**KEY.jwk(), "n": "@@"}]}).encode()),
    ],
)
def test_a_keys_endpoint_that_is_down_fails_closed(answer: tuple[int, bytes] | Exception) -> None:
    with pytest.raises(IdentityUnavailable) as raised:
        access_user(good(), FakeVerifier(answer))
    assert (raised.value.status, raised.value.code) == (503, "identity_unavailable")
    assert "Retry-After" in raised.value.headers()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ACCESS_TEAM_DOMAIN": TEAM}, "go together"),
        ({"ACCESS_AUD": AUD}, "go together"),
        ({"ACCESS_TEAM_DOMAIN": "http://team.example", "ACCESS_AUD": AUD}, "https://"),
        ({"ACCESS_TEAM_DOMAIN": TEAM + "/path", "ACCESS_AUD": AUD}, "a domain like"),
    ],
)
def test_bad_access_settings_are_named(values: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Settings.from_mapping(values)


def test_access_settings_take_a_domain_or_a_loopback_url() -> None:
    assert ACCESS.identity.access is not None
    assert ACCESS.identity.access.team == TEAM
    local = settings(ACCESS_TEAM_DOMAIN="http://127.0.0.1:8123/", ACCESS_AUD=AUD)
    assert local.identity.access is not None
    assert local.identity.access.certs_url == "http://127.0.0.1:8123/cdn-cgi/access/certs"


def test_a_verified_token_is_kept_until_it_expires() -> None:
    now = [1_795_000_000.0]
    keys = AccessKeys(wall=lambda: now[0])
    verifier = FakeVerifier(jwks(KEY))
    token = KEY.token(KEY.claims(TEAM, iat=int(now[0]), nbf=int(now[0]), exp=int(now[0]) + 60))
    for _ in range(3):
        assert access_user(token, verifier, keys=keys).name == "ann@example.com"
    # A browser sends the same token with every request: one signature check.
    assert verifier.verifications == 1
    now[0] += 60
    with pytest.raises(Unauthorized):
        access_user(token, verifier, keys=keys)
