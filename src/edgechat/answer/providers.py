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
from typing import Any

from edgechat.config.providers import Provider
from edgechat.core.faults import ProviderError, UpstreamError
from edgechat.core.ports import Fetch, UpstreamStream
from edgechat.core.requests import PARAMS

__all__ = ["ProviderAi", "provider_inputs"]

# What an OpenAI-compatible API takes of the inputs edgechat builds.
_PASSED = ("temperature", *(param.name for param in PARAMS if param.providers))


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
