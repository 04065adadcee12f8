"""One chat answer, for either endpoint: call the model (with fallback, down
the Workers AI chain and then the providers' APIs), relay its stream, keep
the deadlines, and end with exactly one closing (``done``/``error``).

What the client gets is a ``Framing``'s: for ``/chat`` (``ChatFraming``)
``meta``, then the model's own SSE events byte for byte, then ``done`` or
``error``; for the OpenAI API (``openai_api``) chunks, a whole completion, or
its error. A cache hit replays a kept stream through the same path
(``replay``). Every chunk of a model's stream is about
one token, and at the edge every microsecond Python spends on one is billed
CPU (the Free plan allows 10 ms per request), so Python does not touch the
stream per token. It works in two phases:

1. **Until the model says something**, Python reads the stream itself
   (``UpstreamStream.read``; a handful of chunks) and holds those bytes back.
   That gives an exact time to first token, keeps the first-token deadline,
   sends ``: ping`` while the model is silent, and, because nothing of the
   model has reached the client yet, lets a failing model be swapped for the
   next one in the fallback chain.
2. **The rest is relayed natively** (``UpstreamStream.relay``): the platform
   copies it into the response without Python. Python wakes twice per
   ``watch`` interval (4 s by default) to look at what went by
   (``Relay.observe``): that is enough for the idle and total deadlines and,
   from the last bytes (``upstream.Tail``), the finish reason, usage and
   truncation. A framing that rewrites events (the OpenAI API's) has Python
   forward the rest instead, in batches (``forward_batch``, ``_forward_rest``).

Heartbeats (``: ping``) are sent in phase 1, while the model is silent before
its first words: queueing and prompt processing are where long silences
happen (a thinking model streams its reasoning). In phase 2 nothing can be
written between two relayed chunks: workerd's native pipe cannot be paused
without losing the chunk it holds (``pipeTo``'s signal errors the source,
``src/workerd/api/streams/internal.c++``, ``writeLoopAfterFrontOutputLock``),
so a silence mid-answer is bounded by the idle deadline instead, which is
shorter than the usual proxy timeouts.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from edgechat import sse
from edgechat.config import Settings
from edgechat.errors import (
    DeadlineExceeded,
    EdgechatError,
    ModerationUnavailable,
    UpstreamError,
    UpstreamMalformed,
)
from edgechat.models import Model, Usage, cost_usd
from edgechat.moderation import CHECK_FAILURES, Verdict, answer_text
from edgechat.ports import TIMED_OUT, ClientGone, Sink, Streams, UpstreamStream
from edgechat.requests import ChatRequest
from edgechat.upstream import BLANK_LINES, Tail, UpstreamReader

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]
# Checks a finished answer's text (``MODERATION=input,output``).
CheckAnswer = Callable[[str], Awaitable[Verdict]]


class Cooling:
    """The Workers AI models of this isolate that just failed with capacity
    (3040) or quota (3036): skipped until their ``Retry-After`` passed, so a
    request does not wait on a model that said it cannot answer."""

    __slots__ = ("_clock", "_until")

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._until: dict[str, float] = {}

    def mark(self, model: Model, exc: UpstreamError, longest_s: float = math.inf) -> None:
        seconds = min(exc.retry_after or 0, longest_s)
        if exc.binding_code in (3040, 3036) and seconds > 0:
            self._until[model.id] = self._clock() + seconds

    def cool(self, model: Model) -> bool:
        until = self._until.get(model.id)
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[model.id]
            return False
        return True


# Bytes a model may send before its first text (role chunks, empty deltas),
# held back so a fallback leaves nothing of the failed model behind; a stream
# that says nothing in this much is not a usable answer.
MAX_HELD_BYTES = 64 << 10

# How often Python looks at a relayed stream: a quarter of the idle deadline
# (the one deadline that depends on seeing bytes: it fires at most a quarter
# late), at most every 4 s, which is a handful of wakes for a long answer and
# at most 4 s of tokens (tens of KiB) kept by the platform for Python to see.
WATCH_MAX_S = 4.0
WATCH_MIN_S = 0.05


def watch_interval(settings: Settings) -> float:
    return min(WATCH_MAX_S, max(WATCH_MIN_S, settings.idle_timeout_s / 4))


# When Python forwards the stream itself (a framing that rewrites events), it
# takes what arrived in batches instead of waking per token: every 100 ms at
# first, then a tenth of the time the answer has streamed, up to 1 s. The
# first words flow at once; a long answer settles into a wake a second, which
# keeps its CPU near what a short one costs (``bench/v1.mjs`` measures it).
FORWARD_BATCH_S = 0.1
FORWARD_BATCH_MAX_S = 1.0
FORWARD_BATCH_GROWTH = 0.1


def forward_batch(streamed_s: float) -> float:
    """How long the next batch gathers, after ``streamed_s`` of streaming."""
    return min(FORWARD_BATCH_MAX_S, max(FORWARD_BATCH_S, FORWARD_BATCH_GROWTH * streamed_s))


# The most of a stream kept to be stored in the response cache; an answer
# longer than this is not stored.
MAX_RECORDED_BYTES = 1 << 20


class Framing(Protocol):
    """What one endpoint makes of a model's stream. ``/chat`` (``ChatFraming``)
    relays the model's events natively between its own; the OpenAI API
    (``openai_api``) rewrites them, so Python forwards them in batches."""

    # Whether phase 2 is the platform's native copy (``feed`` then never sees
    # those bytes) or Python forwarding what ``feed`` returns.
    relays_natively: bool
    # Written while the model is silent before its first words (b"": nothing).
    ping: bytes

    def opening(self) -> bytes: ...

    def feed(self, data: bytes) -> bytes:
        """The model's bytes as the client gets them."""
        ...

    def whole(self, held: bytes, reader: UpstreamReader) -> bytes:
        """A complete JSON answer (``reader.whole_body``), sent instead of a stream."""
        ...

    def closing(self, between_events: bool) -> bytes:
        """After the model's stream ended well; ``session.outcome`` is complete."""
        ...

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        """The answer failed after the stream began."""
        ...


class ChatFraming:
    """``/chat``: ``meta``, the model's events byte for byte, ``done``/``error``."""

    relays_natively = True
    ping = sse.PING

    __slots__ = ("_session",)

    def __init__(self, session: ChatSession) -> None:
        self._session = session

    def opening(self) -> bytes:
        session = self._session
        model = session.outcome.model or session.first_model
        return sse.event("meta", {"request_id": session.request_id, "model": model.id})

    def feed(self, data: bytes) -> bytes:
        return data

    def whole(self, held: bytes, reader: UpstreamReader) -> bytes:
        # Sent as one event of the model's own shape, so the client reads it like a chunk.
        assert reader.whole_body is not None
        return sse.data(reader.whole_body)

    def closing(self, between_events: bool) -> bytes:
        outcome = self._session.outcome
        assert outcome.model is not None
        done: dict[str, object] = {
            "model": outcome.model.id,
            "finish_reason": outcome.finish_reason,
            "usage": outcome.usage,
            "cost_usd": outcome.cost_usd(),
            "ttft_ms": outcome.ttft_ms,
        }
        if outcome.fallback_from is not None:
            done["fallback_from"] = outcome.fallback_from.id
        if outcome.cached:
            done["cached"] = True
        if outcome.moderation is not None:
            done["moderation"] = outcome.moderation.to_json()
        return _close(between_events) + sse.event("done", done)

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        return _close(between_events) + sse.error(exc)


def _close(between_events: bool) -> bytes:
    return b"" if between_events else sse.CLOSE_EVENT


@dataclass(slots=True)
class Outcome:
    """What happened, for the request log."""

    model: Model | None = None
    fallback_from: Model | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    ttft_ms: float | None = None
    error: EdgechatError | None = None
    client_gone: bool = False
    truncated: bool = False
    # Answered from the response cache, without a model call.
    cached: bool = False
    # The verdict on the finished answer (MODERATION=input,output), or why
    # there is none.
    moderation: Verdict | None = None
    moderation_error: str | None = None

    def cost_usd(self) -> float | None:
        """What the answer cost at list price: nothing from the cache, None
        when the usage or the prices are unknown."""
        if self.cached:
            return 0.0
        if self.model is None or self.usage is None:
            return None
        return cost_usd(self.model, self.usage)


class ChatSession:
    def __init__(
        self,
        request: ChatRequest,
        settings: Settings,
        ai: Streams,
        *,
        request_id: str,
        framing: Callable[[ChatSession], Framing] = ChatFraming,
        ai_options: dict[str, Any] | None = None,
        record: bool = False,
        providers: Streams | None = None,
        cooling: Cooling | None = None,
        check_answer: CheckAnswer | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self._request = request
        self._settings = settings
        self._ai = ai
        self._ai_options = ai_options or {}
        self._providers = providers
        self._cooling = cooling or Cooling(clock)
        self._check_answer = check_answer
        self._clock = clock
        self._sleep = sleep
        self._watch_s = watch_interval(settings)
        self.request_id = request_id
        self.first_model = request.model
        self.max_tokens = request.max_tokens
        # Models that cannot read the request's parameters (tools on Llama)
        # are no fallback; the providers' APIs come after the Workers AI chain.
        fallbacks = settings.fallbacks_after(request.model)
        candidates = [
            request.model,
            *(model for model in fallbacks if request.unfit(model) is None),
            *(
                provider.model
                for provider in settings.providers
                if providers is not None and request.unfit(provider.model) is None
            ),
        ]
        # Skip models cooling down after a capacity or quota failure, unless
        # that would leave nothing to ask.
        warm = [model for model in candidates if not self._cooling.cool(model)]
        self._candidates = warm or candidates
        self._upstream: UpstreamStream | None = None
        self._started = clock()
        # When bytes last came from the model (None: none yet) and when we
        # last wrote to the client, for the idle deadline and the heartbeat.
        self._last_chunk: float | None = None
        self._last_write = self._started
        # Whether the client's stream is known to be between two events.
        self._between_events = True
        # What phase 1 wrote of the model's stream.
        self._head = b""
        # The answering model's whole stream, kept for the response cache
        # (None: not kept, or longer than MAX_RECORDED_BYTES).
        self._recorded: list[bytes] | None = [] if record or check_answer else None
        self._recorded_size = 0
        self.outcome = Outcome()
        self.framing = framing(self)

    async def open(self) -> None:
        """Starts the first model that accepts the call, falling back down the
        chain on fallback-worthy errors; raises the last error if none does."""
        while True:
            model = self._candidates.pop(0)
            inputs = self._request.inputs(model, self._settings.system_prompt)
            # The binding answers with a stream long before the first token;
            # should it not answer at all, the first-token deadline still holds.
            left = self._settings.first_token_timeout_s - (self._clock() - self._started)
            if model.provider is not None and self._providers is not None:
                source, options = self._providers, {}
            else:
                source, options = self._ai, self._ai_options
            try:
                self._upstream = await asyncio.wait_for(
                    source.stream(model.id, inputs, options), timeout=max(left, 0.0)
                )
            except TimeoutError:
                exc = DeadlineExceeded(detail=f"the binding did not answer within {left:.1f} s")
                self.outcome.model = model
                self.outcome.error = exc
                raise exc from None
            except UpstreamError as exc:
                self._cooling.mark(model, exc, self._settings.cooldown_max_s)
                if exc.fallback_worthy and self._candidates:
                    continue
                self.outcome.model = model
                self.outcome.error = exc
                raise
            self.outcome.model = model
            if model is not self.first_model:
                self.outcome.fallback_from = self.first_model
            return

    def replay(self, model: Model, upstream: UpstreamStream) -> None:
        """Answers from the response cache: ``upstream`` holds the stream
        ``model`` sent before; nothing calls a model."""
        self._upstream = upstream
        self._candidates = []
        self.outcome.model = model
        self.outcome.cached = True
        if model is not self.first_model:
            self.outcome.fallback_from = self.first_model

    async def pump(self, sink: Sink) -> None:
        """Writes the whole stream; never raises."""
        try:
            await self._write(sink, self.framing.opening())
            await self._answer_with_fallback(sink)
            if self._check_answer is not None:
                await self._moderate_answer()
            await self._write(sink, self.framing.closing(self._between_events))
        except ClientGone:
            self.outcome.client_gone = True
        except EdgechatError as exc:
            self.outcome.error = exc
            await self._final_error(sink, exc)
        except Exception as exc:
            # Unexpected: the client gets the generic error, the log the detail.
            self.outcome.error = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
            await self._final_error(sink, self.outcome.error)
        finally:
            await self._finish(sink)

    async def complete(self) -> None:
        """Reads the whole answer without writing anything (a framing whose
        result is taken at the end); raises the ``EdgechatError`` that ended it."""
        sink = _NO_SINK
        try:
            await self._answer_with_fallback(sink)
            self.framing.closing(self._between_events)
        except EdgechatError as exc:
            self.outcome.error = exc
            raise
        except Exception as exc:
            self.outcome.error = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
            raise self.outcome.error from exc
        finally:
            await self._finish(sink)

    async def abandon(self) -> None:
        """Stops the model call (a refused request); the session ends here."""
        await self._release_upstream()

    async def _moderate_answer(self) -> None:
        """Checks the finished answer before ``done``: the verdict goes into
        ``done``, a failed check follows ``MODERATION_FAIL``."""
        assert self._check_answer is not None
        try:
            if self._recorded is None:
                raise ValueError(f"the answer is longer than {MAX_RECORDED_BYTES} bytes")
            answer = answer_text(b"".join(self._recorded))
            self.outcome.moderation = await self._check_answer(answer)
        except CHECK_FAILURES as exc:
            self.outcome.moderation_error = f"{type(exc).__name__}: {exc}"
            if self._settings.moderation_fail_closed:
                raise ModerationUnavailable(detail=self.outcome.moderation_error) from exc

    async def _finish(self, sink: Sink) -> None:
        if self._upstream is not None:
            await self._upstream.cancel()
        await sink.close()

    def recorded(self) -> bytes | None:
        """The answering model's whole stream, when it was kept and the
        answer is complete enough to be given again: ended by ``stop`` or
        ``length``, no error, no tool call, not from the cache itself."""
        outcome = self.outcome
        if (
            self._recorded is None
            or outcome.cached
            or outcome.error is not None
            or outcome.client_gone
            or outcome.truncated
            or outcome.finish_reason not in ("stop", "length", None)
        ):
            return None
        body = b"".join(self._recorded)
        # A forced tool call may end with "stop". JSON escapes every quote in
        # a model's text, so these bytes can only be a call.
        if b'"tool_calls":[{' in body or b'"tool_calls": [{' in body:
            return None
        return body

    def _record(self, data: bytes) -> None:
        if self._recorded is None:
            return
        self._recorded_size += len(data)
        if self._recorded_size > MAX_RECORDED_BYTES:
            self._recorded = None
        else:
            self._recorded.append(data)

    async def _answer_with_fallback(self, sink: Sink) -> None:
        while True:
            try:
                await self._answer(sink)
                return
            except UpstreamError as exc:
                if self.outcome.model is not None:
                    self._cooling.mark(self.outcome.model, exc, self._settings.cooldown_max_s)
                # A model may be switched only while the client has seen none of it.
                if self.outcome.ttft_ms is not None or not exc.fallback_worthy:
                    raise
                if not self._candidates:
                    raise
                await self._release_upstream()
                self._last_chunk = None  # the next model's silence is its own
                await self.open()

    async def _answer(self, sink: Sink) -> None:
        upstream = self._upstream
        assert upstream is not None
        try:
            reader = await self._first_words(upstream, sink)
            if reader is None:
                if self.framing.relays_natively:
                    reader = await self._relay_rest(upstream, sink)
                else:
                    reader = await self._forward_rest(upstream, sink)
        except UpstreamError:
            # The upstream failed because we stopped it (or the client left).
            if self.outcome.client_gone:
                raise ClientGone() from None
            raise
        self.outcome.usage = reader.usage
        self.outcome.finish_reason = reader.finish_reason
        # A whole JSON answer is complete by itself; a stream says so by its end.
        self.outcome.truncated = (
            reader.whole_body is None and not reader.saw_done and reader.finish_reason is None
        )

    # --- phase 1: Python reads until the model says something ----------------

    async def _first_words(self, upstream: UpstreamStream, sink: Sink) -> UpstreamReader | None:
        """Reads and holds the model's first bytes. Returns None once text
        came (the bytes are written, the rest is for phase 2), or the
        finished reader when the stream ended first."""
        reader = UpstreamReader()
        held: list[bytes] = []
        held_size = 0
        while True:
            now = self._clock()
            data = await upstream.read(min(self._next_deadline(), self._next_ping()) - now)
            if data is TIMED_OUT:
                await self._on_time(upstream, sink, ping=True)
                continue
            if data is None:
                break
            self._last_chunk = self._clock()
            held.append(data)
            held_size += len(data)
            if reader.feed(data):
                self._first_text()
                self._head = b"".join(held)
                self._record(self._head)
                await self._write(sink, self.framing.feed(self._head))
                return None
            if held_size > MAX_HELD_BYTES:
                raise UpstreamMalformed(detail=f"no text in the first {held_size} bytes")
        reader.finish()
        if not reader.produced:
            raise UpstreamMalformed(
                detail=f"no text from the model ({reader.malformed_lines} malformed lines)"
            )
        self._first_text()
        self._head = b"".join(held)
        self._record(self._head)
        if reader.whole_body is not None:
            # One JSON document although a stream was asked for.
            await self._write(sink, self.framing.whole(self._head, reader))
        else:
            await self._write(sink, self.framing.feed(self._head))
            self._between_events = self._head.endswith(BLANK_LINES)
        return reader

    def _first_text(self) -> None:
        self.outcome.ttft_ms = round((self._clock() - self._started) * 1000, 1)

    # --- phase 2: the platform relays, Python looks in now and then ----------

    async def _relay_rest(self, upstream: UpstreamStream, sink: Sink) -> UpstreamReader:
        tail = Tail()
        tail.add(self._head)
        self._between_events = False  # unknown until the observer has seen the end
        relay = await upstream.relay(sink)
        # Each turn: rest until the next look (unless the copy finishes), then
        # take everything that went by meanwhile, or wait for the next bytes
        # while the deadlines allow. Two wakes per watch interval, whatever the
        # number of tokens.
        ended = False  # the stream ended; the copy may still be writing its end
        while True:
            now = self._clock()
            if await relay.rest(min(now + self._watch_s, self._next_deadline()) - now):
                break
            if ended:
                await self._on_time(upstream, sink, ping=False)
                continue
            now = self._clock()
            seen = await relay.observe(self._next_deadline() - now)
            if seen is None:
                ended = True
                self._last_chunk = None  # a slow client is no silent model
            elif seen is not TIMED_OUT:
                tail.add(seen)
                self._record(seen)
                self._last_chunk = self._clock()
            await self._on_time(upstream, sink, ping=False)
        await relay.finished()
        while (seen := await relay.observe(math.inf)) is not None and seen is not TIMED_OUT:
            tail.add(seen)
            self._record(seen)
        self._between_events = tail.between_events
        return tail.read()

    # --- phase 2, when the framing rewrites events: Python forwards ----------

    async def _forward_rest(self, upstream: UpstreamStream, sink: Sink) -> UpstreamReader:
        """Takes what arrived, writes what the framing makes of it, then lets
        the next batch gather (``forward_batch``): a few wakes a second,
        whatever the token rate."""
        tail = Tail()
        tail.add(self._head)
        await upstream.coalesce()
        began = self._clock()
        while True:
            data = await upstream.read(self._next_deadline() - self._clock())
            if data is TIMED_OUT:
                await self._on_time(upstream, sink, ping=False)
                continue
            if data is None:
                break
            self._last_chunk = now = self._clock()
            tail.add(data)
            self._record(data)
            out = self.framing.feed(data)
            if out:
                await self._write(sink, out)
            await self._check_deadlines(upstream, now)
            batch = forward_batch(now - began)
            pause = min(now + batch, self._next_deadline()) - self._clock()
            if pause > 0:
                await self._sleep(pause)
        return tail.read()

    # --- deadlines and heartbeats -------------------------------------------

    async def _on_time(self, upstream: UpstreamStream, sink: Sink, *, ping: bool) -> None:
        """Keeps the deadlines (aborting the upstream when one passed) and, if
        ``ping``, the heartbeat."""
        now = self._clock()
        await self._check_deadlines(upstream, now)
        if ping and now >= self._next_ping():
            await self._write(sink, self.framing.ping)

    def _next_ping(self) -> float:
        if not self.framing.ping:
            return math.inf  # a whole answer: nothing is written before it
        # Bytes held back in phase 1 do not count: the client has not seen them.
        return self._last_write + self._settings.heartbeat_s

    def _next_deadline(self) -> float:
        s = self._settings
        deadline = self._started + s.total_timeout_s
        if self.outcome.ttft_ms is None:
            deadline = min(deadline, self._started + s.first_token_timeout_s)
        if self._last_chunk is not None:
            deadline = min(deadline, self._last_chunk + s.idle_timeout_s)
        return deadline

    async def _check_deadlines(self, upstream: UpstreamStream, now: float) -> None:
        s = self._settings
        if now - self._started >= s.total_timeout_s:
            reason = f"total deadline of {s.total_timeout_s} s"
        elif self.outcome.ttft_ms is None and now - self._started >= s.first_token_timeout_s:
            reason = f"no first token within {s.first_token_timeout_s} s"
        elif self._last_chunk is not None and now - self._last_chunk >= s.idle_timeout_s:
            reason = f"upstream silent for {s.idle_timeout_s} s"
        else:
            return
        await upstream.cancel()
        raise DeadlineExceeded(detail=reason)

    # --- writing ------------------------------------------------------------

    async def _write(self, sink: Sink, data: bytes) -> None:
        if not data:
            return
        try:
            await sink.write(data)
        except ClientGone:
            self.outcome.client_gone = True
            raise
        self._last_write = self._clock()

    async def _final_error(self, sink: Sink, exc: EdgechatError) -> None:
        try:
            await self._write(sink, self.framing.failure(exc, self._between_events))
        except ClientGone:
            self.outcome.client_gone = True

    async def _release_upstream(self) -> None:
        # What a failed model sent is no part of the answer to keep.
        self._recorded = [] if self._recorded is not None else None
        self._recorded_size = 0
        if self._upstream is not None:
            await self._upstream.cancel()
            self._upstream = None


class _NoSink:
    """Where nothing is written (a whole answer is returned, not streamed)."""

    async def write(self, data: bytes) -> None:
        raise AssertionError("nothing is written while a whole answer is read")

    async def close(self) -> None:
        return None


_NO_SINK = _NoSink()
