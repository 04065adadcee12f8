"""One chat answer: call the model (with fallback), relay its stream as our
events, keep the deadlines, and end with exactly one ``done`` or ``error``.

The relay is the hot path: every upstream chunk (about one token) costs billed
CPU at the edge. The platform pipes the model's stream into the response
natively and calls ``_on_chunk`` synchronously per chunk: one parse and one
encode, no await, no task switch. Deadlines and heartbeats live in a separate
watchdog that wakes a few times per deadline, not once per chunk.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from edgechat import sse
from edgechat.config import Settings
from edgechat.errors import (
    DeadlineExceeded,
    EdgechatError,
    UpstreamError,
    UpstreamMalformed,
)
from edgechat.models import Model, Usage, WireFormat, cost_usd
from edgechat.ports import Ai, ClientGone, Sink, UpstreamStream
from edgechat.upstream import Delta, DeltaKind, UpstreamReader
from edgechat.validation import ChatRequest

Clock = Callable[[], float]
_CONTENT = DeltaKind.CONTENT

# The watchdog wakes this many times per shortest deadline or heartbeat, so
# each fires at most a quarter late; never more often than every 50 ms.
_WATCH_DIVISOR = 4
_WATCH_MIN_S = 0.05


def upstream_inputs(request: ChatRequest, settings: Settings, model: Model) -> dict[str, Any]:
    """The binding's inputs: the conversation as chat messages under our system prompt."""
    messages = [{"role": "system", "content": settings.system_prompt}]
    messages += [{"role": m.role, "content": m.content} for m in request.messages]
    inputs: dict[str, Any] = {"messages": messages, "stream": True}
    if model.wire_format is WireFormat.OPENAI:
        inputs["max_completion_tokens"] = request.max_tokens
        if request.reasoning is False:
            inputs["chat_template_kwargs"] = {"enable_thinking": False}
    else:
        inputs["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        inputs["temperature"] = request.temperature
    return inputs


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


class ChatSession:
    def __init__(
        self,
        request: ChatRequest,
        settings: Settings,
        ai: Ai,
        *,
        request_id: str,
        clock: Clock = time.monotonic,
    ) -> None:
        self._request = request
        self._settings = settings
        self._ai = ai
        self._clock = clock
        self.request_id = request_id
        self.first_model = request.model
        self._candidates = [request.model, *settings.fallbacks_after(request.model)]
        self._upstream: UpstreamStream | None = None
        self._started = clock()
        # Progress counters: the hot path only counts; the watchdog turns
        # counts into times when it wakes, so no clock is read per chunk.
        self._chunks = 0
        self._writes = 0
        self._expired: DeadlineExceeded | None = None
        self._client_gone = False
        self._reader = UpstreamReader()
        self.outcome = Outcome()

    async def open(self) -> None:
        """Starts the first model that accepts the call, falling back down the
        chain on fallback-worthy errors; raises the last error if none does."""
        while True:
            model = self._candidates.pop(0)
            inputs = upstream_inputs(self._request, self._settings, model)
            # The binding answers with a stream long before the first token;
            # should it not answer at all, the first-token deadline still holds.
            left = self._settings.first_token_timeout_s - (self._clock() - self._started)
            try:
                self._upstream = await asyncio.wait_for(
                    self._ai.stream(model.id, inputs), timeout=max(left, 0.0)
                )
            except TimeoutError:
                exc = DeadlineExceeded(f"the binding did not answer within {left:.1f} s")
                self.outcome.model = model
                self.outcome.error = exc
                raise exc from None
            except UpstreamError as exc:
                if exc.fallback_worthy and self._candidates:
                    continue
                self.outcome.model = model
                self.outcome.error = exc
                raise
            self.outcome.model = model
            if model is not self.first_model:
                self.outcome.fallback_from = self.first_model
            return

    async def pump(self, sink: Sink) -> None:
        """Writes the whole event stream; never raises."""
        watchdog = asyncio.ensure_future(self._watch(sink))
        try:
            await self._write(sink, sse.event("meta", self._meta()))
            await self._relay_with_fallback(sink)
            await self._write(sink, sse.event("done", self._done()))
        except ClientGone:
            self.outcome.client_gone = True
        except EdgechatError as exc:
            self.outcome.error = exc
            await self._final_error(sink, exc)
        except Exception as exc:
            # Unexpected: the client gets the generic error, the log the detail.
            self.outcome.error = EdgechatError(f"{type(exc).__name__}: {exc}")
            await self._final_error(sink, self.outcome.error)
        finally:
            watchdog.cancel()
            if self._upstream is not None:
                await self._upstream.cancel()
            await sink.close()

    def _meta(self) -> dict[str, object]:
        model = self.outcome.model or self.first_model
        return {"request_id": self.request_id, "model": model.id}

    def _done(self) -> dict[str, object]:
        outcome = self.outcome
        assert outcome.model is not None
        done: dict[str, object] = {
            "model": outcome.model.id,
            "finish_reason": outcome.finish_reason,
            "usage": outcome.usage,
            "cost_usd": cost_usd(outcome.model, outcome.usage) if outcome.usage else None,
            "ttft_ms": outcome.ttft_ms,
        }
        if outcome.fallback_from is not None:
            done["fallback_from"] = outcome.fallback_from.id
        return done

    async def _relay_with_fallback(self, sink: Sink) -> None:
        while True:
            try:
                await self._relay(sink)
                return
            except UpstreamError as exc:
                # A model may be switched only while the client has seen no text.
                if self.outcome.ttft_ms is not None or not exc.fallback_worthy:
                    raise
                if not self._candidates:
                    raise
                await self._release_upstream()
                await self.open()

    async def _relay(self, sink: Sink) -> None:
        upstream = self._upstream
        assert upstream is not None
        reader = self._reader = UpstreamReader()
        try:
            await upstream.pipe(sink, self._on_chunk)
            if self._client_gone:
                raise ClientGone()
            if self._expired is not None:
                raise self._expired
            tail = self._encode(reader.finish())
            if tail:
                await self._write(sink, tail)
        except UpstreamError:
            # The upstream failed because the watchdog stopped it.
            if self._client_gone:
                raise ClientGone() from None
            if self._expired is not None:
                raise self._expired from None
            raise
        finally:
            self.outcome.usage = reader.usage
            self.outcome.finish_reason = reader.finish_reason
        if not reader.produced:
            raise UpstreamMalformed(
                f"no text from the model ({reader.malformed_lines} malformed lines)"
            )
        self.outcome.truncated = not reader.saw_done and reader.finish_reason is None

    def _on_chunk(self, chunk: bytes) -> bytes | None:
        """The hot path, called synchronously once per upstream chunk: the
        events to send for it, or None."""
        self._chunks += 1
        deltas = self._reader.feed(chunk)
        if not deltas:
            return None
        self._writes += 1
        return self._encode(deltas)

    def _encode(self, deltas: list[Delta]) -> bytes:
        if not deltas:
            return b""
        if self.outcome.ttft_ms is None:
            self.outcome.ttft_ms = round((self._clock() - self._started) * 1000, 1)
        if len(deltas) == 1:
            kind, text = deltas[0]
            return sse.token(text) if kind is _CONTENT else sse.reasoning(text)
        return b"".join(
            sse.token(text) if kind is _CONTENT else sse.reasoning(text) for kind, text in deltas
        )

    async def _write(self, sink: Sink, data: bytes) -> None:
        self._writes += 1
        await sink.write(data)

    async def _final_error(self, sink: Sink, exc: EdgechatError) -> None:
        try:
            await sink.write(sse.error(exc))
        except ClientGone:
            self.outcome.client_gone = True

    async def _release_upstream(self) -> None:
        if self._upstream is not None:
            await self._upstream.cancel()
            self._upstream = None

    async def _watch(self, sink: Sink) -> None:
        """Heartbeats while the model is silent; aborts the upstream on a deadline."""
        s = self._settings
        period = min(s.heartbeat_s, s.first_token_timeout_s, s.idle_timeout_s)
        tick = max(_WATCH_MIN_S, period / _WATCH_DIVISOR)
        clock = self._clock
        chunks_seen, last_chunk = 0, None
        writes_seen, last_write = self._writes, self._started
        while True:
            await asyncio.sleep(tick)
            now = clock()
            if self._chunks != chunks_seen:
                chunks_seen, last_chunk = self._chunks, now
            if self._writes != writes_seen:
                writes_seen, last_write = self._writes, now
            expired = self._deadline_passed(now, last_chunk)
            if expired is not None:
                self._expired = DeadlineExceeded(expired)
                if self._upstream is not None:
                    await self._upstream.cancel()
                return
            if now - last_write >= s.heartbeat_s:
                try:
                    await self._write(sink, sse.PING)
                except ClientGone:
                    # While the model is silent the ping is the only write, so
                    # it is what notices the client left: stop paying for it.
                    self._client_gone = True
                    if self._upstream is not None:
                        await self._upstream.cancel()
                    return
                writes_seen, last_write = self._writes, now

    def _deadline_passed(self, now: float, last_chunk: float | None) -> str | None:
        s = self._settings
        if now - self._started >= s.total_timeout_s:
            return f"total deadline of {s.total_timeout_s} s"
        if self.outcome.ttft_ms is None and now - self._started >= s.first_token_timeout_s:
            return f"no first token within {s.first_token_timeout_s} s"
        if last_chunk is not None and now - last_chunk >= s.idle_timeout_s:
            return f"upstream silent for {s.idle_timeout_s} s"
        return None
