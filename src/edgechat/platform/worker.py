"""The one seam to the Workers runtime.

Only this module (and ``entry.py``) touches ``js``, ``pyodide`` and
``workers``: it turns the runtime's request into an ``Incoming``, implements
the ``ports`` protocols over the bindings (``AI``, ``RATE_LIMITER``) and
turns a ``Reply`` into a ``Response``.

A streamed reply's body is the readable side of an ``IdentityTransformStream``
(workerd's native one; ``new TransformStream()`` is JavaScript at current
compatibility dates). Our own events are written to it from Python; the
model's answer is piped into it with ``pipeTo``, which workerd pumps in C++
with no JavaScript per chunk when both sides are native (workerd
``docs/streams.md``, "Pipe Loop Selection"). Python watches a ``tee()`` of the
answer with a BYOB reader, whose one ``read`` returns everything that has
arrived, filled natively from as many chunks as are queued.

Binding errors are translated here, with chaining: a JavaScript error whose
message starts with a Workers AI code becomes the matching ``UpstreamError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Awaitable
from typing import Any
from urllib.parse import urlsplit

from js import (
    AbortController,
    AbortSignal,
    Array,
    ArrayBuffer,
    Blob,
    CompressionStream,
    Function,
    IdentityTransformStream,
    Object,
    Promise,
    Reflect,
    Uint8Array,
    clearTimeout,
    crypto,
    setTimeout,
)
from js import Response as JsResponse
from js import fetch as js_fetch
from pyodide.ffi import JsException, create_proxy, jsnull, to_js
from workers import Request

from edgechat.core.errors import Misconfigured, body_too_large
from edgechat.core.faults import (
    UpstreamError,
    UpstreamInterrupted,
    UpstreamMalformed,
    from_binding_error,
)
from edgechat.core.http import Incoming, Reply
from edgechat.core.ports import (
    TIMED_OUT,
    BlobError,
    ClientGone,
    DatabaseError,
    KeysError,
    KvError,
    Spent,
    TimedOut,
)

# One read takes up to this much of what has arrived. workerd detaches the
# buffer a BYOB read fills and hands it back as ``result.value.buffer``
# (``readable.c++``, ``ReaderImpl::read``), so one buffer serves every read.
READ_BYTES = 64 << 10


def _js_object(values: dict[str, Any]) -> Any:
    # A Python dict handed to JavaScript arrives as a proxy whose keys are not
    # properties; options objects must be real JS objects. (Built per call: JS
    # objects made at import time would not survive the memory snapshot.)
    return to_js(values, dict_converter=Object.fromEntries)


async def _bounded(promise: Any, within: float) -> Any:
    """``promise``, raced against a timer of ``within`` seconds that resolves
    to undefined (None in Python). One await either way: no timer task on the
    Python side.

    The timer is a ``setTimeout`` resolving a JS promise, cleared once the race
    is run: a timer left running after the read won would hold the race until
    its deadline (thousands after a burst of streams), and one stopped by
    rejecting it (``scheduler.wait``'s signal) costs Python a future that
    settles per race. Pyodide hands every promise a JS call returns to
    Python as a ``PyodideFuture`` whose settling schedules Python callbacks
    (``pyodide/webloop.py``); ``Promise.withResolvers()`` returns an object,
    so this timer never becomes one (bench/profile.mjs, in git history: per answer as many
    event-loop callbacks as without a timer stop, a third fewer than with
    the signal). ``setTimeout``/``clearTimeout`` are the Workers runtime's
    standard timers; ``Promise.withResolvers`` is ES2024, in V8 since 12.2."""
    if within == math.inf:
        return await promise
    timer = Promise.withResolvers()
    handle = setTimeout(timer.resolve, max(within, 0.0) * 1000)
    try:
        return await Promise.race(to_js([promise, timer.promise]))
    finally:
        clearTimeout(handle)


class _Js:
    """JavaScript functions a forwarded batch calls, bound once so that each
    costs Python one call across to JavaScript (an attribute read is one
    more). Made on first use: JavaScript values made at import would not
    survive the memory snapshot."""

    __slots__ = ("adopt", "bind", "map_one", "resolvers", "then")

    def __init__(self) -> None:
        # ``bind(f, this, ...args)`` is ``f.bind(this, ...args)``.
        self.bind = Function.prototype.call.bind(Function.prototype.bind)
        self.then = Reflect.get(Promise.prototype, "then")
        # ``[0].map(f)``: calls ``f`` in JavaScript and keeps what it returns
        # in an array, so a promise it returns reaches Python as a property.
        one = Array.of(0)
        self.map_one = one.map.bind(one)
        self.resolvers = Promise.withResolvers.bind(Promise)
        self.adopt = Promise.resolve.bind(Promise)  # a promise, as it is


_js: list[_Js] = []


def _js_functions() -> _Js:
    if not _js:
        _js.append(_Js())
    return _js[0]


class ByteReader:
    """A BYOB reader of a native byte stream: each ``read`` returns every byte
    that has arrived (at least one, at most ``READ_BYTES``), or None at the
    end. A read that outlives its bound is kept for the next call."""

    __slots__ = ("_buffer", "_pending", "reader")

    def __init__(self, stream: Any) -> None:
        self.reader = stream.getReader(_js_object({"mode": "byob"}))
        self._buffer = ArrayBuffer.new(READ_BYTES)
        self._pending: Any = None

    async def read(self, within: float) -> bytes | TimedOut | None:
        pending = self._pending
        if pending is None:
            pending = self._pending = self.reader.read(Uint8Array.new(self._buffer))
        result = await _bounded(pending, within)
        if result is None:
            return TIMED_OUT  # a read always resolves to an object
        self._pending = None
        return self.took(result)

    def view(self) -> Any:
        """What the next read fills: the buffer the last one handed back."""
        return Uint8Array.new(self._buffer)

    def took(self, result: Any) -> bytes | None:
        """A read's result: its bytes (the buffer is ours again), or None at the end."""
        if result.done:
            return None
        value = result.value
        self._buffer = value.buffer
        return bytes(value.to_bytes())


class BindingForward:
    """``ports.Forward``: each batch is one JavaScript promise (the write
    into the response, then the pause, then the read of the next batch)
    and one wait in Python.

    Pyodide makes every promise a JavaScript call returns into a Python
    future whose settling runs Python callbacks through its event loop
    (``pyodide/webloop.py``: a timer per ``call_soon``), awaited or not;
    a promise reached as a property stays a plain proxy. So the chain is
    built through ``[0].map`` (``_Js.map_one``), which calls ``then`` (or
    the write) in JavaScript and hands back an array: one future a batch
    (the final await) instead of three (a future costs about three times
    what the same promise kept in JavaScript does, ``bench/pyodide_promises.mjs``),
    and about twenty calls across to JavaScript instead of thirty-five.

    The bound is a watchdog instead of a timer raced per batch: one
    ``setTimeout`` calling Python, moved on when the deadline has moved
    (at most once per idle timeout), which aborts the upstream call once
    the deadline passed; the pending read then fails at once.

    Relied on: ``then`` passes the value on past a handler that is not
    callable (``map``'s index, an absent pause) and adopts a promise a
    handler returns (ECMAScript, PerformPromiseThen and the promise resolve
    functions); a built-in reads its declared parameters and ignores the
    rest (``map`` adds the index and the array; workerd's ``jsg`` unwraps
    only a method's declared C++ parameters, ``jsg/resource.h``,
    ``MethodCallback``);
    ``bind`` gives the pause's timer its view: a Python Worker's
    ``setTimeout`` calls its handler with no arguments (see ``next``)."""

    __slots__ = (
        "_armed_for",
        "_deadline",
        "_expired",
        "_failed",
        "_gone",
        "_read",
        "_reader",
        "_sink",
        "_upstream",
        "_watch",
        "_watchdog",
        "_write",
    )

    def __init__(
        self, upstream: BindingUpstream, reader: ByteReader, sink: Any, writer: Any
    ) -> None:
        self._upstream = upstream
        self._reader = reader
        # The response body's writer, to chain writes in JavaScript; without
        # one (a sink of the core's: a whole answer's, never written to),
        # the sink is written to as any sink.
        self._sink = sink
        self._write = None if writer is None else writer.write.bind(writer)
        self._read = reader.reader.read.bind(reader.reader)
        self._deadline = math.inf
        self._watchdog: Any = None  # the timer's handle while it runs
        self._armed_for = math.inf  # the deadline it runs for
        self._expired = False
        self._gone = False
        self._watch = create_proxy(self._on_watchdog)
        self._failed = create_proxy(self._on_write_failed)

    def _arm(self, now: float) -> None:
        self._armed_for = self._deadline
        self._watchdog = setTimeout(self._watch, max(self._deadline - now, 0.0) * 1000)

    def _on_watchdog(self, *_: Any) -> None:
        self._watchdog = None
        now = time.monotonic()
        if now < self._deadline:
            self._arm(now)  # the deadline moved on since: the model spoke
            return
        self._expired = True
        self._upstream.abort()

    def _on_write_failed(self, *_: Any) -> None:
        self._gone = True  # the response was cancelled: the client went away

    async def next(self, out: bytes, after: float, within: float) -> bytes | TimedOut | None:
        now = time.monotonic()
        self._deadline = now + within
        if self._deadline < self._armed_for:
            # Sooner than the running timer (the idle deadline only moves
            # later; a total deadline may come first): set again.
            if self._watchdog is not None:
                clearTimeout(self._watchdog)
            self._arm(now)
        if out and self._write is None:
            await self._sink.write(out)
            out = b""
        view = self._reader.view()
        if out or after > 0:
            fns = _js_functions()
            # The pause: a timer that hands the read its view. The view is
            # bound to the resolve function: a Python Worker's ``setTimeout``
            # calls its handler with no arguments and turns 0 ms into a
            # microtask (workerd ``src/pyodide/internal/python.ts``,
            # ``makeSetTimeout``; seen on workerd 1.20261117.1).
            timer = fns.resolvers()
            setTimeout(fns.bind(timer.resolve, None, view), max(after, 0.0) * 1000)
            start = timer.promise
            if out:
                written = fns.map_one(fns.bind(self._write, None, to_js(out)))[0]
                # Written, the pause runs on (it started with the write);
                # failed, the client is gone (the read then fails at once).
                wait = fns.bind(fns.adopt, None, start)
                start = fns.map_one(fns.bind(fns.then, written, wait, self._failed))[0]
            pending = fns.map_one(fns.bind(fns.then, start, self._read))[0]
        else:
            pending = self._read(view)  # nothing to write or wait for
        try:
            result = await pending
        except JsException as exc:
            if self._expired:
                return TIMED_OUT
            if self._gone:
                raise ClientGone() from exc
            raise self._upstream.failure(exc) from exc
        if self._gone:
            raise ClientGone()
        if self._expired:
            return TIMED_OUT
        data = self._reader.took(result)
        if data is None:
            self._upstream.ended()
        return data

    def stop(self) -> None:
        if self._watchdog is not None:
            clearTimeout(self._watchdog)
            self._watchdog = None
        self._watch.destroy()
        self._failed.destroy()


class StreamSink:
    """``ports.Sink`` over an ``IdentityTransformStream`` whose readable side is
    the response body. A write resolves once the client's side has taken it."""

    __slots__ = ("_piping", "_writer", "readable", "writable")

    def __init__(self) -> None:
        pipe = IdentityTransformStream.new()
        self.readable = pipe.readable
        self.writable = pipe.writable
        self._writer: Any = None
        self._piping: Any = None  # the relay's pipe into ``writable``, while it runs

    def pipe_from(self, stream: Any) -> Any:
        """Pipes ``stream`` in natively; returns the pipe's promise. The
        response stays open for our closing event whether the upstream ends
        or fails (``preventClose``, ``preventAbort``)."""
        if self._writer is not None:
            self._writer.releaseLock()  # a pipe cannot start while we hold the writer
            self._writer = None
        self._piping = stream.pipeTo(
            self.writable, _js_object({"preventClose": True, "preventAbort": True})
        )
        return self._piping

    def piped(self) -> None:
        """The relay's pipe has settled and let go of the writable."""
        self._piping = None

    async def writer(self) -> Any:
        """The response body's writer, held from now on (``BindingForward``)."""
        return await self._own()

    async def _own(self) -> Any:
        if self._piping is not None:
            # The relay ended or was aborted; its pipe lets go of the writable
            # when it settles, which it does promptly once the source is done.
            piping, self._piping = self._piping, None
            with contextlib.suppress(JsException):
                await piping
        if self._writer is None:
            self._writer = self.writable.getWriter()
        return self._writer

    async def write(self, data: bytes) -> None:
        try:
            writer = await self._own()
            await writer.write(to_js(data))
        except JsException as exc:
            # The response body was cancelled: the client went away.
            raise ClientGone() from exc

    async def close(self) -> None:
        with contextlib.suppress(JsException):
            writer = await self._own()
            await writer.close()


class BindingRelay:
    """``ports.Relay``: one branch of a ``tee()`` piped into the response, the
    other read by Python now and then. Both branches stay native."""

    __slots__ = ("_settled", "_sink", "_upstream", "_watch")

    def __init__(self, upstream: BindingUpstream, stream: Any, sink: StreamSink) -> None:
        self._upstream = upstream
        copy, watched = stream.tee()
        self._watch = ByteReader(watched)
        self._sink = sink
        # Settles when the pipe does, and never rejects: to an object when it
        # succeeded, to ``[reason]`` when it failed, so one await (raced
        # against a timer, which resolves to undefined) tells all three apart.
        # Attached at once, it also keeps a failure nobody awaits yet from
        # counting as an unhandled rejection.
        self._settled = sink.pipe_from(copy).then(Object, Array.of)

    async def rest(self, within: float) -> bool:
        outcome = await _bounded(self._settled, within)
        if outcome is None:
            return False
        self._sink.piped()
        if Array.isArray(outcome):
            raise self._upstream.failure(outcome[0])
        return True

    async def observe(self, within: float) -> bytes | TimedOut | None:
        try:
            data = await self._watch.read(within)
        except JsException as exc:
            raise self._upstream.failure(exc) from exc
        if data is None:
            self._upstream.ended()
        return data

    async def finished(self) -> None:
        await self.rest(math.inf)

    async def cancel(self) -> None:
        with contextlib.suppress(JsException):
            await self._watch.reader.cancel()


class BindingUpstream:
    """``ports.UpstreamStream`` over the binding's streamed answer."""

    __slots__ = (
        "_client_signal",
        "_controller",
        "_done",
        "_draining",
        "_reader",
        "_relay",
        "_stream",
    )

    def __init__(self, result: Any, controller: Any, client_signal: Any) -> None:
        self._controller = controller
        self._client_signal = client_signal
        self._reader: ByteReader | None = None
        self._relay: BindingRelay | None = None
        self._draining: Any = None
        # Ended (read to the end) or cancelled: nothing left to abort.
        self._done = False
        # A complete answer (a dict) although a stream was asked for: the
        # binding parses an application/json reply (``ai-api.ts``, ``run``).
        self._stream: Any = json.dumps(result).encode() if isinstance(result, dict) else result

    def ended(self) -> None:
        self._done = True

    def failure(self, reason: Any) -> Exception:
        """What a failed read or pipe means (``reason``: the JsException, or
        the JS value it was rejected with): the client left, or the model failed."""
        if self._client_signal is not None and self._client_signal.aborted:
            return ClientGone()
        error = from_binding_error(str(reason))
        if type(error) is UpstreamError and error.binding_code is None:
            # A read of a started stream that failed with no code: the body
            # broke off as a connection does, whatever the model meant.
            return UpstreamInterrupted(detail=str(reason))
        return error

    async def read(self, within: float) -> bytes | TimedOut | None:
        if isinstance(self._stream, bytes):
            whole, self._stream = self._stream, None
            return whole
        if self._stream is None:
            return None
        if self._reader is None:
            self._reader = ByteReader(self._stream)
        try:
            data = await self._reader.read(within)
        except JsException as exc:
            raise self.failure(exc) from exc
        if data is None:
            self._done = True
        return data

    async def forward(self, sink: Any) -> BindingForward | Spent:
        if isinstance(self._stream, bytes) or self._stream is None:
            return Spent(sink)
        # A read of the binding's stream takes one upstream chunk (the kj
        # chunked-body reader stops at a chunk's end), but a tee branch that
        # has not been read keeps everything its sibling pulled, and one read
        # takes it all across chunks (workerd's kj tee; tools/runner/README.md,
        # "tee()"). So the sibling is piped into a sink that pulls as the
        # model sends, and Python reads the other branch.
        #
        # The sink is a CompressionStream's writable, never read: workerd's
        # takes every write at once (compression.c++, CompressionStreamImpl
        # ::writeInternal, "This does not yet implement any backpressure"),
        # so the pipe is a native pump with no JavaScript per chunk. A
        # JavaScript WritableStream enters the isolate for every chunk: in
        # workerd the forward's streams cost 2.06x the pass-through with it
        # and 1.05x with this (bench/edge_streams.mjs, docs/PERFORMANCE.md).
        # What it keeps is the answer deflated (GLM's and Kimi's chunks
        # repeat their envelope: about 3 % of the bytes) until the answer
        # is dropped. kj's tee holds the other branch back while a read of
        # this one waits for more than one chunk (``arrayBuffer()``,
        # ``readAtLeast``), so a sink that reads whole would not do.
        self._release_reader()
        drained, watched = self._stream.tee()
        # Settles with the stream and never rejects (a failure reaches Python
        # through its own branch).
        discard = CompressionStream.new("deflate-raw")
        self._draining = drained.pipeTo(discard.writable).then(Object, Array.of)
        self._stream = watched
        self._reader = ByteReader(watched)
        writer = await sink.writer() if isinstance(sink, StreamSink) else None
        return BindingForward(self, self._reader, sink, writer)

    def abort(self) -> None:
        """Aborts the call: its body fails, and with it any read of it."""
        self._done = True
        self._controller.abort()

    def _release_reader(self) -> None:
        if self._reader is not None:
            # Phase 1 ends on a completed read, so none is outstanding here
            # (workerd refuses releaseLock() while one is).
            self._reader.reader.releaseLock()
            self._reader = None

    async def relay(self, sink: Any) -> BindingRelay:
        assert isinstance(sink, StreamSink)
        self._release_reader()
        self._relay = BindingRelay(self, self._stream, sink)
        return self._relay

    async def cancel(self) -> None:
        if self._done:
            return
        # The signal given to AI.run also errors the body it returned (workerd
        # ``http.c++`` wraps it), which ends the relay's pipe and both branches.
        self.abort()
        with contextlib.suppress(JsException):
            if self._relay is not None:
                await self._relay.cancel()
            elif self._reader is not None:
                await self._reader.reader.cancel()
            elif self._stream is not None and not isinstance(self._stream, bytes):
                await self._stream.cancel()


def _raw(binding: Any) -> Any:
    # The SDK fronts each binding with a wrapper that converts every argument
    # and result generically (``workers/rpc.py``, ``_BindingWrapper``): about
    # 0.3 ms a call in Pyodide. The seam converts what it sends itself.
    return getattr(binding, "_binding", binding)


def _abort_signal(client_signal: Any) -> tuple[Any, Any]:
    """A controller of our own, and the signal that fires with it or with the client."""
    controller = AbortController.new()
    signal = controller.signal
    if client_signal is not None:
        signal = AbortSignal.any(to_js([signal, client_signal]))
    return controller, signal


# Logged (never sent) when a route needs the model and nothing is bound as
# AI: the routes that do not (the page, /healthz, history) keep working.
UNBOUND_AI = (
    'no AI binding: bind Workers AI as AI ([ai] binding = "AI" in wrangler.toml; '
    "npm start binds it to the emulator)"
)


class BindingAi:
    """``ports.Ai`` over the ``AI`` binding; aborts when the client goes away.
    Without the binding, every call is a ``Misconfigured`` naming it."""

    def __init__(self, binding: Any, client_signal: Any, ctx: Any = None) -> None:
        self._binding = None if binding is None else _raw(binding)
        self._client_signal = client_signal
        self._ctx = ctx

    def _bound(self) -> Any:
        if self._binding is None:
            raise Misconfigured(detail=UNBOUND_AI)
        return self._binding

    async def _run(self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]) -> Any:
        binding = self._bound()
        controller, signal = _abort_signal(self._client_signal)
        call = None
        try:
            call = binding.run(
                model_id, _js_object(inputs), _js_object({**options, "signal": signal})
            )
            result = await call
        except JsException as exc:
            raise from_binding_error(str(exc)) from exc
        except BaseException:
            controller.abort()  # the caller gave up waiting (a deadline, a cancel)
            if self._ctx is not None and call is not None:
                # Until the call has taken the abort in: a binding that is a
                # Worker reached over RPC (the emulator in local runs) gets it
                # as a message, which the end of this request would cut off.
                # The real binding's fetch fails at once. Best effort: a
                # request already torn down takes no more work.
                with contextlib.suppress(JsException):
                    self._ctx.waitUntil(call.then(Object, Array.of))
            raise
        return result, controller

    async def stream(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> BindingUpstream:
        result, controller = await self._run(model_id, inputs, options)
        if not hasattr(result, "getReader"):
            # A complete answer although a stream was asked for: the binding
            # parses an application/json reply (``ai-api.ts``, ``run``).
            result = result.to_py()
        return BindingUpstream(result, controller, self._client_signal)

    async def run(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> dict[str, Any]:
        result, _ = await self._run(model_id, inputs, options)
        answer = result.to_py() if hasattr(result, "to_py") else result
        if not isinstance(answer, dict):
            raise UpstreamMalformed(detail=f"{model_id} answered no JSON object")
        return answer

    async def to_markdown(self, files: list[tuple[str, str, bytes]]) -> list[dict[str, Any]]:
        # https://developers.cloudflare.com/workers-ai/features/markdown-conversion/:
        # a list of {name, blob} in, a list of ConversionResult out, in order.
        documents = [
            # The parts as a JavaScript Array: workerd's Blob takes no other
            # sequence (a Python list arrives as a proxy).
            _js_object(
                {"name": name, "blob": Blob.new(Array.of(to_js(data)), _js_object({"type": kind}))}
            )
            for name, kind, data in files
        ]
        try:
            results = await self._bound().toMarkdown(to_js(documents))
        except JsException as exc:
            raise from_binding_error(str(exc)) from exc
        answer = results.to_py() if hasattr(results, "to_py") else results
        if not isinstance(answer, list) or not all(isinstance(r, dict) for r in answer):
            raise UpstreamMalformed(detail="toMarkdown answered no list of results")
        return answer


class BindingFetch:
    """``ports.Fetch`` over the runtime's ``fetch``; aborts with the client.

    Redirects are not followed (``redirect: "manual"``; workerd's fetch takes
    ``"follow"`` or ``"manual"``, ``Request::tryParseRedirect`` in
    ``src/workerd/api/http.c++``): the provider's key goes in
    ``Authorization`` to the configured origin only, and a 3xx comes back as
    the answer, which is that provider failing (``ProviderAi``)."""

    def __init__(self, client_signal: Any) -> None:
        self._client_signal = client_signal

    async def post(
        self, url: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], BindingUpstream]:
        controller, signal = _abort_signal(self._client_signal)
        init = _js_object(
            {"method": "POST", "headers": headers, "signal": signal, "redirect": "manual"}
        )
        init.body = to_js(body)
        try:
            response = await js_fetch(url, init)
        except JsException as exc:
            # The message names the failure (DNS, refused, reset), never the key.
            raise UpstreamError(detail=f"fetch failed: {exc}") from exc
        except BaseException:
            controller.abort()
            raise
        reply_headers: dict[str, str] = Object.fromEntries(response.headers).to_py()
        stream = BindingUpstream(response.body, controller, self._client_signal)
        return int(response.status), reply_headers, stream


class BindingRateLimiter:
    def __init__(self, binding: Any) -> None:
        self._binding = _raw(binding)

    async def allow(self, key: str) -> bool:
        outcome = await self._binding.limit(_js_object({"key": key}))
        return bool(outcome.success)


class BindingKv:
    """``ports.Kv`` over a KV namespace binding; values are bytes."""

    def __init__(self, binding: Any) -> None:
        self._binding = _raw(binding)

    async def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        try:
            found = await self._binding.getWithMetadata(key, _js_object({"type": "arrayBuffer"}))
        except JsException as exc:
            raise KvError(str(exc)) from exc
        value = found.value
        if not hasattr(value, "byteLength"):  # null: no such key
            return None
        metadata = found.metadata
        meta = metadata.to_py() if hasattr(metadata, "to_py") else None
        return bytes(Uint8Array.new(value).to_bytes()), meta if isinstance(meta, dict) else {}

    async def put(self, key: str, value: bytes, *, ttl_s: int, metadata: dict[str, Any]) -> None:
        options = _js_object({"expirationTtl": ttl_s, "metadata": metadata})
        try:
            await self._binding.put(key, to_js(value), options)
        except JsException as exc:
            raise KvError(str(exc)) from exc

    async def list(
        self, prefix: str, cursor: str | None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        query = {"prefix": prefix, **({"cursor": cursor} if cursor else {})}
        try:
            page = (await self._binding.list(_js_object(query))).to_py()
        except JsException as exc:
            raise KvError(str(exc)) from exc
        keys = [
            (entry["name"], meta if isinstance(meta := entry.get("metadata"), dict) else {})
            for entry in page.get("keys", [])
        ]
        done = page.get("list_complete", True)
        return keys, None if done else page.get("cursor")


class BindingR2:
    """``ports.Blobs`` over an R2 bucket binding
    (https://developers.cloudflare.com/r2/api/workers/workers-api-reference/).

    What this relies on, read in the sources the runner uses (wrangler's
    local bucket is miniflare's ``workers/r2/bucket.worker.js``) and checked
    by tests/api/test_files.py against it: ``put`` takes an ArrayBufferView
    and ``httpMetadata.contentType``, which ``get`` hands back on the
    object; ``to_js`` of ``bytes`` is a copy out of the Wasm heap
    (Pyodide's ``python2js_buffer_1d_contiguous``: ``HEAP8.slice``), so the
    bucket never reads memory Python may reuse; ``delete`` takes one key or
    an array of them; ``list`` gives at most 1000 keys a page (its default
    ``limit``), with ``truncated`` and the next page's ``cursor``."""

    # R2's ``delete`` takes at most this many keys a call.
    DELETE_BATCH = 1000

    def __init__(self, binding: Any) -> None:
        self._binding = _raw(binding)

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        options = _js_object({"httpMetadata": {"contentType": content_type}})
        try:
            await self._binding.put(key, to_js(data), options)
        except JsException as exc:
            raise BlobError(str(exc)) from exc

    async def get(self, key: str) -> tuple[bytes, str] | None:
        try:
            found = await self._binding.get(key)
            if found is None or found is jsnull:
                return None
            data = bytes((await found.arrayBuffer()).to_bytes())
        except JsException as exc:
            raise BlobError(str(exc)) from exc
        kind = getattr(found.httpMetadata, "contentType", None)
        return data, kind if isinstance(kind, str) else "application/octet-stream"

    async def copy(self, source: str, target: str) -> bool:
        try:
            found = await self._binding.get(source)
            if found is None or found is jsnull:
                return False
            # The bytes stay an ArrayBuffer in JavaScript, handed straight on.
            options = _js_object({})
            options.httpMetadata = found.httpMetadata
            await self._binding.put(target, await found.arrayBuffer(), options)
        except JsException as exc:
            raise BlobError(str(exc)) from exc
        return True

    async def delete(self, keys: list[str]) -> None:
        try:
            for start in range(0, len(keys), self.DELETE_BATCH):
                await self._binding.delete(to_js(keys[start : start + self.DELETE_BATCH]))
        except JsException as exc:
            raise BlobError(str(exc)) from exc

    async def list(self, prefix: str, cursor: str | None) -> tuple[list[str], str | None]:
        query = {"prefix": prefix, **({"cursor": cursor} if cursor else {})}
        try:
            page = await self._binding.list(_js_object(query))
        except JsException as exc:
            raise BlobError(str(exc)) from exc
        keys = [str(entry.key) for entry in page.objects]
        return keys, str(page.cursor) if page.truncated else None


# Prepared statements kept per isolate, per D1 binding: workerd's
# ``D1PreparedStatement.bind`` returns a new statement and leaves the one it
# was called on as it was (src/cloudflare/internal/d1-api.ts), so one
# ``prepare`` per SQL text serves every request. A JsProxy is not hashable;
# ``==`` on two of them is JavaScript's ``===``.
_prepared: list[tuple[Any, dict[str, Any]]] = []


def _statements_of(binding: Any) -> dict[str, Any]:
    for known, statements in _prepared:
        if known == binding:
            return statements
    statements = {}
    _prepared.append((binding, statements))
    return statements


class BindingD1:
    """``ports.Database`` over a D1 binding: ``prepare(sql).bind(...)`` per
    statement (the prepared one kept per isolate), all sent in one ``batch``
    (one round trip, one transaction)."""

    def __init__(self, binding: Any) -> None:
        self._binding = _raw(binding)
        self._statements = _statements_of(self._binding)

    def _prepare(self, sql: str) -> Any:
        statement = self._statements.get(sql)
        if statement is None:
            statement = self._statements[sql] = self._binding.prepare(sql)
        return statement

    def batch(
        self, statements: list[tuple[str, list[Any]]]
    ) -> Awaitable[list[list[dict[str, Any]]]]:
        try:
            prepared = [
                self._prepare(sql).bind(*params) if params else self._prepare(sql)
                for sql, params in statements
            ]
            # Under way from here; settles to ``[results]`` or to the reason
            # and never rejects, so one that is never awaited (a cached
            # answer needs no budget) is no unhandled rejection.
            settled = self._binding.batch(to_js(prepared)).then(Array.of, Object)
        except JsException as exc:
            return _failed(DatabaseError(str(exc)))
        return _rows(settled)


async def _rows(settled: Any) -> list[list[dict[str, Any]]]:
    outcome = await settled
    if not Array.isArray(outcome):
        raise DatabaseError(str(outcome))
    # A NULL column is JS null, which Pyodide hands over as ``jsnull`` (not
    # None, since Pyodide 0.27 unless ``convertNullToNone``): None here, as
    # ``ports.Database`` promises SQL's NULL.
    return [
        [{k: None if v is jsnull else v for k, v in row.items()} for row in result.results.to_py()]
        for result in outcome[0]
    ]


async def _failed(exc: Exception) -> Any:
    raise exc


# RS256 is RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518, section 3.3).
_RS256 = {"name": "RSASSA-PKCS1-v1_5", "hash": "SHA-256"}
_rs256_js: list[Any] = []  # the JS object of it, made on first use (not at import)


def _rs256() -> Any:
    if not _rs256_js:
        _rs256_js.append(_js_object(_RS256))
    return _rs256_js[0]


# How long Access's keys endpoint may take before requests fail closed.
KEYS_TIMEOUT_MS = 5000


class WebCryptoVerifier:
    """``ports.Verifier``: the runtime's ``fetch`` for Access's keys, and
    WebCrypto (``crypto.subtle``) for their signatures."""

    async def get(self, url: str) -> tuple[int, bytes]:
        init = _js_object({"redirect": "manual", "signal": AbortSignal.timeout(KEYS_TIMEOUT_MS)})
        try:
            response = await js_fetch(url, init)
            return int(response.status), bytes((await response.arrayBuffer()).to_bytes())
        except JsException as exc:
            raise KeysError(f"fetch failed: {exc}") from exc

    async def import_rs256(self, jwk: dict[str, Any]) -> object:
        try:
            return await crypto.subtle.importKey(
                "jwk", _js_object(jwk), _rs256(), False, to_js(["verify"])
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

    def __init__(self, env: Any) -> None:
        self._env = env
        history_db = getattr(env, "DB", None)
        self.history = BindingD1(history_db) if history_db is not None else None
        files = getattr(env, "FILES", None)
        self.files = BindingR2(files) if files is not None else None

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
        self.fetch = BindingFetch(client_signal)
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


def _js_response(body: Any, reply: Reply) -> Any:
    # A JS Response, returned as it is: the runtime passes a JsProxy result of
    # ``fetch`` straight through (workerd ``introspection.py``, ``wrapper_func``
    # → ``python_to_rpc``), which spares the SDK's Response wrapper.
    init = {"status": reply.status, "headers": _js_object(reply.headers)}
    return JsResponse.new(body, _js_object(init))


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
