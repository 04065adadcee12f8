"""The response cache: complete answers kept in KV (``CACHE``) and given again.

What is kept is the model's own stream, as the relay saw it, with the model
that answered, under a SHA-256 of everything that shaped the answer: the
model asked for and the inputs it was sent (the whole conversation, the
system prompt in effect, every generation parameter) - never the token. The
same stream replays through either endpoint's framing, so ``/chat`` and the
OpenAI API share entries when they ask the same thing.

Which requests use it is ``CACHE_MODE``'s: ``off``; ``deterministic`` (only
``temperature`` 0 or a ``seed``: the answers that would come out the same
anyway); ``all`` (repeat questions answered from the cache). A request with
``Cache-Control: no-cache`` skips the lookup and stores its fresh answer.
A KV failure is logged and the model answers: the cache never fails a request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from edgechat.answer.framing import Outcome
from edgechat.config.settings import Settings
from edgechat.core.models import Model, find
from edgechat.core.ports import Kv, KvError, Sink, Spent, TimedOut
from edgechat.core.requests import ChatRequest

__all__ = ["CachedUpstream", "Hit", "cache_key", "keepable", "lookup", "store", "wants_cache"]

KEY_PREFIX = "answer:v1:"


def wants_cache(request: ChatRequest, settings: Settings) -> bool:
    """Whether ``CACHE_MODE`` lets this request be answered from the cache."""
    mode = settings.cache_mode
    if mode == "all":
        return True
    if mode == "deterministic":
        return request.temperature == 0 or "seed" in request.params
    return False


def cache_key(request: ChatRequest, settings: Settings) -> str:
    inputs = request.inputs(request.model, settings.system_prompt)
    del inputs["stream"]
    canonical = json.dumps(
        {"model": request.model.id, "inputs": inputs},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return KEY_PREFIX + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def keepable(body: bytes | None, outcome: Outcome) -> bytes | None:
    """The recorded stream ``body``, when the answer is complete enough to
    be given again: ended by ``stop`` or ``length``, no error, no tool call,
    not from the cache itself."""
    if (
        body is None
        or outcome.cached
        or outcome.error is not None
        or outcome.client_gone
        or outcome.truncated
        or outcome.finish_reason not in ("stop", "length", None)
    ):
        return None
    # A forced tool call may end with "stop". JSON escapes every quote in a
    # model's text, so these bytes can only be a call.
    if b'"tool_calls":[{' in body or b'"tool_calls": [{' in body:
        return None
    return body


class Hit:
    __slots__ = ("body", "model")

    def __init__(self, model: Model, body: bytes) -> None:
        self.model = model
        self.body = body


async def lookup(kv: Kv, key: str, allowed: Sequence[str], log: dict[str, object]) -> Hit | None:
    """The kept answer under ``key``, if any, and if the model that gave it is
    still one the operator allows."""
    try:
        found = await kv.get(key)
    except KvError as exc:
        log["cache_error"] = f"get: {exc}"
        return None
    if found is None:
        return None
    body, meta = found
    model = find(meta.get("model", "")) if isinstance(meta.get("model"), str) else None
    if model is None or model.alias not in allowed or not body:
        return None  # kept under another catalog or another MODELS
    return Hit(model, body)


async def store(kv: Kv, key: str, body: bytes, model: Model, ttl_s: int, request_id: str) -> None:
    """Keeps an answer; runs after the reply (``wait_until``), so a failure
    gets a log line of its own."""
    try:
        await kv.put(key, body, ttl_s=ttl_s, metadata={"model": model.id})
    except KvError as exc:
        print(json.dumps({"request_id": request_id, "cache_error": f"put: {exc}"}))


class CachedUpstream:
    """``ports.UpstreamStream`` over a kept stream: one read gives it all."""

    __slots__ = ("_body",)

    def __init__(self, body: bytes) -> None:
        self._body: bytes | None = body

    async def read(self, within: float) -> bytes | TimedOut | None:
        body, self._body = self._body, None
        return body

    async def relay(self, sink: Sink) -> _Spent:
        return _Spent()

    async def forward(self, sink: Sink) -> Spent:
        assert self._body is None, "forward() before the first read"
        return Spent(sink)

    async def cancel(self) -> None:
        self._body = None


class _Spent:
    """``ports.Relay`` of a kept stream: phase 1's one read took all of it."""

    async def rest(self, within: float) -> bool:
        return True

    async def observe(self, within: float) -> bytes | TimedOut | None:
        return None

    async def finished(self) -> None:
        return None
