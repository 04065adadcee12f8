from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from edgechat import sse
from edgechat.chat import ChatSession, upstream_inputs
from edgechat.config import Settings
from edgechat.errors import (
    DeadlineExceeded,
    UpstreamBadRequest,
    UpstreamBusy,
    UpstreamError,
    UpstreamMisconfigured,
    UpstreamPlanRequired,
    UpstreamQuotaExhausted,
    UpstreamRateLimited,
    UpstreamRequestTooLarge,
    UpstreamTimeout,
)
from edgechat.models import Model, cost_usd, find
from edgechat.validation import ChatRequest, Message

from .fakes import (
    STALL,
    Delay,
    Fail,
    FakeAi,
    FakeSink,
    native_stream,
    openai_stream,
    usage,
)
from .sse_parser import parse_stream


def model(name: str) -> Model:
    found = find(name)
    assert found is not None
    return found


GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")

# Deadlines short enough for unit tests; no heartbeat unless a test wants one.
FAST = Settings(first_token_timeout_s=0.2, idle_timeout_s=0.2, heartbeat_s=30, total_timeout_s=1)
# Any pump that has not finished by then hangs.
HANG_S = 1.5


def chat_request(
    chosen: Model = GLM,
    *,
    messages: tuple[tuple[str, str], ...] = (("user", "Hi"),),
    max_tokens: int = 256,
    temperature: float | None = None,
    reasoning: bool | None = None,
) -> ChatRequest:
    return ChatRequest(
        messages=tuple(Message(role, content) for role, content in messages),  # type: ignore[arg-type]
        model=chosen,
        temperature=temperature,
        max_tokens=max_tokens,
        reasoning=reasoning,
    )


def session_for(
    ai: FakeAi, chosen: Model = GLM, settings: Settings = FAST, **request: Any
) -> ChatSession:
    return ChatSession(chat_request(chosen, **request), settings, ai, request_id="req-1")


async def pump(session: ChatSession, sink: FakeSink) -> float:
    """Runs the pump to its end; fails the test instead of hanging. Returns seconds taken."""
    started = time.monotonic()
    try:
        await asyncio.wait_for(session.pump(sink), HANG_S)
    except TimeoutError:
        pytest.fail(f"pump() still running after {HANG_S} s")
    return time.monotonic() - started


def answer(
    ai: FakeAi, chosen: Model = GLM, settings: Settings = FAST, **request: Any
) -> tuple[ChatSession, FakeSink]:
    """Opens and pumps one session with a collecting sink."""
    session = session_for(ai, chosen, settings, **request)
    sink = FakeSink()

    async def run() -> None:
        await session.open()
        await pump(session, sink)

    asyncio.run(run())
    return session, sink


def events(sink: FakeSink) -> list[tuple[str, dict[str, Any]]]:
    """The stream's events, after checking it is well formed: closed once,
    ending with exactly one ``done`` or ``error``."""
    names_and_data, _ = parse_stream(sink.body)
    parsed = [(name, json.loads(data)) for name, data in names_and_data]
    finals = [name for name, _ in parsed if name in ("done", "error")]
    assert len(finals) == 1, parsed
    assert parsed[-1][0] in ("done", "error"), parsed
    assert sink.closed == 1
    return parsed


def names(sink: FakeSink) -> list[str]:
    return [name for name, _ in events(sink)]


def final(sink: FakeSink) -> dict[str, Any]:
    return events(sink)[-1][1]


def error_event(error: UpstreamError) -> dict[str, Any]:
    return {"code": error.code, "message": error.public_message, "retryable": error.retryable}


USAGE = usage(12, 3)
HELLO = openai_stream(("reasoning", "Hmm."), ("content", "Hel"), ("content", "lo"), usage=USAGE)
NATIVE_HELLO = native_stream("Hel", "lo", usage=USAGE)


# --- upstream_inputs -----------------------------------------------------------


def test_inputs_send_the_conversation_as_messages_under_the_system_prompt() -> None:
    settings = Settings(system_prompt="Be brief.")
    request = chat_request(
        messages=(("user", "Hi"), ("assistant", "Hello!"), ("user", "How are you?")),
        max_tokens=300,
    )
    assert upstream_inputs(request, settings, GLM) == {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "How are you?"},
        ],
        "stream": True,
        "max_completion_tokens": 300,
    }


def test_inputs_native_models_get_max_tokens() -> None:
    inputs = upstream_inputs(chat_request(LLAMA, max_tokens=77), Settings(), LLAMA)
    assert inputs["max_tokens"] == 77
    assert "max_completion_tokens" not in inputs
    assert inputs["messages"][0] == {"role": "system", "content": Settings().system_prompt}


def test_inputs_reasoning_false_turns_thinking_off_for_openai_models() -> None:
    inputs = upstream_inputs(chat_request(reasoning=False), Settings(), GLM)
    assert inputs["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.parametrize("reasoning", [None, True])
def test_inputs_leave_thinking_alone_unless_reasoning_is_false(reasoning: bool | None) -> None:
    inputs = upstream_inputs(chat_request(reasoning=reasoning), Settings(), KIMI)
    assert "chat_template_kwargs" not in inputs


def test_inputs_native_models_get_no_template_kwargs() -> None:
    inputs = upstream_inputs(chat_request(LLAMA, reasoning=False), Settings(), LLAMA)
    assert "chat_template_kwargs" not in inputs


@pytest.mark.parametrize("temperature", [0.0, 1.5])
def test_inputs_pass_temperature_when_given(temperature: float) -> None:
    inputs = upstream_inputs(chat_request(temperature=temperature), Settings(), GLM)
    assert inputs["temperature"] == temperature


def test_inputs_omit_temperature_when_absent() -> None:
    assert "temperature" not in upstream_inputs(chat_request(), Settings(), GLM)


def test_inputs_follow_the_model_called_not_the_model_asked_for() -> None:
    # Falling back from GLM to Llama must switch to Llama's input shape.
    inputs = upstream_inputs(chat_request(GLM, reasoning=False), Settings(), LLAMA)
    assert inputs["max_tokens"] == 256
    assert "max_completion_tokens" not in inputs
    assert "chat_template_kwargs" not in inputs


# --- open: the first model that accepts, down the fallback chain -----------------

FALLBACK_WORTHY = [
    UpstreamBusy("3040: capacity"),
    UpstreamQuotaExhausted("3036: daily allocation"),
    UpstreamTimeout("3007: timeout"),
    UpstreamPlanRequired("5035: paid only"),
]
NOT_FALLBACK_WORTHY = [
    UpstreamRateLimited("3021: rate"),
    UpstreamRequestTooLarge("3006: too large"),
    UpstreamMisconfigured("5007: no such model"),
    UpstreamBadRequest("3003: bad input"),
    UpstreamError("something else"),
]


def test_open_uses_the_requested_model_when_it_accepts() -> None:
    ai = FakeAi({GLM.id: HELLO})
    session = session_for(ai, max_tokens=99)
    asyncio.run(session.open())
    assert ai.models_called == [GLM.id]
    assert ai.calls[0].inputs["max_completion_tokens"] == 99
    assert session.outcome.model is GLM
    assert session.outcome.fallback_from is None


@pytest.mark.parametrize("error", FALLBACK_WORTHY, ids=lambda e: type(e).__name__)
def test_open_falls_back_on_fallback_worthy_errors(error: UpstreamError) -> None:
    ai = FakeAi({GLM.id: error, LLAMA.id: NATIVE_HELLO})
    session = session_for(ai, max_tokens=99)
    asyncio.run(session.open())
    assert ai.models_called == [GLM.id, LLAMA.id]
    # Each model gets its own input shape.
    assert ai.calls[0].inputs["max_completion_tokens"] == 99
    assert ai.calls[1].inputs["max_tokens"] == 99
    assert "max_completion_tokens" not in ai.calls[1].inputs
    assert session.outcome.model is LLAMA
    assert session.outcome.fallback_from is GLM


@pytest.mark.parametrize("error", NOT_FALLBACK_WORTHY, ids=lambda e: type(e).__name__)
def test_open_raises_other_errors_without_fallback(error: UpstreamError) -> None:
    ai = FakeAi({GLM.id: error, LLAMA.id: NATIVE_HELLO})
    session = session_for(ai)
    with pytest.raises(type(error)) as raised:
        asyncio.run(session.open())
    assert raised.value is error
    assert ai.models_called == [GLM.id]
    assert session.outcome.model is GLM
    assert session.outcome.error is error
    assert session.outcome.fallback_from is None


def test_open_raises_the_last_error_when_the_chain_is_exhausted() -> None:
    last = UpstreamQuotaExhausted("3036: llama allocation")
    ai = FakeAi({GLM.id: UpstreamBusy("3040"), LLAMA.id: last})
    session = session_for(ai)
    with pytest.raises(UpstreamQuotaExhausted) as raised:
        asyncio.run(session.open())
    assert raised.value is last
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert session.outcome.error is last
    assert session.outcome.model is LLAMA
    assert session.outcome.fallback_from is None


def test_open_falls_back_from_a_model_outside_the_chain_to_the_whole_chain() -> None:
    ai = FakeAi({KIMI.id: UpstreamPlanRequired("5035"), GLM.id: UpstreamBusy("3040"), LLAMA.id: []})
    session = session_for(ai, KIMI)
    asyncio.run(session.open())
    assert ai.models_called == [KIMI.id, GLM.id, LLAMA.id]
    assert session.outcome.fallback_from is KIMI


def test_open_does_not_fall_back_from_the_end_of_the_chain() -> None:
    ai = FakeAi({LLAMA.id: UpstreamBusy("3040"), GLM.id: HELLO})
    with pytest.raises(UpstreamBusy):
        asyncio.run(session_for(ai, LLAMA).open())
    assert ai.models_called == [LLAMA.id]


def test_open_follows_the_configured_chain() -> None:
    settings = Settings(fallback_chain=("glm",))
    ai = FakeAi({GLM.id: UpstreamBusy("3040"), LLAMA.id: NATIVE_HELLO})
    with pytest.raises(UpstreamBusy):
        asyncio.run(session_for(ai, settings=settings).open())
    assert ai.models_called == [GLM.id]


def test_open_gives_up_on_a_binding_that_does_not_answer() -> None:
    ai = FakeAi({GLM.id: HELLO, LLAMA.id: NATIVE_HELLO}, open_delay={GLM.id: STALL})
    session = session_for(ai)
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        asyncio.run(asyncio.wait_for(session.open(), HANG_S))
    assert 0.2 <= time.monotonic() - started < 0.5
    assert ai.models_called == [GLM.id]  # a deadline is no reason to try another model
    assert ai.calls[0].abandoned
    assert isinstance(session.outcome.error, DeadlineExceeded)
    assert session.outcome.model is GLM


def test_open_waits_for_a_slow_binding_within_the_deadline() -> None:
    ai = FakeAi({GLM.id: HELLO}, open_delay={GLM.id: 0.1})
    session = session_for(ai)
    asyncio.run(session.open())
    assert not ai.calls[0].abandoned
    assert session.outcome.error is None


# --- pump: the event stream ----------------------------------------------------------


def test_pump_relays_an_openai_style_answer() -> None:
    session, sink = answer(FakeAi({GLM.id: HELLO}))
    got = events(sink)
    done = got[-1][1]
    assert got == [
        ("meta", {"request_id": "req-1", "model": GLM.id}),
        ("reasoning", {"text": "Hmm."}),
        ("token", {"text": "Hel"}),
        ("token", {"text": "lo"}),
        (
            "done",
            {
                "model": GLM.id,
                "finish_reason": "stop",
                "usage": USAGE,
                "cost_usd": cost_usd(GLM, USAGE),
                "ttft_ms": done["ttft_ms"],
            },
        ),
    ]
    assert isinstance(done["ttft_ms"], float)
    assert 0 <= done["ttft_ms"] < 1000
    assert session.outcome.truncated is False


def test_pump_relays_a_native_answer() -> None:
    _, sink = answer(FakeAi({LLAMA.id: NATIVE_HELLO}), LLAMA)
    got = events(sink)
    assert got[:3] == [
        ("meta", {"request_id": "req-1", "model": LLAMA.id}),
        ("token", {"text": "Hel"}),
        ("token", {"text": "lo"}),
    ]
    assert got[3][0] == "done"
    assert got[3][1]["model"] == LLAMA.id
    assert got[3][1]["usage"] == USAGE
    assert got[3][1]["finish_reason"] is None
    assert got[3][1]["cost_usd"] == cost_usd(LLAMA, USAGE)
    assert len(got) == 4


def test_pump_reads_a_complete_json_answer_instead_of_a_stream() -> None:
    body = json.dumps({"response": "Whole answer", "usage": USAGE}).encode()
    _, sink = answer(FakeAi({LLAMA.id: [body[:7], body[7:]]}), LLAMA)
    got = events(sink)
    assert [name for name, _ in got] == ["meta", "token", "done"]
    assert got[1][1] == {"text": "Whole answer"}
    assert got[2][1]["usage"] == USAGE


def test_pump_keeps_characters_split_across_chunks() -> None:
    joined = b"".join(openai_stream(("content", "你好🙂"), usage=USAGE))
    cut = joined.index("好".encode()) + 1  # inside the character
    _, sink = answer(FakeAi({GLM.id: [joined[:cut], joined[cut:]]}))
    tokens = "".join(data["text"] for name, data in events(sink) if name == "token")
    assert tokens == "你好🙂"


def test_pump_frames_model_text_safely() -> None:
    text = 'x\n\nevent: done\ndata: {"model":"evil"}\n\n\r'
    _, sink = answer(FakeAi({GLM.id: openai_stream(("content", text))}))
    assert names(sink) == ["meta", "token", "done"]
    assert events(sink)[1][1] == {"text": text}


def test_pump_without_usage_reports_no_cost() -> None:
    _, sink = answer(FakeAi({GLM.id: openai_stream(("content", "Hi"))}))
    done = final(sink)
    assert done["usage"] is None
    assert done["cost_usd"] is None


def test_pump_marks_a_stream_without_end_as_truncated() -> None:
    stream = openai_stream(("content", "Hi"), finish_reason=None, done=False)
    session, sink = answer(FakeAi({GLM.id: stream}))
    assert names(sink) == ["meta", "token", "done"]
    assert session.outcome.truncated is True


def test_pump_cancels_the_upstream_after_a_complete_answer() -> None:
    ai = FakeAi({GLM.id: HELLO})
    answer(ai)
    assert ai.calls[0].cancelled


def test_pump_records_the_outcome_for_the_log() -> None:
    session, _ = answer(FakeAi({GLM.id: HELLO}))
    outcome = session.outcome
    assert outcome.model is GLM
    assert outcome.usage == USAGE
    assert outcome.finish_reason == "stop"
    assert outcome.ttft_ms is not None
    assert outcome.error is None
    assert outcome.client_gone is False


# --- pump: fallback only before the first token ------------------------------


def test_done_names_the_model_fallen_back_from_at_open() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy("3040"), LLAMA.id: NATIVE_HELLO})
    _, sink = answer(ai)
    got = events(sink)
    assert got[0] == ("meta", {"request_id": "req-1", "model": LLAMA.id})
    assert got[-1][0] == "done"
    assert got[-1][1]["model"] == LLAMA.id
    assert got[-1][1]["fallback_from"] == GLM.id


def test_done_has_no_fallback_from_when_the_first_model_answered() -> None:
    _, sink = answer(FakeAi({GLM.id: HELLO, LLAMA.id: NATIVE_HELLO}))
    assert "fallback_from" not in final(sink)


def test_pump_falls_back_when_the_stream_fails_before_the_first_token() -> None:
    ai = FakeAi({GLM.id: [Fail(UpstreamBusy("3040: mid-stream"))], LLAMA.id: NATIVE_HELLO})
    session, sink = answer(ai)
    got = events(sink)
    assert [name for name, _ in got] == ["meta", "token", "token", "done"]
    assert got[-1][1]["model"] == LLAMA.id
    assert got[-1][1]["fallback_from"] == GLM.id
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[0].cancelled
    assert ai.calls[1].inputs["max_tokens"] == 256
    assert session.outcome.fallback_from is GLM


def test_pump_falls_back_after_chunks_without_text() -> None:
    empty = b'data: {"choices":[{"index":0,"delta":{"content":""}}]}\n\n'
    ai = FakeAi({GLM.id: [empty, Fail(UpstreamTimeout("3007"))], LLAMA.id: NATIVE_HELLO})
    _, sink = answer(ai)
    assert final(sink)["fallback_from"] == GLM.id


@pytest.mark.parametrize("first", ["content", "reasoning"])
def test_pump_never_switches_models_after_text_was_sent(first: str) -> None:
    failure = UpstreamBusy("3040: mid-stream")
    steps = [*openai_stream((first, "Par"), finish_reason=None, done=False), Fail(failure)]
    ai = FakeAi({GLM.id: steps, LLAMA.id: NATIVE_HELLO})
    session, sink = answer(ai)
    assert events(sink) == [
        ("meta", {"request_id": "req-1", "model": GLM.id}),
        ("token" if first == "content" else "reasoning", {"text": "Par"}),
        ("error", error_event(failure)),
    ]
    assert ai.models_called == [GLM.id]
    assert ai.calls[0].cancelled
    assert session.outcome.error is failure


def test_pump_does_not_fall_back_on_other_mid_stream_errors() -> None:
    failure = UpstreamBadRequest("3003")
    ai = FakeAi({GLM.id: [Fail(failure)], LLAMA.id: NATIVE_HELLO})
    _, sink = answer(ai)
    assert names(sink) == ["meta", "error"]
    assert final(sink) == error_event(failure)
    assert ai.models_called == [GLM.id]


def test_pump_reports_the_last_error_when_no_fallback_answers() -> None:
    last = UpstreamQuotaExhausted("3036")
    ai = FakeAi({GLM.id: [Fail(UpstreamBusy("3040"))], LLAMA.id: last})
    session, sink = answer(ai)
    assert names(sink) == ["meta", "error"]
    assert final(sink) == error_event(last)
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[0].cancelled
    assert session.outcome.error is last


# --- pump: failures ---------------------------------------------------------------


def test_error_events_carry_only_public_fields() -> None:
    failure = UpstreamRateLimited("3021: AI binding env.AI said: secret detail")
    ai = FakeAi({GLM.id: [*openai_stream(("content", "a"), done=False), Fail(failure)]})
    _, sink = answer(ai)
    assert final(sink) == {
        "code": "upstream_rate_limited",
        "message": UpstreamRateLimited.public_message,
        "retryable": True,
    }
    assert b"secret" not in sink.body
    assert b"env.AI" not in sink.body


def test_unexpected_failure_becomes_a_generic_error_event() -> None:
    ai = FakeAi({GLM.id: [Fail(RuntimeError("boom with internals"))]})
    session, sink = answer(ai)
    assert names(sink) == ["meta", "error"]
    assert final(sink) == {
        "code": "internal_error",
        "message": "Something went wrong on our side. Please try again.",
        "retryable": False,
    }
    assert b"boom" not in sink.body
    assert session.outcome.error is not None
    assert "RuntimeError: boom with internals" in str(session.outcome.error)
    assert ai.calls[0].cancelled


def test_malformed_stream_without_text_ends_with_an_error() -> None:
    garbage = [b"data: {not json\n\n", b"hello there\n\n", b"data: [1, 2]\n\n", b"data: [DONE]\n\n"]
    ai = FakeAi({GLM.id: garbage, LLAMA.id: NATIVE_HELLO})
    session, sink = answer(ai)
    assert names(sink) == ["meta", "error"]
    assert final(sink) == {
        "code": "upstream_malformed",
        "message": "The model's answer could not be read. Please try again.",
        "retryable": False,
    }
    assert ai.models_called == [GLM.id]
    assert "3 malformed lines" in str(session.outcome.error)


def test_empty_stream_ends_with_an_error() -> None:
    _, sink = answer(FakeAi({GLM.id: [b"data: [DONE]\n\n"]}))
    assert names(sink) == ["meta", "error"]
    assert final(sink)["code"] == "upstream_malformed"


def test_malformed_lines_between_good_ones_are_skipped() -> None:
    good = openai_stream(("content", "A"), ("content", "B"), usage=USAGE)
    stream = [good[0], b"data: {oops\n\n", good[1], *good[2:]]
    _, sink = answer(FakeAi({GLM.id: stream}))
    assert [(n, d) for n, d in events(sink) if n == "token"] == [
        ("token", {"text": "A"}),
        ("token", {"text": "B"}),
    ]
    assert names(sink)[-1] == "done"


# --- pump: deadlines and heartbeat -----------------------------------------------


def deadline_error() -> dict[str, Any]:
    return error_event(DeadlineExceeded())


def run_pump(
    ai: FakeAi, settings: Settings = FAST, sink: FakeSink | None = None, chosen: Model = GLM
) -> tuple[ChatSession, FakeSink, float]:
    session = session_for(ai, chosen, settings)
    sink = sink or FakeSink()

    async def run() -> float:
        await session.open()
        return await pump(session, sink)

    took = asyncio.run(run())
    return session, sink, took


def test_first_token_deadline_aborts_a_silent_model() -> None:
    ai = FakeAi({GLM.id: [STALL], LLAMA.id: NATIVE_HELLO})
    session, sink, took = run_pump(ai)
    assert events(sink) == [
        ("meta", {"request_id": "req-1", "model": GLM.id}),
        ("error", deadline_error()),
    ]
    assert ai.calls[0].cancelled
    assert ai.models_called == [GLM.id]  # a deadline is no reason to try another model
    assert isinstance(session.outcome.error, DeadlineExceeded)
    assert 0.2 <= took < 0.6


def test_first_token_deadline_counts_text_not_chunks() -> None:
    empty = b'data: {"choices":[{"index":0,"delta":{"content":""}}]}\n\n'
    ai = FakeAi({GLM.id: [step for _ in range(40) for step in (Delay(0.03), empty)]})
    _, sink, took = run_pump(ai)
    assert names(sink) == ["meta", "error"]
    assert final(sink) == deadline_error()
    assert ai.calls[0].cancelled
    assert took < 0.6


def test_idle_deadline_aborts_a_model_that_stops_mid_answer() -> None:
    ai = FakeAi({GLM.id: [*openai_stream(("content", "Hal"), done=False), STALL]})
    _, sink, took = run_pump(ai)
    assert events(sink)[1:] == [("token", {"text": "Hal"}), ("error", deadline_error())]
    assert ai.calls[0].cancelled
    assert 0.2 <= took < 0.6


def test_idle_deadline_restarts_with_every_chunk() -> None:
    # Five chunks 0.08 s apart: longer in total than the 0.15 s idle deadline,
    # never silent for that long.
    chunks = openai_stream(*[("content", str(i)) for i in range(4)])
    steps = [step for chunk in chunks for step in (Delay(0.08), chunk)]
    settings = Settings(
        first_token_timeout_s=0.3, idle_timeout_s=0.15, heartbeat_s=30, total_timeout_s=1
    )
    _, sink, took = run_pump(FakeAi({GLM.id: steps}), settings)
    assert names(sink) == ["meta", *["token"] * 4, "done"]
    assert took > 0.3


def test_total_deadline_ends_an_answer_that_never_stops() -> None:
    chunk = openai_stream(("content", "la"), finish_reason=None, done=False)[0]
    steps = [step for _ in range(200) for step in (Delay(0.02), chunk)]
    settings = Settings(
        first_token_timeout_s=0.2, idle_timeout_s=0.2, heartbeat_s=30, total_timeout_s=0.4
    )
    session, sink, took = run_pump(FakeAi({GLM.id: steps}), settings)
    got = names(sink)
    assert got[0] == "meta"
    assert got[-1] == "error"
    assert set(got[1:-1]) == {"token"}
    assert len(got) > 5
    assert final(sink) == deadline_error()
    assert session.outcome.ttft_ms is not None
    assert 0.4 <= took < 0.8


def test_heartbeat_while_the_model_is_silent() -> None:
    settings = Settings(
        first_token_timeout_s=0.6, idle_timeout_s=0.6, heartbeat_s=0.05, total_timeout_s=1
    )
    ai = FakeAi({GLM.id: [Delay(0.35), *HELLO]})
    _, sink, _ = run_pump(ai, settings)
    parsed, comments = parse_stream(sink.body)
    assert comments >= 3
    pings = [write for write in sink.writes if write == sse.PING]
    assert len(pings) == comments
    # Pings are whole writes between events and change nothing else.
    assert b"".join(w for w in sink.writes if w != sse.PING) == parse_free_body(parsed)
    assert names(sink) == ["meta", "reasoning", "token", "token", "done"]


def parse_free_body(parsed: list[tuple[str, str]]) -> bytes:
    return b"".join(f"event: {name}\ndata: {data}\n\n".encode() for name, data in parsed)


def test_no_heartbeat_while_events_flow() -> None:
    settings = Settings(
        first_token_timeout_s=0.5, idle_timeout_s=0.5, heartbeat_s=0.15, total_timeout_s=1
    )
    chunks = openai_stream(*[("content", str(i)) for i in range(12)])
    steps = [step for chunk in chunks for step in (Delay(0.02), chunk)]
    _, sink, _ = run_pump(FakeAi({GLM.id: steps}), settings)
    _, comments = parse_stream(sink.body)
    assert comments == 0
    assert names(sink)[-1] == "done"


def test_a_deadline_during_a_fallback_call_ends_the_stream() -> None:
    # GLM fails before its first token; Llama's call never returns. The
    # first-token deadline must still end the stream.
    ai = FakeAi(
        {GLM.id: [Fail(UpstreamBusy("3040"))], LLAMA.id: NATIVE_HELLO},
        open_delay={LLAMA.id: STALL},
    )
    _, sink, took = run_pump(ai)
    assert names(sink) == ["meta", "error"]
    assert final(sink) == deadline_error()
    assert ai.calls[1].abandoned
    assert took < 0.6


# --- pump: the client goes away -----------------------------------------------------


def test_client_gone_on_a_token_stops_the_relay_and_cancels_the_upstream() -> None:
    many = openai_stream(*[("content", str(i)) for i in range(50)])
    ai = FakeAi({GLM.id: many})
    sink = FakeSink(gone_after=2)  # meta and one token
    session, sink, _ = run_pump(ai, sink=sink)
    assert [name for name, _ in parse_stream(sink.body)[0]] == ["meta", "token"]
    assert sink.failed_writes == 1  # no error event is attempted for a gone client
    assert sink.closed == 1
    assert session.outcome.client_gone is True
    assert ai.calls[0].cancelled
    assert ai.calls[0].upstream is not None
    assert ai.calls[0].upstream.chunks_piped <= 3


def test_client_gone_before_meta() -> None:
    ai = FakeAi({GLM.id: HELLO})
    session, sink, _ = run_pump(ai, sink=FakeSink(gone_after=0))
    assert sink.body == b""
    assert session.outcome.client_gone is True
    assert ai.calls[0].cancelled
    assert ai.calls[0].upstream is not None
    assert ai.calls[0].upstream.chunks_piped == 0


def test_client_gone_before_the_error_event() -> None:
    failure = UpstreamBadRequest("3003")
    ai = FakeAi({GLM.id: [Fail(failure)]})
    session, sink, _ = run_pump(ai, sink=FakeSink(gone_after=1))
    assert [name for name, _ in parse_stream(sink.body)[0]] == ["meta"]
    assert session.outcome.error is failure
    assert session.outcome.client_gone is True
    assert sink.closed == 1


def test_client_gone_during_a_heartbeat_cancels_a_silent_upstream() -> None:
    # Only the heartbeat writes while the model is silent, so only it can
    # notice the client left; the upstream must then be cancelled promptly.
    settings = Settings(
        first_token_timeout_s=0.5, idle_timeout_s=0.5, heartbeat_s=0.05, total_timeout_s=1
    )
    ai = FakeAi({GLM.id: [STALL]})
    session, sink, took = run_pump(ai, settings, sink=FakeSink(gone_after=1))
    assert [name for name, _ in parse_stream(sink.body)[0]] == ["meta"]
    assert ai.calls[0].cancelled
    assert session.outcome.client_gone is True
    assert took < 0.3
