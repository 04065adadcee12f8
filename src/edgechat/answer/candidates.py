"""Who may answer a question, in order: the model asked for, the Workers AI
fallback chain after it, then the providers' own APIs (a comparison's
answer: its model alone); minus the models that
cannot read the request, those cooling down after saying they cannot answer
now, and every Workers AI model while the account's daily allocation is
used up (3036, 4006: until 00:00 UTC)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from edgechat.config.settings import Settings
from edgechat.core.faults import UpstreamError, UpstreamQuotaExhausted
from edgechat.core.models import Model
from edgechat.core.requests import ChatRequest
from edgechat.users.usage import next_midnight

__all__ = ["Candidates", "Cooling"]

Clock = Callable[[], float]


class Cooling:
    """What this isolate learnt from Workers AI's refusals: the models that
    just failed with capacity (3040), skipped until their ``Retry-After``
    passed, so a request does not wait on a model that said it cannot answer;
    and the account's daily allocation, used up until 00:00 UTC once any
    model said so (3036, 4006), since every model would say the same."""

    __slots__ = ("_clock", "_exhausted_until", "_until", "wall")

    def __init__(self, clock: Clock = time.monotonic, wall: Clock = time.time) -> None:
        self._clock = clock
        self.wall = wall
        self._until: dict[str, float] = {}
        self._exhausted_until: float | None = None

    def mark(self, model: Model, exc: UpstreamError, longest_s: float = math.inf) -> None:
        """``longest_s`` (``COOLDOWN_MAX_S``) caps a model's cooling; 0
        keeps nothing, not even the allocation (each request asks again)."""
        if longest_s <= 0 or model.provider is not None:
            return
        if isinstance(exc, UpstreamQuotaExhausted):
            self.exhaust(next_midnight(self.wall()))
            return
        seconds = min(exc.retry_after or 0, longest_s)
        if exc.binding_code == 3040 and seconds > 0:
            self._until[model.id] = self._clock() + seconds

    def exhaust(self, until: float) -> None:
        """No Workers AI model is asked before ``until`` (epoch s): the
        allocation is used up, or ``DAILY_NEURON_LIMIT`` reached."""
        self._exhausted_until = until

    def allocation_resets(self) -> float | None:
        """While the account's allocation is used up: when it resets (epoch s)."""
        until = self._exhausted_until
        if until is not None and self.wall() >= until:
            self._exhausted_until = until = None
        return until

    def is_cooling(self, model: Model) -> bool:
        until = self._until.get(model.id)
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[model.id]
            return False
        return True


def quota_exhausted(
    resets_at: float, now: float, exc: UpstreamQuotaExhausted | None = None
) -> UpstreamQuotaExhausted:
    """``exc`` (or a new refusal) saying when the allocation resets."""
    exc = exc or UpstreamQuotaExhausted(detail="the account's daily allocation is used up")
    exc.resets_at = resets_at
    exc.retry_after = max(1, math.ceil(resets_at - now))
    return exc


class Candidates:
    """The models still to ask for one answer, best first."""

    __slots__ = ("_cooldown_max_s", "_cooling", "_left", "_refusal")

    def __init__(
        self,
        request: ChatRequest,
        settings: Settings,
        cooling: Cooling,
        *,
        providers: bool,
        fallback: bool = True,
    ) -> None:
        # Models that cannot read the request's parameters (tools on Llama)
        # are no fallback; the providers' APIs come after the Workers AI
        # chain. Without ``fallback`` (a shadow trial's models) and for a
        # comparison's answer (it measures its own model) the model asked
        # for is the only one.
        fit = [request.model]
        if fallback and request.slot is None:
            fit += [m for m in settings.fallbacks_after(request.model) if request.unfit(m) is None]
            fit += [
                provider.model
                for provider in settings.providers
                if providers and request.unfit(provider.model) is None
            ]
        self._refusal: UpstreamQuotaExhausted | None = None
        resets = cooling.allocation_resets()
        if resets is not None:
            # No Workers AI model is asked: one 429, or the providers.
            fit = [model for model in fit if model.provider is not None]
            self._refusal = quota_exhausted(resets, cooling.wall())
        # Cooling models are skipped, unless that would leave nothing to ask.
        warm = [model for model in fit if not cooling.is_cooling(model)]
        self._left = warm or fit
        self._cooling = cooling
        self._cooldown_max_s = settings.cooldown_max_s

    def __bool__(self) -> bool:
        return bool(self._left)

    def next(self) -> Model:
        """The next model to ask; raises ``UpstreamQuotaExhausted`` when none
        is left because the account's allocation is used up."""
        if not self._left and self._refusal is not None:
            raise self._refusal
        return self._left.pop(0)

    def clear(self) -> None:
        self._left = []

    def failed(self, model: Model, exc: UpstreamError) -> None:
        """``model`` refused or broke off: it cools down if it said to wait;
        a used-up allocation takes every Workers AI model out of this answer."""
        if isinstance(exc, UpstreamQuotaExhausted) and model.provider is None:
            now = self._cooling.wall()
            quota_exhausted(next_midnight(now), now, exc)
            self._left = [left for left in self._left if left.provider is not None]
        self._cooling.mark(model, exc, self._cooldown_max_s)
