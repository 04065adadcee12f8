"""Daily usage (``usage``): one KV key per complete answer (``count``), a
day's keys added up per model (``read_day``) across pages, and
``GET /api/usage`` through ``app.handle``: behind ``API_TOKEN`` when it is set,
404 without a ``CACHE`` binding, 503 ``store_unavailable`` when KV fails."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from edgechat.core.errors import StoreUnavailable
from edgechat.core.faults import UpstreamError
from edgechat.core.http import Incoming, Reply
from edgechat.core.models import Model, cost_usd
from edgechat.core.ports import KvError
from edgechat.users.usage import (
    KEEP_S,
    MAX_LIST_CALLS,
    MAX_PAGES,
    MAX_USAGE_DAYS,
    NEURONS_PER_USD,
    PREFIX,
    count,
    day_of,
    read_days,
    usage_days,
)
from edgechat.web import app
from tests.unit.fakes import Fail, FakeAi, FakeKv, FakePlatform, FakeSink, model, openai_stream
from tests.unit.fakes import usage as counts

GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")
DAY = "2026-03-04"
SELF = "https://chat.example.com"
NOTE = (
    "Counted in KV as answers complete: eventually consistent, an answer may take a minute to show."
)


def entry(
    kv: FakeKv,
    name: str,
    *,
    day: str = DAY,
    **meta: Any,
) -> None:
    """One answer's key as ``count`` writes it, put straight into the KV."""
    kv.items[f"{PREFIX}{day}:{name}"] = (b"", meta, KEEP_S)


def answer_meta(
    chosen: Model, prompt: int, completion: int, *, cached: bool = False
) -> dict[str, Any]:
    return {
        "model": chosen.id,
        "prompt": prompt,
        "completion": completion,
        "usd": 0.0 if cached else cost_usd(chosen, counts(prompt, completion)),
        "cached": cached,
    }


def read(kv: FakeKv, day: str = DAY) -> dict[str, Any]:
    return asyncio.run(read_days(kv, [day]))


ZERO = {
    "requests": 0,
    "cached": 0,
    "prompt_tokens": 0,
    "cached_prompt_tokens": 0,
    "completion_tokens": 0,
    "neurons": 0,
    "cost_usd": 0.0,
}


def empty_day(day: str) -> dict[str, Any]:
    return {
        "day": day,
        "days": 1,
        "from": day,
        "models": [],
        "users": [],
        "daily": [{"day": day, **ZERO}],
        "rows": [],
        "total": ZERO,
        "free_allocation_neurons": 10_000,
        "auto": {"requests": 0, "cost_usd": 0.0, "baseline_usd": 0.0, "saved_usd": 0.0},
        "similar": {"hits": 0, "saved_usd": 0.0, "saved_neurons": 0},
        "complete": True,
        "note": NOTE,
    }


# --- count ---------------------------------------------------------------------------


def test_day_of_is_the_utc_day() -> None:
    assert day_of(0) == "1970-01-01"
    assert day_of(1_780_000_000) == "2026-05-28"
    assert day_of(1_780_012_799.9) == "2026-05-28"  # 23:59:59.9 UTC
    assert day_of(1_780_012_800) == "2026-05-29"


def test_count_writes_one_key_per_answer() -> None:
    kv = FakeKv()
    before = day_of()
    asyncio.run(
        count(
            kv,
            model=KIMI,
            prompt_tokens=100,
            completion_tokens=20,
            cost_usd=0.000175,
            cached=False,
            request_id="req-1",
        )
    )
    after = day_of()
    ((key, (value, meta, ttl)),) = kv.items.items()
    assert key in (f"usage:v1:{before}:req-1", f"usage:v1:{after}:req-1")
    assert value == b""
    assert ttl == KEEP_S == (MAX_USAGE_DAYS + 1) * 86_400 == 31 * 86_400
    assert meta == {
        "model": KIMI.id,
        "user": "anonymous",
        "prompt": 100,
        "completion": 20,
        "prompt_cached": 0,
        "usd": 0.000175,
        "cached": False,
    }


def test_concurrent_answers_never_share_a_key() -> None:
    kv = FakeKv()

    async def run() -> None:
        await asyncio.gather(
            *(
                count(
                    kv,
                    model=GLM,
                    prompt_tokens=1,
                    completion_tokens=1,
                    cost_usd=0.0,
                    cached=False,
                    request_id=f"req-{n}",
                )
                for n in range(5)
            )
        )

    asyncio.run(run())
    assert len(kv.items) == 5


def test_a_failing_count_is_logged_and_raises_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    kv = FakeKv()
    kv.failing.add("put")
    asyncio.run(
        count(
            kv,
            model=GLM,
            prompt_tokens=1,
            completion_tokens=1,
            cost_usd=0.0,
            cached=False,
            request_id="req-7",
        )
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines == [{"request_id": "req-7", "usage_error": "put: put: KV is down (scripted)"}]


# --- read_day ----------------------------------------------------------------------------


def test_an_empty_day() -> None:
    assert read(FakeKv()) == empty_day(DAY)


def test_a_day_is_added_up_per_model() -> None:
    kv = FakeKv()
    entry(kv, "a", **answer_meta(GLM, 1000, 200))
    entry(kv, "b", **answer_meta(GLM, 3000, 800))
    entry(kv, "c", **answer_meta(GLM, 3000, 800, cached=True))
    entry(kv, "d", **answer_meta(KIMI, 1_000_000, 1_000_000))
    entry(kv, "e", **answer_meta(LLAMA, 10, 5, cached=True))
    entry(kv, "other-day", day="2026-03-05", **answer_meta(GLM, 9, 9))
    kv.items["answer:v1:abc"] = (b"data: x\n\n", {"model": GLM.id}, 60)

    body = read(kv)
    glm_usd = round(cost_usd(GLM, counts(1000, 200)) + cost_usd(GLM, counts(3000, 800)), 8)
    kimi_usd = 4.95  # 0.95 in + 4.00 out per million
    assert body["models"] == [
        {
            "model": LLAMA.id,
            "requests": 1,
            "cached": 1,
            "prompt_tokens": 10,
            "cached_prompt_tokens": 0,
            "completion_tokens": 5,
            "cost_usd": 0.0,
            "neurons": 0,
        },
        {
            "model": KIMI.id,
            "requests": 1,
            "cached": 0,
            "prompt_tokens": 1_000_000,
            "cached_prompt_tokens": 0,
            "completion_tokens": 1_000_000,
            "cost_usd": kimi_usd,
            "neurons": round(kimi_usd * NEURONS_PER_USD),
        },
        {
            "model": GLM.id,
            "requests": 3,
            "cached": 1,
            "prompt_tokens": 7000,
            "cached_prompt_tokens": 0,
            "completion_tokens": 1800,
            "cost_usd": glm_usd,
            "neurons": round(glm_usd * NEURONS_PER_USD),
        },
    ]
    assert [m["model"] for m in body["models"]] == sorted(m["model"] for m in body["models"])
    assert body["total"] == {
        "requests": 5,
        "cached": 2,
        "prompt_tokens": 1_007_010,
        "cached_prompt_tokens": 0,
        "completion_tokens": 1_001_805,
        "neurons": sum(m["neurons"] for m in body["models"]),
        "cost_usd": round(kimi_usd + glm_usd, 8),
    }
    assert (body["day"], body["complete"], body["note"]) == (DAY, True, NOTE)
    json.dumps(body)  # it is JSON


def test_neurons_are_dollars_at_the_list_price_of_a_thousand_for_0_011() -> None:
    kv = FakeKv()
    entry(kv, "a", model=GLM.id, prompt=0, completion=0, usd=0.011, cached=False)
    assert read(kv)["models"][0]["neurons"] == 1000
    assert abs(NEURONS_PER_USD - 90_909.09) < 0.01


@pytest.mark.parametrize(
    "meta",
    [
        {"prompt": 5},
        {"model": 7, "prompt": 5},
        {"model": None},
    ],
    ids=["no-model", "model-not-a-string", "null-model"],
)
def test_a_key_without_a_model_is_skipped(meta: dict[str, Any]) -> None:
    kv = FakeKv()
    entry(kv, "bad", **meta)
    assert read(kv) == empty_day(DAY)


def test_numbers_that_are_no_counts_count_as_nothing() -> None:
    kv = FakeKv()
    entry(kv, "a", model=GLM.id, prompt=-5, completion="7", usd=True, cached="yes")
    entry(kv, "b", model=GLM.id, prompt=2.9, completion=None, usd=-1.0, cached=1)
    (glm,) = read(kv)["models"]
    assert glm == {
        "model": GLM.id,
        "requests": 2,
        "cached": 0,  # only true is cached
        "prompt_tokens": 2,
        "cached_prompt_tokens": 0,
        "completion_tokens": 0,
        "cost_usd": 0.0,
        "neurons": 0,
    }
    assert type(glm["prompt_tokens"]) is int


@pytest.mark.parametrize("entries", [5, 6, 7])
def test_every_page_is_read(entries: int) -> None:
    kv = FakeKv(page_size=2)
    for n in range(entries):
        entry(kv, f"r{n:03}", **answer_meta(GLM, 1, 1))
    body = read(kv)
    assert body["total"]["requests"] == entries
    assert body["complete"] is True


def test_exactly_max_pages_is_still_complete() -> None:
    kv = FakeKv(page_size=1)
    for n in range(MAX_PAGES):
        entry(kv, f"r{n:03}", **answer_meta(GLM, 1, 1))
    body = read(kv)
    assert body["total"]["requests"] == MAX_PAGES
    assert body["complete"] is True


def test_past_max_pages_the_body_says_it_is_incomplete() -> None:
    kv = FakeKv(page_size=3)
    for n in range(3 * MAX_PAGES + 1):
        entry(kv, f"r{n:03}", **answer_meta(GLM, 1, 1))
    body = read(kv)
    assert body["total"]["requests"] == 3 * MAX_PAGES
    assert body["complete"] is False


def test_a_failing_list_raises_kv_error() -> None:
    kv = FakeKv()
    kv.failing.add("list")
    with pytest.raises(KvError):
        read(kv)


def test_read_day_reads_only_that_day() -> None:
    kv = FakeKv()
    entry(kv, "a", day="2026-03-03", **answer_meta(GLM, 1, 1))
    entry(kv, "b", day="2026-03-04", **answer_meta(GLM, 1, 1))
    entry(kv, "c", day="2026-03-04", **answer_meta(GLM, 1, 1))
    assert read(kv, "2026-03-03")["total"]["requests"] == 1
    assert read(kv, "2026-03-04")["total"]["requests"] == 2
    assert read(kv, "2026-03-05")["total"]["requests"] == 0


# --- /api/usage and the counting through the app -------------------------------------------


def world(*, kv: FakeKv | None = None, ai: FakeAi | None = None, **vars: object) -> FakePlatform:
    return FakePlatform(
        vars=dict(vars),
        kv=kv,
        ai=ai or FakeAi({GLM.id: openai_stream(("content", "Hi"), usage=counts(20, 4))}),
    )


async def get_usage(where: FakePlatform, headers: dict[str, str] | None = None) -> Reply:
    return await app.handle(Incoming("GET", "/api/usage", SELF, headers or {}), where)


def get(where: FakePlatform, headers: dict[str, str] | None = None) -> Reply:
    return asyncio.run(get_usage(where, headers))


async def chat(where: FakePlatform, sink: FakeSink | None = None, **fields: object) -> Reply:
    where.body = json.dumps({"messages": [{"role": "user", "content": "Hi"}], **fields}).encode()
    headers = {"content-type": "application/json", "cf-connecting-ip": "203.0.113.7"}
    if where.var("API_TOKEN"):
        headers["authorization"] = f"Bearer {where.var('API_TOKEN')}"
    reply = await app.handle(Incoming("POST", "/chat", SELF, headers), where)
    assert reply.stream is not None
    await asyncio.wait_for(reply.stream(sink or FakeSink()), 10)
    return reply


def usage_keys(kv: FakeKv) -> dict[str, dict[str, Any]]:
    return {key: meta for key, (_, meta, _) in kv.items.items() if key.startswith(PREFIX)}


def test_api_usage_without_a_cache_binding_is_404() -> None:
    reply = get(world(kv=None))
    assert reply.status == 404
    assert json.loads(reply.body) == {
        "error": {
            "code": "not_found",
            "message": "Usage is counted in the CACHE KV namespace, which is not bound.",
        }
    }


def test_api_usage_reads_today() -> None:
    kv = FakeKv()
    before = time.time()
    entry(kv, "a", day=day_of(before), **answer_meta(GLM, 10, 2))
    reply = get(world(kv=kv))
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.headers["Cache-Control"] == "no-store"
    body = json.loads(reply.body)
    if body["day"] == day_of(before):  # not across midnight UTC
        assert body["total"]["requests"] == 1
    assert body["day"] in (day_of(before), day_of())


def test_api_usage_is_open_without_api_token() -> None:
    assert get(world(kv=FakeKv())).status == 200


@pytest.mark.parametrize(
    ("authorization", "status"),
    [
        (None, 401),
        ("Bearer wrong", 401),
        ("Bearer s3cret-0123456789abcdef", 200),
        ("bearer s3cret-0123456789abcdef", 200),
    ],
)
def test_api_usage_is_behind_api_token_when_set(authorization: str | None, status: int) -> None:
    headers = {"authorization": authorization} if authorization else {}
    reply = get(world(kv=FakeKv(), API_TOKEN="s3cret-0123456789abcdef"), headers)
    assert reply.status == status
    if status == 401:
        assert json.loads(reply.body)["error"]["code"] == "unauthorized"


def test_api_usage_on_a_failing_kv_is_503(capsys: pytest.CaptureFixture[str]) -> None:
    kv = FakeKv()
    kv.failing.add("list")
    reply = get(world(kv=kv))
    assert reply.status == 503
    assert json.loads(reply.body) == {
        "error": {"code": "store_unavailable", "message": StoreUnavailable.public_message}
    }
    assert b"scripted" not in reply.body
    (record,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert record["error_code"] == "store_unavailable"
    assert "KV is down" in record["error_detail"]


def test_every_complete_answer_is_counted_and_reported() -> None:
    kv = FakeKv()
    where = world(kv=kv)

    async def run() -> dict[str, Any]:
        await chat(where, temperature=0)  # kept in the cache
        await where.settle()
        await chat(where, temperature=0)  # from the cache
        await chat(where)  # not cacheable
        await where.settle()
        reply = await get_usage(where)
        body: dict[str, Any] = json.loads(reply.body)
        return body

    body = asyncio.run(run())
    assert where.ai.models_called == [GLM.id, GLM.id]
    metas = sorted(usage_keys(kv).values(), key=lambda meta: meta["cached"])
    one_cost = cost_usd(GLM, counts(20, 4))
    assert metas == [
        {
            "model": GLM.id,
            "user": "anonymous",
            "prompt": 20,
            "completion": 4,
            "prompt_cached": 0,
            "usd": one_cost,
            "cached": False,
        },
        {
            "model": GLM.id,
            "user": "anonymous",
            "prompt": 20,
            "completion": 4,
            "prompt_cached": 0,
            "usd": one_cost,
            "cached": False,
        },
        {
            "model": GLM.id,
            "user": "anonymous",
            "prompt": 20,
            "completion": 4,
            "prompt_cached": 0,
            "usd": 0.0,
            "cached": True,
        },
    ]
    (glm,) = body["models"]
    assert glm["requests"] == 3
    assert glm["cached"] == 1
    assert glm["prompt_tokens"] == 60
    assert glm["completion_tokens"] == 12
    assert glm["cost_usd"] == round(2 * one_cost, 8)
    assert body["total"]["neurons"] == glm["neurons"] == round(glm["cost_usd"] * NEURONS_PER_USD)


def test_the_key_of_an_answer_is_its_request_id() -> None:
    kv = FakeKv()
    where = world(kv=kv, CACHE_MODE="off")

    async def run() -> Reply:
        reply = await chat(where)
        await where.settle()
        return reply

    reply = asyncio.run(run())
    (key,) = usage_keys(kv)
    assert key.startswith(PREFIX)
    assert key.endswith(":" + reply.headers["X-Request-Id"])


def test_an_answer_without_usage_counts_as_one_request_of_no_tokens() -> None:
    kv = FakeKv()
    where = world(kv=kv, ai=FakeAi({GLM.id: openai_stream(("content", "Hi"))}))

    async def run() -> None:
        await chat(where)
        await where.settle()

    asyncio.run(run())
    (meta,) = usage_keys(kv).values()
    assert meta == {
        "model": GLM.id,
        "user": "anonymous",
        "prompt": 0,
        "completion": 0,
        "prompt_cached": 0,
        "usd": 0.0,
        "cached": False,
    }


def test_a_failed_or_abandoned_answer_is_not_counted() -> None:
    kv = FakeKv()
    first = openai_stream(("content", "Hi"), usage=counts(20, 4))[0]
    failing = FakeAi({GLM.id: [first, Fail(UpstreamError(detail="lost"))]})
    where = world(kv=kv, ai=failing)

    async def run() -> None:
        await chat(where)
        await where.settle()
        where.ai = FakeAi({GLM.id: openai_stream(("content", "Hi"), usage=counts(20, 4))})
        await chat(where, sink=FakeSink(gone_after=1))
        await where.settle()

    asyncio.run(run())
    assert usage_keys(kv) == {}


def test_the_v1_api_is_counted_too() -> None:
    kv = FakeKv()
    where = world(kv=kv, API_TOKEN="t" * 16, CACHE_MODE="off")

    async def run() -> None:
        where.body = json.dumps({"messages": [{"role": "user", "content": "Hi"}]}).encode()
        headers = {"content-type": "application/json", "authorization": "Bearer " + "t" * 16}
        reply = await app.handle(Incoming("POST", "/v1/chat/completions", SELF, headers), where)
        assert reply.status == 200
        await where.settle()

    asyncio.run(run())
    (meta,) = usage_keys(kv).values()
    assert (meta["model"], meta["prompt"], meta["completion"]) == (GLM.id, 20, 4)


def test_a_providers_answers_count_no_neurons() -> None:
    kv = FakeKv()
    kv.items["usage:v1:2026-12-01:r1"] = (
        b"",
        {"model": "acme/acme-chat-1", "prompt": 10, "completion": 5, "usd": 0.001, "cached": False},
        60,
    )
    body = asyncio.run(read_days(kv, ["2026-12-01"]))
    (entry,) = body["models"]
    assert entry["cost_usd"] == 0.001
    assert entry["neurons"] == 0


# --- several days, per user, who sees what ---------------------------------------------


def user_meta(user: str, chosen: Model, prompt: int, completion: int) -> dict[str, Any]:
    return {**answer_meta(chosen, prompt, completion), "user": user}


def test_days_are_added_up_per_day_user_and_model() -> None:
    kv = FakeKv()
    entry(kv, "a", day="2026-03-02", **user_meta("key:ann", GLM, 1000, 100))
    entry(kv, "b", day="2026-03-04", **user_meta("key:ann", GLM, 2000, 200))
    entry(kv, "c", day="2026-03-04", **user_meta("key:bo", KIMI, 10, 10))
    entry(kv, "d", day="2026-03-04", **answer_meta(LLAMA, 5, 5))  # counted before users were
    entry(kv, "old", day="2026-03-01", **user_meta("key:ann", GLM, 9, 9))
    days = ["2026-03-02", "2026-03-03", "2026-03-04"]
    body = asyncio.run(read_days(kv, days))
    assert (body["day"], body["from"], body["days"]) == ("2026-03-04", "2026-03-02", 3)
    assert [(r["day"], r["user"], r["model"], r["requests"]) for r in body["rows"]] == [
        ("2026-03-02", "key:ann", GLM.id, 1),
        ("2026-03-04", "anonymous", LLAMA.id, 1),
        ("2026-03-04", "key:ann", GLM.id, 1),
        ("2026-03-04", "key:bo", KIMI.id, 1),
    ]
    # Every day of the range, those without answers too.
    assert [(d["day"], d["requests"]) for d in body["daily"]] == [
        ("2026-03-02", 1),
        ("2026-03-03", 0),
        ("2026-03-04", 3),
    ]
    (anon, ann, bo) = body["users"]
    assert (ann["user"], ann["requests"], ann["prompt_tokens"]) == ("key:ann", 2, 3000)
    ann_usd = cost_usd(GLM, counts(1000, 100)) + cost_usd(GLM, counts(2000, 200))  # type: ignore[operator]
    assert ann["cost_usd"] == round(ann_usd, 8)
    assert ann["neurons"] == round(ann_usd * NEURONS_PER_USD)
    assert (anon["user"], bo["user"]) == ("anonymous", "key:bo")
    assert body["total"]["requests"] == 4
    assert sum(m["requests"] for m in body["models"]) == 4
    assert body["free_allocation_neurons"] == 10_000


def test_a_user_sees_only_their_own_answers() -> None:
    kv = FakeKv()
    entry(kv, "a", **user_meta("key:ann", GLM, 1000, 100))
    entry(kv, "b", **user_meta("key:bo", KIMI, 10, 10))
    body = asyncio.run(read_days(kv, [DAY], "key:bo".__eq__))
    assert {r["user"] for r in body["rows"]} == {"key:bo"}
    assert [u["user"] for u in body["users"]] == ["key:bo"]
    assert [m["model"] for m in body["models"]] == [KIMI.id]
    assert body["total"]["requests"] == 1


def test_usage_days_end_today_oldest_first() -> None:
    noon = 1_780_000_000.0  # 2026-05-28
    assert usage_days(noon, 1) == ["2026-05-28"]
    assert usage_days(noon, 3) == ["2026-05-26", "2026-05-27", "2026-05-28"]
    assert len(set(usage_days(noon, MAX_USAGE_DAYS))) == MAX_USAGE_DAYS


def test_many_days_share_the_list_calls() -> None:
    kv = FakeKv(page_size=1)
    days = [f"2026-03-{n:02}" for n in range(1, 31)]
    for day in days:
        for n in range(3):
            entry(kv, f"r{n}", day=day, **answer_meta(GLM, 1, 1))
    body = asyncio.run(read_days(kv, days))
    # 60 calls over 30 days: 2 pages a day of 1 key each, of 3.
    assert MAX_LIST_CALLS // len(days) == 2
    assert body["total"]["requests"] == 2 * len(days)
    assert body["complete"] is False


@pytest.mark.parametrize(
    "query", ["days=0", "days=31", "days=x", "days=", "days=1&days=2", "days=%D9%A3"]
)
def test_a_bad_days_is_refused(query: str) -> None:
    where = world(kv=FakeKv())
    reply = asyncio.run(app.handle(Incoming("GET", "/api/usage", SELF, {}, query), where))
    assert reply.status == 400
    assert json.loads(reply.body)["error"]["message"] == (
        "days must be a whole number from 1 to 30, given once."
    )


def test_days_reads_that_many_days_and_names_the_viewer() -> None:
    kv = FakeKv()
    entry(kv, "a", day=day_of(time.time() - 86_400 * 5), **answer_meta(GLM, 1, 1))
    where = world(kv=kv)
    week = json.loads(
        asyncio.run(app.handle(Incoming("GET", "/api/usage", SELF, {}, "days=7"), where)).body
    )
    today = json.loads(get(where).body)
    assert (week["days"], len(week["daily"]), today["days"]) == (7, 7, 1)
    assert week["viewer"] == {"user": "anonymous", "admin": False}
    if week["day"] == today["day"]:  # not across midnight UTC
        assert (week["total"]["requests"], today["total"]["requests"]) == (1, 0)


def test_auto_answers_are_added_up_beside_their_baseline() -> None:
    kv = FakeKv()
    entry(kv, "a", **answer_meta(GLM, 1000, 200), auto_base_usd=0.002)
    entry(kv, "b", **answer_meta(GLM, 3000, 800), auto_base_usd=0.004)
    entry(kv, "c", **answer_meta(KIMI, 10, 10))  # not routed: no baseline
    entry(kv, "d", **answer_meta(GLM, 10, 10), auto_base_usd="x")  # malformed: left out
    body = read(kv)
    spent = round(cost_usd(GLM, counts(1000, 200)) + cost_usd(GLM, counts(3000, 800)), 8)
    assert body["auto"] == {
        "requests": 2,
        "cost_usd": spent,
        "baseline_usd": 0.006,
        "saved_usd": round(0.006 - spent, 8),
    }


def test_a_routed_answer_keeps_its_baseline_cost() -> None:
    kv = FakeKv()
    asyncio.run(
        count(
            kv,
            model=GLM,
            prompt_tokens=10,
            completion_tokens=5,
            cost_usd=0.001,
            cached=False,
            request_id="req-8",
            baseline_usd=0.25,
        )
    )
    ((_, meta, _),) = kv.items.values()
    assert meta["auto_base_usd"] == 0.25


def test_similar_questions_answered_again_add_up_what_they_saved() -> None:
    kv = FakeKv()
    cached = {**answer_meta(GLM, 20, 4), "usd": 0.0, "cached": True}
    entry(kv, "a", **cached, similar_saved_usd=0.011)
    entry(kv, "b", **cached, similar_saved_usd=0.0055)
    entry(kv, "c", **cached)  # the response cache's: saved nothing counted here
    entry(kv, "d", **cached, similar_saved_usd="x")  # malformed: left out
    body = read(kv)
    assert body["similar"] == {"hits": 2, "saved_usd": 0.0165, "saved_neurons": 1500}
    assert body["total"]["cached"] == 4


def test_a_similar_answer_keeps_what_it_saved() -> None:
    kv = FakeKv()
    asyncio.run(
        count(
            kv,
            model=GLM,
            prompt_tokens=10,
            completion_tokens=5,
            cost_usd=0.0,
            cached=True,
            request_id="req-9",
            similar_saved_usd=0.003,
        )
    )
    ((_, meta, _),) = kv.items.values()
    assert meta["similar_saved_usd"] == 0.003
