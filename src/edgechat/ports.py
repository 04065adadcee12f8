"""What the core needs from the platform, as protocols.

``platform.py`` implements them on the Workers runtime; tests implement them
with plain Python fakes. Nothing here imports the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class ClientGone(Exception):
    """Writing to the client failed: it disconnected or cancelled the stream."""


class UpstreamStream(Protocol):
    """The model's answer as it arrives: raw bytes of the binding's stream."""

    async def pipe(self, sink: Sink, transform: Callable[[bytes], bytes | None]) -> None:
        """Passes every chunk through ``transform`` and writes what it returns
        to ``sink``, until the upstream ends. ``transform`` is called
        synchronously, once per chunk: the platform does the reading and
        writing natively. Raises ``UpstreamError`` when the upstream fails and
        ``ClientGone`` when the client stopped reading."""
        ...

    async def cancel(self) -> None:
        """Stops the upstream call (aborts it) and releases the stream; idempotent."""
        ...


class Ai(Protocol):
    async def stream(self, model_id: str, inputs: dict[str, Any]) -> UpstreamStream:
        """Starts a streamed call; raises ``UpstreamError`` when the binding refuses it."""
        ...


class Sink(Protocol):
    """Where the response body goes (the writable side of a TransformStream)."""

    async def write(self, data: bytes) -> None:
        """Raises ``ClientGone`` when the client is no longer reading."""
        ...

    async def close(self) -> None: ...


class RateLimiter(Protocol):
    async def allow(self, key: str) -> bool: ...


class Platform(Protocol):
    """One request's view of the runtime: its body, settings and bindings."""

    @property
    def ai(self) -> Ai: ...

    @property
    def rate_limiter(self) -> RateLimiter | None: ...

    def var(self, name: str) -> object:
        """A ``[vars]`` value or secret, or None when unset."""
        ...

    async def read_body(self, limit: int) -> bytes:
        """The request body; raises ``PayloadTooLarge`` past ``limit`` bytes,
        before reading it all."""
        ...
