"""The semantic cache (``similar``): a question's scope, the lookup over a
``FakeVectors`` and a ``FakeKv``, the race with the model's first bytes, what
is kept after an answer; and through ``app.handle``: a paraphrase answered
from a kept answer, another user's question never, ``Cache-Control:
no-cache`` skipping it, and what never takes part.

Embeddings here are a bag of words hashed into 64 numbers (``bag``): texts
sharing their words are near, others far, as the emulator's are.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from edgechat.answer import similar
from edgechat.answer.framing import Outcome, Similar
from edgechat.config.settings import Settings
from edgechat.core.faults import UpstreamBusy
from edgechat.core.http import Incoming, Reply
from edgechat.core.ids import owner_tag
from edgechat.core.models import Model
from edgechat.core.ports import TIMED_OUT
from edgechat.core.requests import ChatRequest, Message, Slot
from edgechat.web import app
from tests.kit.sse import Parsed, parse
from tests.unit.fakes import (
    Delay,
    FakeAi,
    FakeKv,
    FakePlatform,
    FakeSink,
    FakeUpstream,
    FakeVectors,
    RunCall,
    chat_request,
    model,
    openai_stream,
    usage,
)

GLM, GLM_53, KIMI, LLAMA = model("glm"), model("glm-5.3"), model("kimi"), model("llama")
ON = Settings(semantic_cache="user", models=("glm", "glm-5.3", "kimi", "llama"))
USER = "key:ann"
HANG_S = 10.0


def bag(text: str, dimensions: int = 1024) -> list[float]:
    """A bag of words, each hashed to a signed dimension, normalised."""
    values = [0.0] * dimensions
    for word in "".join(c if c.isalnum() else " " for c in text.lower()).split():
        digest = hashlib.sha256(word.encode()).digest()
        values[digest[0] % dimensions] += 1.0 if digest[1] % 2 else -1.0
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


def request_of(*turns: tuple[str, str], chosen: Model = GLM, **fields: Any) -> ChatRequest:
    return replace(chat_request(chosen, messages=turns), semantic_cache=True, **fields)


def scope(*turns: tuple[str, str], settings: Settings = ON, **fields: Any) -> similar.Scope:
    found = similar.scope_of(request_of(*turns, **fields), settings, USER)
    assert isinstance(found, similar.Scope), found
    return found


# --- the scope -------------------------------------------------------------------------


def test_the_scope_filters_on_the_indexed_properties_only() -> None:
    found = scope(("user", "  What is a cache?  "))
    assert found.question == "What is a cache?"
    assert found.filter() == {"kind": "answer", "owner": found.owner, "scope": found.context}
    assert len(found.context) == 64  # Vectorize indexes a string's first 64 bytes
    assert found.owner == owner_tag(USER)
    assert USER not in found.owner
    assert len(found.vector_id) <= 64


def test_each_user_has_an_owner_of_their_own_and_shared_is_everyones() -> None:
    request = request_of(("user", "Hi"))
    ann, bo = (similar.scope_of(request, ON, who) for who in ("key:ann", "key:bo"))
    assert isinstance(ann, similar.Scope)
    assert isinstance(bo, similar.Scope)
    assert ann.owner != bo.owner
    assert ann.context == bo.context
    shared = replace(ON, semantic_cache="shared")
    for who in ("key:ann", None):
        found = similar.scope_of(request, shared, who)
        assert isinstance(found, similar.Scope)
        assert found.owner == "shared"


@pytest.mark.parametrize(
    "changed",
    [
        request_of(("user", "Before"), ("assistant", "Yes"), ("user", "Hi")),
        request_of(("user", "Hi"), chosen=KIMI),
        request_of(("user", "Hi"), preset_prompt="Answer as a pirate."),
        request_of(("user", "Hi"), params={"response_format": {"type": "json_object"}}),
        request_of(("user", "Hi"), reasoning=False),
    ],
    ids=["what-precedes", "family", "preset", "format", "no-thinking"],
)
def test_the_scope_changes_with_what_shapes_the_answer(changed: ChatRequest) -> None:
    found = similar.scope_of(changed, ON, USER)
    assert isinstance(found, similar.Scope)
    assert found.context != scope(("user", "Hi")).context


def test_the_scope_holds_a_family_and_not_sampling() -> None:
    plain = scope(("user", "Hi")).context
    assert scope(("user", "Hi"), chosen=GLM_53).context == plain
    assert scope(("user", "Hi"), temperature=0.3, params={"seed": 4, "top_p": 0.5}).context == plain
    assert scope(("user", "Hi")).vector_id != scope(("user", "Hi there")).vector_id


def image_turn() -> Message:
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}
    return Message("user", "What is it?", parts=({"type": "text", "text": "What is it?"}, part))


@pytest.mark.parametrize(
    ("request_", "settings", "user", "reason"),
    [
        (request_of(("user", "Hi")), Settings(), USER, "off"),
        (request_of(("user", "Hi")), ON, None, "anonymous"),
        (replace(request_of(("user", "Hi")), semantic_cache=False), ON, USER, "not asked"),
        (request_of(("user", "Hi"), slot=Slot("c" * 20, 0)), ON, USER, "comparison"),
        (request_of(("user", "Hi"), temperature=1.5), ON, USER, "temperature"),
        (request_of(("user", "Hi"), params={"tools": [{"type": "function"}]}), ON, USER, "tools"),
        (replace(request_of(("user", "Hi")), messages=(image_turn(),)), ON, USER, "images"),
        (
            replace(request_of(("user", "Hi")), messages=(Message("user", "Hi", attached="A"),)),
            ON,
            USER,
            "documents",
        ),
        (replace(request_of(("user", "Hi")), knowledge="k" * 24), ON, USER, "documents"),
        (request_of(("user", "Hi"), ("assistant", "Hey")), ON, USER, "no question"),
    ],
)
def test_what_never_takes_part(
    request_: ChatRequest, settings: Settings, user: str | None, reason: str
) -> None:
    assert similar.scope_of(request_, settings, user) == reason


def test_the_highest_temperature_is_a_setting() -> None:
    hot = request_of(("user", "Hi"), temperature=1.5)
    assert isinstance(
        similar.scope_of(hot, replace(ON, semantic_max_temperature=2), USER), similar.Scope
    )
    assert similar.scope_of(request_of(("user", "Hi"), temperature=1.0), ON, USER) != "temperature"


# --- the lookup and the race ------------------------------------------------------------

KEPT_STREAM = b"".join(openai_stream(("content", "Kept answer"), usage=usage(12, 3)))


@dataclass
class Index:
    """A FakeVectors and a FakeKv holding kept answers, and what the lookups embedded."""

    vectors: FakeVectors = field(default_factory=FakeVectors)
    kv: FakeKv = field(default_factory=FakeKv)
    embedded: list[str] = field(default_factory=list)
    log: dict[str, object] = field(default_factory=dict)

    def embed(
        self, text: str, *, gate: asyncio.Event | None = None
    ) -> Callable[[], Awaitable[list[float]]]:
        async def run() -> list[float]:
            self.embedded.append(text)
            if gate is not None:
                await gate.wait()
            return bag(text)

        return run

    def kept(self, question: str, *, model_: Model = GLM, usd: float = 0.002) -> similar.Scope:
        found = scope(("user", question))
        self.kv.items[similar.KEY_PREFIX + found.vector_id] = (
            KEPT_STREAM,
            {"model": model_.id, "question": question, "usd": usd},
            600,
        )
        self.vectors.vectors[found.vector_id] = {
            "id": found.vector_id,
            "values": bag(question),
            "metadata": found.filter(),
        }
        return found

    def lookup(self, question: str, *, look: bool = True, **embed: Any) -> similar.Lookup:
        found = scope(("user", question))
        made = similar.Lookup(
            found, self.embed(question, **embed), self.vectors, self.kv, ON, self.log, look=look
        )
        made.start()
        return made


@dataclass
class Replaced:
    calls: list[tuple[Model, Similar]] = field(default_factory=list)

    def __call__(self, chosen: Model, found: Similar) -> None:
        self.calls.append((chosen, found))


def test_a_kept_answer_before_the_models_first_bytes_replaces_it() -> None:
    index = Index()
    index.kept("What is a cache in computing?")
    model_stream = FakeUpstream([Delay(0.5), *openai_stream(("content", "Model"))])
    replaced = Replaced()

    async def run() -> bytes | None:
        lookup = index.lookup("In computing, what is a cache?")
        raced = similar.Raced(model_stream, lookup, replaced)
        first = await raced.read(5.0)
        assert isinstance(first, bytes | None)
        return first

    assert asyncio.run(run()) == KEPT_STREAM
    assert model_stream.cancelled
    ((chosen, found),) = replaced.calls
    assert chosen is GLM
    assert found.question == "What is a cache in computing?"
    assert 0.9 < found.score <= 1
    assert found.saved_usd == 0.002
    assert index.log["similar"] == f"hit {found.score:.3f}"
    (query,) = [c for c in index.vectors.calls if c["method"] == "query"]
    assert query["filter"] == scope(("user", "x")).filter()
    assert query["top_k"] == 1


def test_the_model_answers_when_it_speaks_first() -> None:
    index = Index()
    index.kept("What is a cache in computing?")
    gate = asyncio.Event()
    chunks = openai_stream(("content", "Model"))
    model_stream = FakeUpstream(chunks)
    replaced = Replaced()

    async def run() -> list[bytes]:
        lookup = index.lookup("In computing, what is a cache?", gate=gate)
        raced = similar.Raced(model_stream, lookup, replaced)
        read = [await raced.read(5.0)]
        gate.set()  # the lookup finds the kept answer, too late
        assert await lookup.settle() is not None
        while (data := await raced.read(5.0)) is not None:
            read.append(data)
        return [r for r in read if isinstance(r, bytes)]

    assert asyncio.run(run()) == chunks
    assert replaced.calls == []
    assert not model_stream.cancelled


def test_a_miss_below_the_least_score_lets_the_model_answer() -> None:
    index = Index()
    index.kept("How do I bake sourdough bread?")
    chunks = openai_stream(("content", "Model"))
    replaced = Replaced()

    async def run() -> bytes | None:
        raced = similar.Raced(
            FakeUpstream([Delay(0.2), *chunks]), index.lookup("What is a cache?"), replaced
        )
        first = await raced.read(5.0)
        assert first is not TIMED_OUT
        return first  # type: ignore[return-value]

    assert asyncio.run(run()) == chunks[0]
    assert replaced.calls == []
    assert str(index.log["similar"]).startswith("miss ")


def test_a_silent_model_keeps_the_race_open_across_heartbeats() -> None:
    index = Index()
    index.kept("What is a cache in computing?")
    gate = asyncio.Event()
    model_stream = FakeUpstream([Delay(5.0), *openai_stream(("content", "Model"))])

    async def run() -> list[object]:
        lookup = index.lookup("In computing, what is a cache?", gate=gate)
        raced = similar.Raced(model_stream, lookup, Replaced())
        first = await raced.read(0.05)  # a heartbeat's wake: nothing yet
        gate.set()
        return [first, await raced.read(5.0)]

    first, second = asyncio.run(run())
    assert first is TIMED_OUT
    assert second == KEPT_STREAM


def test_an_expired_answer_is_a_miss_and_its_vector_goes() -> None:
    index = Index()
    kept = index.kept("What is a cache in computing?")
    del index.kv.items[similar.KEY_PREFIX + kept.vector_id]

    async def run() -> similar.Kept | None:
        lookup = index.lookup("What is a cache in computing?")
        return await lookup.settle()

    assert asyncio.run(run()) is None
    assert kept.vector_id not in index.vectors.vectors
    assert str(index.log["similar"]).startswith("gone ")


@pytest.mark.parametrize("failing", ["vectors", "kv", "embed"])
def test_a_failing_index_kv_or_embedding_is_a_miss_in_the_log(failing: str) -> None:
    index = Index()
    index.kept("What is a cache in computing?")
    index.vectors.fail = failing == "vectors"
    if failing == "kv":
        index.kv.failing.add("get")
    found = scope(("user", "What is a cache in computing?"))

    async def broken() -> list[float]:
        raise RuntimeError("3010: bge-m3 is down")

    async def run() -> similar.Kept | None:
        embed = broken if failing == "embed" else index.embed(found.question)
        lookup = similar.Lookup(found, embed, index.vectors, index.kv, ON, index.log)
        lookup.start()
        return await lookup.settle()

    assert asyncio.run(run()) is None
    assert "similar_error" in index.log


def test_an_answer_of_a_model_no_longer_allowed_is_a_miss() -> None:
    index = Index()
    index.kept("What is a cache in computing?", model_=KIMI)
    found = scope(("user", "What is a cache in computing?"))

    async def run() -> similar.Kept | None:
        settings = replace(ON, models=("glm", "llama"), fallback_chain=("glm", "llama"))
        lookup = similar.Lookup(
            found, index.embed(found.question), index.vectors, index.kv, settings, {}
        )
        lookup.start()
        return await lookup.settle()

    assert asyncio.run(run()) is None


def test_a_fresh_question_is_embedded_and_never_looked_up() -> None:
    index = Index()
    index.kept("What is a cache in computing?")

    async def run() -> similar.Kept | None:
        return await index.lookup("What is a cache in computing?", look=False).settle()

    assert asyncio.run(run()) is None
    assert index.embedded == ["What is a cache in computing?"]
    assert [c["method"] for c in index.vectors.calls] == []


# --- what is kept after an answer -------------------------------------------------------


def outcome_of(chosen: Model = GLM, **fields: Any) -> Outcome:
    return Outcome(**{"model": chosen, "usage": usage(12, 3), "finish_reason": "stop", **fields})


def test_a_complete_answer_is_kept_with_the_lookups_vector() -> None:
    index = Index()

    async def run() -> None:
        lookup = index.lookup("What is a cache in computing?")
        await similar.keep(lookup, index.vectors, index.kv, KEPT_STREAM, outcome_of(), 600, "r1")

    asyncio.run(run())
    found = scope(("user", "What is a cache in computing?"))
    assert index.embedded == ["What is a cache in computing?"]  # embedded once
    body, meta, ttl = index.kv.items[similar.KEY_PREFIX + found.vector_id]
    assert (body, ttl) == (KEPT_STREAM, 600)
    assert meta == {
        "model": GLM.id,
        "question": "What is a cache in computing?",
        "usd": outcome_of().cost_usd(),
    }
    assert index.vectors.vectors[found.vector_id] == {
        "id": found.vector_id,
        "values": bag("What is a cache in computing?"),
        "metadata": found.filter(),
    }


@pytest.mark.parametrize(
    "outcome",
    [
        outcome_of(finish_reason="length"),
        outcome_of(cached=True),
        outcome_of(truncated=True),
        outcome_of(client_gone=True),
        outcome_of(model("glm"), finish_reason="tool_calls"),
    ],
    ids=["length", "cached", "truncated", "client-gone", "tool-calls"],
)
def test_what_is_never_kept(outcome: Outcome) -> None:
    index = Index()

    async def run() -> None:
        lookup = index.lookup("What is a cache in computing?")
        await similar.keep(lookup, index.vectors, index.kv, KEPT_STREAM, outcome, 600, "r1")

    asyncio.run(run())
    assert index.kv.items == {}
    assert index.vectors.vectors == {}


def test_an_answer_found_too_late_is_not_kept_twice() -> None:
    index = Index()
    index.kept("What is a cache in computing?")
    before = dict(index.vectors.vectors)

    async def run() -> None:
        lookup = index.lookup("In computing, what is a cache?")
        await similar.keep(lookup, index.vectors, index.kv, KEPT_STREAM, outcome_of(), 600, "r1")

    asyncio.run(run())
    assert index.vectors.vectors == before


def test_a_long_question_is_kept_short_in_kvs_metadata() -> None:
    index = Index()
    question = '"' * 2000

    async def run() -> None:
        lookup = index.lookup(question)
        await similar.keep(lookup, index.vectors, index.kv, KEPT_STREAM, outcome_of(), 600, "r1")

    asyncio.run(run())
    ((_, meta, _),) = index.kv.items.values()
    assert meta["question"].endswith("…")
    assert len(json.dumps(meta, ensure_ascii=False).encode()) < 1024


# --- through app.handle ----------------------------------------------------------------

ANN, BO = "tok-ann-0123456789", "tok-bo-0123456789"
MODEL_ANSWER = [Delay(0.3), *openai_stream(("content", "From the model"), usage=usage(20, 4))]
EMBED = "@cf/baai/bge-m3"


class EmbeddingAi(FakeAi):
    """A FakeAi whose bge-m3 embeds every text as a ``bag``."""

    async def run(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> dict[str, Any]:
        if model_id != EMBED:
            return await super().run(model_id, inputs, options)
        self.run_calls.append(RunCall(model_id, inputs, options))
        texts = inputs["text"]
        return {"shape": [len(texts), 1024], "data": [bag(t) for t in texts], "pooling": "cls"}


def world(**vars: str) -> FakePlatform:
    return FakePlatform(
        vars={
            "API_KEYS": f"ann:{ANN},bo:{BO}",
            "SEMANTIC_CACHE": "user",
            "CACHE_MODE": "off",
            **vars,
        },
        ai=EmbeddingAi({GLM.id: MODEL_ANSWER}),
        kv=FakeKv(),
        vector_index=FakeVectors(),
    )


@dataclass
class Asked:
    reply: Reply
    body: bytes

    @property
    def events(self) -> Parsed:
        return parse(self.body)

    @property
    def done(self) -> dict[str, Any]:
        return self.events.final.data


async def ask(
    where: FakePlatform,
    text: str,
    token: str = ANN,
    headers: dict[str, str] | None = None,
    **fields: Any,
) -> Asked:
    where.body = json.dumps({"messages": [{"role": "user", "content": text}], **fields}).encode()
    request = Incoming(
        "POST",
        "/chat",
        "https://chat.example.com",
        {"content-type": "application/json", "authorization": f"Bearer {token}", **(headers or {})},
    )
    reply = await app.handle(request, where)
    sink = FakeSink()
    assert reply.stream is not None, reply.body
    await asyncio.wait_for(reply.stream(sink), HANG_S)
    await where.settle()
    return Asked(reply, sink.body)


def queries(where: FakePlatform) -> list[dict[str, Any]]:
    assert where.vector_index is not None
    return [call for call in where.vector_index.calls if call["method"] == "query"]


def test_a_paraphrase_is_answered_from_the_kept_answer() -> None:
    where = world()

    async def run() -> tuple[Asked, Asked]:
        first = await ask(where, "What is a cache in computing?")
        again = await ask(where, "in computing: what is a cache")
        return first, again

    first, again = asyncio.run(run())
    assert "cached" not in first.done
    assert first.events.text() == "From the model"
    cached = again.done["cached"]
    assert cached["kind"] == "similar"
    assert cached["question"] == "What is a cache in computing?"
    assert cached["score"] >= ON.semantic_min_score
    assert again.done["cost_usd"] == 0
    assert again.events.text() == "From the model"
    assert len(where.ai.calls) == 2  # the second call was cancelled
    assert where.ai.calls[1].upstream is not None
    assert where.ai.calls[1].upstream.cancelled
    ann = similar.scope_of(request_of(("user", "x")), ON, "key:ann")
    assert isinstance(ann, similar.Scope)
    assert [q["filter"]["owner"] for q in queries(where)] == [ann.owner, ann.owner]


def test_another_users_similar_question_misses() -> None:
    where = world()

    async def run() -> Asked:
        await ask(where, "What is a cache in computing?", ANN)
        return await ask(where, "What is a cache in computing?", BO)

    bo = asyncio.run(run())
    assert "cached" not in bo.done
    owners = {q["filter"]["owner"] for q in queries(where)}
    assert len(owners) == 2


def test_no_cache_asks_fresh_and_keeps_the_fresh_answer() -> None:
    where = world()

    async def run() -> Asked:
        await ask(where, "What is a cache in computing?")
        return await ask(
            where, "What is a cache in computing?", headers={"cache-control": "no-cache"}
        )

    fresh = asyncio.run(run())
    assert "cached" not in fresh.done
    assert len(queries(where)) == 1  # the fresh one looked nothing up


def test_a_high_temperature_takes_no_part() -> None:
    where = world(SEMANTIC_CACHE_MAX_TEMPERATURE="0.5")

    async def run() -> None:
        await ask(where, "What is a cache in computing?", temperature=0.9)

    asyncio.run(run())
    assert where.vector_index is not None
    assert where.vector_index.calls == []
    assert [c.model_id for c in where.ai.run_calls] == []


def test_a_question_the_response_cache_answers_is_not_looked_up() -> None:
    where = world(CACHE_MODE="all")

    async def run() -> Asked:
        await ask(where, "What is a cache in computing?")
        return await ask(where, "What is a cache in computing?")

    again = asyncio.run(run())
    assert again.done["cached"] is True
    assert len(queries(where)) == 1
    assert len([c for c in where.ai.run_calls if c.model_id == EMBED]) == 1


def test_a_lookup_is_settled_when_the_request_is_refused() -> None:
    where = world()
    busy = UpstreamBusy(detail="3040: busy")
    where.ai = EmbeddingAi({GLM.id: busy, LLAMA.id: busy})

    async def run() -> Reply:
        where.body = json.dumps({"messages": [{"role": "user", "content": "Hi there"}]}).encode()
        request = Incoming(
            "POST",
            "/chat",
            "https://chat.example.com",
            {"content-type": "application/json", "authorization": f"Bearer {ANN}"},
        )
        reply = await app.handle(request, where)
        await where.settle()
        return reply

    reply = asyncio.run(run())
    assert reply.status == 503
    assert len(queries(where)) == 1  # the lookup ran to its end, in the background


def test_the_questions_embedding_is_counted_beside_the_answer() -> None:
    where = world()

    async def run() -> None:
        await ask(where, "What is a cache in computing?")

    asyncio.run(run())
    assert where.kv is not None
    counted = [meta for key, (_, meta, _) in where.kv.items.items() if key.startswith("usage:v1:")]
    assert sorted(meta["model"] for meta in counted) == [EMBED, GLM.id]
    (embedded,) = [meta for meta in counted if meta["model"] == EMBED]
    assert embedded["prompt"] > 0
    assert embedded["user"] == "key:ann"


def test_a_fallback_models_stream_races_the_lookup_too() -> None:
    first = world()
    later = world()
    later.kv, later.vector_index = first.kv, first.vector_index
    slow = [Delay(0.3), *openai_stream(("content", "Llama's own"), usage=usage(9, 2))]
    later.ai = EmbeddingAi({GLM.id: UpstreamBusy(detail="3040: busy"), LLAMA.id: slow})

    async def run() -> Asked:
        await ask(first, "What is a cache in computing?")
        return await ask(later, "In computing, what is a cache?")

    again = asyncio.run(run())
    assert again.done["cached"]["kind"] == "similar"
    assert again.done["model"] == GLM.id
    assert "fallback_from" not in again.done
    assert again.events.text() == "From the model"
    assert [c.model_id for c in later.ai.calls] == [GLM.id, LLAMA.id]
