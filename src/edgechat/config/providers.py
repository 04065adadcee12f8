"""The providers' own OpenAI-compatible APIs as the operator names them
(``PROVIDERS`` and each one's ``<NAME>_BASE_URL``, ``<NAME>_MODEL``,
``<NAME>_API_KEY``, ``<NAME>_PRICE_IN``, ``<NAME>_PRICE_OUT``): what a
fallback to them needs to know. ``answer.providers`` calls them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from edgechat.core.models import Model, WireFormat

__all__ = ["BUILTIN", "NAME", "Provider"]

# Base URL and default model of the built-in providers (their public
# OpenAI-compatible endpoints as documented in late 2026; check them, and
# the model names, before relying on a fallback).
BUILTIN: dict[str, tuple[str, str]] = {
    "zhipu": ("https://open.bigmodel.cn/api/paas/v4", "glm-4.7-flash"),
    "moonshot": ("https://api.moonshot.ai/v1", "kimi-k2.6"),
}

NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")


@dataclass(frozen=True, slots=True)
class Provider:
    name: str
    base_url: str
    model_name: str
    api_key: str = field(repr=False)
    price_in_per_m: float | None = None
    price_out_per_m: float | None = None

    @property
    def model(self) -> Model:
        """The provider's model as a candidate of the fallback chain."""
        return Model(
            alias=self.name,
            id=f"{self.name}/{self.model_name}",
            label=f"{self.model_name} ({self.name})",
            family=self.name,
            context_window=0,
            price_in_per_m=self.price_in_per_m or 0.0,
            price_out_per_m=self.price_out_per_m or 0.0,
            free_plan=False,
            wire_format=WireFormat.OPENAI,
            tools=True,
            priced=self.price_in_per_m is not None and self.price_out_per_m is not None,
            provider=self.name,
        )
