"""Fallback to the providers' own OpenAI-compatible APIs (``PROVIDERS``).

When every model of the Workers AI chain failed before its first byte with a
fallback-worthy error (capacity, daily allocation, paid plan, a first-token
timeout), the providers are tried in order: Zhipu's and Moonshot's own APIs
serve the same GLM and Kimi families, and any other OpenAI-compatible API
works with an explicit base URL. Each is called with the runtime's ``fetch``
through the platform seam, streamed, under the same abort signal; its key
goes in ``Authorization`` only, never into a log, an event or an error.
Their chunks are OpenAI chunks, which both endpoints read like GLM's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from edgechat.core.faults import ProviderError, UpstreamError
from edgechat.core.models import Model, WireFormat
from edgechat.core.ports import Fetch, UpstreamStream
from edgechat.core.requests import PARAMS

__all__ = ["BUILTIN", "Provider", "ProviderAi", "provider_inputs"]

# Base URL and default model of the built-in providers (their public
# OpenAI-compatible endpoints as documented in late 2026; check them, and
# the model names, before relying on a fallback).
BUILTIN: dict[str, tuple[str, str]] = {
    "zhipu": ("https://open.bigmodel.cn/api/paas/v4", "glm-4.7-flash"),
    "moonshot": ("https://api.moonshot.ai/v1", "kimi-k2.6"),
}

NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")

# What an OpenAI-compatible API takes of the inputs edgechat builds.
_PASSED = ("temperature", *(param.name for param in PARAMS if param.providers))


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


def provider_inputs(inputs: dict[str, Any], provider: Provider) -> dict[str, Any]:
    """The request body for ``provider``, from the inputs edgechat would send
    Workers AI: OpenAI's fields only, the provider's model name, usage asked for."""
    body: dict[str, Any] = {
        "model": provider.model_name,
        "messages": inputs["messages"],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    cap = inputs.get("max_completion_tokens", inputs.get("max_tokens"))
    if cap is not None:
        body["max_tokens"] = cap
    for name in _PASSED:
        if name in inputs:
            body[name] = inputs[name]
    return body


class ProviderAi:
    """``ports.Ai``'s ``stream`` over the providers' APIs, by candidate id."""

    def __init__(self, fetch: Fetch, providers: tuple[Provider, ...]) -> None:
        self._fetch = fetch
        self._by_id = {provider.model.id: provider for provider in providers}

    async def stream(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> UpstreamStream:
        provider = self._by_id[model_id]
        body = json.dumps(provider_inputs(inputs, provider), ensure_ascii=False).encode()
        headers = {
            "authorization": f"Bearer {provider.api_key}",
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        url = provider.base_url.rstrip("/") + "/chat/completions"
        try:
            status, reply_headers, stream = await self._fetch.post(url, headers, body)
        except ProviderError:
            raise
        except UpstreamError as exc:
            raise ProviderError(detail=f"provider {provider.name}: {exc}") from exc
        if status != 200:
            await stream.cancel()
            retry = reply_headers.get("retry-after", "")
            raise ProviderError(
                detail=f"provider {provider.name} answered HTTP {status}",
                retry_after=int(retry) if retry.isdigit() else None,
            )
        return stream
