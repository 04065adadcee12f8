"""The semantic cache: an answer given again to a similar question
(``SEMANTIC_CACHE``).

A question's **scope** is what must match exactly: who may see the answer
(``owner``: a digest of the user's id, or ``shared``) and a digest of
everything but the question that shapes an answer (what precedes the last
question, the system prompt in effect, the model family, the parameters
other than sampling). Both go into the Vectorize query as metadata filters
on indexed properties (``kind``, ``owner``, ``scope``), so a query never
sees another scope's vectors; the question alone is embedded (bge-m3), and
its similarity to a kept question is the query's cosine score. At
``SEMANTIC_CACHE_MIN_SCORE`` or above, the kept answer is given again.

The answer itself is kept in KV (``CACHE``, key ``similar:v1:<vector id>``,
``SEMANTIC_CACHE_TTL_S``), not in the vector's metadata: Vectorize keeps at
most 10 KiB of metadata per vector and returns it with every match, has no
expiry, while KV holds an answer's whole stream (up to 1 MiB recorded) and
forgets it by itself. A vector whose answer has expired is deleted when a
query next finds it.

The lookup never delays a miss: it starts beside the model call
(``Lookup``), and races the model's first bytes (``Raced``). A hit before
them cancels the model call and replays the kept stream; otherwise the
model's answer goes on and the lookup only finishes for what comes after:
its vector (the question is embedded once) is upserted with the answer once
the answer is complete. Any failure of the embedding, the index or KV is
logged and the model answers: the cache never fails a request.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from edgechat.answer.cache import CachedUpstream, keepable
from edgechat.answer.framing import Outcome, Similar
from edgechat.config.settings import Settings
from edgechat.core.ids import owner_tag
from edgechat.core.models import Model, find
from edgechat.core.ports import (
    Forward,
    Kv,
    KvError,
    Relay,
    Sink,
    TimedOut,
    UpstreamStream,
    Vectors,
    VectorsError,
)
from edgechat.core.requests import ChatRequest

__all__ = [
    "EMBED_TIMEOUT_S",
    "KEY_PREFIX",
    "KIND",
    "SHARED",
    "Kept",
    "Lookup",
    "Raced",
    "Scope",
    "keep",
    "scope_of",
]

# The vector's ``kind``: an answer of the semantic cache (knowledge bases
# keep ``chunk``s in the same index).
KIND = "answer"
# The owner of every answer under SEMANTIC_CACHE=shared.
SHARED = "shared"
KEY_PREFIX = "similar:v1:"
# Generation parameters that only vary an answer's wording: not part of the
# scope. Everything else the request carries is.
_SAMPLING = frozenset(("top_p", "seed", "frequency_penalty", "presence_penalty"))
# The kept question, as JSON, in KV's metadata (at most 1,024 bytes there).
_QUESTION_JSON_BYTES = 600
# The question's embedding, at most: bge-m3 answers one short text in well
# under a second, and what a lookup leaves for after the reply must end
# within waitUntil's 30 s.
EMBED_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Scope:
    """A question and what it must share with a kept one."""

    owner: str
    context: str
    question: str

    def filter(self) -> dict[str, str]:
        """The query's metadata filter: every property indexed
        (``wrangler.toml``), each compared for equality."""
        return {"kind": KIND, "owner": self.owner, "scope": self.context}

    @property
    def vector_id(self) -> str:
        """The same question in the same scope has one vector (asked again,
        its answer is replaced). 40 hex digits: Vectorize takes ids of up
        to 64 bytes."""
        seed = "\n".join((self.owner, self.context, self.question))
        return "a" + _digest(seed)[:40]


def scope_of(request: ChatRequest, settings: Settings, user_id: str | None) -> Scope | str:
    """The question's scope, or why it takes no part in the semantic cache
    (a short reason for the log). ``user_id``: None for an anonymous user."""
    if settings.semantic_cache == "off":
        return "off"
    if request.slot is not None:
        return "comparison"  # the comparison measures its model, not the cache
    if not request.semantic_cache:
        return "not asked"
    owner = SHARED if settings.semantic_cache == SHARED else None
    if owner is None:
        if user_id is None:
            # One anonymous user is every anonymous client: per-user is
            # meaningless, and per-address leaks across a shared address.
            return "anonymous"
        owner = owner_tag(user_id)
    last = request.messages[-1]
    if last.role != "user" or not last.content.strip():
        return "no question"
    if any(m.parts for m in request.messages):
        return "images"
    if any(m.documents or m.attached for m in request.messages) or request.knowledge:
        return "documents"  # the answer rests on what they say, which may change
    if "tools" in request.params or "tool_choice" in request.params or request.has_tool_turns():
        return "tools"
    if request.temperature is not None and request.temperature > settings.semantic_max_temperature:
        return "temperature"
    return Scope(owner, _context(request, settings), last.content.strip())


def _context(request: ChatRequest, settings: Settings) -> str:
    """A digest of all that shapes the answer but the question: 64 hex
    digits, the 64 bytes of a string Vectorize indexes."""
    prompt = (request.preset_prompt or settings.system_prompt) if request.server_prompt else None
    canonical = json.dumps(
        {
            "family": request.model.family,
            "prompt": prompt,
            "before": [m.wire() for m in request.messages[:-1]],
            "params": {k: v for k, v in request.params.items() if k not in _SAMPLING},
            "reasoning": request.reasoning,
        },
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return _digest(canonical)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True, slots=True)
class Kept:
    """A kept answer the lookup found: its model, its stream and what it says."""

    model: Model
    body: bytes
    similar: Similar


class Lookup:
    """The lookup, started beside the model call: the question's vector
    (``vector``, already under way), its nearest kept neighbour in scope,
    and that neighbour's answer from KV. ``hit`` resolves to the kept answer
    or None and never raises; ``vector`` stays readable for the store."""

    __slots__ = (
        "_embed",
        "_kv",
        "_log",
        "_look_up",
        "_settings",
        "_vector",
        "_vectors",
        "hit",
        "scope",
        "tidy",
    )

    def __init__(
        self,
        scope: Scope,
        embed: Callable[[], Awaitable[list[float]]],
        vectors: Vectors,
        kv: Kv,
        settings: Settings,
        log: dict[str, object],
        *,
        look: bool = True,
    ) -> None:
        self.scope = scope
        self._embed = embed
        self._vectors = vectors
        self._kv = kv
        self._settings = settings
        self._log = log
        # False (``Cache-Control: no-cache``, the page's Ask fresh): no
        # lookup, but the question is still embedded for keeping the answer.
        self._look_up = look
        self._vector: asyncio.Future[list[float]] | None = None
        # Resolves to the kept answer or None, never raises; None until started.
        self.hit: asyncio.Future[Kept | None] | None = None
        # A dead vector's deletion, for after the reply.
        self.tidy: Awaitable[None] | None = None

    def start(self) -> None:
        """Starts the embedding and the lookup (with the model call, so
        neither waits for the other); once."""
        if self.hit is not None:
            return
        self._vector = asyncio.ensure_future(self._embed())
        self.hit = asyncio.ensure_future(self._look() if self._look_up else _nothing())

    async def vector(self) -> list[float] | None:
        """The question's vector, once embedded; None when that failed or
        never started."""
        if self._vector is None:
            return None
        try:
            return await self._vector
        except Exception as exc:
            self._log.setdefault("similar_error", f"embed: {type(exc).__name__}: {exc}")
            return None

    async def _look(self) -> Kept | None:
        values = await self.vector()
        if values is None:
            return None
        try:
            matches = await self._vectors.query(
                values, top_k=1, filter=self.scope.filter(), metadata=False
            )
        except VectorsError as exc:
            self._log["similar_error"] = f"query: {exc}"
            return None
        if not matches:
            self._log["similar"] = "miss"
            return None
        best = matches[0]
        score = float(best.get("score", 0.0))
        if score < self._settings.semantic_min_score:
            self._log["similar"] = f"miss {score:.3f}"
            return None
        kept = await self._kept(str(best["id"]), score)
        self._log["similar"] = f"hit {score:.3f}" if kept is not None else f"gone {score:.3f}"
        return kept

    async def _kept(self, vector_id: str, score: float) -> Kept | None:
        try:
            found = await self._kv.get(KEY_PREFIX + vector_id)
        except KvError as exc:
            self._log["similar_error"] = f"get: {exc}"
            return None
        if found is None:
            # Its answer expired (KV forgets, Vectorize does not): the
            # vector goes, so it no longer hides a live neighbour.
            self.tidy = _forget(self._vectors, vector_id)
            return None
        body, meta = found
        model = find(meta.get("model", "")) if isinstance(meta.get("model"), str) else None
        if model is None or model.alias not in self._settings.models or not body:
            return None  # kept under another catalog or another MODELS
        question = meta.get("question")
        usd = meta.get("usd")
        similar = Similar(
            score=round(score, 4),
            question=question if isinstance(question, str) else "",
            saved_usd=float(usd) if isinstance(usd, int | float) and usd >= 0 else 0.0,
        )
        return Kept(model, body, similar)

    async def settle(self) -> Kept | None:
        """Waits for the lookup to end (after the reply: nothing is left
        pending when the request ends); what it found."""
        if self.hit is None:
            return None
        try:
            kept = await self.hit
        except Exception as exc:
            self._log.setdefault("similar_error", f"lookup: {type(exc).__name__}: {exc}")
            kept = None
        if self.tidy is not None:
            await self.tidy
        await self.vector()
        return kept


async def _nothing() -> None:
    return None


async def _forget(vectors: Vectors, vector_id: str) -> None:
    with contextlib.suppress(VectorsError):
        await vectors.delete_by_ids([vector_id])


# What an answer does when the kept answer replaces its model's: the model
# that gave the kept answer, and what the closing says of it.
Replaced = Callable[[Model, Similar], None]


class Raced:
    """``ports.UpstreamStream``: the model's stream, unless the lookup finds
    a kept answer before the model's first bytes arrive; then the model call
    is cancelled and the kept stream is read instead. Each read before the
    race is settled waits for whichever comes first; after it, reads go
    straight to the stream that won."""

    __slots__ = ("_current", "_lookup", "_replaced")

    def __init__(self, upstream: UpstreamStream, lookup: Lookup, replaced: Replaced) -> None:
        self._current = upstream
        self._lookup: Lookup | None = lookup
        self._replaced = replaced

    async def read(self, within: float) -> bytes | TimedOut | None:
        lookup = self._lookup
        if lookup is None or lookup.hit is None:
            return await self._current.read(within)
        hit = lookup.hit
        if not hit.done():
            reading = asyncio.ensure_future(self._current.read(within))
            await asyncio.wait((reading, hit), return_when=asyncio.FIRST_COMPLETED)
            if reading.done():
                data = reading.result()
                if not isinstance(data, TimedOut):
                    self._lookup = None  # the model spoke first: it answers
                return data
            kept = hit.result()
            if kept is None:
                self._lookup = None
                return await reading
            reading.cancel()
            with contextlib.suppress(BaseException):
                await reading
            return await self._replay(kept)
        self._lookup = None
        kept = hit.result()
        if kept is None:
            return await self._current.read(within)
        return await self._replay(kept)

    async def _replay(self, kept: Kept) -> bytes | TimedOut | None:
        await self._current.cancel()
        self._current = CachedUpstream(kept.body)
        self._lookup = None
        self._replaced(kept.model, kept.similar)
        return await self._current.read(0.0)

    async def relay(self, sink: Sink) -> Relay:
        return await self._current.relay(sink)

    async def forward(self, sink: Sink) -> Forward:
        return await self._current.forward(sink)

    async def cancel(self) -> None:
        await self._current.cancel()


@dataclass(frozen=True, slots=True)
class Race:
    """``answer.Race``: what puts a lookup beside each model call."""

    lookup: Lookup

    def beside(self, upstream: UpstreamStream, replaced: Replaced) -> UpstreamStream:
        self.lookup.start()
        return Raced(upstream, self.lookup, replaced)


async def keep(
    lookup: Lookup,
    vectors: Vectors,
    kv: Kv,
    body: bytes | None,
    outcome: Outcome,
    ttl_s: int,
    request_id: str,
) -> None:
    """After a complete answer (``wait_until``): its question's vector
    upserted with its scope, and the answer's stream in KV, unless the
    lookup found a kept answer (given, or found too late: one is enough)."""
    kept = await lookup.settle()
    body = None if kept is not None else keepable(body, outcome)
    if body is None or outcome.model is None or outcome.model.provider is not None:
        return
    if outcome.finish_reason == "length":
        return  # cut short: not an answer to give a different question
    values = await lookup.vector()
    if values is None:
        return
    scope = lookup.scope
    vector_id = scope.vector_id
    metadata: dict[str, object] = {"model": outcome.model.id, "question": _short(scope.question)}
    cost = outcome.cost_usd()
    if cost is not None:
        metadata["usd"] = cost
    try:
        # The answer first: a vector never points at nothing for long.
        await kv.put(KEY_PREFIX + vector_id, body, ttl_s=ttl_s, metadata=metadata)
        await vectors.upsert([{"id": vector_id, "values": values, "metadata": scope.filter()}])
    except (KvError, VectorsError) as exc:
        print(json.dumps({"request_id": request_id, "similar_error": f"keep: {exc}"}))


def _short(question: str) -> str:
    """The question as KV's metadata holds it: at most
    ``_QUESTION_JSON_BYTES`` of JSON, cut with an ellipsis."""
    text = question
    while len(json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")) > (
        _QUESTION_JSON_BYTES
    ):
        text = text[: max(0, len(text) - max(1, len(text) // 8))]
    return text if text == question else text.rstrip() + "…"
