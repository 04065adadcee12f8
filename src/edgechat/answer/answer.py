"""One answer to one question: call the model (with fallback down the
``Candidates``), relay its stream through a ``Framing``, keep the
``Deadlines``, and end with exactly one closing (``done``/``error``).

Every chunk of a model's stream is about one token, and at the edge every
microsecond Python spends on one is billed CPU (the Free plan allows 10 ms
per request), so Python does not touch the stream per token:

1. **Until the model says something**, Python reads the stream itself and
   holds those bytes back: an exact time to first token, the first-token
   deadline, ``: ping`` while the model is silent, and - since the client has
   seen nothing of the model yet - a failing model swapped for the next one.
2. **The rest is relayed natively** (``UpstreamStream.relay``): the platform
   copies it into the response, and Python wakes twice per ``watch``
   interval to keep the idle and total deadlines and read the stream's end
   (``upstream.Tail``). A framing that rewrites events (the OpenAI API's)
   has Python forward the rest in growing batches instead (``forward_batch``).

In phase 2 nothing can be written between two relayed chunks (a native pipe
cannot be paused without losing the chunk it holds), so a silence mid-answer
is bounded by the idle deadline instead of heartbeats.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from edgechat.answer.candidates import Candidates
from edgechat.answer.deadlines import Deadlines
from edgechat.answer.delivery import Delivery, Writer
from edgechat.answer.framing import Framing, Outcome, Similar
from edgechat.answer.moderation import CHECK_FAILURES, Verdict
from edgechat.answer.recording import Recording
from edgechat.answer.upstream import Redaction
from edgechat.core.errors import EdgechatError, ModerationUnavailable
from edgechat.core.faults import DeadlineExceeded, NoFirstToken, UpstreamError
from edgechat.core.models import Model
from edgechat.core.ports import ClientGone, Sink, Streams, UpstreamStream
from edgechat.core.requests import ChatRequest

__all__ = ["Answer", "CheckAnswer", "Race", "Sources"]

# Checks a finished answer's recorded stream (``MODERATION=input,output``);
# None: the answer was too long to record.
CheckAnswer = Callable[[bytes | None], Awaitable[Verdict]]


class Race(Protocol):
    """What may answer in a model's place before its first bytes (the
    semantic cache, ``similar``): ``beside`` wraps each model's stream as
    it opens, and calls ``replaced`` when a kept answer took its place."""

    def beside(
        self, upstream: UpstreamStream, replaced: Callable[[Model, Similar], None]
    ) -> UpstreamStream: ...


@dataclass(frozen=True, slots=True)
class Sources:
    """Where answers come from: Workers AI (with ``AI.run``'s options) and,
    after its chain, the providers' own APIs."""

    ai: Streams
    ai_options: Mapping[str, Any] = field(default_factory=dict)
    providers: Streams | None = None
    # The secrets nothing relayed may hold.
    redaction: Redaction = field(default_factory=lambda: Redaction(()))

    def open(
        self, model: Model, inputs: dict[str, Any], *, later: bool = False
    ) -> Awaitable[UpstreamStream]:
        """Starts ``model``'s call; ``later``: another candidate comes after
        it, so a busy Workers AI model fails at once (``rejectIfBusy``, 3040)
        instead of queueing for capacity
        (https://developers.cloudflare.com/changelog/post/2026-09-17-reject-if-busy/)."""
        if model.provider is not None and self.providers is not None:
            return self.providers.stream(model.id, inputs, {})
        options = dict(self.ai_options)
        if later:
            options["rejectIfBusy"] = True
        return self.ai.stream(model.id, inputs, options)


class Answer:
    """``open`` (or ``replay``) first; then ``stream`` or ``whole`` once."""

    __slots__ = (
        "_between_events",
        "_candidates",
        "_check_answer",
        "_deadlines",
        "_framing",
        "_race",
        "_request",
        "_settings",
        "_sleep",
        "_sources",
        "_upstream",
        "outcome",
        "recording",
    )

    def __init__(
        self,
        request: ChatRequest,
        framing: Framing,
        sources: Sources,
        candidates: Candidates,
        deadlines: Deadlines,
        *,
        record: bool = False,
        check_answer: CheckAnswer | None = None,
        race: Race | None = None,
    ) -> None:
        self._request = request
        self._race = race
        self._framing = framing
        self._sources = sources
        self._candidates = candidates
        self._deadlines = deadlines
        self._settings = deadlines.settings
        self._check_answer = check_answer
        self._upstream: UpstreamStream | None = None
        # Whether the client's stream is known to be between two events.
        self._between_events = True
        self.recording = Recording(record or check_answer is not None)
        self.outcome = Outcome()

    # --- before the reply: a model that takes the call -----------------------

    async def open(self) -> None:
        """Starts the first candidate that takes the call, falling back on
        fallback-worthy errors; raises the last error if none does."""
        while True:
            model = self._candidates.next()
            inputs = self._request.inputs(model, self._settings.system_prompt)
            # The binding answers with a stream long before the first token;
            # should it not answer at all, the first-token deadline still holds.
            self._deadlines.asking()
            left = self._deadlines.first_token_left()
            try:
                self._upstream = await asyncio.wait_for(
                    self._sources.open(model, inputs, later=bool(self._candidates)),
                    timeout=max(left, 0.0),
                )
            except TimeoutError:
                exc = self._silent(model, left)
                if exc.fallback_worthy and self._candidates:
                    continue
                self.outcome.model, self.outcome.error = model, exc
                raise exc from None
            except UpstreamError as exc:
                self._candidates.failed(model, exc)
                if exc.fallback_worthy and self._candidates:
                    continue
                self.outcome.model, self.outcome.error = model, exc
                raise
            if self._race is not None:
                self._upstream = self._race.beside(self._upstream, self._replayed)
            self._answering(model)
            return

    def _silent(self, model: Model, waited: float) -> DeadlineExceeded:
        detail = f"{model.id} did not answer within {waited:.1f} s"
        if self._deadlines.first_token_left() <= 0 < self._deadlines.total_left():
            return NoFirstToken(detail=detail)
        return DeadlineExceeded(detail=detail)

    def replay(self, model: Model, upstream: UpstreamStream) -> None:
        """Answers from the response cache: ``upstream`` holds the stream
        ``model`` sent before; nothing calls a model."""
        self._upstream = upstream
        self._replayed(model)

    def _replayed(self, model: Model, similar: Similar | None = None) -> None:
        """The answer is a kept one (``similar``: a similar question's),
        ``model``'s; no other model is asked."""
        self._candidates.clear()
        self.outcome.cached = True
        self.outcome.similar = similar
        self._answering(model)
        if similar is not None:
            # Another model of the family may have given it: no fallback.
            self.outcome.fallback_from = None

    def _answering(self, model: Model) -> None:
        self.outcome.model = model
        if model is not self._request.model:
            self.outcome.fallback_from = self._request.model

    async def abandon(self) -> None:
        """Stops the model call (a refused request); the answer ends here."""
        await self._release()

    # --- the reply ------------------------------------------------------------

    async def stream(self, sink: Sink) -> None:
        """Writes the whole stream; never raises."""
        outcome, framing = self.outcome, self._framing
        writer = Writer(sink, self._deadlines, outcome)
        try:
            await writer.write(framing.opening(outcome.model or self._request.model))
            await self._answer_with_fallback(writer)
            if self._check_answer is not None:
                await self._judge()
            await writer.write(framing.closing(outcome, self._between_events))
        except ClientGone:
            outcome.client_gone = True
        except Exception as exc:
            # Unexpected errors: the client gets the generic one, the log the detail.
            if not isinstance(exc, EdgechatError):
                exc = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
            outcome.error = exc
            with contextlib.suppress(ClientGone):
                await writer.write(framing.failure(exc, self._between_events))
        finally:
            await self._finish(sink)

    async def whole(self) -> None:
        """Reads the whole answer without writing anything (a framing whose
        result is taken at the end); raises the ``EdgechatError`` that ended it."""
        try:
            await self._answer_with_fallback(Writer(_NO_SINK, self._deadlines, self.outcome))
            self._framing.closing(self.outcome, self._between_events)
        except EdgechatError as exc:
            self.outcome.error = exc
            raise
        except Exception as exc:
            self.outcome.error = EdgechatError(detail=f"{type(exc).__name__}: {exc}")
            raise self.outcome.error from exc
        finally:
            await self._finish(_NO_SINK)

    async def _judge(self) -> None:
        """The output check, before the closing: its verdict goes into it, a
        failed check follows ``MODERATION_FAIL``."""
        assert self._check_answer is not None
        try:
            self.outcome.moderation = await self._check_answer(self.recording.body())
        except CHECK_FAILURES as exc:
            self.outcome.moderation_error = f"{type(exc).__name__}: {exc}"
            if self._settings.moderation_fail_closed:
                raise ModerationUnavailable(detail=self.outcome.moderation_error) from exc

    async def _answer_with_fallback(self, writer: Writer) -> None:
        while True:
            try:
                await self._answer(writer)
                return
            except UpstreamError as exc:
                if self.outcome.model is not None:
                    self._candidates.failed(self.outcome.model, exc)
                # A model may be switched only while the client has seen none of it.
                if self.outcome.ttft_ms is not None or not exc.fallback_worthy:
                    raise
                if not self._candidates:
                    raise
                await self._release()
                await self.open()

    async def _answer(self, writer: Writer) -> None:
        upstream = self._upstream
        assert upstream is not None
        framing, deadlines = self._framing, self._deadlines
        delivery = Delivery(
            upstream,
            writer,
            framing,
            deadlines,
            self.recording,
            redact=self._sources.redaction,
        )
        try:
            reader = await delivery.run()
        except UpstreamError:
            # The upstream failed because we stopped it (or the client left).
            if self.outcome.client_gone:
                raise ClientGone() from None
            raise
        finally:
            self._between_events = delivery.between_events
        self.outcome.usage = reader.usage
        self.outcome.finish_reason = reader.finish_reason
        self.outcome.ended_ms = deadlines.elapsed_ms()
        # A whole JSON answer is complete by itself; a stream says so by its end.
        self.outcome.truncated = (
            reader.whole_body is None and not reader.saw_done and reader.finish_reason is None
        )

    async def _release(self) -> None:
        self.recording.restart()
        if self._upstream is not None:
            await self._upstream.cancel()
            self._upstream = None

    async def _finish(self, sink: Sink) -> None:
        if self._upstream is not None:
            await self._upstream.cancel()
        await sink.close()


class _NoSink:
    """Where nothing is written (a whole answer is returned, not streamed)."""

    async def write(self, data: bytes) -> None:
        raise AssertionError("nothing is written while a whole answer is read")

    async def close(self) -> None:
        return None


_NO_SINK = _NoSink()
