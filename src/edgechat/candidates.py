"""Who may answer a question, in order: the model asked for, the Workers AI
fallback chain after it, then the providers' own APIs; minus the models that
cannot read the request, and those cooling down after saying they cannot
answer now."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from edgechat.config import Settings
from edgechat.errors import UpstreamError
from edgechat.models import Model
from edgechat.requests import ChatRequest

__all__ = ["Candidates", "Cooling"]

Clock = Callable[[], float]


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

    def is_cooling(self, model: Model) -> bool:
        until = self._until.get(model.id)
        if until is None:
            return False
        if self._clock() >= until:
            del self._until[model.id]
            return False
        return True


class Candidates:
    """The models still to ask for one answer, best first."""

    __slots__ = ("_cooldown_max_s", "_cooling", "_left")

    def __init__(
        self, request: ChatRequest, settings: Settings, cooling: Cooling, *, providers: bool
    ) -> None:
        # Models that cannot read the request's parameters (tools on Llama)
        # are no fallback; the providers' APIs come after the Workers AI chain.
        fit = [
            request.model,
            *(m for m in settings.fallbacks_after(request.model) if request.unfit(m) is None),
            *(
                provider.model
                for provider in settings.providers
                if providers and request.unfit(provider.model) is None
            ),
        ]
        # Cooling models are skipped, unless that would leave nothing to ask.
        warm = [model for model in fit if not cooling.is_cooling(model)]
        self._left = warm or fit
        self._cooling = cooling
        self._cooldown_max_s = settings.cooldown_max_s

    def __bool__(self) -> bool:
        return bool(self._left)

    def next(self) -> Model:
        return self._left.pop(0)

    def clear(self) -> None:
        self._left = []

    def failed(self, model: Model, exc: UpstreamError) -> None:
        """``model`` refused or broke off: it cools down if it said to wait."""
        self._cooling.mark(model, exc, self._cooldown_max_s)
