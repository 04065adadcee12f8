"""``POST /v1/embeddings``: the body's rules (``validation``), the vectors'
encodings (``embeddings``), and the route through ``app.handle`` over a
scripted ``FakeAi``: what it reports, charges and refuses. The call itself
(``answer.embedding``) is tested in tests/unit/answer/test_embedding.py."""

from __future__ import annotations

import array
import asyncio
import base64
import json
import math
from typing import Any

import pytest

from edgechat.apis.embeddings import embeddings_json
from edgechat.apis.embeddings_body import MAX_EMBEDDING_INPUTS, parse_embeddings_request
from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.faults import UpstreamBusy
from edgechat.core.http import Reply
from edgechat.core.models import EMBEDDING_CATALOG
from edgechat.core.requests import EmbeddingsRequest, Limits
from edgechat.users.usage import NEURONS_PER_USD, day_of
from edgechat.web import app
from tests.unit.apis.test_openai_api import AUTH, TOKEN, incoming, openai_error, serve
from tests.unit.fakes import FakeAi, FakeDb, FakeKv, FakePlatform

BGE = EMBEDDING_CATALOG[0]
LIMITS = Limits()
MARKER = "SECRET-MARKER-e1"


def vector(seed: int) -> list[float]:
    return [math.sin(seed + i) for i in range(BGE.dimensions)]


def answer(*seeds: int) -> dict[str, Any]:
    """What the binding answers for texts of these seeds."""
    return {
        "shape": [len(seeds), BGE.dimensions],
        "data": [vector(s) for s in seeds],
        "pooling": "cls",
    }


def parse(body: object, limits: Limits = LIMITS) -> EmbeddingsRequest:
    return parse_embeddings_request(json.dumps(body).encode(), limits)


def refused(body: object, limits: Limits = LIMITS) -> str:
    with pytest.raises(BadRequest) as caught:
        parse(body, limits)
    assert type(caught.value) is BadRequest
    assert MARKER not in caught.value.public_message
    return caught.value.public_message


# --- the body -----------------------------------------------------------------------


def test_bge_m3_is_in_the_catalog() -> None:
    assert (BGE.alias, BGE.id, BGE.dimensions) == ("bge-m3", "@cf/baai/bge-m3", 1024)


@pytest.mark.parametrize("model", [None, "bge-m3", "@cf/baai/bge-m3"])
def test_a_string_or_a_list_of_strings(model: str | None) -> None:
    body: dict[str, object] = {"input": "边缘"}
    if model is not None:
        body["model"] = model
    assert parse(body) == EmbeddingsRequest(model=BGE, texts=("边缘",), encoding_format="float")
    listed = parse({**body, "input": ["a", "b"], "encoding_format": "base64", "user": "u"})
    assert listed.texts == ("a", "b")
    assert listed.encoding_format == "base64"
    assert parse({"input": "x", "dimensions": 1024}).texts == ("x",)


def test_an_unknown_model_is_model_not_found_and_not_repeated() -> None:
    with pytest.raises(ModelNotFound) as caught:
        parse({"model": MARKER, "input": "x"})
    assert MARKER not in caught.value.public_message
    with pytest.raises(ModelNotFound):
        parse({"model": "glm", "input": "x"})  # a chat model embeds nothing


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ({}, "input is required."),
        (
            {"input": [1, 2, 3]},
            f"input must be a string or a list of 1 to {MAX_EMBEDDING_INPUTS} strings "
            "(token arrays are not taken).",
        ),
        (
            {"input": []},
            f"input must be a string or a list of 1 to {MAX_EMBEDDING_INPUTS} strings "
            "(token arrays are not taken).",
        ),
        (
            {"input": ["x"] * (MAX_EMBEDDING_INPUTS + 1)},
            f"input must be a string or a list of 1 to {MAX_EMBEDDING_INPUTS} strings "
            "(token arrays are not taken).",
        ),
        ({"input": ["ok", " "]}, "input[1] must not be empty."),
        (
            {"input": MARKER * 1000},
            f"input is longer than {LIMITS.max_message_chars} characters.",
        ),
        (
            {"input": "x", "encoding_format": "int8"},
            "encoding_format must be one of float, base64.",
        ),
        (
            {"input": "x", "dimensions": 256},
            "dimensions must be 1024 for @cf/baai/bge-m3: its vectors are not shortened.",
        ),
        ({"input": "x", "model": 7}, "model must be a string."),
        ({"input": "x", "user": 7}, "user must be a string."),
        (
            {"input": "x", "prompt": MARKER},
            "The request has a field edgechat does not support; supported: "
            "model, input, encoding_format, dimensions, user.",
        ),
    ],
)
def test_each_rule_is_a_400_naming_it(body: dict[str, object], rule: str) -> None:
    assert refused(body) == rule


def test_the_texts_together_keep_the_conversation_limit() -> None:
    limits = Limits(max_total_chars=10)
    assert refused({"input": ["12345", "678901"]}, limits) == (
        "messages are longer than 10 characters in total."
    )


# --- the body's encodings ---------------------------------------------------------------


def test_floats_and_base64_say_the_same() -> None:
    vectors = [vector(3), vector(4)]
    floats = embeddings_json(parse({"input": ["a", "b"]}), vectors, 5)
    assert floats == {
        "object": "list",
        "data": [
            {"object": "embedding", "index": 0, "embedding": vectors[0]},
            {"object": "embedding", "index": 1, "embedding": vectors[1]},
        ],
        "model": BGE.id,
        "usage": {"prompt_tokens": 5, "total_tokens": 5},
    }
    packed = embeddings_json(parse({"input": ["a", "b"], "encoding_format": "base64"}), vectors, 5)
    for item, exact in zip(packed["data"], vectors, strict=True):
        decoded = array.array("f", base64.b64decode(item["embedding"]))
        assert len(decoded) == BGE.dimensions
        assert decoded.tolist() == pytest.approx(exact, abs=1e-6)


# --- the route --------------------------------------------------------------------------


def test_the_route_answers_openais_list() -> None:
    ai = FakeAi({}, runs={BGE.id: [answer(9)]})
    body = json.dumps({"model": "bge-m3", "input": "你好"}).encode()
    where = FakePlatform(vars={"API_TOKEN": "tok-123-0123456789"}, body=body, ai=ai)
    reply, raw = serve(incoming("POST", "/v1/embeddings", AUTH), where)
    assert reply.status == 200
    body = json.loads(raw)
    assert body["data"] == [{"object": "embedding", "index": 0, "embedding": vector(9)}]
    assert body["model"] == BGE.id


def test_the_route_refuses_in_the_openai_shape_before_any_call() -> None:
    ai = FakeAi({}, runs={BGE.id: []})
    where = FakePlatform(vars={"API_TOKEN": "tok-123-0123456789"}, body=b'{"input": []}', ai=ai)
    reply, raw = serve(incoming("POST", "/v1/embeddings", AUTH), where)
    assert reply.status == 400
    assert openai_error(reply, raw)["code"] == "invalid_request"
    assert ai.run_calls == []


def test_a_busy_model_is_the_openai_503() -> None:
    ai = FakeAi({}, runs={BGE.id: [UpstreamBusy(detail="3040")]})
    where = FakePlatform(vars={"API_TOKEN": "tok-123-0123456789"}, body=b'{"input": "x"}', ai=ai)
    reply, raw = serve(incoming("POST", "/v1/embeddings", AUTH), where)
    assert reply.status == 503
    assert openai_error(reply, raw)["code"] == "model_busy"
    assert reply.headers["Retry-After"]


def test_without_api_token_the_route_is_off() -> None:
    ai = FakeAi({}, runs={BGE.id: []})
    where = FakePlatform(vars={}, body=b'{"input": "x"}', ai=ai)
    reply, raw = serve(incoming("POST", "/v1/embeddings", AUTH), where)
    assert reply.status == 403
    assert openai_error(reply, raw)["code"] == "api_disabled"


# --- paid for like an answer ------------------------------------------------------------

API = {"API_KEYS": f"ann:{TOKEN}"}


def embed_route(where: FakePlatform) -> tuple[Reply, dict[str, Any]]:
    """``POST /v1/embeddings``, then everything it left to run after its reply."""

    async def run() -> tuple[Reply, bytes]:
        reply = await app.handle(incoming("POST", "/v1/embeddings", AUTH), where)
        await where.settle()
        return reply, reply.body

    reply, raw = asyncio.run(run())
    return reply, json.loads(raw)


def test_the_input_tokens_are_reported_and_charged_to_the_user_and_the_account() -> None:
    db, kv = FakeDb(), FakeKv()
    texts = ["edge computing", "边缘计算"]  # 14 characters: 4 tokens; 4 CJK: 4 tokens
    where = FakePlatform(
        vars=API,
        body=json.dumps({"input": texts}).encode(),
        ai=FakeAi({}, runs={BGE.id: [answer(1, 2)]}),
        db=db,
        kv=kv,
    )
    reply, body = embed_route(where)
    assert reply.status == 200
    assert body["usage"] == {"prompt_tokens": 8, "total_tokens": 8}
    cost = 8 * BGE.price_in_per_m / 1e6
    rows = db.connection.execute("SELECT user, requests, usd, neurons FROM spend ORDER BY user")
    assert [tuple(row) for row in rows] == [
        ("*", 1, pytest.approx(cost), pytest.approx(cost * NEURONS_PER_USD)),
        ("key:ann", 1, pytest.approx(cost), pytest.approx(cost * NEURONS_PER_USD)),
    ]
    ((key, (_, meta, _)),) = kv.items.items()
    assert key.startswith(f"usage:v1:{day_of()}:")
    assert meta == {
        "model": BGE.id,
        "user": "key:ann",
        "prompt": 8,
        "completion": 0,
        "prompt_cached": 0,
        "usd": pytest.approx(cost),
        "cached": False,
    }


def test_the_model_s_own_count_is_what_is_charged() -> None:
    db = FakeDb()
    where = FakePlatform(
        vars=API,
        body=b'{"input": "x"}',
        ai=FakeAi({}, runs={BGE.id: [{**answer(1), "usage": {"prompt_tokens": 1000}}]}),
        db=db,
    )
    _, body = embed_route(where)
    assert body["usage"]["prompt_tokens"] == 1000
    usd = db.connection.execute("SELECT usd FROM spend WHERE user = '*'").fetchone()[0]
    assert usd == pytest.approx(1000 * BGE.price_in_per_m / 1e6)


def test_embeddings_are_refused_once_the_budget_is_spent_and_nothing_is_charged() -> None:
    db = FakeDb()
    db.connection.execute(
        "CREATE TABLE spend (day TEXT NOT NULL, user TEXT NOT NULL, requests INTEGER NOT NULL "
        "DEFAULT 0, usd REAL NOT NULL DEFAULT 0, neurons REAL NOT NULL DEFAULT 0, "
        "PRIMARY KEY (day, user))"
    )
    for user in ("key:ann", "*"):
        db.connection.execute("INSERT INTO spend VALUES (?, ?, 1, 0.5, 0)", [day_of(), user])
    where = FakePlatform(
        vars={**API, "USER_DAILY_USD": "0.5"},
        body=b'{"input": "x"}',
        ai=FakeAi({}, runs={BGE.id: [answer(1)]}),
        db=db,
    )
    reply, body = embed_route(where)
    assert reply.status == 429
    assert body["error"]["code"] == "budget_exhausted"
    assert reply.headers["Retry-After"]
    assert db.connection.execute("SELECT sum(requests) FROM spend").fetchone()[0] == 2
    # And the account's Neuron limit, with no provider to embed instead.
    where = FakePlatform(
        vars={**API, "DAILY_NEURON_LIMIT": "1"},
        body=b'{"input": "x"}',
        ai=FakeAi({}, runs={BGE.id: [answer(1)]}),
        db=db,
    )
    db.connection.execute("UPDATE spend SET neurons = 5")
    reply, body = embed_route(where)
    assert reply.status == 429
    assert body["error"]["code"] == "quota_exhausted"
