"""Who is asking: a named key, a Cloudflare Access user, or an anonymous client.

- **Named keys** (``API_KEYS``, ``name:token`` pairs, and ``API_TOKEN`` as
  the key ``api_token``): a request's ``Authorization: Bearer`` token is
  compared with every key's in constant time (their SHA-256 digests, so not
  even a length is told apart). The key's name is the user. Tokens are never
  logged, echoed or kept anywhere but in the settings.
- **Cloudflare Access** (``ACCESS_TEAM_DOMAIN`` and ``ACCESS_AUD``): every
  request without a key must carry a valid ``Cf-Access-Jwt-Assertion``: an
  RS256 token signed with one of the team's keys
  (``<team>/cdn-cgi/access/certs``), for this application (``aud``), from
  this team (``iss``), within its ``nbf`` and ``exp``. The signature is
  checked by the runtime's WebCrypto at the seam (``ports.Verifier``); the
  keys are kept per isolate (``AccessKeys``) and fetched again for a ``kid``
  they lack. The user is the token's ``email``, or ``common_name`` (service
  tokens), or ``sub``.
  (https://developers.cloudflare.com/cloudflare-one/identity/authorization-cookie/validating-json/)
- Otherwise the client is anonymous (today's single shared door), counted
  by its address.

Every broken token is refused the same way (``401 unauthorized``); the log
gets why, never the token. A keys endpoint that cannot be read fails closed
(``503 identity_unavailable``).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from edgechat.core.errors import ApiDisabled, IdentityUnavailable, Unauthorized
from edgechat.core.http import Incoming
from edgechat.core.json_body import nested_deeper_than
from edgechat.core.ports import KeysError, Verifier

__all__ = [
    "MAX_ASSERTION_BYTES",
    "Access",
    "AccessKeys",
    "ApiKey",
    "User",
    "identify",
    "match_key",
]

# A real Access token is about 1 KB; anything much larger is refused
# before a byte of it is decoded.
MAX_ASSERTION_BYTES = 8192
# The team's keys are fetched again after this long, and for an unknown
# ``kid`` at most ``REFETCHES`` times a minute (a flood of made-up ``kid``s
# must not become a flood of fetches; a rotation needs one).
KEYS_MAX_AGE_S = 3600.0
REFETCHES = 3
# Verified tokens kept per isolate (then forgotten all at once).
MAX_VERIFIED = 1024

Clock = Callable[[], float]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


@dataclass(frozen=True, slots=True)
class ApiKey:
    """One named key: scripts and the OpenAI API use it, and it is a user."""

    name: str
    token: str = field(repr=False)
    digest: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", _digest(self.token))


@dataclass(frozen=True, slots=True)
class Access:
    """A Cloudflare Access application: its team's origin and its AUD tag."""

    team: str  # "https://<team>.cloudflareaccess.com", the tokens' issuer
    aud: str

    @property
    def certs_url(self) -> str:
        return self.team + "/cdn-cgi/access/certs"


@dataclass(frozen=True, slots=True)
class User:
    """Who a request is: ``id`` is unique (``key:ci``, ``access:ann@example.com``,
    ``anonymous``), ``name`` what the page shows."""

    id: str
    name: str
    via: Literal["key", "access", "anonymous"]
    admin: bool = False

    def to_json(self) -> dict[str, object]:
        return {"user": self.name, "via": self.via, "admin": self.admin}


ANONYMOUS = User("anonymous", "anonymous", "anonymous")


def match_key(keys: Sequence[ApiKey], presented: str) -> ApiKey | None:
    """The key whose token is ``presented``; every key is compared, in
    constant time, whichever matches."""
    wanted = _digest(presented)
    found = None
    for key in keys:
        if hmac.compare_digest(wanted, key.digest):
            found = key
    return found


def _bearer(request: Incoming) -> str | None:
    scheme, _, presented = request.headers.get("authorization", "").partition(" ")
    if not scheme:
        return None
    return presented.strip() if scheme.lower() == "bearer" else ""


@dataclass(frozen=True, slots=True)
class Rules:
    """What ``identify`` needs of the settings."""

    keys: tuple[ApiKey, ...] = ()
    access: Access | None = None
    admins: frozenset[str] = frozenset()


async def identify(
    request: Incoming,
    rules: Rules,
    verifier: Verifier,
    keys: AccessKeys,
    *,
    api: bool = False,
) -> User:
    """The user ``request`` is; raises ``Unauthorized`` (any missing or
    broken credential), ``ApiDisabled`` (``api``: the OpenAI API, which
    needs a key, while none is set) or ``IdentityUnavailable``."""
    if api and not rules.keys:
        raise ApiDisabled(detail="no API_TOKEN or API_KEYS")
    presented = _bearer(request)
    if presented is not None and rules.keys:
        key = match_key(rules.keys, presented)
        if key is None:
            raise Unauthorized(detail="the bearer token matches no key")
        return User("key:" + key.name, key.name, "key", key.name in rules.admins)
    if api or (rules.keys and rules.access is None):
        raise Unauthorized(detail="no bearer token")
    if rules.access is None:
        return ANONYMOUS
    assertion = request.headers.get("cf-access-jwt-assertion")
    if assertion is None:
        raise Unauthorized(public=ACCESS_REFUSED, detail="no Cf-Access-Jwt-Assertion")
    name = await verify_assertion(assertion, rules.access, verifier, keys)
    return User("access:" + name, name, "access", name in rules.admins)


class TokenRefused(Exception):
    """Why an Access token was refused, for the log (never the token)."""


def _part(text: str) -> bytes:
    # base64url without padding, as JWS compact serialisation has it (RFC 7515).
    if not text or not _B64URL.fullmatch(text):
        raise TokenRefused("a part is not unpadded base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise TokenRefused("a part is not base64url") from exc


_B64URL = re.compile(r"[A-Za-z0-9_-]+")


def _object(data: bytes, what: str) -> dict[str, Any]:
    if nested_deeper_than(data, 4):
        raise TokenRefused(f"the {what} nests too deep")
    try:
        value = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenRefused(f"the {what} is not JSON") from exc
    if not isinstance(value, dict):
        raise TokenRefused(f"the {what} is not an object")
    return value


def read_token(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """The header, claims, signed bytes and signature of a compact RS256
    token; raises ``TokenRefused`` for anything else (``alg: none``, HS256,
    a missing or extra part, padding, a huge token)."""
    if len(token) > MAX_ASSERTION_BYTES:
        raise TokenRefused(f"longer than {MAX_ASSERTION_BYTES} bytes")
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenRefused(f"{len(parts)} parts, not 3")
    header = _object(_part(parts[0]), "header")
    if header.get("alg") != "RS256":
        raise TokenRefused("alg is not RS256")
    if not isinstance(header.get("kid"), str) or "crit" in header:
        raise TokenRefused("no kid, or a crit header")
    claims = _object(_part(parts[1]), "claims")
    signature = _part(parts[2])
    return header, claims, f"{parts[0]}.{parts[1]}".encode(), signature


def check_claims(claims: Mapping[str, Any], access: Access, now: float) -> str:
    """The user named by valid ``claims``; raises ``TokenRefused``."""
    if claims.get("iss") != access.team:
        raise TokenRefused("wrong issuer")
    aud = claims.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    if access.aud not in audiences:
        raise TokenRefused("wrong audience")
    exp, nbf = _time(claims.get("exp")), _time(claims.get("nbf", 0))
    if exp is None or now >= exp:
        raise TokenRefused("expired, or no exp")
    if nbf is None or now < nbf:
        raise TokenRefused("not yet valid")
    for claim in ("email", "common_name", "sub"):
        name = claims.get(claim)
        if isinstance(name, str) and name.strip():
            return name.strip()
    raise TokenRefused("names no user")


def _time(value: object) -> float | None:
    """A NumericDate (RFC 7519): seconds since the epoch; booleans are not."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


async def verify_assertion(token: str, access: Access, verifier: Verifier, keys: AccessKeys) -> str:
    """The user a valid Access token names; raises ``Unauthorized`` for any
    broken token, ``IdentityUnavailable`` when the keys cannot be read."""
    known = keys.verified(token)
    if known is not None:
        return known
    try:
        header, claims, signed, signature = read_token(token)
        name = check_claims(claims, access, keys.wall())
        key = await keys.key(header["kid"], access, verifier)
        if key is None:
            raise TokenRefused("unknown kid")
        if not await verifier.verify_rs256(key, signed, signature):
            raise TokenRefused("bad signature")
    except TokenRefused as exc:
        raise Unauthorized(public=ACCESS_REFUSED, detail=f"access token: {exc}") from None
    keys.remember(token, name, _time(claims["exp"]) or 0.0)
    return name


ACCESS_REFUSED = "A valid Cloudflare Access sign-in is required. Reload the page to sign in again."


class AccessKeys:
    """The team's signing keys, kept for the isolate: fetched on first use
    and after ``KEYS_MAX_AGE_S``, and again for an unknown ``kid`` (at most
    ``REFETCHES`` times a minute). Concurrent requests share one fetch."""

    __slots__ = ("_clock", "_fetched_at", "_fetching", "_keys", "_refetched", "_verified", "wall")

    def __init__(self, clock: Clock = time.monotonic, wall: Clock = time.time) -> None:
        self._clock = clock
        self.wall = wall
        self._keys: dict[str, object] = {}
        self._fetched_at: float | None = None
        self._fetching: asyncio.Future[None] | None = None
        self._refetched: list[float] = []
        # Tokens already verified (a browser sends the same one with every
        # request): their SHA-256, the user and until when it holds.
        self._verified: dict[bytes, tuple[str, float]] = {}

    def verified(self, token: str) -> str | None:
        """The user of a token this isolate verified, while it is valid."""
        known = self._verified.get(_digest(token))
        if known is None or self.wall() >= known[1]:
            return None
        return known[0]

    def remember(self, token: str, name: str, exp: float) -> None:
        """Keeps a verified token until its ``exp``, an hour at most."""
        if len(self._verified) >= MAX_VERIFIED:
            self._verified.clear()
        self._verified[_digest(token)] = (name, min(exp, self.wall() + KEYS_MAX_AGE_S))

    async def key(self, kid: str, access: Access, verifier: Verifier) -> object | None:
        """The imported key ``kid``, or None when the team has none such."""
        now = self._clock()
        if self._fetched_at is None or now - self._fetched_at >= KEYS_MAX_AGE_S:
            await self._refresh(access, verifier)
        elif kid not in self._keys and self._fetching is None:
            self._refetched = [at for at in self._refetched if now - at < 60]
            if len(self._refetched) < REFETCHES:
                self._refetched.append(now)
                await self._refresh(access, verifier)
        elif kid not in self._keys and self._fetching is not None:
            await self._refresh(access, verifier)  # the fetch under way may bring it
        return self._keys.get(kid)

    async def _refresh(self, access: Access, verifier: Verifier) -> None:
        if self._fetching is None:
            self._fetching = asyncio.ensure_future(self._fetch(access, verifier))
        fetching = self._fetching
        try:
            await asyncio.shield(fetching)
        finally:
            if fetching.done():
                self._fetching = None

    async def _fetch(self, access: Access, verifier: Verifier) -> None:
        try:
            status, body = await verifier.get(access.certs_url)
            if status != 200:
                raise KeysError(f"HTTP {status}")
            keys = {}
            for jwk in _jwks(body):
                keys[jwk["kid"]] = await verifier.import_rs256(jwk)
        except (KeysError, ValueError) as exc:
            raise IdentityUnavailable(detail=f"access keys: {exc}") from exc
        self._keys = keys
        self._fetched_at = self._clock()


def _jwks(body: bytes) -> list[dict[str, Any]]:
    """The RSA signing keys of a JWK set; raises ``ValueError``."""
    if nested_deeper_than(body, 8):
        raise ValueError("the key set nests too deep")
    found = json.loads(body)
    entries = found.get("keys") if isinstance(found, dict) else None
    if not isinstance(entries, list):
        raise ValueError("no keys list")
    return [
        {name: jwk[name] for name in ("kty", "kid", "n", "e", "alg") if name in jwk}
        for jwk in entries
        if isinstance(jwk, dict)
        and jwk.get("kty") == "RSA"
        and isinstance(jwk.get("kid"), str)
        and jwk.get("use", "sig") == "sig"
    ]
