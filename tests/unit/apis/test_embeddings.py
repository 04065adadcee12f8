"""``POST /v1/embeddings``: the body's rules (``validation``), the vectors
and their encodings (``embeddings``), and the route through ``app.handle``
over a scripted ``FakeAi``."""

from __future__ import annotations

import array
import asyncio
import base64
import json
import math
from typing import Any

import pytest

from edgechat.apis.embeddings import embed, embeddings_json
from edgechat.apis.embeddings_body import MAX_EMBEDDING_INPUTS, parse_embeddings_request
from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.faults import UpstreamBusy, UpstreamMalformed
from edgechat.core.models import EMBEDDING_CATALOG
from edgechat.core.requests import EmbeddingsRequest, Limits
from tests.unit.apis.test_openai_api import AUTH, incoming, openai_error, serve
from tests.unit.fakes import FakeAi, FakePlatform

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


# --- the vectors ----------------------------------------------------------------------


def run(ai: FakeAi, request: EmbeddingsRequest) -> tuple[list[list[float]], int]:
    return asyncio.run(embed(ai, request, {"gateway": {"id": "g"}}, 5.0))


def test_one_binding_call_for_every_text() -> None:
    ai = FakeAi({}, runs={BGE.id: [answer(1, 2)]})
    request = parse({"input": ["one", "two"]})
    vectors, tokens = run(ai, request)
    assert vectors == [vector(1), vector(2)]
    assert tokens == 0  # the binding counts no tokens for BGE-M3
    (call,) = ai.run_calls
    assert (call.model_id, call.inputs, call.options) == (
        BGE.id,
        {"text": ["one", "two"]},
        {"gateway": {"id": "g"}},
    )


def test_the_models_token_count_when_it_gives_one() -> None:
    ai = FakeAi({}, runs={BGE.id: [{**answer(1), "usage": {"prompt_tokens": 7}}]})
    assert run(ai, parse({"input": "x"}))[1] == 7


@pytest.mark.parametrize(
    "bad",
    [
        {"shape": [1, 1024]},
        answer(1, 2),  # two vectors for one text
        {"data": [vector(1)[:10]]},
        {"data": [["0.5"] * BGE.dimensions]},
        {"data": [[math.nan] * BGE.dimensions]},
    ],
    ids=["no data", "too many", "too short", "strings", "nan"],
)
def test_an_answer_that_is_no_vectors_is_malformed(bad: dict[str, Any]) -> None:
    ai = FakeAi({}, runs={BGE.id: [bad]})
    with pytest.raises(UpstreamMalformed):
        run(ai, parse({"input": "x"}))


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
