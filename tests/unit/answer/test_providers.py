"""The providers' own APIs after the Workers AI chain: their settings, the
request body, ``ProviderAi`` over a fake ``fetch``, models cooling down after
a capacity or quota failure, and the whole path through ``app.handle``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from edgechat.answer.candidates import Cooling
from edgechat.answer.providers import ProviderAi, provider_inputs
from edgechat.config.providers import Provider
from edgechat.config.settings import Settings
from edgechat.core.faults import (
    ProviderError,
    UpstreamBusy,
    UpstreamError,
    UpstreamPlanRequired,
    UpstreamQuotaExhausted,
    UpstreamRateLimited,
    UpstreamTimeout,
    from_binding_error,
)
from edgechat.core.http import Incoming, Reply
from edgechat.core.models import WireFormat, cost_usd
from edgechat.core.requests import ChatRequest, Message
from edgechat.web import app
from tests.kit.sse import Parsed, parse
from tests.unit.fakes import (
    STALL,
    AnswerUnderTest,
    Fail,
    FakeAi,
    FakeFetch,
    FakeKv,
    FakePlatform,
    FakeSink,
    FetchReply,
    chat_request,
    finish_within,
    model,
    native_stream,
    openai_stream,
    usage,
)

GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")
KEY = "sk-provider-SECRET-7f3a"
OTHER_KEY = "sk-moonshot-SECRET-91bb"
HELLO = openai_stream(("content", "Hi!"), usage=usage(20, 2))
NATIVE_HELLO = native_stream("Hi", usage=usage(20, 1))
BUSY = from_binding_error("3040: Capacity temporarily exceeded")
QUOTA = from_binding_error("3036: daily allocation used")
HANG_S = 5.0


def settings(**values: object) -> Settings:
    return Settings.from_mapping(values)


def zhipu(**changes: Any) -> Provider:
    fields: dict[str, Any] = {
        "name": "zhipu",
        "base_url": "https://open.bigmodel.cn/api/paas/v4",
        "model_name": "glm-4.7-flash",
        "api_key": KEY,
    }
    return Provider(**{**fields, **changes})


# --- settings ------------------------------------------------------------------


def test_no_providers_by_default() -> None:
    assert settings().providers == ()
    assert settings(PROVIDERS=" , ").providers == ()


def test_built_in_providers_have_their_defaults() -> None:
    s = settings(PROVIDERS="zhipu, moonshot", ZHIPU_API_KEY=KEY, MOONSHOT_API_KEY=OTHER_KEY)
    assert s.providers == (
        Provider("zhipu", "https://open.bigmodel.cn/api/paas/v4", "glm-4.7-flash", KEY),
        Provider("moonshot", "https://api.moonshot.ai/v1", "kimi-k2.6", OTHER_KEY),
    )


def test_every_provider_variable_is_read() -> None:
    s = settings(
        PROVIDERS="Zhipu",
        ZHIPU_BASE_URL=" https://proxy.example/v4/ ",
        ZHIPU_MODEL="glm-5",
        ZHIPU_API_KEY=f" {KEY} ",
        ZHIPU_PRICE_IN="0.1",
        ZHIPU_PRICE_OUT=0,
    )
    assert s.providers == (Provider("zhipu", "https://proxy.example/v4/", "glm-5", KEY, 0.1, 0.0),)


def test_a_provider_without_its_key_is_skipped() -> None:
    s = settings(PROVIDERS="zhipu,moonshot", MOONSHOT_API_KEY=OTHER_KEY)
    assert [p.name for p in s.providers] == ["moonshot"]
    assert settings(PROVIDERS="zhipu", ZHIPU_API_KEY="  ").providers == ()


def test_any_other_name_needs_a_base_url_and_a_model() -> None:
    s = settings(
        PROVIDERS="deepseek",
        DEEPSEEK_BASE_URL="https://api.deepseek.com",
        DEEPSEEK_MODEL="deepseek-chat",
        DEEPSEEK_API_KEY=KEY,
    )
    assert s.providers == (Provider("deepseek", "https://api.deepseek.com", "deepseek-chat", KEY),)
    message = r"^PROVIDERS: DEEPSEEK_BASE_URL and DEEPSEEK_MODEL are needed for deepseek$"
    with pytest.raises(ValueError, match=message):
        settings(PROVIDERS="deepseek", DEEPSEEK_API_KEY=KEY)
    with pytest.raises(ValueError, match=message):
        settings(PROVIDERS="deepseek", DEEPSEEK_MODEL="m", DEEPSEEK_API_KEY=KEY)
    with pytest.raises(ValueError, match=message):
        settings(PROVIDERS="deepseek", DEEPSEEK_BASE_URL="https://x.example", DEEPSEEK_API_KEY=KEY)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/v1",
        "http://localhost:1234",
        "http://[::1]:9000/v1",
        "https://api.example.com/v1",
        "HTTPS://api.example.com",
    ],
)
def test_good_base_urls(url: str) -> None:
    s = settings(PROVIDERS="local", LOCAL_BASE_URL=url, LOCAL_MODEL="m", LOCAL_API_KEY=KEY)
    assert s.providers[0].base_url == url


@pytest.mark.parametrize(
    "url",
    [
        "http://api.example.com/v1",  # a key over plain HTTP
        "http://localhost.example.com",
        "http://10.0.0.1:8080",
        "ftp://api.example.com",
        "https://",
        "api.example.com/v1",
        "javascript:alert(1)",
    ],
)
def test_bad_base_urls(url: str) -> None:
    message = r"^LOCAL_BASE_URL must be an https:// URL \(http:// only for a local server\)$"
    with pytest.raises(ValueError, match=message):
        settings(PROVIDERS="local", LOCAL_BASE_URL=url, LOCAL_MODEL="m", LOCAL_API_KEY=KEY)


def test_a_bad_base_url_is_refused_even_without_a_key() -> None:
    with pytest.raises(ValueError, match="ZHIPU_BASE_URL"):
        settings(PROVIDERS="zhipu", ZHIPU_BASE_URL="http://open.bigmodel.cn")


@pytest.mark.parametrize("name", ["1abc", "a-b", "zhi pu", "x" * 33, "_a", "zhipu!"])
def test_bad_provider_names(name: str) -> None:
    with pytest.raises(ValueError, match=r"^PROVIDERS names must be lower-case letters"):
        settings(PROVIDERS=name)


@pytest.mark.parametrize("price", ["-1", "abc", "inf", "nan", "1e999"])
@pytest.mark.parametrize("var", ["ZHIPU_PRICE_IN", "ZHIPU_PRICE_OUT"])
def test_bad_prices(var: str, price: str) -> None:
    with pytest.raises(ValueError, match=f"^{var} must be a price in USD per million tokens$"):
        settings(PROVIDERS="zhipu", ZHIPU_API_KEY=KEY, **{var: price})


def test_the_key_is_in_no_repr() -> None:
    s = settings(PROVIDERS="zhipu", ZHIPU_API_KEY=KEY)
    assert KEY not in repr(s)
    assert KEY not in repr(s.providers[0])
    assert KEY not in repr(s.providers[0].model)


def test_a_provider_named_twice_is_tried_once() -> None:
    s = settings(PROVIDERS="zhipu,Zhipu", ZHIPU_API_KEY=KEY)
    assert [p.name for p in s.providers] == ["zhipu"]


# --- the provider as a candidate ------------------------------------------------


def test_a_provider_is_an_openai_model_of_its_own() -> None:
    m = zhipu().model
    assert (m.alias, m.id, m.label, m.family, m.provider) == (
        "zhipu",
        "zhipu/glm-4.7-flash",
        "glm-4.7-flash (zhipu)",
        "zhipu",
        "zhipu",
    )
    assert m.wire_format is WireFormat.OPENAI
    assert m.tools is True
    assert m.free_plan is False
    assert m.priced is False
    assert cost_usd(m, usage(1_000_000, 1_000_000)) is None


def test_a_priced_provider_has_a_cost() -> None:
    m = zhipu(price_in_per_m=0.5, price_out_per_m=2.0).model
    assert m.priced
    assert cost_usd(m, usage(1_000_000, 500_000)) == pytest.approx(1.5)
    # One price alone is no price.
    assert zhipu(price_in_per_m=0.5).model.priced is False


# --- provider_inputs --------------------------------------------------------------


def openai_request(**params: Any) -> ChatRequest:
    return ChatRequest(
        messages=(Message("user", "Hi"),),
        model=GLM,
        temperature=0.3,
        max_tokens=99,
        reasoning=False,
        params=params,
    )


def test_provider_inputs_take_openais_fields_only() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    request = openai_request(
        top_p=0.9,
        seed=7,
        stop=["END"],
        response_format={"type": "json_object"},
        tools=tools,
        tool_choice="auto",
        frequency_penalty=0.1,
        presence_penalty=0.2,
        reasoning_effort="low",
    )
    provider = zhipu()
    inputs = request.inputs(provider.model, Settings(system_prompt="Be brief.").system_prompt)
    assert inputs["chat_template_kwargs"] == {"enable_thinking": False}  # Workers AI's own
    assert provider_inputs(inputs, provider) == {
        "model": "glm-4.7-flash",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 99,
        "temperature": 0.3,
        "top_p": 0.9,
        "seed": 7,
        "stop": ["END"],
        "response_format": {"type": "json_object"},
        "tools": tools,
        "tool_choice": "auto",
        "frequency_penalty": 0.1,
        "presence_penalty": 0.2,
    }


def test_provider_inputs_cap() -> None:
    provider = zhipu()
    base = {"messages": [], "stream": True}
    assert provider_inputs({**base, "max_tokens": 5}, provider)["max_tokens"] == 5
    both = {**base, "max_completion_tokens": 7, "max_tokens": 5}
    assert provider_inputs(both, provider)["max_tokens"] == 7
    assert "max_tokens" not in provider_inputs(base, provider)
    assert "max_completion_tokens" not in provider_inputs(both, provider)


# --- ProviderAi ---------------------------------------------------------------------


INPUTS = {"messages": [{"role": "user", "content": "Hi"}], "stream": True, "max_tokens": 9}


def provider_stream(
    fetch: FakeFetch, provider: Provider | None = None, inputs: dict[str, Any] = INPUTS
) -> Any:
    provider = provider or zhipu()
    ai = ProviderAi(fetch, (provider,))
    return asyncio.run(ai.stream(provider.model.id, dict(inputs), {}))


def test_provider_ai_posts_the_body_with_the_key_in_authorization_only() -> None:
    fetch = FakeFetch([FetchReply(200, HELLO)])
    upstream = provider_stream(fetch, zhipu(base_url="https://api.example/v1/"))
    [posted] = fetch.posts
    assert upstream is posted.upstream
    assert not posted.cancelled
    assert posted.url == "https://api.example/v1/chat/completions"
    assert posted.headers == {
        "authorization": f"Bearer {KEY}",
        "content-type": "application/json",
        "accept": "text/event-stream",
    }
    assert posted.body == provider_inputs(INPUTS, zhipu())
    assert KEY not in json.dumps(posted.body)


@pytest.mark.parametrize(
    ("status", "headers", "retry_after"),
    [
        (429, {"retry-after": "30"}, 30),
        (503, {"retry-after": "Wed, 21 Oct 2026 07:28:00 GMT"}, None),
        (401, {}, None),
        (500, {}, None),
        (404, {}, None),
        # A redirect is not followed (the key goes to the configured origin only).
        (307, {"location": "https://elsewhere.example/v1/chat/completions"}, None),
        (301, {"location": "https://elsewhere.example/"}, None),
    ],
)
def test_a_refusal_is_a_provider_error(
    status: int, headers: dict[str, str], retry_after: int | None
) -> None:
    body = [f'{{"error": {{"message": "bad key {KEY}"}}}}'.encode()]
    fetch = FakeFetch([FetchReply(status, body, headers)])
    with pytest.raises(ProviderError) as raised:
        provider_stream(fetch)
    exc = raised.value
    assert exc.fallback_worthy
    assert exc.retry_after == retry_after
    assert str(exc) == f"provider zhipu answered HTTP {status}"
    assert KEY not in str(exc) + json.dumps(exc.to_json()) + repr(exc)
    assert fetch.posts[0].cancelled  # the body is not left open


def test_a_network_failure_is_a_provider_error() -> None:
    fetch = FakeFetch([UpstreamError(detail="fetch failed: TypeError: Network connection lost")])
    with pytest.raises(ProviderError) as raised:
        provider_stream(fetch)
    assert raised.value.fallback_worthy


# --- Cooling ---------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_busy_model_cools_for_its_retry_after() -> None:
    clock = Clock()
    cooling = Cooling(clock)
    assert BUSY.retry_after == 10
    cooling.mark(GLM, BUSY)
    assert cooling.is_cooling(GLM)
    assert not cooling.is_cooling(LLAMA)
    clock.now += 9.99
    assert cooling.is_cooling(GLM)
    clock.now += 0.01
    assert not cooling.is_cooling(GLM)
    clock.now -= 5  # once warm, it stays warm until marked again
    assert not cooling.is_cooling(GLM)


def test_a_used_up_allocation_keeps_workers_ai_out_until_midnight_utc() -> None:
    clock, wall = Clock(), Clock()
    wall.now = 1_795_000_000.0 - 86_400 + 10  # ten seconds into a UTC day
    cooling = Cooling(clock, wall)
    midnight = (wall.now // 86_400 + 1) * 86_400
    assert cooling.allocation_resets() is None
    cooling.mark(KIMI, QUOTA)
    # The account's allocation, not one model: none cools by itself, and the
    # reset is the next 00:00 UTC whatever the Retry-After said.
    assert not cooling.is_cooling(KIMI)
    assert cooling.allocation_resets() == midnight
    wall.now = midnight - 1
    assert cooling.allocation_resets() == midnight
    wall.now = midnight
    assert cooling.allocation_resets() is None


def test_a_provider_s_quota_marks_nothing() -> None:
    wall = Clock()
    cooling = Cooling(Clock(), wall)
    provider = Provider("zhipu", "https://example.test/v4", "glm-4.7-flash", "k", None, None)
    cooling.mark(provider.model, QUOTA)
    assert cooling.allocation_resets() is None


def test_the_binding_s_retry_after_counts() -> None:
    clock = Clock()
    cooling = Cooling(clock)
    cooling.mark(GLM, UpstreamBusy(detail="3040", binding_code=3040, retry_after=2))
    clock.now += 2
    assert not cooling.is_cooling(GLM)
    cooling.mark(GLM, UpstreamBusy(detail="3040", binding_code=3040, retry_after=0))
    assert not cooling.is_cooling(GLM)


@pytest.mark.parametrize(
    "exc",
    [
        from_binding_error("3021: rate limited"),
        from_binding_error("3007: timeout"),
        from_binding_error("5035: plan"),
        UpstreamRateLimited(detail="x", binding_code=3021, retry_after=60),
        UpstreamTimeout(detail="x", binding_code=3008, retry_after=60),
        UpstreamPlanRequired(detail="x", binding_code=5035, retry_after=60),
        ProviderError(detail="provider zhipu answered HTTP 429", retry_after=60),
        UpstreamError(detail="5000: x", binding_code=5000, retry_after=60),
    ],
)
def test_only_capacity_and_quota_cool_a_model(exc: UpstreamError) -> None:
    cooling = Cooling(Clock())
    cooling.mark(GLM, exc)
    assert not cooling.is_cooling(GLM)


# --- ChatSession: providers after the chain, cooling --------------------------------


def session_for(
    ai: FakeAi,
    s: Settings,
    *,
    fetch: FakeFetch | None = None,
    cooling: Cooling | None = None,
    chosen: Any = GLM,
) -> AnswerUnderTest:
    return AnswerUnderTest(
        chat_request(chosen),
        s,
        ai,
        request_id="req-1",
        providers=ProviderAi(fetch, s.providers) if fetch is not None else None,
        cooling=cooling,
    )


def pumped(session: AnswerUnderTest) -> Parsed:
    sink = FakeSink()

    async def run() -> None:
        await session.open()
        await session.stream(sink)

    asyncio.run(finish_within(HANG_S, run()))
    return parse(sink.body)


def opened_error(session: AnswerUnderTest) -> UpstreamError:
    with pytest.raises(UpstreamError) as raised:
        asyncio.run(finish_within(HANG_S, session.open()))
    return raised.value


TWO = settings(
    PROVIDERS="zhipu,moonshot",
    ZHIPU_API_KEY=KEY,
    MOONSHOT_API_KEY=OTHER_KEY,
    FIRST_TOKEN_TIMEOUT_S="5",
)


def test_providers_come_after_the_chain_in_their_order() -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: QUOTA})
    fetch = FakeFetch([FetchReply(503), FetchReply(200, HELLO)])
    parsed = pumped(session_for(ai, TWO, fetch=fetch))
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert [p.url for p in fetch.posts] == [
        "https://open.bigmodel.cn/api/paas/v4/chat/completions",
        "https://api.moonshot.ai/v1/chat/completions",
    ]
    assert [p.headers["authorization"] for p in fetch.posts] == [
        f"Bearer {KEY}",
        f"Bearer {OTHER_KEY}",
    ]
    assert [p.body["model"] for p in fetch.posts] == ["glm-4.7-flash", "kimi-k2.6"]
    assert fetch.posts[0].cancelled
    assert parsed.text() == "Hi!"
    done = parsed.final.data
    assert parsed.final.name == "done"
    assert done["model"] == "moonshot/kimi-k2.6"
    assert done["fallback_from"] == GLM.id
    assert done["cost_usd"] is None  # no prices configured
    assert parsed.meta["model"] == "moonshot/kimi-k2.6"


@pytest.mark.parametrize("code", [3036, 4006])
def test_a_used_up_allocation_goes_straight_to_the_providers(code: int) -> None:
    ai = FakeAi({GLM.id: from_binding_error(f"{code}: used up your daily free allocation")})
    fetch = FakeFetch([FetchReply(200, HELLO)])
    cooling = Cooling()
    parsed = pumped(session_for(ai, TWO, fetch=fetch, cooling=cooling))
    # Llama, next in the chain, would answer the same: it is not asked.
    assert ai.models_called == [GLM.id]
    assert parsed.final.data["model"] == "zhipu/glm-4.7-flash"
    assert cooling.allocation_resets() is not None
    # The next request asks no Workers AI model at all.
    again = FakeAi({})
    pumped(session_for(again, TWO, fetch=FakeFetch([FetchReply(200, HELLO)]), cooling=cooling))
    assert again.models_called == []


def test_a_used_up_allocation_without_providers_is_one_429_until_midnight() -> None:
    ai = FakeAi({GLM.id: QUOTA, LLAMA.id: NATIVE_HELLO})
    wall = [1_795_000_000.0 + 3600]  # one hour into a UTC day
    cooling = Cooling(wall=lambda: wall[0])
    exc = opened_error(session_for(ai, settings(), cooling=cooling))
    assert isinstance(exc, UpstreamQuotaExhausted)
    assert ai.models_called == [GLM.id]
    midnight = (wall[0] // 86_400 + 1) * 86_400
    assert exc.headers() == {"Retry-After": str(int(midnight - wall[0]))}
    assert exc.to_json()["error"]["resets_at"].endswith("T00:00:00Z")
    # Later requests are refused the same way without a call, until midnight.
    later = FakeAi({GLM.id: HELLO})
    wall[0] = midnight - 10
    refused = opened_error(session_for(later, settings(), cooling=cooling))
    assert isinstance(refused, UpstreamQuotaExhausted)
    assert refused.headers() == {"Retry-After": "10"}
    assert later.models_called == []
    wall[0] = midnight
    pumped(session_for(later, settings(), cooling=cooling))
    assert later.models_called == [GLM.id]


def test_reject_if_busy_only_while_a_later_candidate_exists() -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: NATIVE_HELLO})
    pumped(session_for(ai, settings()))
    assert [call.options for call in ai.calls] == [{"rejectIfBusy": True}, {}]
    # The last of the chain queues for capacity rather than fail.
    alone = FakeAi({LLAMA.id: NATIVE_HELLO})
    pumped(session_for(alone, settings(), chosen=LLAMA))
    assert [call.options for call in alone.calls] == [{}]


def test_providers_only_when_given() -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    exc = opened_error(session_for(ai, TWO, fetch=None))
    assert isinstance(exc, UpstreamBusy)
    assert ai.models_called == [GLM.id, LLAMA.id]


def test_every_provider_failing_is_one_provider_error() -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    fetch = FakeFetch([FetchReply(500), FetchReply(429, (), {"retry-after": "7"})])
    exc = opened_error(session_for(ai, TWO, fetch=fetch))
    assert isinstance(exc, ProviderError)
    assert (exc.status, exc.code, exc.retry_after) == (502, "provider_error", 7)
    assert str(exc) == "provider moonshot answered HTTP 429"
    assert all(p.cancelled for p in fetch.posts)


def test_a_non_fallback_error_stops_before_the_providers() -> None:
    ai = FakeAi({GLM.id: from_binding_error("3003: bad input")})
    fetch = FakeFetch([])
    opened_error(session_for(ai, TWO, fetch=fetch))
    assert fetch.posts == []


def test_a_tool_request_skips_llama_but_not_the_providers() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    request = ChatRequest(
        messages=(Message("user", "Hi"),),
        model=GLM,
        temperature=None,
        max_tokens=32,
        reasoning=None,
        params={"tools": tools},
    )
    ai = FakeAi({GLM.id: BUSY})
    fetch = FakeFetch([FetchReply(200, HELLO)])
    session = AnswerUnderTest(
        request, TWO, ai, request_id="r", providers=ProviderAi(fetch, TWO.providers)
    )
    parsed = pumped(session)
    assert ai.models_called == [GLM.id]
    assert fetch.posts[0].body["tools"] == tools
    assert parsed.final.data["model"] == "zhipu/glm-4.7-flash"


def test_a_busy_model_is_skipped_by_the_next_session_while_it_cools() -> None:
    clock = Clock()
    cooling = Cooling(clock)
    s = Settings()
    llama_hi = native_stream("Hi!", usage=usage(20, 2))

    first = FakeAi({GLM.id: BUSY, LLAMA.id: llama_hi})
    assert pumped(session_for(first, s, cooling=cooling)).final.data["model"] == LLAMA.id
    assert first.models_called == [GLM.id, LLAMA.id]

    second = FakeAi({GLM.id: HELLO, LLAMA.id: llama_hi})
    done = pumped(session_for(second, s, cooling=cooling)).final.data
    assert second.models_called == [LLAMA.id]  # GLM not asked while it cools
    assert (done["model"], done["fallback_from"]) == (LLAMA.id, GLM.id)

    clock.now += BUSY.retry_after or 0
    third = FakeAi({GLM.id: HELLO, LLAMA.id: llama_hi})
    assert pumped(session_for(third, s, cooling=cooling)).final.data["model"] == GLM.id
    assert third.models_called == [GLM.id]


def test_a_model_busy_mid_answer_cools_too() -> None:
    # A 3040 while the first bytes are read (before the first token) counts.
    cooling = Cooling(Clock())
    ai = FakeAi(
        {GLM.id: [Fail(BUSY)], LLAMA.id: native_stream("Hi!", usage=usage(20, 2))},
    )
    pumped(session_for(ai, Settings(), cooling=cooling))
    assert cooling.is_cooling(GLM)


def test_cooling_never_leaves_nothing_to_ask() -> None:
    cooling = Cooling(Clock())
    cooling.mark(GLM, BUSY)
    cooling.mark(LLAMA, BUSY)
    ai = FakeAi({GLM.id: HELLO})
    done = pumped(session_for(ai, Settings(), cooling=cooling)).final.data
    assert ai.models_called == [GLM.id]
    assert done["model"] == GLM.id
    assert "fallback_from" not in done


def test_cooling_skips_to_a_provider() -> None:
    cooling = Cooling(Clock())
    cooling.mark(GLM, BUSY)
    cooling.mark(LLAMA, BUSY)
    ai = FakeAi({})
    fetch = FakeFetch([FetchReply(200, HELLO)])
    done = pumped(session_for(ai, TWO, fetch=fetch, cooling=cooling)).final.data
    assert ai.models_called == []
    assert done["model"] == "zhipu/glm-4.7-flash"


# --- through app.handle -------------------------------------------------------------


CHAT_BODY = json.dumps({"messages": [{"role": "user", "content": "Hello"}]}).encode()


def incoming() -> Incoming:
    return Incoming(
        method="POST",
        path="/chat",
        origin="https://chat.example.com",
        headers={"content-type": "application/json", "cf-connecting-ip": "203.0.113.7"},
    )


def platform_of(ai: FakeAi, fetch: FakeFetch, **vars: object) -> FakePlatform:
    base: dict[str, object] = {
        "PROVIDERS": "zhipu,moonshot",
        "ZHIPU_API_KEY": KEY,
        "MOONSHOT_API_KEY": OTHER_KEY,
        "CACHE_MODE": "off",
    }
    return FakePlatform(vars={**base, **vars}, body=CHAT_BODY, ai=ai, fetch=fetch)


def serve(platform: FakePlatform, cooling: Cooling | None = None) -> tuple[Reply, FakeSink]:
    sink = FakeSink()

    async def run() -> Reply:
        reply = await app.handle(incoming(), platform, None, cooling)
        if reply.stream is not None:
            await reply.stream(sink)
        await platform.settle()
        return reply

    return asyncio.run(finish_within(HANG_S, run())), sink


def no_key_anywhere(reply: Reply, sink: FakeSink, out: str) -> None:
    for secret in (KEY, OTHER_KEY, "SECRET"):
        assert secret not in out
        assert secret.encode() not in reply.body
        assert secret.encode() not in sink.body
        assert secret not in json.dumps(reply.headers)


def test_the_provider_answers_when_workers_ai_cannot(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    fetch = FakeFetch([FetchReply(200, HELLO)])
    reply, sink = serve(platform_of(ai, fetch))
    assert reply.status == 200
    parsed = parse(sink.body)
    assert parsed.text() == "Hi!"
    assert (parsed.final.data["model"], parsed.final.data["fallback_from"]) == (
        "zhipu/glm-4.7-flash",
        GLM.id,
    )
    out = capsys.readouterr().out
    [line] = out.splitlines()
    record = json.loads(line)
    assert (record["model"], record["fallback_from"]) == ("zhipu/glm-4.7-flash", GLM.id)
    assert "error_code" not in record
    no_key_anywhere(reply, sink, out)


def test_when_every_provider_fails_one_error(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    fetch = FakeFetch([FetchReply(401, [KEY.encode()]), FetchReply(500, [KEY.encode()])])
    reply, sink = serve(platform_of(ai, fetch))
    assert reply.status == 502
    assert json.loads(reply.body) == {
        "error": {"code": "provider_error", "message": ProviderError.public_message}
    }
    assert all(p.cancelled for p in fetch.posts)
    out = capsys.readouterr().out
    record = json.loads(out)
    assert record["error_code"] == "provider_error"
    assert record["error_detail"] == "provider moonshot answered HTTP 500"
    no_key_anywhere(reply, sink, out)


def test_a_stalling_provider_is_aborted_by_the_first_token_deadline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    fetch = FakeFetch([STALL, STALL])
    reply, _ = serve(platform_of(ai, fetch, FIRST_TOKEN_TIMEOUT_S="0.05"))
    assert reply.status == 504
    assert json.loads(reply.body)["error"]["code"] == "deadline_exceeded"
    # Each provider had its own first-token deadline, and was abandoned after it.
    assert [post.abandoned for post in fetch.posts] == [True, True]
    assert json.loads(capsys.readouterr().out)["model"] == "moonshot/kimi-k2.6"


def test_a_stalling_provider_gives_way_to_the_next() -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    fetch = FakeFetch([STALL, FetchReply(200, HELLO)])
    reply, sink = serve(platform_of(ai, fetch, FIRST_TOKEN_TIMEOUT_S="0.05"))
    assert reply.status == 200
    assert parse(sink.body).final.data["model"] == "moonshot/kimi-k2.6"
    assert fetch.posts[0].abandoned


def test_the_isolates_cooling_is_shared_between_requests() -> None:
    cooling = Cooling()
    first = FakeAi({GLM.id: BUSY, LLAMA.id: native_stream("Hi!", usage=usage(20, 2))})
    serve(platform_of(first, FakeFetch()), cooling)
    second = FakeAi({GLM.id: HELLO, LLAMA.id: native_stream("Hi!", usage=usage(20, 2))})
    _, sink = serve(platform_of(second, FakeFetch()), cooling)
    assert second.models_called == [LLAMA.id]
    assert parse(sink.body).final.data["fallback_from"] == GLM.id


def test_without_the_isolates_cooling_each_request_cools_alone() -> None:
    serve(platform_of(FakeAi({GLM.id: BUSY, LLAMA.id: HELLO}), FakeFetch()))
    second = FakeAi({GLM.id: HELLO})
    serve(platform_of(second, FakeFetch()))
    assert second.models_called == [GLM.id]


def test_a_provider_that_cannot_be_reached_hands_over_to_the_next() -> None:
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    fetch = FakeFetch(
        [UpstreamError(detail="fetch failed: Network connection lost"), FetchReply(200, HELLO)]
    )
    reply, sink = serve(platform_of(ai, fetch))
    assert reply.status == 200
    assert parse(sink.body).final.data["model"] == "moonshot/kimi-k2.6"


def test_a_provider_answer_kept_in_the_cache_can_be_given_again() -> None:
    kv = FakeKv()
    ai = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    where = platform_of(ai, FakeFetch([FetchReply(200, HELLO)]), CACHE_MODE="all")
    where.kv = kv
    serve(where)
    if not any(key.startswith("answer:") for key in kv.items):
        return  # not kept: nothing wasted
    again = FakeAi({GLM.id: BUSY, LLAMA.id: BUSY})
    where = platform_of(again, FakeFetch([FetchReply(200, HELLO)]), CACHE_MODE="all")
    where.kv = kv
    reply, _ = serve(where)
    assert reply.headers.get("X-Edgechat-Cache") == "hit"


def test_an_image_request_is_not_sent_to_a_provider_that_cannot_see() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    request = ChatRequest(
        messages=(Message("user", "What is this?", parts=({"type": "text", "text": "?"}, image)),),
        model=KIMI,
        temperature=None,
        max_tokens=32,
        reasoning=None,
    )
    assert request.unfit(zhipu().model) == "images"
    s = settings(MODELS="glm,kimi,llama", PROVIDERS="zhipu", ZHIPU_API_KEY=KEY)
    ai = FakeAi({KIMI.id: BUSY})
    fetch = FakeFetch([FetchReply(200, HELLO)])
    session = AnswerUnderTest(
        request, s, ai, request_id="r", providers=ProviderAi(fetch, s.providers)
    )
    with pytest.raises(UpstreamBusy):
        asyncio.run(finish_within(HANG_S, session.open()))
    assert fetch.posts == []


def test_cooldown_max_s_caps_the_skip_and_0_turns_it_off() -> None:
    now = [100.0]
    cooling = Cooling(clock=lambda: now[0])
    busy = UpstreamBusy(detail="3040", binding_code=3040, retry_after=3600)
    cooling.mark(GLM, busy, 60)
    now[0] += 59
    assert cooling.is_cooling(GLM)
    now[0] += 2
    assert not cooling.is_cooling(GLM)
    cooling.mark(GLM, busy, 0)
    assert not cooling.is_cooling(GLM)
    # 0 keeps no memory of a used-up allocation either: each request asks.
    cooling.mark(GLM, UpstreamQuotaExhausted(detail="3036", binding_code=3036), 0)
    assert cooling.allocation_resets() is None
    assert Settings.from_mapping({"COOLDOWN_MAX_S": "0"}).cooldown_max_s == 0
    assert Settings().cooldown_max_s == 3600
    with pytest.raises(ValueError, match="COOLDOWN_MAX_S"):
        Settings.from_mapping({"COOLDOWN_MAX_S": "-1"})
