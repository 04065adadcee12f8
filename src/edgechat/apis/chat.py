"""``POST /chat``'s framing: ``meta``, then the model's own SSE events byte
for byte (relayed natively, see ``answer.delivery``), then exactly one ``done`` or
``error``.

The closing carries ``meta``'s ``request_id``: a relayed stream reaches the
client before Python has looked at it, so a ``done``/``error`` forged inside
it could arrive first; the request id (random, never sent upstream) is what
tells a client the closing is edgechat's.

A comparison's answer says which (``comparison``: its id, slot and whether
it is blind); a blind one's ``meta`` and ``done`` name no model and no cost
(the price would tell the model), until the vote reveals them
(``GET /api/comparisons/<id>``).

A question asked of a knowledge base closes with its ``sources``: the
passages the prompt held, by the numbers the answer cites (``[1]``)."""

from __future__ import annotations

from typing import Any

from edgechat.answer.framing import Outcome, Whole
from edgechat.core import sse
from edgechat.core.errors import EdgechatError
from edgechat.core.models import Model
from edgechat.core.requests import Route, Slot

__all__ = ["ChatFraming"]


class ChatFraming:
    relays_natively = True
    ping = sse.PING
    moderates_output = True

    __slots__ = ("_comparison", "_request_id", "_route", "_sources")

    def __init__(
        self,
        request_id: str,
        route: Route | None = None,
        slot: Slot | None = None,
        sources: list[dict[str, Any]] | None = None,
    ) -> None:
        self._request_id = request_id
        self._route = route
        self._sources = sources
        self._comparison = (
            None
            if slot is None
            else {"id": slot.comparison, "slot": slot.index, "blind": slot.blind}
        )

    @property
    def _blind(self) -> bool:
        return self._comparison is not None and self._comparison["blind"] is True

    def opening(self, model: Model) -> bytes:
        meta: dict[str, object] = {
            "request_id": self._request_id,
            "model": None if self._blind else model.id,
        }
        if self._route is not None:
            meta["route"] = self._route.to_json()
        if self._comparison is not None:
            meta["comparison"] = self._comparison
        return sse.event("meta", meta)

    def first_words(self, model: Model, data: bytes) -> bytes:
        return data

    def feed(self, data: bytes) -> bytes:
        return data

    def whole(self, model: Model, answer: Whole) -> bytes:
        # Sent as one event of the model's own shape, so the client reads it like a chunk.
        return sse.data(answer.body)

    def closing(self, outcome: Outcome, between_events: bool) -> bytes:
        assert outcome.model is not None
        blind = self._blind
        done: dict[str, object] = {
            "request_id": self._request_id,
            "model": None if blind else outcome.model.id,
            "finish_reason": outcome.finish_reason,
            "usage": outcome.usage,
            "cost_usd": None if blind else outcome.cost_usd(),
            "ttft_ms": outcome.ttft_ms,
        }
        if outcome.fallback_from is not None:
            done["fallback_from"] = outcome.fallback_from.id
        if self._route is not None:
            done["route"] = self._route.to_json()
        if self._comparison is not None:
            done["comparison"] = self._comparison
        if outcome.cached:
            # The response cache's answer: true; a similar question's: what it was.
            done["cached"] = True if outcome.similar is None else outcome.similar.to_json()
        if outcome.moderation is not None:
            done["moderation"] = outcome.moderation.to_json()
        if self._sources is not None:
            done["sources"] = self._sources
        return _close(between_events) + sse.event("done", done)

    def failure(self, exc: EdgechatError, between_events: bool) -> bytes:
        return _close(between_events) + sse.error(exc, self._request_id)


def _close(between_events: bool) -> bytes:
    return b"" if between_events else sse.CLOSE_EVENT
