"""What an endpoint makes of a model's answer (a ``Framing``), and the values
it is handed: the ``Whole`` answer a model sent as one document, and the
``Outcome`` of the answer. A framing is given what it writes, never the
answer itself: values flow one way, from ``answer.Answer`` to the framing.

``/chat``'s framing is ``chat.ChatFraming``; the OpenAI API's are in
``openai_api``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from edgechat.answer.moderation import Verdict
from edgechat.core.errors import EdgechatError
from edgechat.core.models import Model, Usage, cost_usd

__all__ = ["MIN_PACE_S", "Document", "Framing", "Outcome", "Similar", "Whole"]

# An answer whose words all came within this many seconds has no pace worth
# a number (a whole JSON answer, a cached one): the page's stats line says
# nothing either.
MIN_PACE_S = 0.05


@dataclass(frozen=True, slots=True)
class Similar:
    """An answer given again to a similar question (``answer.similar``):
    how similar (the cosine score), the question it answered, and what it
    cost then (what giving it again saved)."""

    score: float
    question: str
    saved_usd: float

    def to_json(self) -> dict[str, object]:
        return {"kind": "similar", "score": self.score, "question": self.question}


@dataclass(slots=True)
class Outcome:
    """What happened: for the closing event, the request log, what is kept."""

    model: Model | None = None
    fallback_from: Model | None = None
    usage: Usage | None = None
    finish_reason: str | None = None
    ttft_ms: float | None = None
    # From the question to the model's last byte, in milliseconds (with
    # ``ttft_ms`` and the usage: the answer's tokens per second).
    ended_ms: float | None = None
    error: EdgechatError | None = None
    client_gone: bool = False
    truncated: bool = False
    # Answered from the response cache, without a model call.
    cached: bool = False
    # ... from the semantic cache: the kept answer of a similar question.
    similar: Similar | None = None
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

    def tokens_per_s(self) -> float | None:
        """The answer's pace once its first words came: completion tokens
        over the seconds after them (None: unknown, or too short to tell)."""
        if self.usage is None or self.ttft_ms is None or self.ended_ms is None:
            return None
        seconds = (self.ended_ms - self.ttft_ms) / 1000
        tokens = self.usage["completion_tokens"]
        return round(tokens / seconds, 2) if tokens and seconds >= MIN_PACE_S else None


@dataclass(frozen=True, slots=True)
class Whole:
    """A complete JSON answer a model sent although a stream was asked for."""

    body: dict[str, Any]
    content: str
    reasoning: str
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str | None


class Framing(Protocol):
    """What one endpoint makes of a model's stream. ``/chat`` relays the
    model's events natively between its own; the OpenAI API rewrites them,
    so Python forwards them in batches, or reads the whole answer."""

    # Whether the rest of the stream (after the first words) is the
    # platform's native copy (``feed`` then never sees it) or Python
    # forwarding what ``feed`` returns.
    relays_natively: bool
    # Written while the model is silent before its first words (b"": nothing).
    ping: bytes
    # Whether the closing can carry a verdict on the finished answer.
    moderates_output: bool

    def opening(self, model: Model) -> bytes:
        """Before anything else; ``model`` is the one asked first."""
        ...

    def first_words(self, model: Model, data: bytes) -> bytes:
        """The model's first bytes, held back until its first text (or its
        end); ``model`` is the one that answers."""
        ...

    def feed(self, data: bytes) -> bytes:
        """The model's next bytes as the client gets them."""
        ...

    def whole(self, model: Model, answer: Whole) -> bytes:
        """Instead of ``first_words``, when the model sent one document."""
        ...

    def closing(self, outcome: Outcome, between_events: bool) -> bytes:
        """After the model's stream ended well (``between_events``: the
        client's stream is known to be between two events)."""
        ...

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        """The answer failed after the stream began."""
        ...


class Document(Framing, Protocol):
    """A framing whose client gets one document at the end, not a stream:
    nothing is written while the model answers, and a failure is raised."""

    def result(self, outcome: Outcome) -> dict[str, Any]: ...
