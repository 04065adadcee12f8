"""The Worker's platform as the core sees it (``WorkerPlatform``): the
runtime's request turned into an ``Incoming``, every binding behind its port,
the clock and the schedule, Access's keys checked with WebCrypto, and a
``Reply`` turned into a ``Response``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlsplit

from js import (
    AbortSignal,
    Object,
    crypto,
)
from js import Response as JsResponse
from js import fetch as js_fetch
from pyodide.ffi import JsException, create_proxy, to_js
from workers import Request

from edgechat.core.errors import body_too_large
from edgechat.core.http import Incoming, Reply
from edgechat.core.ports import KeysError, Vectors
from edgechat.platform.ai import BindingAi, BindingFetch, OutboundFetch
from edgechat.platform.bindings import (
    BindingD1,
    BindingKv,
    BindingR2,
    BindingRateLimiter,
    BindingVectors,
)
from edgechat.platform.interop import js_object
from edgechat.platform.streams import StreamSink

__all__ = ["WallClock", "WebCryptoVerifier", "WorkerPlatform", "WorkerSchedule", "to_response"]


# RS256 is RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518, section 3.3).
_RS256 = {"name": "RSASSA-PKCS1-v1_5", "hash": "SHA-256"}


_rs256_js: list[Any] = []  # the JS object of it, made on first use (not at import)


def _rs256() -> Any:
    if not _rs256_js:
        _rs256_js.append(js_object(_RS256))
    return _rs256_js[0]


# How long Access's keys endpoint may take before requests fail closed.
KEYS_TIMEOUT_MS = 5000


class WebCryptoVerifier:
    """``ports.Verifier``: the runtime's ``fetch`` for Access's keys, and
    WebCrypto (``crypto.subtle``) for their signatures."""

    async def get(self, url: str) -> tuple[int, bytes]:
        init = js_object({"redirect": "manual", "signal": AbortSignal.timeout(KEYS_TIMEOUT_MS)})
        try:
            response = await js_fetch(url, init)
            return int(response.status), bytes((await response.arrayBuffer()).to_bytes())
        except JsException as exc:
            raise KeysError(f"fetch failed: {exc}") from exc

    async def import_rs256(self, jwk: dict[str, Any]) -> object:
        try:
            return await crypto.subtle.importKey(
                "jwk", js_object(jwk), _rs256(), False, to_js(["verify"])
            )
        except JsException as exc:
            raise ValueError(f"key {jwk.get('kid')!r} cannot be imported: {exc}") from exc

    async def verify_rs256(self, key: object, signed: bytes, signature: bytes) -> bool:
        try:
            return bool(await crypto.subtle.verify(_rs256(), key, to_js(signature), to_js(signed)))
        except JsException:
            return False


class WallClock:
    """The isolate's wall clock: ``time.time()``, moved by the offset that a
    local run's ``DEV_CLOCK`` binding answers (``npm start -- --clock-hook``,
    for tests of what expires: workerd has no way to move a Worker's clock).
    Nothing is bound as ``DEV_CLOCK`` at the edge, so there it is
    ``time.time()`` and one attribute lookup a request."""

    __slots__ = ("offset_s",)

    def __init__(self) -> None:
        self.offset_s = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset_s

    async def follow(self, env: Any) -> None:
        clock = getattr(env, "DEV_CLOCK", None)
        if clock is not None:
            self.offset_s = float(await clock.offsetMs()) / 1000


class WorkerSchedule:
    """``ports.Schedule`` for a scheduled run on the Workers runtime."""

    def __init__(self, env: Any, ctx: Any = None) -> None:
        self._env = env
        usage_db = getattr(env, "USAGE_DB", None)
        self.db = BindingD1(usage_db) if usage_db is not None else None
        self.ai = BindingAi(getattr(env, "AI", None), None, ctx)
        cache = getattr(env, "CACHE", None)
        self.kv = BindingKv(cache) if cache is not None else None
        self.outbound = OutboundFetch()
        history_db = getattr(env, "DB", None)
        self.history = BindingD1(history_db) if history_db is not None else None
        files = getattr(env, "FILES", None)
        self.files = BindingR2(files) if files is not None else None
        self._vectors = _vectors(env)

    def vectors(self) -> Vectors | None:
        return self._vectors

    def var(self, name: str) -> object:
        return getattr(self._env, name, None)


class WorkerPlatform:
    """``ports.Platform`` for one request on the Workers runtime."""

    def __init__(self, request: Request, env: Any, ctx: Any) -> None:
        self._request = request.js_object
        self._env = env
        self._ctx = ctx
        # One conversion of the whole Headers object (its names are already
        # lower-case), not one FFI call per header.
        self._headers: dict[str, str] = Object.fromEntries(self._request.headers).to_py()
        client_signal = getattr(self._request, "signal", None)
        self.ai = BindingAi(getattr(env, "AI", None), client_signal, ctx)
        self.ai_after_reply = BindingAi(getattr(env, "AI", None), None, ctx)
        self.fetch = BindingFetch(client_signal)
        self.outbound = OutboundFetch()
        self.verifier = WebCryptoVerifier()
        limiter = getattr(env, "RATE_LIMITER", None)
        self.rate_limiter = BindingRateLimiter(limiter) if limiter is not None else None
        cache = getattr(env, "CACHE", None)
        self.kv = BindingKv(cache) if cache is not None else None
        usage_db = getattr(env, "USAGE_DB", None)
        self.db = BindingD1(usage_db) if usage_db is not None else None
        history_db = getattr(env, "DB", None)
        self.history = BindingD1(history_db) if history_db is not None else None
        files = getattr(env, "FILES", None)
        self.files = BindingR2(files) if files is not None else None
        self._vectors = _vectors(env)

    def vectors(self) -> Vectors | None:
        return self._vectors

    def var(self, name: str) -> object:
        return getattr(self._env, name, None)

    def wait_until(self, work: Awaitable[None]) -> None:
        _keep_alive(asyncio.ensure_future(work), self._ctx)

    async def read_body(self, limit: int) -> bytes:
        declared = self._headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise body_too_large(limit, detail=f"Content-Length {declared}")
        body = self._request.body
        # No body at all is JS null (None or jsnull, depending on Pyodide).
        if body is None or not hasattr(body, "getReader"):
            return b""
        if declared is not None and declared.isdigit():
            # Within the limit, and the runtime holds the body to its declared
            # length: one read of it all.
            return bytes((await self._request.arrayBuffer()).to_bytes())
        # Counted as it arrives, so a chunked upload stops at the limit.
        reader = body.getReader()
        parts: list[bytes] = []
        size = 0
        while True:
            result = await reader.read()
            if result.done:
                break
            chunk = result.value.to_bytes()
            size += len(chunk)
            if size > limit:
                await reader.cancel()
                raise body_too_large(limit, detail="chunked body over the limit")
            parts.append(chunk)
        return b"".join(parts)

    def incoming(self) -> Incoming:
        request = self._request
        parts = urlsplit(request.url)
        return Incoming(
            method=request.method,
            path=parts.path,
            origin=f"{parts.scheme}://{parts.netloc}".lower(),
            headers=self._headers,
            query=parts.query,
        )


def _vectors(env: Any) -> BindingVectors | None:
    index = getattr(env, "VECTORS", None)
    return BindingVectors(index) if index is not None else None


def _js_response(body: Any, reply: Reply) -> Any:
    # A JS Response, returned as it is: the runtime passes a JsProxy result of
    # ``fetch`` straight through (workerd ``introspection.py``, ``wrapper_func``
    # → ``python_to_rpc``), which spares the SDK's Response wrapper.
    init = {"status": reply.status, "headers": js_object(reply.headers)}
    return JsResponse.new(body, js_object(init))


def to_response(reply: Reply, ctx: Any) -> Any:
    if reply.stream is None:
        return _js_response(to_js(reply.body) if reply.body else None, reply)
    sink = StreamSink()
    _keep_alive(asyncio.ensure_future(reply.stream(sink)), ctx)
    return _js_response(sink.readable, reply)


def _keep_alive(task: asyncio.Future[None], ctx: Any) -> None:
    # The proxy keeps the task alive for the runtime until it is done.
    keep_alive = create_proxy(task)
    task.add_done_callback(lambda _: keep_alive.destroy())
    ctx.waitUntil(keep_alive)
