"""Cloudflare Access, played by the tests: RSA signing keys, tokens signed
with them (good ones and every broken kind), and a loopback keys endpoint.

Access signs ``Cf-Access-Jwt-Assertion`` tokens with RS256 and publishes its
public keys as a JWK set at ``<team>/cdn-cgi/access/certs``
(https://developers.cloudflare.com/cloudflare-one/identity/authorization-cookie/validating-json/).
Here the team is a ``KeysServer`` on 127.0.0.1; ``SigningKey.token`` builds
the compact JWS by hand (RFC 7515), so a test can break any part of it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

__all__ = ["AUD", "KeysServer", "SigningKey", "b64url", "keys_server"]

AUD = "edgechat-test-aud-3f9c1e"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(number: int) -> str:
    return b64url(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class SigningKey:
    """An RSA key of the team's, named ``kid``."""

    def __init__(self, kid: str) -> None:
        self.kid = kid
        self._private = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def jwk(self) -> dict[str, str]:
        public = self._private.public_key().public_numbers()
        return {"kid": self.kid, "kty": "RSA", "alg": "RS256", "use": "sig",
                "e": _uint(public.e), "n": _uint(public.n)}  # fmt: skip

    def public_pem(self) -> bytes:
        return self._private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def claims(self, team: str, **changes: Any) -> dict[str, Any]:
        """What Access puts in a user's token, valid for five minutes."""
        now = int(time.time())
        claims = {"aud": [AUD], "email": "ann@example.com", "exp": now + 300,
                  "iat": now, "nbf": now - 5, "iss": team, "sub": "7d2f-ann",
                  "type": "app"}  # fmt: skip
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def token(
        self,
        claims: Mapping[str, Any],
        *,
        header: Mapping[str, Any] | None = None,
        alg: str = "RS256",
    ) -> str:
        """A compact token of ``claims``: RS256 by this key, or ``alg``
        ``none`` (no signature) or ``HS256`` keyed with the public key (the
        classic confusion attack)."""
        head = {"alg": alg, "kid": self.kid, "typ": "JWT", **(header or {})}
        signed = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims).encode())}"
        if alg == "none":
            return signed + "."
        if alg == "HS256":
            mac = hmac.new(self.public_pem(), signed.encode(), hashlib.sha256).digest()
            return f"{signed}.{b64url(mac)}"
        signature = self._private.sign(signed.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signed}.{b64url(signature)}"


class KeysServer:
    """The team's keys endpoint on loopback: serves ``keys`` (changeable:
    a rotation) as a JWK set, or ``status`` when it is not 200 (down);
    counts the fetches."""

    def __init__(self, *keys: SigningKey) -> None:
        self.keys = list(keys)
        self.status = 200
        self.fetches = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with outer._lock:
                    outer.fetches += 1
                    status, keys = outer.status, list(outer.keys)
                if self.path != "/cdn-cgi/access/certs":
                    status = 404
                body = json.dumps({"keys": [key.jwk() for key in keys]}).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.team = f"http://127.0.0.1:{self._server.server_address[1]}"

    def serve(self) -> None:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def keys_server(*keys: SigningKey) -> Iterator[KeysServer]:
    server = KeysServer(*keys)
    server.serve()
    try:
        yield server
    finally:
        server.close()
