"""What the core needs from the platform, as protocols.

``edgechat.platform`` implements them on the Workers runtime; tests implement them
with plain Python fakes. Nothing here imports the runtime.

A model's streamed answer reaches the client in two phases (``apis.chat``):
Python reads the first bytes itself (``UpstreamStream.read``) until the model
has said something, then hands the rest to the platform (``relay``), which
copies it into the response natively while Python only looks in now and then
(``Relay.observe``), or, when the framing rewrites events, forwards the rest
itself in batches (``forward``). No Python runs per token.

Every wait takes a bound (``within``, seconds; ``math.inf`` for none) and
returns ``TIMED_OUT`` when it passes, so the core keeps its deadlines without
a timer task of its own per wait: on the runtime one wait is one await.
An unfinished read is kept and continued by the next call.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from typing import Any, Final, Protocol


class TimedOut(enum.Enum):
    TIMED_OUT = "timed out"


# What a bounded wait returns when its bound passed first.
TIMED_OUT: Final = TimedOut.TIMED_OUT


class ClientGone(Exception):
    """Writing to the client failed: it disconnected or cancelled the stream."""


class Sink(Protocol):
    """Where the response body goes."""

    async def write(self, data: bytes) -> None:
        """Raises ``ClientGone`` when the client is no longer reading."""
        ...

    async def close(self) -> None: ...


class Relay(Protocol):
    """The rest of an upstream stream being copied into the sink natively."""

    async def rest(self, within: float) -> bool:
        """Waits until the copy has finished or ``within`` passed; returns
        whether it finished. Raises like ``finished``."""
        ...

    async def observe(self, within: float) -> bytes | TimedOut | None:
        """The relayed bytes Python has not seen yet: everything that arrived
        since the last call, once there is at least one byte; None once the
        stream has ended. The copy to the client never waits for this."""
        ...

    async def finished(self) -> None:
        """Returns once every byte reached the sink. Raises ``UpstreamError``
        when the upstream failed (or was cancelled) and ``ClientGone`` when the
        client stopped reading."""
        ...


class Forward(Protocol):
    """The rest of an upstream stream that Python forwards itself, batch by
    batch (the framing rewrites its events)."""

    async def next(self, out: bytes, after: float, within: float) -> bytes | TimedOut | None:
        """Writes ``out`` (what the framing made of the last batch; nothing
        when empty) into the sink; once the sink took it and ``after``
        seconds passed (the next batch gathers meanwhile), reads everything
        that arrived since the last batch (at least one byte), or None at the
        end. One wait for all three, bounded by ``within`` seconds from now:
        when it passes, the upstream is cancelled and ``TIMED_OUT`` returned.
        Raises ``ClientGone`` when the write failed and ``UpstreamError`` when
        the upstream did."""
        ...

    def stop(self) -> None:
        """No batch follows (the stream ended or the answer failed)."""
        ...


class Spent:
    """``Forward`` of a stream already read to its end (a kept answer, a
    whole JSON document): a batch is only its write, then the end."""

    __slots__ = ("_sink",)

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    async def next(self, out: bytes, after: float, within: float) -> bytes | TimedOut | None:
        if out:
            await self._sink.write(out)
        return None

    def stop(self) -> None:
        return None


class UpstreamStream(Protocol):
    """The model's answer as it arrives: raw bytes of the binding's stream."""

    async def read(self, within: float) -> bytes | TimedOut | None:
        """Python reads the bytes that have arrived (at least one), or None at
        the end, in one wait bounded by ``within`` seconds from now. Raises
        ``UpstreamError`` when the upstream fails."""
        ...

    async def relay(self, sink: Sink) -> Relay:
        """Hands the rest of the stream to ``sink``; after this, ``read`` is
        not called again. Raises ``ClientGone`` when the sink is gone.
        ``sink`` is the one the platform handed to the reply's producer
        (``http.Reply.stream``): the platform relays natively into its own
        sink and accepts no other."""
        ...

    async def forward(self, sink: Sink) -> Forward:
        """Hands the rest of the stream to Python's batches, written into
        ``sink`` (the reply's, or one of the core's where nothing is written:
        a whole answer); after this, ``read`` is not called again. Each
        batch takes everything that arrived since the last one, where a
        ``read`` takes one upstream chunk, about one token."""
        ...

    async def cancel(self) -> None:
        """Stops the upstream call (aborts it) and releases the stream; idempotent."""
        ...


class Fetch(Protocol):
    """The runtime's ``fetch``, for the providers' own APIs."""

    async def post(
        self, url: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], UpstreamStream]:
        """POSTs ``body``; returns the status, the headers (lower-case names)
        and the body as a stream. A redirect is not followed: its 3xx is the
        status returned. Raises ``UpstreamError`` when no answer came (the
        network failed). Aborted with the client, like ``Ai``."""
        ...


class Outbound(Protocol):
    """The runtime's ``fetch`` for a POST that belongs to no client: a spend
    alert posted after the reply (``waitUntil``) or by the cron run. Unlike
    ``Fetch`` it is never aborted when the client leaves; its own bound
    stops it."""

    async def post(self, url: str, headers: dict[str, str], body: bytes, within: float) -> int:
        """POSTs ``body`` to ``url`` (no redirect followed) and returns the
        answer's status once its headers are in; the answer's body is not
        read. Raises ``OutboundError`` when no answer came within ``within``
        seconds or the network failed."""
        ...


class OutboundError(Exception):
    """An ``Outbound`` POST got no answer. The message names the kind of
    failure only (``TimeoutError``, ``TypeError``): never the URL, which
    may be a credential."""


class Streams(Protocol):
    """Where a model's streamed answer comes from: Workers AI, or a provider."""

    async def stream(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> UpstreamStream:
        """Starts a streamed call; raises ``UpstreamError`` when the binding
        refuses it. ``options`` are ``AI.run``'s (``gateway``); the platform
        adds the abort signal."""
        ...


class Ai(Streams, Protocol):
    async def run(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> dict[str, Any]:
        """A whole (non-stream) answer, such as the moderation model's verdict;
        raises ``UpstreamError``."""
        ...

    async def to_markdown(self, files: list[tuple[str, str, bytes]]) -> list[dict[str, Any]]:
        """``toMarkdown`` of ``(name, type, bytes)`` files: one result each, in
        order, ``{"name", "mimeType", "format": "markdown", "tokens", "data"}``
        or ``{"format": "error", "error"}``; raises ``UpstreamError``."""
        ...


class RateLimiter(Protocol):
    async def allow(self, key: str) -> bool: ...


class Kv(Protocol):
    """A KV namespace (``CACHE``). Every method raises ``KvError`` when the
    store fails; callers treat that as a miss, never as a failed request."""

    async def get(self, key: str) -> tuple[bytes, dict[str, Any]] | None:
        """The value and its metadata, or None."""
        ...

    async def put(
        self, key: str, value: bytes, *, ttl_s: int, metadata: dict[str, Any]
    ) -> None: ...

    async def list(
        self, prefix: str, cursor: str | None
    ) -> tuple[list[tuple[str, dict[str, Any]]], str | None]:
        """One page of the keys under ``prefix`` with their metadata, and the
        cursor of the next page (None on the last one)."""
        ...


class KvError(Exception):
    """The KV store failed (a limit, an outage): the detail is for the log."""


class Database(Protocol):
    """A D1 database (``USAGE_DB``, ``DB``): SQL with ``?`` parameters
    (None binds NULL)."""

    def batch(
        self, statements: list[tuple[str, list[Any]]]
    ) -> Awaitable[list[list[dict[str, Any]]]]:
        """Sends the statements at once (the call is under way before it is
        awaited), to run in order in one transaction; the awaitable gives
        each one's rows, or raises ``DatabaseError``. A None parameter, and
        a NULL column, is SQL's NULL."""
        ...


class DatabaseError(Exception):
    """The database failed (a limit, an outage): the detail is for the log."""


class Blobs(Protocol):
    """An R2 bucket (``FILES``): bytes by key. Every method raises
    ``BlobError`` when the store fails."""

    async def put(self, key: str, data: bytes, content_type: str) -> None: ...

    async def get(self, key: str) -> tuple[bytes, str] | None:
        """The object's bytes and its Content-Type, or None."""
        ...

    async def copy(self, source: str, target: str) -> bool:
        """Copies an object within the bucket (its bytes never reach
        Python); False when ``source`` is missing."""
        ...

    async def delete(self, keys: list[str]) -> None:
        """Deletes the objects (missing ones are no error)."""
        ...

    async def list(self, prefix: str, cursor: str | None) -> tuple[list[str], str | None]:
        """One page of the keys under ``prefix``, and the next page's cursor (None: the last)."""
        ...


class BlobError(Exception):
    """The bucket failed (a limit, an outage): the detail is for the log."""


class Vectors(Protocol):
    """A Vectorize index (https://developers.cloudflare.com/vectorize/reference/client-api/):
    ``VECTORS``, 1024 dimensions and cosine (bge-m3's vectors). Its mutations
    are asynchronous: an upserted or deleted vector shows in queries a few
    seconds later, not when the call returns. Every method raises
    ``VectorsError`` when the index refuses the call or fails."""

    async def upsert(self, vectors: list[dict[str, Any]]) -> None:
        """Each {"id": str, "values": list[float], "namespace"?: str, "metadata"?: dict}.
        Raises VectorsError."""
        ...

    async def query(
        self,
        values: list[float],
        *,
        top_k: int,
        namespace: str | None = None,
        filter: dict[str, Any] | None = None,
        metadata: bool = True,
    ) -> list[dict[str, Any]]:
        """Nearest first: [{"id", "score", "metadata"?, "namespace"?}]
        (returnMetadata "all" when metadata)."""
        ...

    async def get_by_ids(self, ids: list[str]) -> list[dict[str, Any]]:
        """The stored vectors among ``ids``: [{"id", "values", "metadata"?, "namespace"?}]."""
        ...

    async def delete_by_ids(self, ids: list[str]) -> None: ...


class VectorsError(Exception):
    """The Vectorize index refused a call (a limit, a bad filter) or failed:
    the detail is for the log."""


class Verifier(Protocol):
    """Cloudflare Access's signing keys and the runtime's WebCrypto, for
    ``identity``: no signature is checked in Python."""

    async def get(self, url: str) -> tuple[int, bytes]:
        """GETs ``url`` (no redirect followed, a few seconds at most);
        raises ``KeysError`` when no answer came."""
        ...

    async def import_rs256(self, jwk: dict[str, Any]) -> object:
        """An RSA public key (a JWK) imported for RS256; raises ``ValueError``."""
        ...

    async def verify_rs256(self, key: object, signed: bytes, signature: bytes) -> bool:
        """Whether ``signature`` is ``key``'s RSASSA-PKCS1-v1_5 SHA-256 over ``signed``."""
        ...


class KeysError(Exception):
    """Access's keys endpoint gave no answer: the detail is for the log."""


class Schedule(Protocol):
    """A scheduled run's view of the runtime (a Cron Trigger: no request)."""

    @property
    def db(self) -> Database | None:
        """The ``USAGE_DB`` database (spend, alerts), when bound."""
        ...

    @property
    def ai(self) -> Ai:
        """The ``AI`` binding (a knowledge base's ingestion taken up again)."""
        ...

    @property
    def kv(self) -> Kv | None:
        """The ``CACHE`` namespace (the day's usage counts), when bound."""
        ...

    @property
    def outbound(self) -> Outbound: ...

    @property
    def history(self) -> Database | None:
        """The ``DB`` database, when bound."""
        ...

    @property
    def files(self) -> Blobs | None:
        """The ``FILES`` bucket, when bound."""
        ...

    def vectors(self) -> Vectors | None:
        """The ``VECTORS`` index, when bound."""
        ...

    def var(self, name: str) -> object:
        """A ``[vars]`` value or secret, or None when unset."""
        ...


class Platform(Protocol):
    """One request's view of the runtime: its body, settings and bindings."""

    @property
    def ai(self) -> Ai: ...

    @property
    def ai_after_reply(self) -> Ai:
        """The AI binding for work after the reply (shadow trials): not
        aborted with the client, whose signal may fire once the reply is out."""
        ...

    @property
    def rate_limiter(self) -> RateLimiter | None: ...

    @property
    def fetch(self) -> Fetch: ...

    @property
    def outbound(self) -> Outbound:
        """POSTs that outlive the request (spend alerts after the reply)."""
        ...

    @property
    def verifier(self) -> Verifier: ...

    @property
    def db(self) -> Database | None:
        """The ``USAGE_DB`` database, when bound."""
        ...

    @property
    def history(self) -> Database | None:
        """The ``DB`` database (conversations, share links), when bound."""
        ...

    @property
    def files(self) -> Blobs | None:
        """The ``FILES`` bucket (conversations' images), when bound."""
        ...

    @property
    def kv(self) -> Kv | None:
        """The ``CACHE`` namespace, when bound."""
        ...

    def vectors(self) -> Vectors | None:
        """The ``VECTORS`` index (the semantic cache, knowledge bases), when
        bound; without it the features that need it are off."""
        ...

    def wait_until(self, work: Awaitable[None]) -> None:
        """Runs ``work`` after the reply, without delaying it (``ctx.waitUntil``)."""
        ...

    def var(self, name: str) -> object:
        """A ``[vars]`` value or secret, or None when unset."""
        ...

    async def read_body(self, limit: int) -> bytes:
        """The request body; raises ``PayloadTooLarge`` past ``limit`` bytes,
        before reading it all."""
        ...
