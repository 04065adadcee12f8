"""The response cache (``cache``): which requests use it, the key, lookup and
store over a ``FakeKv``, the replayed stream; and through ``app.handle``:
an answer kept after the reply and given again without a model call, on
``/chat`` and ``/v1``, ``Cache-Control: no-cache``, what is never kept, and a
KV that fails without failing the request.

A scenario of several requests runs in one event loop, so what the first
left to run after its reply (``wait_until``) is awaited with
``platform.settle()`` before the next one asks.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from edgechat.answer.cache import (
    KEY_PREFIX,
    CachedUpstream,
    Hit,
    cache_key,
    lookup,
    store,
    wants_cache,
)
from edgechat.answer.recording import MAX_RECORDED_BYTES
from edgechat.apis.openai_body import parse_openai_request
from edgechat.config.settings import DEFAULT_SYSTEM_PROMPT, Settings
from edgechat.core.faults import UpstreamBusy, UpstreamError
from edgechat.core.http import Incoming, Reply
from edgechat.core.models import Model, cost_usd
from edgechat.core.ports import TIMED_OUT
from edgechat.core.requests import ChatRequest, Limits, Message
from edgechat.web import app
from tests.kit import upstream as wire
from tests.kit.sse import Parsed, parse
from tests.unit.fakes import (
    AnswerUnderTest,
    Fail,
    FakeAi,
    FakeKv,
    FakePlatform,
    FakeSink,
    Step,
    chat_request,
    model,
    native_stream,
    openai_stream,
    usage,
)

GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")
USAGE = usage(20, 4)
ANSWER = openai_stream(("reasoning", "Hmm."), ("content", "Hel"), ("content", "lo"), usage=USAGE)
OTHER_ANSWER = openai_stream(("content", "Fresh"), usage=usage(20, 1))
SELF = "https://chat.example.com"
TOKEN = "tok-123-0123456789"
HEADERS = {
    "content-type": "application/json",
    "cf-connecting-ip": "203.0.113.7",
    "authorization": f"Bearer {TOKEN}",
}
HANG_S = 10.0
KEY = re.compile(re.escape(KEY_PREFIX) + "[0-9a-f]{64}")


def chat_body(content: str = "Hi", **fields: object) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": content}], "temperature": 0, **fields}


def v1_body(content: str = "Hi", **fields: object) -> dict[str, object]:
    return {
        "model": "glm",
        "messages": [{"role": "user", "content": content}],
        "temperature": 0,
        **fields,
    }


@dataclass
class CachePlatform(FakePlatform):
    """A ``FakePlatform`` with a KV."""

    kv: FakeKv | None = field(default_factory=FakeKv)


def world(*, ai: FakeAi | None = None, kv: FakeKv | None = None, **vars: object) -> CachePlatform:
    return CachePlatform(
        vars={"API_TOKEN": TOKEN, **vars} if "API_TOKEN" not in vars else dict(vars),
        ai=ai or FakeAi({GLM.id: ANSWER, LLAMA.id: native_stream("Llama", usage=USAGE)}),
        kv=kv if kv is not None else FakeKv(),
    )


@dataclass
class Answer:
    reply: Reply
    body: bytes

    @property
    def events(self) -> Parsed:
        return parse(self.body)

    @property
    def cache(self) -> str | None:
        return self.reply.headers.get("X-Edgechat-Cache")


async def ask(
    where: FakePlatform,
    body: dict[str, object],
    *,
    path: str = "/chat",
    headers: dict[str, str] | None = None,
    sink: FakeSink | None = None,
) -> Answer:
    """One request through ``app.handle``, its stream read to the end."""
    where.body = json.dumps(body).encode()
    request = Incoming("POST", path, SELF, {**HEADERS, **(headers or {})})
    reply = await app.handle(request, where)
    sink = sink or FakeSink()
    if reply.stream is not None:
        await asyncio.wait_for(reply.stream(sink), HANG_S)
    return Answer(reply, reply.body or sink.body)


def answers(kv: FakeKv) -> dict[str, tuple[bytes, dict[str, Any], int]]:
    return {key: item for key, item in kv.items.items() if key.startswith(KEY_PREFIX)}


def the_kv(where: FakePlatform) -> FakeKv:
    assert where.kv is not None
    return where.kv


def log_lines(capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def request_lines(lines: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (line for line in lines if "route" in line)


# --- which requests use the cache ------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "temperature", "seed", "expected"),
    [
        ("off", 0, None, False),
        ("off", None, 7, False),
        ("deterministic", 0, None, True),
        ("deterministic", 0.0, None, True),
        ("deterministic", None, 7, True),
        ("deterministic", 0.7, 7, True),
        ("deterministic", 0.7, None, False),
        ("deterministic", None, None, False),
        ("all", None, None, True),
        ("all", 1.5, None, True),
    ],
)
def test_wants_cache_follows_the_cache_mode(
    mode: str, temperature: float | None, seed: int | None, expected: bool
) -> None:
    request = ChatRequest(
        messages=(Message("user", "Hi"),),
        model=GLM,
        temperature=temperature,
        max_tokens=256,
        reasoning=None,
        params={"seed": seed} if seed is not None else {},
    )
    assert wants_cache(request, Settings(cache_mode=mode)) is expected


# --- the key -------------------------------------------------------------------------


def key_of(request: ChatRequest, settings: Settings | None = None) -> str:
    return cache_key(request, settings or Settings())


def v1_request(**body: Any) -> ChatRequest:
    raw = json.dumps({"messages": [{"role": "user", "content": "Hi"}], **body}).encode()
    return parse_openai_request(raw, Limits(), ("glm", "kimi", "llama"), "glm").chat


def test_the_key_is_a_sha256_under_its_prefix_and_stable() -> None:
    first = key_of(chat_request(GLM, temperature=0))
    assert KEY.fullmatch(first)
    # Equal requests built apart give the same key, in any process.
    assert key_of(chat_request(GLM, temperature=0)) == first
    assert key_of(chat_request(GLM, temperature=0), Settings(api_token="other")) == first


@pytest.mark.parametrize(
    "changed",
    [
        chat_request(GLM, messages=(("user", "Hi!"),)),
        chat_request(GLM, messages=(("user", "Hi"), ("assistant", "Hey"), ("user", "Hi"))),
        chat_request(KIMI),
        chat_request(LLAMA),
        chat_request(GLM, temperature=0),
        chat_request(GLM, max_tokens=257),
        chat_request(GLM, reasoning=False),
    ],
    ids=["content", "conversation", "kimi", "llama", "temperature", "max-tokens", "no-thinking"],
)
def test_the_key_changes_with_what_shapes_the_answer(changed: ChatRequest) -> None:
    assert key_of(changed) != key_of(chat_request(GLM))


def test_the_key_changes_with_the_system_prompt() -> None:
    request = chat_request(GLM)
    assert key_of(request, Settings(system_prompt="Be terse.")) != key_of(request)


def test_the_key_ignores_what_the_model_is_not_sent() -> None:
    # reasoning=True is what the model does anyway: the same inputs.
    assert key_of(chat_request(GLM, reasoning=True)) == key_of(chat_request(GLM))
    # Settings that change no input: timeouts, CACHE_TTL_S, the gateway.
    other = Settings(idle_timeout_s=5, cache_ttl_s=60, ai_gateway_id="gw", cache_mode="all")
    assert key_of(chat_request(GLM), other) == key_of(chat_request(GLM))


@pytest.mark.parametrize(
    "params",
    [{"seed": 1}, {"seed": 2}, {"top_p": 0.5}, {"stop": "END"}, {"stop": ["END"]},
     {"tools": [{"type": "function", "function": {"name": "f"}}]}, {"presence_penalty": 1},
     {"response_format": {"type": "json_object"}}, {"reasoning_effort": "low"}],
)  # fmt: skip
def test_every_generation_parameter_is_in_the_key(params: dict[str, Any]) -> None:
    keys = {key_of(v1_request(**params)), key_of(v1_request())}
    assert len(keys) == 2


def test_the_v1_key_ignores_how_the_answer_is_delivered() -> None:
    plain = key_of(v1_request())
    assert key_of(v1_request(stream=True, stream_options={"include_usage": True})) == plain
    assert key_of(v1_request(stream=False, user="someone", n=1, store=False)) == plain


def test_chat_and_v1_share_a_key_when_the_model_gets_the_same_inputs() -> None:
    # Both parsers give temperature as a float, so does this request.
    chat = chat_request(GLM, temperature=0.0, max_tokens=1024)
    same = v1_request(
        messages=[
            {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": "Hi"},
        ],
        temperature=0,
    )
    assert key_of(same) == key_of(chat)
    assert key_of(v1_request(temperature=0)) != key_of(chat)  # no system prompt on /v1


# --- lookup and store --------------------------------------------------------------------


def test_lookup_finds_what_store_kept() -> None:
    kv = FakeKv()

    async def run() -> Hit | None:
        await store(kv, "answer:v1:k", b"data: x\n\n", LLAMA, 120, "req-1")
        return await lookup(kv, "answer:v1:k", ("glm", "kimi", "llama"), {})

    hit = asyncio.run(run())
    assert hit is not None
    assert hit.model is LLAMA
    assert hit.body == b"data: x\n\n"
    assert kv.items["answer:v1:k"] == (b"data: x\n\n", {"model": LLAMA.id}, 120)


def test_lookup_of_a_missing_key_is_none() -> None:
    log: dict[str, object] = {}
    assert asyncio.run(lookup(FakeKv(), "answer:v1:none", ("glm",), log)) is None
    assert log == {}


def test_a_failing_get_is_a_miss_noted_in_the_log() -> None:
    kv = FakeKv()
    kv.items["answer:v1:k"] = (b"data: x\n\n", {"model": GLM.id}, 60)
    kv.failing.add("get")
    log: dict[str, object] = {}
    assert asyncio.run(lookup(kv, "answer:v1:k", ("glm", "kimi", "llama"), log)) is None
    assert log == {"cache_error": "get: get: KV is down (scripted)"}


@pytest.mark.parametrize(
    ("body", "meta"),
    [
        (b"data: x\n\n", {"model": "@cf/openai/gpt-oss-120b"}),
        (b"data: x\n\n", {"model": 7}),
        (b"data: x\n\n", {}),
        (b"", {"model": GLM.id}),
    ],
    ids=["unknown-model", "model-not-a-string", "no-model", "empty"],
)
def test_an_entry_this_edgechat_cannot_use_is_a_miss(body: bytes, meta: dict[str, Any]) -> None:
    kv = FakeKv()
    kv.items["answer:v1:k"] = (body, meta, 60)
    log: dict[str, object] = {}
    assert asyncio.run(lookup(kv, "answer:v1:k", ("glm", "kimi", "llama"), log)) is None
    assert log == {}


def test_an_answer_of_a_model_no_longer_allowed_is_a_miss() -> None:
    kv = FakeKv()
    kv.items["answer:v1:k"] = (b"data: x\n\n", {"model": LLAMA.id}, 60)
    assert asyncio.run(lookup(kv, "answer:v1:k", ("glm", "kimi"), {})) is None
    assert asyncio.run(lookup(kv, "answer:v1:k", ("glm", "llama"), {})) is not None


def test_a_failing_put_is_logged_on_a_line_of_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    kv = FakeKv()
    kv.failing.add("put")
    asyncio.run(store(kv, "answer:v1:k", b"x", GLM, 60, "req-9"))
    assert log_lines(capsys) == [
        {"request_id": "req-9", "cache_error": "put: put: KV is down (scripted)"}
    ]
    assert kv.items == {}


def test_a_kept_stream_is_read_in_one_go() -> None:
    upstream = CachedUpstream(b"data: kept\n\n")

    async def run() -> list[object]:
        got: list[object] = [await upstream.read(0.0), await upstream.read(1.0)]
        relay = await upstream.relay(FakeSink())
        got += [await relay.rest(0.0), await relay.observe(0.0), await relay.finished()]
        await upstream.cancel()
        return got

    assert asyncio.run(run()) == [b"data: kept\n\n", None, True, None, None]
    assert TIMED_OUT not in asyncio.run(run())


def test_a_cancelled_kept_stream_has_nothing_left() -> None:
    upstream = CachedUpstream(b"data: kept\n\n")

    async def run() -> object:
        await upstream.cancel()
        return await upstream.read(0.0)

    assert asyncio.run(run()) is None


# --- what the session keeps ----------------------------------------------------------------


def recorded(ai: FakeAi, chosen: Model = GLM) -> AnswerUnderTest:
    session = AnswerUnderTest(chat_request(chosen), Settings(), ai, request_id="req-1", record=True)

    async def run() -> None:
        await session.open()
        await asyncio.wait_for(session.stream(FakeSink()), HANG_S)

    asyncio.run(run())
    return session


def test_the_session_keeps_the_whole_stream() -> None:
    assert recorded(FakeAi({GLM.id: ANSWER})).recorded() == b"".join(ANSWER)


def test_the_session_keeps_nothing_unless_asked() -> None:
    ai = FakeAi({GLM.id: ANSWER})
    session = AnswerUnderTest(chat_request(GLM), Settings(), ai, request_id="r")

    async def run() -> None:
        await session.open()
        await session.stream(FakeSink())

    asyncio.run(run())
    assert session.recorded() is None


def test_a_stream_over_the_cap_is_not_kept() -> None:
    words = [("content", "x" * 4000) for _ in range(MAX_RECORDED_BYTES // 4000 + 1)]
    long = openai_stream(*words, usage=USAGE)
    assert len(b"".join(long)) > MAX_RECORDED_BYTES
    session = recorded(FakeAi({GLM.id: long}))
    assert session.outcome.finish_reason == "stop"
    assert session.recorded() is None


def test_after_a_fallback_only_the_answering_models_stream_is_kept() -> None:
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
    steps: list[Step] = [role, Fail(UpstreamBusy(detail="3040"))]
    llama = native_stream("Llama", usage=USAGE)
    session = recorded(FakeAi({GLM.id: steps, LLAMA.id: llama}))
    assert session.outcome.model is LLAMA
    assert session.recorded() == b"".join(llama)


# --- through the app: kept, then given again ---------------------------------------------------


def test_a_repeat_question_is_answered_from_the_cache(capsys: pytest.CaptureFixture[str]) -> None:
    where = world()
    kv = the_kv(where)

    async def run() -> tuple[Answer, Answer]:
        first = await ask(where, chat_body())
        await where.settle()
        second = await ask(where, chat_body())
        await where.settle()
        return first, second

    first, second = asyncio.run(run())
    assert where.ai.models_called == [GLM.id]  # the second asked no model
    assert (first.cache, second.cache) == ("miss", "hit")
    ((key, (body, meta, ttl)),) = answers(kv).items()
    assert KEY.fullmatch(key)
    assert (body, meta, ttl) == (b"".join(ANSWER), {"model": GLM.id}, 86_400)

    fresh, kept = first.events, second.events
    assert kept.names == fresh.names
    assert (kept.text(), kept.reasoning()) == ("Hello", "Hmm.")
    assert kept.meta["model"] == GLM.id
    assert kept.meta["request_id"] == second.reply.headers["X-Request-Id"]
    assert "cached" not in fresh.final.data
    assert fresh.final.data["cost_usd"] == cost_usd(GLM, USAGE) > 0
    done = kept.final.data
    assert done["cached"] is True
    assert done["cost_usd"] == 0.0
    assert done["usage"] == USAGE
    assert done["finish_reason"] == "stop"
    assert done["model"] == GLM.id

    first_log, second_log = request_lines(log_lines(capsys))
    assert first_log["cache"] == "miss"
    assert "cached" not in first_log
    assert (second_log["cache"], second_log["cached"]) == ("hit", True)


def test_the_kept_answer_lives_cache_ttl_s() -> None:
    where = world(CACHE_TTL_S="120")

    async def run() -> None:
        await ask(where, chat_body())
        await where.settle()

    asyncio.run(run())
    ((_, _, ttl),) = answers(the_kv(where)).values()
    assert ttl == 120


def test_v1_answers_come_from_the_cache_streamed_or_whole() -> None:
    where = world()

    async def run() -> tuple[Answer, Answer, Answer]:
        whole = await ask(where, v1_body(), path="/v1/chat/completions")
        await where.settle()
        streamed = await ask(where, v1_body(stream=True), path="/v1/chat/completions")
        again = await ask(where, v1_body(), path="/v1/chat/completions")
        return whole, streamed, again

    whole, streamed, again = asyncio.run(run())
    assert where.ai.models_called == [GLM.id]
    assert (whole.cache, streamed.cache, again.cache) == ("miss", "hit", "hit")
    fresh = json.loads(whole.body)["choices"][0]
    kept = json.loads(again.body)["choices"][0]
    assert kept == fresh
    assert fresh["message"] == {
        "role": "assistant",
        "content": "Hello",
        "reasoning_content": "Hmm.",
    }
    events = streamed.events
    assert events.text() == "Hello"
    assert events.model_events[-1].data == "[DONE]"


def test_chat_and_v1_share_an_answer_when_they_ask_the_same() -> None:
    where = world()
    v1_same = v1_body(
        messages=[
            {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
            {"role": "user", "content": "Hi"},
        ]
    )

    async def run() -> Answer:
        await ask(where, chat_body())
        await where.settle()
        return await ask(where, v1_same, path="/v1/chat/completions")

    shared = asyncio.run(run())
    assert shared.cache == "hit"
    assert where.ai.models_called == [GLM.id]
    assert json.loads(shared.body)["choices"][0]["message"]["content"] == "Hello"


def test_the_key_does_not_depend_on_the_token() -> None:
    where = world(API_TOKEN="first-token-0123456789")

    async def run() -> Answer:
        await ask(where, chat_body(), headers={"authorization": "Bearer first-token-0123456789"})
        await where.settle()
        where.vars["API_TOKEN"] = "rotated-token-0123456789"
        return await ask(
            where, chat_body(), headers={"authorization": "Bearer rotated-token-0123456789"}
        )

    second = asyncio.run(run())
    assert second.reply.status == 200
    assert second.cache == "hit"
    assert where.ai.models_called == [GLM.id]


def test_no_cache_skips_the_lookup_and_keeps_the_fresh_answer() -> None:
    where = world()
    kv = the_kv(where)

    async def run() -> tuple[Answer, Answer, int, int]:
        await ask(where, chat_body())
        await where.settle()
        gets = len(kv.gets)
        where.ai = FakeAi({GLM.id: OTHER_ANSWER})
        fresh = await ask(where, chat_body(), headers={"cache-control": "no-cache"})
        await where.settle()
        gets_after_refresh = len(kv.gets)
        kept = await ask(where, chat_body())
        return fresh, kept, gets, gets_after_refresh

    fresh, kept, gets, gets_after_refresh = asyncio.run(run())
    assert gets_after_refresh == gets  # no lookup
    assert fresh.cache == "refresh"
    assert where.ai.models_called == [GLM.id]  # the refreshed call
    assert fresh.events.text() == "Fresh"
    ((body, _, _),) = answers(kv).values()
    assert body == b"".join(OTHER_ANSWER)
    assert (kept.cache, kept.events.text()) == ("hit", "Fresh")


@pytest.mark.parametrize("mode", ["off", "deterministic"])
def test_requests_the_mode_leaves_out_never_touch_the_cache(mode: str) -> None:
    where = world(CACHE_MODE=mode)
    kv = the_kv(where)
    body = chat_body() if mode == "off" else chat_body(temperature=0.7)

    async def run() -> tuple[Answer, Answer]:
        first = await ask(where, body)
        await where.settle()
        second = await ask(where, body)
        await where.settle()
        return first, second

    first, second = asyncio.run(run())
    assert where.ai.models_called == [GLM.id, GLM.id]
    assert kv.gets == []
    assert answers(kv) == {}
    assert first.cache is None
    assert second.cache is None
    assert "cached" not in second.events.final.data


def test_cache_mode_all_answers_any_repeat_question() -> None:
    where = world(CACHE_MODE="all")

    async def run() -> Answer:
        await ask(where, chat_body(temperature=1.2))
        await where.settle()
        return await ask(where, chat_body(temperature=1.2))

    assert asyncio.run(run()).cache == "hit"
    assert where.ai.models_called == [GLM.id]


def test_a_seed_makes_a_v1_request_cacheable() -> None:
    where = world()
    body = v1_body(temperature=None, seed=11)

    async def run() -> Answer:
        await ask(where, body, path="/v1/chat/completions")
        await where.settle()
        return await ask(where, body, path="/v1/chat/completions")

    assert asyncio.run(run()).cache == "hit"


def test_without_a_cache_binding_nothing_is_cached() -> None:
    where = CachePlatform(vars={}, ai=FakeAi({GLM.id: ANSWER}), kv=None)

    async def run() -> tuple[Answer, Answer]:
        first = await ask(where, chat_body())
        await where.settle()
        return first, await ask(where, chat_body())

    first, second = asyncio.run(run())
    assert (first.cache, second.cache) == (None, None)
    assert where.ai.models_called == [GLM.id, GLM.id]
    assert where.background == []


def test_a_fallback_answer_is_given_again_with_its_model() -> None:
    llama = native_stream("Llama here", usage=USAGE)
    where = world(ai=FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: llama}))

    async def run() -> Answer:
        await ask(where, chat_body())
        await where.settle()
        return await ask(where, chat_body())

    kept = asyncio.run(run())
    assert where.ai.models_called == [GLM.id, LLAMA.id]
    ((_, meta, _),) = answers(the_kv(where)).values()
    assert meta == {"model": LLAMA.id}
    done = kept.events.final.data
    assert (done["model"], done["fallback_from"], done["cached"]) == (LLAMA.id, GLM.id, True)
    assert kept.events.text() == "Llama here"


# --- what is never kept -----------------------------------------------------------------------

TOOL_CALL = [
    wire.openai_chunk(content="").encode(),
    b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",'
    b'"type":"function","function":{"name":"lookup","arguments":"{}"}}]}}]}\n\n',
]


@pytest.mark.parametrize(
    ("steps", "kept"),
    [
        (ANSWER, True),
        (openai_stream(("content", "Cut"), finish_reason="length", usage=USAGE), True),
        (native_stream("Llama-shaped", usage=USAGE), True),
        ([ANSWER[0], ANSWER[1], Fail(UpstreamError(detail="lost"))], False),
        (openai_stream(("content", "Hi"), finish_reason=None, done=False), False),
        ([*TOOL_CALL, wire.openai_chunk(finish_reason="tool_calls").encode()], False),
        (openai_stream(("content", "No."), finish_reason="content_filter"), False),
    ],
    ids=["stop", "length", "native", "error", "truncated", "tool-calls", "content-filter"],
)
def test_only_complete_answers_are_kept(steps: list[Step], kept: bool) -> None:
    where = world(ai=FakeAi({GLM.id: steps}))

    async def run() -> Answer:
        answer = await ask(where, chat_body())
        await where.settle()
        return answer

    answer = asyncio.run(run())
    assert answer.reply.status == 200
    assert bool(answers(the_kv(where))) is kept


def test_a_tool_call_is_never_kept_whatever_its_finish_reason() -> None:
    steps = [*TOOL_CALL, wire.openai_chunk(finish_reason="stop").encode(), wire.DONE.encode()]
    where = world(ai=FakeAi({GLM.id: steps}))
    tools = [{"type": "function", "function": {"name": "lookup"}}]
    body = v1_body(tools=tools, tool_choice={"type": "function", "function": {"name": "lookup"}})

    async def run() -> None:
        await ask(where, body, path="/v1/chat/completions")
        await where.settle()

    asyncio.run(run())
    assert answers(the_kv(where)) == {}


def test_an_answer_the_client_left_is_not_kept() -> None:
    where = world()

    async def run() -> None:
        await ask(where, chat_body(), sink=FakeSink(gone_after=1))
        await where.settle()

    asyncio.run(run())
    assert the_kv(where).items == {}  # neither kept nor counted


def test_an_answer_from_the_cache_is_not_kept_again() -> None:
    where = world()
    kv = the_kv(where)

    async def run() -> None:
        await ask(where, chat_body())
        await where.settle()
        kv.items = {k: (v, m, 999) for k, (v, m, _) in kv.items.items()}  # mark them
        await ask(where, chat_body())
        await where.settle()

    asyncio.run(run())
    assert {ttl for _, _, ttl in answers(kv).values()} == {999}


# --- a failing KV never fails a request ----------------------------------------------------------


def test_a_failing_lookup_lets_the_model_answer(capsys: pytest.CaptureFixture[str]) -> None:
    where = world()
    the_kv(where).failing.add("get")

    async def run() -> Answer:
        answer = await ask(where, chat_body())
        await where.settle()
        return answer

    answer = asyncio.run(run())
    assert answer.reply.status == 200
    assert answer.events.final.name == "done"
    assert answer.events.text() == "Hello"
    assert answer.cache == "miss"
    assert where.ai.models_called == [GLM.id]
    (record,) = request_lines(log_lines(capsys))
    assert record["cache_error"] == "get: get: KV is down (scripted)"
    assert record["status"] == 200


@pytest.mark.parametrize("path", ["/chat", "/v1/chat/completions"])
def test_a_failing_store_is_logged_after_the_reply(
    path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    where = world()
    the_kv(where).failing.add("put")

    async def run() -> Answer:
        answer = await ask(where, chat_body() if path == "/chat" else v1_body(), path=path)
        await where.settle()
        return answer

    answer = asyncio.run(run())
    assert answer.reply.status == 200
    request_id = answer.reply.headers["X-Request-Id"]
    lines = log_lines(capsys)
    assert {"request_id": request_id, "cache_error": "put: put: KV is down (scripted)"} in lines
    assert {"request_id": request_id, "usage_error": "put: put: KV is down (scripted)"} in lines
    assert the_kv(where).items == {}


def test_a_kv_that_fails_everything_still_answers_twice() -> None:
    where = world()
    the_kv(where).failing.update({"get", "put", "list"})

    async def run() -> list[Answer]:
        got = []
        for _ in range(2):
            got.append(await ask(where, v1_body(), path="/v1/chat/completions"))
            await where.settle()
        return got

    got = asyncio.run(run())
    assert [a.reply.status for a in got] == [200, 200]
    assert where.ai.models_called == [GLM.id, GLM.id]
