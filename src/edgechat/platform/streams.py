"""Streams: the model's answer read, forwarded and relayed, and the sink a
streamed reply is written to.

A streamed reply's body is the readable side of an ``IdentityTransformStream``
(workerd's native one; ``new TransformStream()`` is JavaScript at current
compatibility dates). Our own events are written to it from Python; the
model's answer is piped into it with ``pipeTo``, which workerd pumps in C++
with no JavaScript per chunk when both sides are native (workerd
``docs/streams.md``, "Pipe Loop Selection"). Python watches a ``tee()`` of the
answer with a BYOB reader, whose one ``read`` returns everything that has
arrived, filled natively from as many chunks as are queued.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from typing import Any

from js import (
    Array,
    ArrayBuffer,
    CompressionStream,
    Function,
    IdentityTransformStream,
    Object,
    Promise,
    Reflect,
    Uint8Array,
    clearTimeout,
    setTimeout,
)
from pyodide.ffi import JsException, create_proxy, to_js

from edgechat.core.faults import UpstreamError, UpstreamInterrupted, from_binding_error
from edgechat.core.ports import TIMED_OUT, ClientGone, Spent, TimedOut
from edgechat.platform.interop import bounded, js_object

__all__ = ["BindingForward", "BindingRelay", "BindingUpstream", "ByteReader", "StreamSink"]


# One read takes up to this much of what has arrived. workerd detaches the
# buffer a BYOB read fills and hands it back as ``result.value.buffer``
# (``readable.c++``, ``ReaderImpl::read``), so one buffer serves every read.
READ_BYTES = 64 << 10


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
        self.reader = stream.getReader(js_object({"mode": "byob"}))
        self._buffer = ArrayBuffer.new(READ_BYTES)
        self._pending: Any = None

    async def read(self, within: float) -> bytes | TimedOut | None:
        pending = self._pending
        if pending is None:
            pending = self._pending = self.reader.read(Uint8Array.new(self._buffer))
        result = await bounded(pending, within)
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
            self.writable, js_object({"preventClose": True, "preventAbort": True})
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
        outcome = await bounded(self._settled, within)
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
