"""One model's stream delivered to the client, in the two phases described
in ``answer.py``: its first words read and held back by Python, then the
rest relayed natively while Python looks in now and then, or forwarded by
Python in growing batches when the framing rewrites events. Both phases
keep the deadlines; the delivery ends with a reader of how the stream ended.
"""

from __future__ import annotations

import contextlib
import math

from edgechat.answer.deadlines import Deadlines
from edgechat.answer.framing import Framing, Outcome, Whole
from edgechat.answer.recording import Recording
from edgechat.answer.upstream import (
    BLANK_LINES,
    DeltaKind,
    Redaction,
    Tail,
    UpstreamReader,
    model_events,
)
from edgechat.config.settings import Settings
from edgechat.core import sse
from edgechat.core.faults import UpstreamMalformed
from edgechat.core.models import Model
from edgechat.core.ports import TIMED_OUT, ClientGone, Forward, Sink, TimedOut, UpstreamStream

__all__ = ["MAX_HELD_BYTES", "Delivery", "ModelEvents", "Writer", "forward_batch", "watch_interval"]


# Bytes a model may send before its first text (role chunks, empty deltas),
# held back so a fallback leaves nothing of the failed model behind; a stream
# that says nothing in this much is not a usable answer.
MAX_HELD_BYTES = 64 << 10

# How often Python looks at a relayed stream: a quarter of the idle deadline
# (it then fires at most a quarter late), at most every 4 s: a handful of
# wakes for a long answer, and at most 4 s of tokens kept for Python to see.
WATCH_MAX_S = 4.0
WATCH_MIN_S = 0.05


def watch_interval(settings: Settings) -> float:
    return min(WATCH_MAX_S, max(WATCH_MIN_S, settings.idle_timeout_s / 4))


# Python forwarding a stream takes what arrived every 100 ms at first, then
# every tenth of the time streamed so far, up to 1 s: the first words flow at
# once, and a long answer costs about what a short one does (measured with
# bench/v1.mjs, now in git history).
FORWARD_BATCH_S = 0.1
FORWARD_BATCH_MAX_S = 1.0
FORWARD_BATCH_GROWTH = 0.1


def forward_batch(streamed_s: float) -> float:
    """How long the next batch gathers, after ``streamed_s`` of streaming."""
    return min(FORWARD_BATCH_MAX_S, max(FORWARD_BATCH_S, FORWARD_BATCH_GROWTH * streamed_s))


class Writer:
    """The client's side of one answer: what is written, when (for the
    heartbeat), and whether the client is still there."""

    __slots__ = ("_deadlines", "outcome", "sink")

    def __init__(self, sink: Sink, deadlines: Deadlines, outcome: Outcome) -> None:
        self.sink = sink
        self._deadlines = deadlines
        self.outcome = outcome

    async def write(self, data: bytes) -> None:
        if not data:
            return
        try:
            await self.sink.write(data)
        except ClientGone:
            self.outcome.client_gone = True
            raise
        self._deadlines.wrote()

    async def forward(
        self, batches: Forward, out: bytes, after: float, within: float
    ) -> bytes | TimedOut | None:
        """``out`` written and the next batch read, in one wait
        (``ports.Forward.next``)."""
        try:
            data = await batches.next(out, after, within)
        except ClientGone:
            self.outcome.client_gone = True
            raise
        if out:
            self._deadlines.wrote()  # once the batch after it came: close enough for a heartbeat
        return data


class ModelEvents:
    """What Python lets through of one model's stream: its complete events
    (with what came before them), only the model's (``upstream.model_events``
    raises on anything else), and, where Python forwards them, without a
    configured secret. Natively relayed bytes go out as they came, so only
    checked; ``end`` also takes an event the stream left without its blank
    line."""

    __slots__ = ("_redact", "_split")

    def __init__(self, redact: Redaction | None) -> None:
        self._split = sse.EventSplitter()
        self._redact = redact

    def __call__(self, data: bytes, *, end: bool = False) -> bytes:
        whole = model_events(self._split.feed(data))
        if end:
            rest = self._split.finish()
            if rest.strip():
                # The stream stopped before this event's blank line: whole, it
                # still goes out; cut off inside, it is a truncation (the
                # tail says so), not something foreign.
                with contextlib.suppress(UpstreamMalformed):
                    whole += model_events(rest + b"\n\n")
        return self.redacted(whole)

    def redacted(self, whole: bytes) -> bytes:
        """Complete model events as they may go out."""
        return self._redact(whole) if whole and self._redact is not None else whole


class Delivery:
    """``run`` once per model; ``between_events`` says, even after a failure,
    whether the client's stream is known to be between two events."""

    __slots__ = (
        "_deadlines",
        "_events",
        "_framing",
        "_native",
        "_outcome",
        "_recording",
        "_redact",
        "_upstream",
        "_writer",
        "between_events",
    )

    def __init__(
        self,
        upstream: UpstreamStream,
        writer: Writer,
        framing: Framing,
        deadlines: Deadlines,
        recording: Recording,
        *,
        redact: Redaction,
    ) -> None:
        self._upstream = upstream
        self._writer = writer
        self._framing = framing
        self._deadlines = deadlines
        self._recording = recording
        self._redact = redact
        self._outcome = outcome = writer.outcome
        # A provider's stream is never relayed natively: Python sees every
        # event of it first (``redact``), since a provider is not the model's
        # own wire format behind a binding.
        assert outcome.model is not None
        self._native = framing.relays_natively and outcome.model.provider is None
        self._events = ModelEvents(None if self._native else redact)
        self.between_events = True

    async def run(self) -> UpstreamReader:
        first = await self._first_words()
        if isinstance(first, UpstreamReader):
            return first
        if self._native:
            return await self._relay_rest(first)
        return await self._forward_rest(first)

    # --- phase 1: Python reads until the model says something ----------------

    async def _first_words(self) -> UpstreamReader | bytes:
        """Reads and holds the model's first bytes. Returns them once text
        came (they are written; the rest is for phase 2), or the finished
        reader when the stream ended first."""
        upstream, deadlines = self._upstream, self._deadlines
        reader = UpstreamReader()
        held: list[bytes] = []
        held_size = 0
        while True:
            wake = min(deadlines.next(), deadlines.next_ping(bool(self._framing.ping)))
            data = await upstream.read(wake - deadlines.now())
            if data is TIMED_OUT:
                await deadlines.keep(upstream)
                if deadlines.now() >= deadlines.next_ping(bool(self._framing.ping)):
                    await self._writer.write(self._framing.ping)
                continue
            if data is None:
                break
            deadlines.heard()
            held.append(data)
            held_size += len(data)
            if reader.feed(data):
                head = b"".join(held)
                await self._write_first(head, end=False)
                return head
            if held_size > MAX_HELD_BYTES:
                raise UpstreamMalformed(detail=f"no text in the first {held_size} bytes")
        deltas = reader.finish()
        if not reader.produced:
            raise UpstreamMalformed(
                detail=f"no text from the model ({reader.malformed_lines} malformed lines)"
            )
        head = b"".join(held)
        if reader.whole_body is None:
            await self._write_first(head, end=True)
            self.between_events = not self._native or head.endswith(BLANK_LINES)
            return reader
        if self._redact.holds_one(head):
            raise UpstreamMalformed(detail="an answer holding a configured secret")
        # One JSON document although a stream was asked for.
        whole = Whole(
            body=reader.whole_body,
            content="".join(text for kind, text in deltas if kind is DeltaKind.CONTENT),
            reasoning="".join(text for kind, text in deltas if kind is DeltaKind.REASONING),
            tool_calls=reader.tool_calls,
            finish_reason=reader.finish_reason,
        )
        await self._writer.write(self._framing.whole(self._first(head), whole))
        return reader

    async def _write_first(self, head: bytes, *, end: bool) -> None:
        """The first words: natively relayed bytes go as they came (their
        complete events checked), forwarded ones as ``ModelEvents`` leaves them."""
        try:
            checked = self._events(head, end=end)  # raises on what is not the model's
        except UpstreamMalformed as exc:
            # One read may hold several events (the platform hands over all
            # that arrived): the model's words before the bad one still reach
            # the client, as they would have a read earlier; then it fails.
            before = self._events.redacted(exc.before)
            if UpstreamReader().feed(before):
                await self._writer.write(self._framing.first_words(self._first(before), before))
            raise
        out = head if self._native else checked
        await self._writer.write(self._framing.first_words(self._first(head), out))

    def _first(self, head: bytes) -> Model:
        """Notes the first words (``head``, all the model sent until them);
        returns the model that answers."""
        outcome = self._outcome
        outcome.ttft_ms = self._deadlines.first_words()
        self._recording.add(head)
        assert outcome.model is not None
        return outcome.model

    # --- phase 2: the platform relays, Python looks in now and then ----------

    async def _relay_rest(self, head: bytes) -> UpstreamReader:
        """Each turn Python rests until the next look (unless the copy
        finishes), then takes everything that went by meanwhile: two wakes
        per watch interval, whatever the number of tokens."""
        upstream, deadlines, recording = self._upstream, self._deadlines, self._recording
        watch_s = watch_interval(deadlines.settings)
        tail = Tail()
        tail.add(head)
        self.between_events = False  # unknown until the observer has seen the end
        relay = await upstream.relay(self._writer.sink)
        ended = False  # the stream ended; the copy may still be writing its end
        while True:
            now = deadlines.now()
            if await relay.rest(min(now + watch_s, deadlines.next()) - now):
                break
            if ended:
                await deadlines.keep(upstream)
                continue
            seen = await relay.observe(deadlines.next() - deadlines.now())
            if seen is None:
                ended = True
                deadlines.last_chunk = None  # a slow client is no silent model
            elif seen is not TIMED_OUT:
                tail.add(seen)
                recording.add(seen)
                deadlines.heard()
                await self._look(seen)
            await deadlines.keep(upstream)
        await relay.finished()
        while (seen := await relay.observe(math.inf)) is not None and seen is not TIMED_OUT:
            tail.add(seen)
            recording.add(seen)
            await self._look(seen)
        await self._look(b"", end=True)
        self.between_events = tail.between_events
        return tail.read()

    async def _look(self, seen: bytes, *, end: bool = False) -> None:
        """Checks what went by natively: anything but the model's events
        ends the answer here (it reached the client already, up to one look
        ago; the closing that follows says the answer failed)."""
        try:
            self._events(seen, end=end)
        except UpstreamMalformed:
            await self._upstream.cancel()
            raise

    # --- phase 2, when the framing rewrites events: Python forwards ----------

    async def _forward_rest(self, head: bytes) -> UpstreamReader:
        """Takes what arrived and makes the framing's bytes of its checked
        events; the next turn writes them and lets the next batch gather
        (``forward_batch``) before it reads: one wait a batch
        (``ports.Forward``), bounded by the next deadline."""
        upstream, deadlines, writer = self._upstream, self._deadlines, self._writer
        tail = Tail()
        tail.add(head)
        batches = await upstream.forward(writer.sink)
        began = deadlines.now()
        out, pause = b"", 0.0
        try:
            while True:
                data = await writer.forward(batches, out, pause, deadlines.next() - deadlines.now())
                out, pause = b"", 0.0
                if data is TIMED_OUT:
                    await deadlines.keep(upstream)
                    continue
                if data is None:
                    break
                now = deadlines.heard()
                tail.add(data)
                self._recording.add(data)
                out = self._framing.feed(self._events(data))
                pause = max(
                    0.0, min(now + forward_batch(now - began), deadlines.next()) - deadlines.now()
                )
        finally:
            batches.stop()
        await writer.write(self._framing.feed(self._events(b"", end=True)))
        return tail.read()
