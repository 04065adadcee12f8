"""``answer.embedding``: one binding call for every text, the vectors
checked, their input tokens (the model's count, else the estimate) and
their cost at bge-m3's list price; and ``billing``, which counts them like
an answer."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from edgechat.answer import billing
from edgechat.answer.embedding import BGE_M3, Embedded, bill_of, embed
from edgechat.config.settings import Settings
from edgechat.core.faults import UpstreamMalformed, UpstreamTimeout
from edgechat.media.documents import estimate_tokens
from edgechat.users.usage import NEURONS_PER_USD
from tests.unit.fakes import STALL, FakeAi, FakeDb, FakeKv, FakePlatform


def vector(seed: int) -> list[float]:
    return [math.sin(seed + i) for i in range(BGE_M3.dimensions)]


def answer(*seeds: int) -> dict[str, Any]:
    """What the binding answers for texts of these seeds."""
    return {
        "shape": [len(seeds), BGE_M3.dimensions],
        "data": [vector(s) for s in seeds],
        "pooling": "cls",
    }


def run(ai: FakeAi, texts: list[str], timeout_s: float = 5.0) -> Embedded:
    return asyncio.run(embed(ai, texts, timeout_s=timeout_s, options={"gateway": {"id": "g"}}))


def test_bge_m3_is_the_model_and_its_price_is_the_list_price() -> None:
    # https://developers.cloudflare.com/workers-ai/platform/pricing/: $0.012 per M input tokens.
    assert (BGE_M3.id, BGE_M3.dimensions, BGE_M3.price_in_per_m) == ("@cf/baai/bge-m3", 1024, 0.012)


def test_one_binding_call_for_every_text_and_the_tokens_estimated() -> None:
    ai = FakeAi({}, runs={BGE_M3.id: [answer(1, 2)]})
    texts = ["How do I reset my password?", "边缘计算是什么"]
    got = run(ai, texts)
    assert got.vectors == [vector(1), vector(2)]
    # The binding counts no tokens for bge-m3: 27 characters are 7, 7 CJK characters 7.
    assert (got.tokens, got.estimated) == (14, True)
    assert got.tokens == estimate_tokens(texts[0]) + estimate_tokens(texts[1])
    assert got.cost_usd == pytest.approx(14 * 0.012 / 1e6)
    assert got.neurons == pytest.approx(got.cost_usd * NEURONS_PER_USD)
    (call,) = ai.run_calls
    assert (call.model_id, call.inputs, call.options) == (
        BGE_M3.id,
        {"text": texts},
        {"gateway": {"id": "g"}},
    )


def test_the_models_token_count_when_it_gives_one() -> None:
    ai = FakeAi({}, runs={BGE_M3.id: [{**answer(1), "usage": {"prompt_tokens": 7}}]})
    got = run(ai, ["x"])
    assert (got.tokens, got.estimated) == (7, False)
    assert got.cost_usd == pytest.approx(7 * 0.012 / 1e6)


@pytest.mark.parametrize(
    "bad",
    [
        {"shape": [1, 1024]},
        answer(1, 2),  # two vectors for one text
        {"data": [vector(1)[:10]]},
        {"data": [["0.5"] * BGE_M3.dimensions]},
        {"data": [[math.nan] * BGE_M3.dimensions]},
    ],
    ids=["no data", "too many", "too short", "strings", "nan"],
)
def test_an_answer_that_is_no_vectors_is_malformed(bad: dict[str, Any]) -> None:
    ai = FakeAi({}, runs={BGE_M3.id: [bad]})
    with pytest.raises(UpstreamMalformed):
        run(ai, ["x"])


def test_a_model_that_does_not_answer_in_time_is_a_timeout() -> None:
    ai = FakeAi({}, runs={BGE_M3.id: [STALL]})
    with pytest.raises(UpstreamTimeout):
        run(ai, ["x"], timeout_s=0.05)
    assert ai.run_calls[0].abandoned


def time() -> float:
    return 0.0


def test_billing_counts_an_embedding_like_an_answer() -> None:
    db, kv = FakeDb(), FakeKv()
    where = FakePlatform(db=db, kv=kv)
    embedded = Embedded([vector(1)], 1000, True, 0.000012, 0.000012 * NEURONS_PER_USD)
    bill = bill_of(embedded)
    assert (bill.model, bill.prompt_tokens, bill.cost_usd) == (BGE_M3, 1000, 0.000012)
    settings = Settings()
    asyncio.run(billing.count(where, settings, bill, user="key:a", request_id="r", clock=lambda: 0))
    rows = db.connection.execute("SELECT day, user, usd FROM spend ORDER BY user").fetchall()
    assert [tuple(row) for row in rows] == [
        ("1970-01-01", "*", 0.000012),
        ("1970-01-01", "key:a", 0.000012),
    ]
    ((_, meta, _),) = kv.items.values()
    assert (meta["model"], meta["user"], meta["prompt"]) == (BGE_M3.id, "key:a", 1000)


def test_billing_leaves_nothing_to_run_when_there_is_nothing_to_count() -> None:
    bill = bill_of(Embedded([vector(1)], 0, True, 0.0, 0.0))
    where = FakePlatform()  # no database, no KV
    asyncio.run(
        billing.count(where, Settings(), bill, user="key:a", request_id="r", clock=lambda: 0)
    )
    # Nobody to charge: the usage row is the anonymous one, the budgets are not touched.
    db, kv = FakeDb(), FakeKv()
    nobody = FakePlatform(db=db, kv=kv)
    paid = bill_of(Embedded([vector(1)], 10, True, 0.1, 0.1 * NEURONS_PER_USD))
    asyncio.run(billing.count(nobody, Settings(), paid, user=None, request_id="r", clock=lambda: 0))
    assert db.batches == []
    ((_, meta, _),) = kv.items.values()
    assert meta["user"] == "anonymous"
