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
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from js import AbortController, AbortSignal, Object, TransformStream
from pyodide.ffi import JsException, create_proxy, to_js
from workers import Request, Response

from edgechat import app
from edgechat.errors import from_binding_error
from edgechat.http import Incoming, Reply
from edgechat.ports import ClientGone, Sink
from edgechat.validation import body_too_large

# The upstream may fail or end while the response goes on: fallback pipes the
# next model into the same sink, and the final event is written after the pipe.
# (Built per call: JS objects made at import time would not survive the
# runtime's memory snapshot.)
_KEEP_SINK_OPEN = {"preventClose": True, "preventAbort": True}


class BindingUpstream:
    """The binding's streamed answer (``ports.UpstreamStream``): piped into the
    response natively, with the core's transform called once per chunk."""

    __slots__ = ("_client_signal", "_controller", "_stream", "_whole")

    def __init__(self, result: Any, controller: Any, client_signal: Any) -> None:
        self._controller = controller
        self._client_signal = client_signal
        if isinstance(result, dict):
            # A complete answer although a stream was asked for.
            self._stream = None
            self._whole: bytes | None = json.dumps(result).encode()
        else:
            self._stream = result
            self._whole = None

    async def pipe(self, sink: Sink, transform: Callable[[bytes], bytes | None]) -> None:
        assert isinstance(sink, StreamSink)
        if self._stream is None:
            whole, self._whole = self._whole, None
            out = transform(whole) if whole else None
            if out:
                await sink.write(out)
            return
        stream, self._stream = self._stream, None
        sink.transform = transform
        try:
            await stream.pipeTo(
                sink.writable, to_js(_KEEP_SINK_OPEN, dict_converter=Object.fromEntries)
            )
        except JsException as exc:
            if sink.gone or (self._client_signal is not None and self._client_signal.aborted):
                raise ClientGone() from exc
            raise from_binding_error(str(exc)) from exc
        finally:
            sink.transform = None

    async def cancel(self) -> None:
        self._controller.abort()
        stream, self._stream = self._stream, None
        if stream is not None and not stream.locked:
            with contextlib.suppress(JsException):
                await stream.cancel()


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
        return BindingUpstream(result, controller, self._client_signal)


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
            raise body_too_large(limit, f"Content-Length {declared}")
        body = self._request.js_object.body
        # No body at all is JS null (None or jsnull, depending on Pyodide).
        if body is None or not hasattr(body, "getReader"):
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
                raise body_too_large(limit, "chunked body over the limit")
            parts.append(chunk)
        return b"".join(parts)


class StreamSink:
    """``ports.Sink`` over a TransformStream whose readable side is the
    response body. The upstream is piped into its writable side; the transform
    hands each chunk to the core synchronously and enqueues what comes back.
    Events of our own (meta, done, ping) are enqueued directly."""

    __slots__ = ("_controller", "_proxies", "gone", "readable", "transform", "writable")

    def __init__(self) -> None:
        self.transform: Callable[[bytes], bytes | None] | None = None
        self.gone = False
        self._controller: Any = None
        self._proxies = [create_proxy(self._start), create_proxy(self._transform)]
        transformer = to_js(
            {"start": self._proxies[0], "transform": self._proxies[1]},
            dict_converter=Object.fromEntries,
        )
        pipe = TransformStream.new(transformer)
        self.readable = pipe.readable
        self.writable = pipe.writable

    def _start(self, controller: Any) -> None:
        self._controller = controller

    def _transform(self, chunk: Any, controller: Any) -> None:
        transform = self.transform
        if transform is not None:
            out = transform(chunk.to_bytes())
            if out:
                controller.enqueue(to_js(out))

    async def write(self, data: bytes) -> None:
        try:
            self._controller.enqueue(to_js(data))
        except JsException as exc:
            # The readable side was cancelled: the client went away.
            self.gone = True
            raise ClientGone() from exc

    async def close(self) -> None:
        with contextlib.suppress(JsException):
            self._controller.terminate()
        for proxy in self._proxies:
            proxy.destroy()
        self._proxies = []


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
    # The proxy keeps the task alive for the runtime until the stream is written.
    keep_alive = create_proxy(task)
    task.add_done_callback(lambda _: keep_alive.destroy())
    ctx.waitUntil(keep_alive)
    return Response(sink.readable, status=reply.status, headers=reply.headers)


async def on_fetch(request: Request, env: Any, ctx: Any) -> Response:
    reply = await app.handle(to_incoming(request), WorkerPlatform(request, env))
    return to_response(reply, ctx)
