"""The clock of one answer: its first-token, idle and total deadlines, and
when the client last heard from us (for the heartbeat).

The first-token deadline is each model's own: a model that said nothing in
``FIRST_TOKEN_TIMEOUT_S`` gives way to the next (``NoFirstToken``), all of
them within ``TOTAL_TIMEOUT_S`` of the request."""

from __future__ import annotations

import math
from collections.abc import Callable

from edgechat.config.settings import Settings
from edgechat.core.faults import DeadlineExceeded, NoFirstToken
from edgechat.core.ports import UpstreamStream

__all__ = ["Deadlines"]


class Deadlines:
    __slots__ = (
        "asked_at",
        "first_words_at",
        "last_chunk",
        "last_write",
        "now",
        "settings",
        "started",
    )

    def __init__(self, settings: Settings, clock: Callable[[], float]) -> None:
        self.settings = settings
        self.now = clock
        self.started = clock()
        # When the model now asked was asked.
        self.asked_at = self.started
        # When the model's first text came (None: not yet).
        self.first_words_at: float | None = None
        # When bytes last came from the model (None: none yet, or a model
        # whose silence is not to be counted) and when we last wrote.
        self.last_chunk: float | None = None
        self.last_write = self.started

    def first_words(self) -> float:
        """Marks the first text; returns the time to it, in milliseconds."""
        self.first_words_at = self.now()
        return round((self.first_words_at - self.started) * 1000, 1)

    def elapsed_ms(self) -> float:
        """Milliseconds since the answer began."""
        return round((self.now() - self.started) * 1000, 1)

    def heard(self) -> float:
        self.last_chunk = now = self.now()
        return now

    def wrote(self) -> None:
        self.last_write = self.now()

    def asking(self) -> None:
        """A model is being asked: its first-token deadline starts now."""
        self.asked_at = self.now()
        self.last_chunk = None  # the model's silence is its own

    def first_token_left(self) -> float:
        """How long the model now asked may take to answer at all."""
        return min(self._first_token_deadline(), self._total_deadline()) - self.now()

    def total_left(self) -> float:
        return self._total_deadline() - self.now()

    def _first_token_deadline(self) -> float:
        return self.asked_at + self.settings.first_token_timeout_s

    def _total_deadline(self) -> float:
        return self.started + self.settings.total_timeout_s

    def next(self) -> float:
        """When the next deadline passes."""
        s = self.settings
        deadline = self.started + s.total_timeout_s
        if self.first_words_at is None:
            deadline = min(deadline, self._first_token_deadline())
        if self.last_chunk is not None:
            deadline = min(deadline, self.last_chunk + s.idle_timeout_s)
        return deadline

    def next_ping(self, ping: bool) -> float:
        if not ping:
            return math.inf  # a whole answer: nothing is written before it
        # Bytes held back before the first text do not count: the client has
        # not seen them.
        return self.last_write + self.settings.heartbeat_s

    def passed(self, now: float) -> str | None:
        """Which deadline has passed at ``now``, if one has."""
        s = self.settings
        if now - self.started >= s.total_timeout_s:
            return f"total deadline of {s.total_timeout_s} s"
        if self.first_words_at is None and now >= self._first_token_deadline():
            return f"no first token within {s.first_token_timeout_s} s"
        if self.last_chunk is not None and now - self.last_chunk >= s.idle_timeout_s:
            return f"upstream silent for {s.idle_timeout_s} s"
        return None

    async def keep(self, upstream: UpstreamStream) -> None:
        """Aborts ``upstream`` and raises ``DeadlineExceeded`` if a deadline passed."""
        now = self.now()
        reason = self.passed(now)
        if reason is None:
            return
        await upstream.cancel()
        if self.first_words_at is None and now - self.started < self.settings.total_timeout_s:
            raise NoFirstToken(detail=reason)
        raise DeadlineExceeded(detail=reason)
