"""Plain-Python stand-ins for the ``ports`` protocols, scripted per test.

They fake the seam (what ``edgechat.platform`` adapts from the Workers runtime) and
nothing inside the core, so a test drives ``chat``/``app`` exactly as the
runtime would. Upstream byte streams in both wire formats come from
``openai_stream`` and ``native_stream``, which only arrange the chunks that
``tests.kit.upstream`` builds for every suite.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import sqlite3
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from edgechat.answer import cache
from edgechat.answer.answer import Answer, CheckAnswer, Sources
from edgechat.answer.candidates import Candidates, Cooling
from edgechat.answer.deadlines import Deadlines
from edgechat.answer.framing import Framing
from edgechat.apis.chat import ChatFraming
from edgechat.config.settings import Settings
from edgechat.core.errors import PayloadTooLarge
from edgechat.core.faults import UpstreamError
from edgechat.core.models import Model, Usage, find
from edgechat.core.ports import (
    TIMED_OUT,
    BlobError,
    ClientGone,
    DatabaseError,
    KeysError,
    KvError,
    Sink,
    Streams,
    TimedOut,
    VectorsError,
)
from edgechat.core.requests import ChatRequest, Message
from tests.kit import upstream as wire

# --- one answer, built as the pipeline builds it ---------------------------------


class AnswerUnderTest(Answer):
    """An ``Answer`` put together as ``pipeline`` does, keeping its framing
    and the model asked for where the test can read them."""

    def __init__(
        self,
        request: ChatRequest,
        settings: Settings,
        ai: Streams,
        *,
        request_id: str = "req-1",
        framing: Framing | None = None,
        record: bool = False,
        providers: Streams | None = None,
        cooling: Cooling | None = None,
        check_answer: CheckAnswer | None = None,
    ) -> None:
        self.framing = framing or ChatFraming(request_id)
        self.first_model = request.model
        super().__init__(
            request,
            self.framing,
            Sources(ai, {}, providers),
            Candidates(request, settings, cooling or Cooling(), providers=providers is not None),
            Deadlines(settings, time.monotonic),
            record=record,
            check_answer=check_answer,
        )

    def recorded(self) -> bytes | None:
        """What the pipeline would store in the response cache."""
        return cache.keepable(self.recording.body(), self.outcome)


# --- upstream byte streams ---------------------------------------------------


def openai_stream(
    *parts: tuple[str, str],
    usage: Usage | None = None,
    finish_reason: str | None = "stop",
    done: bool = True,
) -> list[bytes]:
    """GLM/Kimi style: one ``chat.completion.chunk`` per part, ``("reasoning"|"content", text)``,
    then the binding's trailing ``{"response": "", "usage": …}`` and ``[DONE]``.
    One chunk per event, as the binding delivers them."""
    events: list[str] = []
    for index, (kind, text) in enumerate(parts):
        reasoning, content = (text, None) if kind == "reasoning" else (None, text)
        last = index == len(parts) - 1
        events.append(
            wire.openai_chunk(
                reasoning=reasoning,
                content=content,
                finish_reason=finish_reason if last else None,
            )
        )
    return _ending(events, usage, done)


def native_stream(*texts: str, usage: Usage | None = None, done: bool = True) -> list[bytes]:
    """Llama style: ``{"response": text}`` events, usage on the last, then ``[DONE]``."""
    return _ending([wire.native_chunk(text) for text in texts], usage, done)


def _ending(events: list[str], usage: Usage | None, done: bool) -> list[bytes]:
    if usage is not None:
        # A Usage is a TypedDict of ints: exactly the kit's usage shape.
        events.append(wire.native_chunk("", usage=cast("dict[str, int]", usage)))
    if done:
        events.append(wire.DONE)
    return [event.encode() for event in events]


def usage(prompt: int, completion: int) -> Usage:
    counts = wire.usage(prompt, completion)
    return {
        "prompt_tokens": counts["prompt_tokens"],
        "completion_tokens": counts["completion_tokens"],
        "total_tokens": counts["total_tokens"],
    }


# --- requests as validation hands them on ---------------------------------------


def model(name: str) -> Model:
    """A catalog model by alias or id, as the code knows it."""
    found = find(name)
    assert found is not None, name
    return found


def chat_request(
    chosen: Model,
    *,
    messages: tuple[tuple[str, str], ...] = (("user", "Hi"),),
    max_tokens: int = 256,
    temperature: float | None = None,
    reasoning: bool | None = None,
) -> ChatRequest:
    return ChatRequest(
        messages=tuple(Message(role, content) for role, content in messages),  # type: ignore[arg-type]
        model=chosen,
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning=reasoning,
    )


# --- the AI binding ------------------------------------------------------------


@dataclass(frozen=True)
class Delay:
    """Wait this long before the next step (a silent model)."""

    seconds: float


@dataclass(frozen=True)
class Fail:
    """Raise this from ``read``: the stream broke mid-way (an ``UpstreamError``,
    as the seam translates binding errors) or, to test robustness, anything else."""

    error: Exception


class Stall:
    """Never deliver another chunk; only ``cancel`` ends the wait."""


STALL = Stall()

Step = bytes | Delay | Fail | Stall


async def _within[T](future: asyncio.Future[T], within: float) -> T | TimedOut:
    """A bounded wait, as the platform's: the future is left running when the
    bound passes first, for the next call to go on waiting."""
    if within == math.inf:
        return await asyncio.shield(future)
    done, _ = await asyncio.wait({future}, timeout=max(within, 0.0))
    return future.result() if done else TIMED_OUT


def _retrieved[T](future: asyncio.Future[T]) -> asyncio.Future[T]:
    """A read the session may leave behind (it cancels the upstream instead
    of awaiting it, as the platform's reads are left): its failure is taken
    here, so it is never reported as an unretrieved task exception."""
    future.add_done_callback(lambda done: done.cancelled() or done.exception())
    return future


class FakeUpstream:
    """``ports.UpstreamStream`` playing a script of chunks, delays, failures and stalls.

    Like the binding: ``read`` returns the next chunk as Python reads it;
    after ``relay`` the rest is copied into the sink by a task of its own (the
    platform's native pipe) while ``observe`` hands Python what went by. A
    failed write ends the copy with ``ClientGone``; a cancel (abort) fails
    whatever is running or starts later with an ``UpstreamError``.

    ``reads`` and ``looks`` count the times Python touched the stream, and
    ``chunks_relayed`` the chunks that went by without it. ``observe_lag``
    (seconds) makes ``observe`` return that much after it took the bytes, as
    the watched branch of a tee may lag behind the pipe: the relay can finish
    while a look is still under way.
    """

    def __init__(self, steps: Iterable[Step], *, observe_lag: float = 0.0) -> None:
        self._steps = list(steps)
        self._observe_lag = observe_lag
        self._cancelled = asyncio.Event()
        self.cancel_calls = 0
        self.reads = 0
        # Each read's ``after`` (the pause before it), recorded and not
        # waited: a batch here gathers whatever the script has ready.
        self.pauses: list[float] = []
        self.looks = 0
        self.chunks_relayed = 0
        self.relays = 0
        self._seen: list[bytes] = []
        self._seen_changed = asyncio.Event()
        self._copy: asyncio.Task[None] | None = None
        self._pending_read: asyncio.Future[bytes | None] | None = None
        self._pending_look: asyncio.Future[bytes | None] | None = None
        # After ``forward``, a read also takes the chunks that follow at once
        # (no delay between them), as a read of a tee branch takes all it holds.
        self.coalesced = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _abort_error(self) -> UpstreamError:
        return UpstreamError(detail="AbortError: The operation was aborted")

    async def _next(self) -> bytes | None:
        """The next chunk of the script, playing delays, failures and stalls."""
        while True:
            if self.cancelled:
                raise self._abort_error()
            if not self._steps:
                return None
            step = self._steps.pop(0)
            if isinstance(step, bytes):
                return step
            if isinstance(step, Fail):
                raise step.error
            if isinstance(step, Delay):
                await self._sleep(step.seconds)
            else:
                await self._cancelled.wait()

    async def forward(self, sink: Sink) -> FakeForward:
        assert self._copy is None, "forward() after relay()"
        self.coalesced = True
        return FakeForward(self, sink)

    async def _next_batch(self) -> bytes | None:
        first = await self._next()
        if first is None or not self.coalesced:
            return first
        batch = [first]
        while self._steps and isinstance(self._steps[0], bytes):
            batch.append(cast(bytes, self._steps.pop(0)))
        return b"".join(batch)

    async def read(self, within: float) -> bytes | TimedOut | None:
        assert self._copy is None, "read() after relay()"
        if self._pending_read is None:
            self.reads += 1
            self._pending_read = _retrieved(asyncio.ensure_future(self._next_batch()))
        result = await _within(self._pending_read, within)
        if result is not TIMED_OUT:
            self._pending_read = None
        return result

    async def relay(self, sink: Sink) -> FakeRelay:
        assert self._copy is None, "relay() twice"
        self.relays += 1
        self._copy = asyncio.ensure_future(self._pump(sink))
        self._copy.add_done_callback(lambda _: self._seen_changed.set())
        return FakeRelay(self)

    async def _pump(self, sink: Sink) -> None:
        while (chunk := await self._next()) is not None:
            self.chunks_relayed += 1
            await sink.write(chunk)
            self._seen.append(chunk)
            self._seen_changed.set()

    async def observe(self, within: float) -> bytes | TimedOut | None:
        if self._pending_look is None:
            self._pending_look = _retrieved(asyncio.ensure_future(self._look()))
        result = await _within(self._pending_look, within)
        if result is not TIMED_OUT:
            self._pending_look = None
        return result

    async def rest(self, within: float) -> bool:
        assert self._copy is not None
        if await _within(self._copy, within) is TIMED_OUT:
            return False
        await self.finished()
        return True

    async def _look(self) -> bytes | None:
        self.looks += 1
        copy = self._copy
        assert copy is not None
        while not self._seen and not copy.done():
            self._seen_changed.clear()
            await self._seen_changed.wait()
        if self._seen:
            seen = b"".join(self._seen)
            self._seen.clear()
            if self._observe_lag:
                await asyncio.sleep(self._observe_lag)
            return seen
        if copy.exception() is not None:
            raise copy.exception()  # type: ignore[misc]
        return None

    async def finished(self) -> None:
        assert self._copy is not None
        await asyncio.shield(self._copy)

    async def _sleep(self, seconds: float) -> None:
        # A delay ends early when the call is aborted, as a real fetch would.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._cancelled.wait(), seconds)

    async def cancel(self) -> None:
        self.cancel_calls += 1
        self._cancelled.set()


class FakeForward:
    """``ports.Forward`` of a ``FakeUpstream``: the write, then the read, the
    pause recorded and not waited (``FakeUpstream.pauses``); a bound that
    passes cancels the upstream, as the platform's watchdog does."""

    def __init__(self, upstream: FakeUpstream, sink: Sink) -> None:
        self._upstream = upstream
        self._sink = sink
        self.stopped = False

    async def next(self, out: bytes, after: float, within: float) -> bytes | TimedOut | None:
        assert not self.stopped, "next() after stop()"
        if out:
            await self._sink.write(out)
        if after > 0:
            self._upstream.pauses.append(after)
        data = await self._upstream.read(within)
        if data is TIMED_OUT:
            await self._upstream.cancel()
        return data

    def stop(self) -> None:
        self.stopped = True


class FakeRelay:
    """``ports.Relay`` of a ``FakeUpstream``."""

    def __init__(self, upstream: FakeUpstream) -> None:
        self._upstream = upstream

    async def rest(self, within: float) -> bool:
        return await self._upstream.rest(within)

    async def observe(self, within: float) -> bytes | TimedOut | None:
        return await self._upstream.observe(within)

    async def finished(self) -> None:
        await self._upstream.finished()


@dataclass
class Call:
    model_id: str
    inputs: dict[str, Any]
    # AI.run's options (``gateway``) as the core passed them.
    options: dict[str, Any] = field(default_factory=dict)
    # The stream returned to the caller, or None when the call was refused.
    upstream: FakeUpstream | None = None
    # The caller gave up waiting for the binding (the task was cancelled).
    abandoned: bool = False

    @property
    def cancelled(self) -> bool:
        return self.upstream is not None and self.upstream.cancelled


# What one call to a model does: refuse with an error, or stream these steps.
Answer = UpstreamError | Sequence[Step]


class Gate:
    """A whole result (``AI.run``) held back until ``open()`` is called, or
    until the fake records the event named ``after`` (say ``"stream:<id>"``):
    ordering is asserted by events, never by guessed times."""

    def __init__(self, result: dict[str, Any] | Exception, *, after: str | None = None) -> None:
        self.result = result
        self.after = after
        self._opened = asyncio.Event()

    def open(self) -> None:
        self._opened.set()


# What one ``AI.run`` call does: return this result, raise this error, wait at
# a gate first, or never answer (only a cancel ends it).
RunStep = dict[str, Any] | Exception | Gate | Stall


@dataclass
class RunCall:
    model_id: str
    inputs: dict[str, Any]
    options: dict[str, Any] = field(default_factory=dict)
    # The caller gave up (its task was cancelled, e.g. by a timeout).
    abandoned: bool = False
    finished: bool = False


class FakeAi:
    """``ports.Ai`` scripted per model id: ``script[model_id]`` is the ``Answer``
    to every call of that model. A model without a script is a test bug
    (KeyError). ``open_delay`` (seconds, or ``STALL``) holds ``stream`` itself
    back before it answers; ``observe_lag`` is every stream's (see ``FakeUpstream``).
    """

    def __init__(
        self,
        script: Mapping[str, Answer],
        *,
        open_delay: Mapping[str, float | Stall] | None = None,
        observe_lag: float = 0.0,
        runs: Mapping[str, Sequence[RunStep]] | None = None,
        markdown: Callable[[str, str, bytes], dict[str, Any]] | Exception | None = None,
    ) -> None:
        self._script = dict(script)
        # ``to_markdown``'s result for each file, or what it raises.
        self._markdown = markdown
        self.converted: list[list[tuple[str, str, bytes]]] = []
        self._open_delay = dict(open_delay or {})
        self._observe_lag = observe_lag
        # ``runs[model_id]``: one step per ``run`` call, in order.
        self._runs = {name: list(steps) for name, steps in (runs or {}).items()}
        self.calls: list[Call] = []
        self.run_calls: list[RunCall] = []
        # What happened, in order: "stream:<id>" (a stream call began),
        # "opened:<id>" (it answered), "run:<id>", "ran:<id>" (a run
        # returned or raised), "run-abandoned:<id>", "stream-abandoned:<id>".
        self.events: list[str] = []
        self._waiters: list[tuple[str, asyncio.Event]] = []

    def _note(self, event: str) -> None:
        self.events.append(event)
        for name, waiter in self._waiters:
            if name == event:
                waiter.set()

    async def happened(self, event: str) -> None:
        """Returns once ``event`` has been recorded."""
        if event in self.events:
            return
        waiter = asyncio.Event()
        self._waiters.append((event, waiter))
        await waiter.wait()

    async def run(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> dict[str, Any]:
        call = RunCall(model_id, json.loads(json.dumps(inputs)), json.loads(json.dumps(options)))
        self.run_calls.append(call)
        self._note(f"run:{model_id}")
        step = self._runs[model_id].pop(0)
        try:
            if isinstance(step, Stall):
                await asyncio.Event().wait()
            if isinstance(step, Gate):
                if step.after is not None:
                    await self.happened(step.after)
                else:
                    await step._opened.wait()
                step = step.result
        except asyncio.CancelledError:
            call.abandoned = True
            self._note(f"run-abandoned:{model_id}")
            raise
        call.finished = True
        self._note(f"ran:{model_id}")
        if isinstance(step, Exception):
            raise step
        assert isinstance(step, dict)
        return step

    async def to_markdown(self, files: list[tuple[str, str, bytes]]) -> list[dict[str, Any]]:
        self.converted.append(list(files))
        if isinstance(self._markdown, Exception):
            raise self._markdown
        convert = self._markdown or (
            lambda name, kind, data: {"format": "markdown", "data": f"Text of {name}.", "tokens": 4}
        )
        return [convert(*file) for file in files]

    @property
    def models_called(self) -> list[str]:
        return [call.model_id for call in self.calls]

    async def stream(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> FakeUpstream:
        # A deep copy: what was sent, even if the caller reuses its dicts.
        call = Call(model_id, json.loads(json.dumps(inputs)), json.loads(json.dumps(options)))
        self.calls.append(call)
        self._note(f"stream:{model_id}")
        delay = self._open_delay.get(model_id)
        try:
            if isinstance(delay, Stall):
                await asyncio.Event().wait()
            elif delay is not None:
                await asyncio.sleep(delay)
        except asyncio.CancelledError:
            call.abandoned = True
            self._note(f"stream-abandoned:{model_id}")
            raise
        answer = self._script[model_id]
        if isinstance(answer, UpstreamError):
            raise answer
        call.upstream = FakeUpstream(answer, observe_lag=self._observe_lag)
        self._note(f"opened:{model_id}")
        return call.upstream


# --- the runtime's fetch (the providers' APIs) ------------------------------------


@dataclass(frozen=True)
class FetchReply:
    """What one ``fetch`` answers: a status, headers (lower-case) and a body
    played like a model's stream."""

    status: int = 200
    steps: Sequence[Step] = ()
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Posted:
    url: str
    headers: dict[str, str]
    # The request body, parsed as JSON.
    body: Any
    upstream: FakeUpstream | None = None
    abandoned: bool = False

    @property
    def cancelled(self) -> bool:
        return self.upstream is not None and self.upstream.cancelled


class FakeFetch:
    """``ports.Fetch`` answering each ``post``, in order, with the next of
    ``replies``: a ``FetchReply``, an exception to raise (the network failed:
    an ``UpstreamError``, as the seam translates it) or ``STALL`` (no answer
    until cancelled). Running out of replies is a test bug."""

    def __init__(self, replies: Iterable[FetchReply | Exception | Stall] = ()) -> None:
        self._replies = list(replies)
        self.posts: list[Posted] = []

    async def post(
        self, url: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], FakeUpstream]:
        assert isinstance(body, bytes)
        posted = Posted(url, dict(headers), json.loads(body))
        self.posts.append(posted)
        reply = self._replies.pop(0)
        if isinstance(reply, Stall):
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                posted.abandoned = True
                raise
        if isinstance(reply, Exception):
            raise reply
        assert isinstance(reply, FetchReply)
        posted.upstream = FakeUpstream(reply.steps)
        return reply.status, dict(reply.headers), posted.upstream


class FakeOutbound:
    """``ports.Outbound`` answering each ``post``, in order, with the next of
    ``replies`` (a status, or an exception to raise: an ``OutboundError``),
    then 200 once they run out; records every post."""

    def __init__(self, replies: Iterable[int | Exception] = ()) -> None:
        self._replies = list(replies)
        self.posts: list[Posted] = []
        self.bounds: list[float] = []

    async def post(self, url: str, headers: dict[str, str], body: bytes, within: float) -> int:
        assert isinstance(body, bytes)
        self.posts.append(Posted(url, dict(headers), json.loads(body)))
        self.bounds.append(within)
        reply = self._replies.pop(0) if self._replies else 200
        if isinstance(reply, Exception):
            raise reply
        return reply


# --- the client side -------------------------------------------------------------


class FakeSink:
    """``ports.Sink`` collecting the response body.

    With ``gone_after=n`` the client disconnects after ``n`` successful
    writes: every later write raises ``ClientGone``.
    """

    def __init__(self, *, gone_after: int | None = None) -> None:
        self._gone_after = gone_after
        self.writes: list[bytes] = []
        self.failed_writes = 0
        self.closed = 0

    @property
    def body(self) -> bytes:
        return b"".join(self.writes)

    async def write(self, data: bytes) -> None:
        assert isinstance(data, bytes)
        assert not self.closed, "write after close"
        if self._gone_after is not None and len(self.writes) >= self._gone_after:
            self.failed_writes += 1
            raise ClientGone()
        self.writes.append(data)
        # A real stream write is a suspension point; let other tasks run.
        await asyncio.sleep(0)

    async def close(self) -> None:
        self.closed += 1


class FakeRateLimiter:
    """``ports.RateLimiter`` allowing the first ``allow`` calls, recording the keys."""

    def __init__(self, allow: int = 1_000_000) -> None:
        self._remaining = allow
        self.keys: list[str] = []

    async def allow(self, key: str) -> bool:
        self.keys.append(key)
        self._remaining -= 1
        return self._remaining >= 0


class FakeKv:
    """``ports.Kv`` in a dict; ``failing`` names the operations that raise
    ``KvError`` ("get", "put", "list"). TTLs are recorded, not enforced."""

    def __init__(self, *, page_size: int = 1000) -> None:
        self.items: dict[str, tuple[bytes, dict[str, Any], int]] = {}
        self.failing: set[str] = set()
        self.gets: list[str] = []
        self._page_size = page_size

    def _check(self, operation: str) -> None:
        if operation in self.failing:
            raise KvError(f"{operation}: KV is down (scripted)")

    async def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        self.gets.append(key)
        self._check("get")
        found = self.items.get(key)
        return None if found is None else (found[0], dict(found[1]))

    async def put(self, key: str, value: bytes, *, ttl_s: int, metadata: dict[str, Any]) -> None:
        self._check("put")
        assert isinstance(value, bytes)
        self.items[key] = (value, json.loads(json.dumps(metadata)), ttl_s)

    async def list(
        self, prefix: str, cursor: str | None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        self._check("list")
        names = sorted(name for name in self.items if name.startswith(prefix))
        start = int(cursor) if cursor else 0
        page = names[start : start + self._page_size]
        after = start + len(page)
        keys = [(name, dict(self.items[name][1])) for name in page]
        return keys, str(after) if after < len(names) else None


class FakeDb:
    """``ports.Database`` over CPython's SQLite (D1 is SQLite): each batch
    one transaction; ``fail`` makes every batch raise ``DatabaseError``."""

    def __init__(self) -> None:
        self.connection = sqlite3.connect(":memory:", isolation_level=None)
        self.connection.row_factory = sqlite3.Row
        self.fail = False
        self.batches: list[list[str]] = []

    async def batch(self, statements: list[tuple[str, list[Any]]]) -> list[list[dict[str, Any]]]:
        self.batches.append([sql for sql, _ in statements])
        if self.fail:
            raise DatabaseError("D1_ERROR: the test says so")
        results = []
        self.connection.execute("BEGIN")
        try:
            for sql, params in statements:
                # D1 binds ?NNN by position; CPython's sqlite3 by name ("1").
                bound: Any = {str(k): v for k, v in enumerate(params, 1)} if "?1" in sql else params
                rows = self.connection.execute(sql, bound).fetchall()
                results.append([dict(row) for row in rows])
        except sqlite3.Error as exc:
            # D1 reports SQLite's own message ("no such table: spend").
            self.connection.execute("ROLLBACK")
            raise DatabaseError(f"D1_ERROR: {exc}") from exc
        self.connection.execute("COMMIT")
        return results


class FakeBlobs:
    """``ports.Blobs`` in a dict (key → bytes, type); ``fail`` makes every
    call raise ``BlobError``."""

    def __init__(self, *, page_size: int = 1000) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self.fail = False
        self._page_size = page_size

    def _check(self) -> None:
        if self.fail:
            raise BlobError("R2 is down (scripted)")

    async def put(self, key: str, data: bytes, content_type: str) -> None:
        self._check()
        assert isinstance(data, bytes)
        self.objects[key] = (data, content_type)

    async def get(self, key: str) -> tuple[bytes, str] | None:
        self._check()
        return self.objects.get(key)

    async def copy(self, source: str, target: str) -> bool:
        self._check()
        if source not in self.objects:
            return False
        self.objects[target] = self.objects[source]
        return True

    async def delete(self, keys: list[str]) -> None:
        self._check()
        for key in keys:
            self.objects.pop(key, None)

    async def list(self, prefix: str, cursor: str | None) -> tuple[list[str], str | None]:
        self._check()
        names = sorted(name for name in self.objects if name.startswith(prefix))
        start = int(cursor) if cursor else 0
        page = names[start : start + self._page_size]
        after = start + len(page)
        return page, str(after) if after < len(names) else None


# The properties the VECTORS index has metadata indexes on (wrangler.toml):
# Vectorize filters on nothing else.
INDEXED = frozenset({"kind", "owner", "base", "scope"})


class FakeVectors:
    """``ports.Vectors`` in a dict, as the emulator's index plays Vectorize
    (tools/emulator/vectorize.mjs): cosine scores; a query's namespace
    narrows it (none: every vector); filters with Vectorize's operators read
    the indexed properties only, so a condition on another, or on a vector
    without the property, matches nothing. Every call is recorded in
    ``calls`` (method, and a query's namespace, filter, top_k).
    With ``lagging`` a mutation waits in ``pending`` until ``apply()``, as
    the real index applies them seconds later; ``fail`` makes every call
    raise ``VectorsError``."""

    def __init__(self, *, lagging: bool = False) -> None:
        self.vectors: dict[str, dict[str, Any]] = {}
        self.pending: list[Callable[[], None]] = []
        self.lagging = lagging
        self.fail = False
        self.calls: list[dict[str, Any]] = []

    def _record(self, method: str, **details: Any) -> None:
        self.calls.append({"method": method, **details})
        if self.fail:
            raise VectorsError(f"{method}: Vectorize is down (scripted)")

    def _mutate(self, change: Callable[[], None]) -> None:
        if self.lagging:
            self.pending.append(change)
        else:
            change()

    def apply(self) -> None:
        """The index takes in the mutations waiting, in order."""
        while self.pending:
            self.pending.pop(0)()

    async def upsert(self, vectors: list[dict[str, Any]]) -> None:
        self._record("upsert", ids=[vector["id"] for vector in vectors])
        kept = [json.loads(json.dumps(vector)) for vector in vectors]
        self._mutate(lambda: self.vectors.update({vector["id"]: vector for vector in kept}))

    async def query(
        self,
        values: list[float],
        *,
        top_k: int,
        namespace: str | None = None,
        filter: dict[str, Any] | None = None,
        metadata: bool = True,
    ) -> list[dict[str, Any]]:
        self._record("query", namespace=namespace, filter=filter, top_k=top_k)
        scored = [
            (_cosine(values, vector["values"]), vector)
            for vector in self.vectors.values()
            if namespace in (None, vector.get("namespace"))
            and _matches(vector.get("metadata", {}), filter)
        ]
        scored.sort(key=lambda pair: -pair[0])
        return [
            {
                "id": vector["id"],
                "score": score,
                **({"metadata": vector.get("metadata", {})} if metadata else {}),
                **({"namespace": vector["namespace"]} if "namespace" in vector else {}),
            }
            for score, vector in scored[:top_k]
        ]

    async def get_by_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        self._record("getByIds", ids=list(ids))
        return [json.loads(json.dumps(self.vectors[id_])) for id_ in ids if id_ in self.vectors]

    async def delete_by_ids(self, ids: list[str]) -> None:
        self._record("deleteByIds", ids=list(ids))
        gone = list(ids)
        self._mutate(lambda: [self.vectors.pop(id_, None) for id_ in gone] and None)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    norms = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norms if norms else 0.0


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda have, want: have == want,
    "$ne": lambda have, want: have != want,
    "$in": lambda have, want: have in want,
    "$nin": lambda have, want: have not in want,
    "$lt": lambda have, want: have < want,
    "$lte": lambda have, want: have <= want,
    "$gt": lambda have, want: have > want,
    "$gte": lambda have, want: have >= want,
}


def _matches(metadata: dict[str, Any], filter_: dict[str, Any] | None) -> bool:
    # Implicit $eq for a bare value; a dotted key reaches into nested metadata.
    for key, condition in (filter_ or {}).items():
        have: Any = metadata
        for part in key.split("."):
            have = have.get(part) if isinstance(have, dict) else None
        if key not in INDEXED or have is None:
            return False
        tests = condition if isinstance(condition, dict) else {"$eq": condition}
        if not all(_OPERATORS[op](have, want) for op, want in tests.items()):
            return False
    return True


class FakeSchedule:
    """``ports.Schedule``: a scheduled run's databases (``db`` is ``DB``,
    ``usage_db`` is ``USAGE_DB``), bucket, outgoing POSTs and ``[vars]``."""

    def __init__(
        self,
        db: FakeDb | None,
        files: FakeBlobs | None = None,
        *,
        usage_db: FakeDb | None = None,
        outbound: FakeOutbound | None = None,
        ai: FakeAi | None = None,
        kv: FakeKv | None = None,
        **variables: str,
    ) -> None:
        self.ai = ai or FakeAi({})
        self.kv = kv
        self.history = db
        self.files = files
        self.db = usage_db
        self.outbound = outbound or FakeOutbound()
        self.variables = variables
        self.vector_index: FakeVectors | None = None

    def vectors(self) -> FakeVectors | None:
        return self.vector_index

    def var(self, name: str) -> object:
        return self.variables.get(name)


class FakeVerifier:
    """``ports.Verifier`` with real RS256 (``cryptography``, as WebCrypto
    would): ``answers`` are what Access's keys endpoint gives, one per
    fetch, the last one again; an exception is a fetch that got no answer."""

    def __init__(self, *answers: tuple[int, bytes] | Exception) -> None:
        self.answers = list(answers) or [KeysError("no keys endpoint in this test")]
        self.fetched: list[str] = []
        self.verifications = 0

    async def get(self, url: str) -> tuple[int, bytes]:
        self.fetched.append(url)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def import_rs256(self, jwk: dict[str, Any]) -> object:
        try:
            numbers = rsa.RSAPublicNumbers(_jwk_int(jwk["e"]), _jwk_int(jwk["n"]))
            return numbers.public_key()
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError("not an RSA public key") from exc

    async def verify_rs256(self, key: object, signed: bytes, signature: bytes) -> bool:
        assert isinstance(key, rsa.RSAPublicKey)
        self.verifications += 1
        try:
            key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            return False
        return True


def _jwk_int(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


@dataclass
class FakePlatform:
    """``ports.Platform`` for one request: ``[vars]``, a body and the bindings."""

    vars: dict[str, object] = field(default_factory=dict)
    body: bytes = b""
    ai: FakeAi = field(default_factory=lambda: FakeAi({}))
    rate_limiter: FakeRateLimiter | None = None
    # A chunked upload (no Content-Length): the limit is counted, not declared.
    declared_length: bool = True
    # The limit of every read_body call.
    body_reads: list[int] = field(default_factory=list)
    kv: FakeKv | None = None
    fetch: FakeFetch = field(default_factory=FakeFetch)
    outbound: FakeOutbound = field(default_factory=FakeOutbound)
    # The binding for work after the reply, when a test tells it apart from ``ai``.
    after_reply: FakeAi | None = None
    verifier: FakeVerifier = field(default_factory=lambda: FakeVerifier())
    db: FakeDb | None = None
    history: FakeDb | None = None
    files: FakeBlobs | None = None
    # The ``VECTORS`` index (``vectors()``); None: not bound.
    vector_index: FakeVectors | None = None
    # What the request left to run after its reply (``wait_until``).
    background: list[asyncio.Future[None]] = field(default_factory=list)

    def var(self, name: str) -> object:
        return self.vars.get(name)

    def vectors(self) -> FakeVectors | None:
        return self.vector_index

    @property
    def ai_after_reply(self) -> FakeAi:
        return self.ai if self.after_reply is None else self.after_reply

    def wait_until(self, work: Any) -> None:
        self.background.append(asyncio.ensure_future(work))

    async def settle(self) -> None:
        """Waits for everything ``wait_until`` started."""
        while self.background:
            await self.background.pop(0)

    async def read_body(self, limit: int) -> bytes:
        # Like platform.WorkerPlatform: refuse by Content-Length before
        # reading, else count the chunks as they come and stop past the limit.
        self.body_reads.append(limit)
        if self.declared_length and len(self.body) > limit:
            raise PayloadTooLarge(detail=f"Content-Length {len(self.body)}")
        size = 0
        for start in range(0, len(self.body) or 1, 1024):
            size += len(self.body[start : start + 1024])
            if size > limit:
                raise PayloadTooLarge(detail="chunked body over the limit")
        return self.body


async def finish_within[T](hang_s: float, work: Coroutine[Any, Any, T]) -> T:
    """Runs ``work`` to its end; a hang of ``hang_s`` fails the test (a
    timeout that cancelled it could let a swallowed cancellation pass for an
    answer)."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=hang_s)
    if not done:
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise AssertionError(f"hung for {hang_s} s")
    return task.result()
