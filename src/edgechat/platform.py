"""The one seam to the Workers runtime.

Only this module touches ``js``, ``pyodide`` and ``workers``: it turns the
runtime's request into an ``Incoming``, implements the ``ports`` protocols
over the bindings (``AI``, ``RATE_LIMITER``) and turns a ``Reply`` into a
``Response`` — streamed bodies through a ``TransformStream`` written by a task
kept alive with ``ctx.waitUntil``.

Binding errors are translated here, with chaining: a JavaScript error whose
message starts with a Workers AI code becomes the matching ``UpstreamError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any
from urllib.parse import urlsplit

from js import AbortController, AbortSignal, TransformStream
from pyodide.ffi import JsException, create_proxy, to_js
from workers import Request, Response

from edgechat import app
from edgechat.errors import PayloadTooLarge, from_binding_error
from edgechat.http import Incoming, Reply
from edgechat.ports import ClientGone


class BindingUpstream:
    """The binding's streamed answer, read chunk by chunk (``ports.UpstreamStream``)."""

    __slots__ = ("_controller", "_pending", "_reader")

    def __init__(self, result: Any, controller: Any) -> None:
        self._controller = controller
        if isinstance(result, dict):
            # A complete answer although a stream was asked for: one chunk.
            self._reader = None
            self._pending: bytes | None = json.dumps(result).encode()
        else:
            self._reader = result.getReader()
            self._pending = None

    async def read(self) -> bytes | None:
        if self._reader is None:
            chunk, self._pending = self._pending, None
            return chunk
        try:
            result = await self._reader.read()
        except JsException as exc:
            raise from_binding_error(str(exc)) from exc
        if result.done:
            return None
        data: bytes = result.value.to_bytes()
        return data

    async def cancel(self) -> None:
        self._controller.abort()
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(JsException):
                await reader.cancel()


class BindingAi:
    """``ports.Ai`` over the ``AI`` binding; aborts when the client goes away."""

    def __init__(self, binding: Any, client_signal: Any) -> None:
        self._binding = binding
        self._client_signal = client_signal

    async def stream(self, model_id: str, inputs: dict[str, Any]) -> BindingUpstream:
        controller = AbortController.new()
        signals = [controller.signal]
        if self._client_signal is not None:
            signals.append(self._client_signal)
        signal = AbortSignal.any(to_js(signals))
        try:
            result = await self._binding.run(model_id, inputs, {"signal": signal})
        except JsException as exc:
            raise from_binding_error(str(exc)) from exc
        except asyncio.CancelledError:
            controller.abort()
            raise
        return BindingUpstream(result, controller)


class BindingRateLimiter:
    def __init__(self, binding: Any) -> None:
        self._binding = binding

    async def allow(self, key: str) -> bool:
        outcome = await self._binding.limit({"key": key})
        return bool(outcome.success)


class WorkerPlatform:
    """``ports.Platform`` for one request on the Workers runtime."""

    def __init__(self, request: Request, env: Any) -> None:
        self._request = request
        self._env = env
        js_request = request.js_object
        self.ai = BindingAi(env.AI, getattr(js_request, "signal", None))
        limiter = getattr(env, "RATE_LIMITER", None)
        self.rate_limiter = BindingRateLimiter(limiter) if limiter is not None else None

    def var(self, name: str) -> object:
        return getattr(self._env, name, None)

    async def read_body(self, limit: int) -> bytes:
        declared = self._request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLarge(detail=f"Content-Length {declared}")
        body = self._request.js_object.body
        if body is None:
            return b""
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
                raise PayloadTooLarge(detail="chunked body over the limit")
            parts.append(chunk)
        return b"".join(parts)


class StreamSink:
    """``ports.Sink`` over the writable side of a TransformStream."""

    __slots__ = ("_writer", "readable")

    def __init__(self) -> None:
        pipe = TransformStream.new()
        self.readable = pipe.readable
        self._writer = pipe.writable.getWriter()

    async def write(self, data: bytes) -> None:
        try:
            await self._writer.write(to_js(data))
        except JsException as exc:
            raise ClientGone() from exc

    async def close(self) -> None:
        with contextlib.suppress(JsException):
            await self._writer.close()


def to_incoming(request: Request) -> Incoming:
    parts = urlsplit(request.url)
    headers = {name.lower(): value for name, value in request.headers.items()}
    return Incoming(
        method=request.method,
        path=parts.path,
        origin=f"{parts.scheme}://{parts.netloc}".lower(),
        headers=headers,
    )


def to_response(reply: Reply, ctx: Any) -> Response:
    if reply.stream is None:
        return Response(reply.body or None, status=reply.status, headers=reply.headers)
    sink = StreamSink()
    task = asyncio.ensure_future(reply.stream(sink))
    ctx.waitUntil(create_proxy(task))
    return Response(sink.readable, status=reply.status, headers=reply.headers)


async def on_fetch(request: Request, env: Any, ctx: Any) -> Response:
    reply = await app.handle(to_incoming(request), WorkerPlatform(request, env))
    return to_response(reply, ctx)
