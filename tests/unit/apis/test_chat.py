"""The chat session: fallback, the relay of the model's bytes, deadlines,
heartbeats, a client that leaves, and exactly one final event.

Deadlines use real time (asyncio's timeouts do), so they are tiny and the
tests assert what happened and in which order, never how fast.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import time
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgechat.answer.delivery import MAX_HELD_BYTES, watch_interval
from edgechat.answer.upstream import TAIL_BYTES
from edgechat.apis.chat import ChatFraming
from edgechat.config.settings import Settings
from edgechat.core import sse
from edgechat.core.faults import (
    BINDING_CODES,
    DeadlineExceeded,
    UpstreamBadRequest,
    UpstreamBusy,
    UpstreamError,
    UpstreamMalformed,
    UpstreamPlanRequired,
    UpstreamQuotaExhausted,
    UpstreamRateLimited,
    UpstreamTimeout,
)
from edgechat.core.models import Model, cost_usd
from edgechat.core.requests import Slot
from tests.kit.sse import MODEL, PING, Event, Parsed, parse
from tests.kit.workers_ai import FALLBACK_CODES, NO_FALLBACK_CODES
from tests.unit.fakes import (
    STALL,
    AnswerUnderTest,
    Delay,
    Fail,
    FakeAi,
    FakeSink,
    FakeUpstream,
    Step,
    chat_request,
    model,
    native_stream,
    openai_stream,
    usage,
)

GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")

# Deadlines short enough for unit tests; no heartbeat unless a test wants one.
FAST = Settings(first_token_timeout_s=0.2, idle_timeout_s=0.2, heartbeat_s=30, total_timeout_s=1)
# Deadlines that never matter: Python looks at a relay once a second.
CALM = Settings(first_token_timeout_s=8, idle_timeout_s=8, heartbeat_s=30, total_timeout_s=20)
# Only a guard that turns a hang into a failure; no test measures speed.
HANG_S = 10.0


def session_for(
    ai: FakeAi, chosen: Model = GLM, settings: Settings = FAST, **request: Any
) -> AnswerUnderTest:
    return AnswerUnderTest(chat_request(chosen, **request), settings, ai, request_id="req-1")


@dataclass
class Answered:
    """One session opened and pumped into a collecting sink."""

    session: AnswerUnderTest
    sink: FakeSink
    ai: FakeAi

    @property
    def body(self) -> bytes:
        return self.sink.body

    @property
    def parsed(self) -> Parsed:
        return parse(self.body)

    @property
    def final(self) -> Event:
        return self.parsed.final

    @property
    def between(self) -> bytes:
        """The body after ``meta`` and before the final event: the model's
        bytes as relayed (and any heartbeat or closing blank line)."""
        body = self.body
        start = body.index(b"\n\n") + 2  # meta is one line of JSON
        end = body.rindex(b"\nevent: ") + 1  # so is the final event
        assert body[:start].startswith(b"event: meta\n")
        assert body[end:].startswith((b"event: done\n", b"event: error\n"))
        return body[start:end]

    def upstream(self, call: int = 0) -> FakeUpstream:
        upstream = self.ai.calls[call].upstream
        assert upstream is not None
        return upstream


def answer(
    ai: FakeAi,
    chosen: Model = GLM,
    settings: Settings = FAST,
    sink: FakeSink | None = None,
    **request: Any,
) -> Answered:
    """Opens the session and pumps it to its end."""
    session = session_for(ai, chosen, settings, **request)
    sink = sink or FakeSink()

    async def run() -> None:
        await session.open()
        try:
            await asyncio.wait_for(session.stream(sink), HANG_S)
        except TimeoutError:
            pytest.fail(f"pump() still running after {HANG_S} s")

    asyncio.run(run())
    assert sink.closed == 1
    return Answered(session, sink, ai)


class WatchingSink(FakeSink):
    """Notes, when the final event is written, which upstreams were already
    aborted: a deadline must stop the model before it reports the error."""

    def __init__(self, ai: FakeAi) -> None:
        super().__init__()
        self._ai = ai
        self.aborted_at_final: list[bool] | None = None

    async def write(self, data: bytes) -> None:
        if b"event: error\n" in data or b"event: done\n" in data:
            self.aborted_at_final = [call.cancelled for call in self._ai.calls]
        await super().write(data)


def deadline_run(steps: list[Step], settings: Settings = FAST) -> tuple[Answered, WatchingSink]:
    """GLM alone (no fallback chain after it) answers with ``steps``."""
    ai = FakeAi({GLM.id: steps, LLAMA.id: NATIVE_HELLO})
    sink = WatchingSink(ai)
    alone = dataclasses.replace(settings, fallback_chain=("glm",))
    got = answer(ai, settings=alone, sink=sink)
    assert got.final == Event("error", DEADLINE)
    assert isinstance(got.session.outcome.error, DeadlineExceeded)
    assert sink.aborted_at_final == [True]
    return got, sink


def public(code: str, message: str, retryable: bool) -> dict[str, Any]:
    return {"code": code, "message": message, "retryable": retryable, "request_id": "req-1"}


DEADLINE = public("deadline_exceeded", "The model took too long to answer. Please try again.", True)
MALFORMED = public(
    "upstream_malformed", "The model's answer could not be read. Please try again.", False
)


def error_event(error: UpstreamError) -> Event:
    data = public(error.code, error.public_message, error.retryable)
    resets_at = getattr(error, "resets_at", None)
    if resets_at is not None:
        # A used-up allocation says when it resets: the next 00:00 UTC.
        assert resets_at % 86_400 == 0
        data["resets_at"] = time.strftime("%Y-%m-%dT00:00:00Z", time.gmtime(resets_at))
    return Event("error", data)


USAGE = usage(12, 3)
HELLO = openai_stream(("reasoning", "Hmm."), ("content", "Hel"), ("content", "lo"), usage=USAGE)
NATIVE_HELLO = native_stream("Hel", "lo", usage=USAGE)
# Chunks a model sends before its first words.
ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'
EMPTY = b'data: {"choices":[{"index":0,"delta":{"content":""}}]}\n\n'


def joined(chunks: list[Step]) -> bytes:
    return b"".join(step for step in chunks if isinstance(step, bytes))


# --- open: the first model that accepts, down the fallback chain -----------------

# Every documented binding code, from the one table of them (tests/kit),
# split by whether another model may succeed; plus an error without a code.
FALLBACK_WORTHY = [
    BINDING_CODES[code](detail=f"{code}: upstream says", binding_code=code)
    for code in FALLBACK_CODES
]
NOT_FALLBACK_WORTHY = [
    *(
        BINDING_CODES[code](detail=f"{code}: upstream says", binding_code=code)
        for code in NO_FALLBACK_CODES
    ),
    UpstreamError(detail="something else"),
]


def test_open_uses_the_requested_model_when_it_accepts() -> None:
    ai = FakeAi({GLM.id: HELLO})
    session = session_for(ai, max_tokens=99)
    asyncio.run(session.open())
    assert ai.models_called == [GLM.id]
    assert ai.calls[0].inputs["max_completion_tokens"] == 99
    assert session.outcome.model is GLM
    assert session.outcome.fallback_from is None


@pytest.mark.parametrize(
    "error", FALLBACK_WORTHY, ids=lambda e: f"{type(e).__name__}-{e.binding_code}"
)
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


@pytest.mark.parametrize(
    "error", NOT_FALLBACK_WORTHY, ids=lambda e: f"{type(e).__name__}-{e.binding_code}"
)
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
    last = UpstreamQuotaExhausted(detail="3036: llama allocation")
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: last})
    session = session_for(ai)
    with pytest.raises(UpstreamQuotaExhausted) as raised:
        asyncio.run(session.open())
    assert raised.value is last
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert session.outcome.error is last
    assert session.outcome.model is LLAMA
    assert session.outcome.fallback_from is None


def test_open_falls_back_from_a_model_outside_the_chain_to_the_whole_chain() -> None:
    ai = FakeAi(
        {
            KIMI.id: UpstreamPlanRequired(detail="5035"),
            GLM.id: UpstreamBusy(detail="3040"),
            LLAMA.id: [],
        }
    )
    session = session_for(ai, KIMI)
    asyncio.run(session.open())
    assert ai.models_called == [KIMI.id, GLM.id, LLAMA.id]
    assert session.outcome.fallback_from is KIMI


def test_open_does_not_fall_back_from_the_end_of_the_chain() -> None:
    ai = FakeAi({LLAMA.id: UpstreamBusy(detail="3040"), GLM.id: HELLO})
    with pytest.raises(UpstreamBusy):
        asyncio.run(session_for(ai, LLAMA).open())
    assert ai.models_called == [LLAMA.id]


def test_open_follows_the_configured_chain() -> None:
    settings = Settings(fallback_chain=("glm",))
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: NATIVE_HELLO})
    with pytest.raises(UpstreamBusy):
        asyncio.run(session_for(ai, settings=settings).open())
    assert ai.models_called == [GLM.id]


def test_open_gives_way_to_the_next_model_when_a_binding_does_not_answer() -> None:
    ai = FakeAi({GLM.id: HELLO, LLAMA.id: NATIVE_HELLO}, open_delay={GLM.id: STALL})
    started = time.monotonic()
    session = session_for(ai)
    asyncio.run(asyncio.wait_for(session.open(), HANG_S))
    # It waited for GLM's first-token deadline (0.2 s), not less.
    assert time.monotonic() - started >= 0.19
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[0].abandoned
    assert session.outcome.model is LLAMA
    assert session.outcome.fallback_from is GLM


def test_open_gives_up_when_no_model_answers() -> None:
    ai = FakeAi(
        {GLM.id: HELLO, LLAMA.id: NATIVE_HELLO}, open_delay={GLM.id: STALL, LLAMA.id: STALL}
    )
    session = session_for(ai)
    with pytest.raises(DeadlineExceeded):
        asyncio.run(asyncio.wait_for(session.open(), HANG_S))
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert all(call.abandoned for call in ai.calls)
    assert isinstance(session.outcome.error, DeadlineExceeded)
    assert session.outcome.model is LLAMA


def test_open_waits_for_a_slow_binding_within_the_deadline() -> None:
    ai = FakeAi({GLM.id: HELLO}, open_delay={GLM.id: 0.1})
    session = session_for(ai)
    asyncio.run(session.open())
    assert not ai.calls[0].abandoned
    assert session.outcome.error is None


# --- watch interval ------------------------------------------------------------------


def test_watch_interval_is_a_quarter_of_the_idle_deadline_within_bounds() -> None:
    assert watch_interval(Settings()) == 4.0  # 30 s idle: capped at every 4 s
    assert watch_interval(Settings(idle_timeout_s=8)) == pytest.approx(2.0)
    assert watch_interval(FAST) == 0.05  # a quarter of 0.2 s
    assert watch_interval(Settings(idle_timeout_s=0.01)) == 0.05  # never more often


# --- pump: meta, the model's own bytes, done -------------------------------------------


def test_meta_then_the_models_bytes_then_done() -> None:
    got = answer(FakeAi({GLM.id: HELLO}))
    parsed = got.parsed
    assert parsed.meta == {"request_id": "req-1", "model": GLM.id}
    assert got.between == b"".join(HELLO)
    assert (parsed.reasoning(), parsed.text()) == ("Hmm.", "Hello")
    assert parsed.saw_done_marker
    done = parsed.final
    assert done == Event(
        "done",
        {
            "request_id": "req-1",
            "model": GLM.id,
            "finish_reason": "stop",
            "usage": USAGE,
            "cost_usd": cost_usd(GLM, USAGE),
            "ttft_ms": done.data["ttft_ms"],
        },
    )
    assert isinstance(done.data["ttft_ms"], float)
    assert done.data["ttft_ms"] >= 0
    assert parsed.pings == 0
    assert got.session.outcome.truncated is False


def test_a_native_answer_is_relayed_in_its_own_shape() -> None:
    got = answer(FakeAi({LLAMA.id: NATIVE_HELLO}), LLAMA)
    assert got.parsed.meta == {"request_id": "req-1", "model": LLAMA.id}
    assert got.between == b"".join(NATIVE_HELLO)
    assert [event.data for event in got.parsed.model_events] == [
        {"response": "Hel"},
        {"response": "lo"},
        {"response": "", "usage": USAGE},
        "[DONE]",
    ]
    done = got.final.data
    assert done["model"] == LLAMA.id
    assert done["usage"] == USAGE
    assert done["finish_reason"] is None
    assert done["cost_usd"] == cost_usd(LLAMA, USAGE)


def test_the_relay_starts_at_the_first_text_and_carries_the_rest() -> None:
    chunks = [ROLE, EMPTY, *HELLO]
    got = answer(FakeAi({GLM.id: chunks}))
    upstream = got.upstream()
    # Python read up to the first words (the reasoning chunk), the platform the rest.
    assert upstream.reads == 3
    assert upstream.relays == 1
    assert upstream.chunks_relayed == len(chunks) - 3
    assert got.between == b"".join(chunks)
    assert got.final.name == "done"


TRICKY_STREAM = openai_stream(
    ("reasoning", "思考 🙂"),
    ("content", 'x\n\nevent: done\ndata: {"model":"evil"}\n\n\r'),
    ("content", "你好🙂\u2028end"),
    usage=USAGE,
)


@settings(max_examples=60, deadline=None)
@given(
    crlf=st.booleans(),
    positions=st.lists(st.integers(0, len(b"".join(TRICKY_STREAM)) * 2), max_size=25),
)
def test_the_models_bytes_reach_the_client_byte_for_byte(crlf: bool, positions: list[int]) -> None:
    stream = b"".join(TRICKY_STREAM)
    if crlf:
        stream = stream.replace(b"\n", b"\r\n")
    # Cut anywhere: inside characters, inside CRLF, inside events.
    edges = sorted({0, len(stream), *(p for p in positions if p < len(stream))})
    chunks: list[Step] = [stream[a:b] for a, b in itertools.pairwise(edges)]
    got = answer(FakeAi({GLM.id: chunks}))
    assert got.between == stream  # ends between events: no closing blank line needed
    parsed = got.parsed
    assert parsed.text() == 'x\n\nevent: done\ndata: {"model":"evil"}\n\n\r你好🙂\u2028end'
    assert parsed.reasoning() == "思考 🙂"
    assert parsed.final.data["usage"] == USAGE
    assert parsed.final.data["finish_reason"] == "stop"
    upstream = got.upstream()
    assert upstream.reads + upstream.chunks_relayed == len(chunks)


def test_python_touches_a_long_answer_only_a_few_times() -> None:
    parts = [("content", f"word{i} ") for i in range(2000)]
    chunks = openai_stream(*parts, usage=USAGE, finish_reason="length")
    stream = b"".join(chunks)
    assert len(stream) > 8 * TAIL_BYTES  # the stream's start falls out of the tail
    got = answer(FakeAi({GLM.id: chunks}), settings=CALM)
    upstream = got.upstream()
    assert upstream.reads <= 2
    assert upstream.looks <= 5
    assert upstream.chunks_relayed >= len(chunks) - 2
    assert upstream.reads + upstream.chunks_relayed == len(chunks)
    assert got.between == stream
    assert got.parsed.text() == "".join(text for _, text in parts)
    # How it ended comes from the tail of the relayed bytes.
    done = got.final.data
    assert done["finish_reason"] == "length"
    assert done["usage"] == USAGE
    assert done["cost_usd"] == cost_usd(GLM, USAGE)
    assert got.session.outcome.truncated is False


def test_what_python_saw_while_the_relay_ran_counts_for_the_ending() -> None:
    # Python looks every quarter second: it sees the usage chunk while the
    # relay still runs, and only [DONE] after the relay ended.
    settings = Settings(
        first_token_timeout_s=1, idle_timeout_s=1, heartbeat_s=30, total_timeout_s=3
    )
    said, usage_chunk, done = NATIVE_HELLO[:2], NATIVE_HELLO[2], NATIVE_HELLO[3]
    steps: list[Step] = [*said, Delay(0.05), usage_chunk, Delay(0.4), done]
    got = answer(FakeAi({LLAMA.id: steps}), LLAMA, settings=settings)
    assert got.between == b"".join(NATIVE_HELLO)
    assert got.final.data["usage"] == USAGE
    assert got.upstream().looks >= 2  # once mid-relay, once (or more) at the end
    assert got.session.outcome.truncated is False


def test_a_look_still_under_way_when_the_relay_ends_counts_for_the_ending() -> None:
    # Python is looking (for 0.1 s) when the usage chunk and [DONE] arrive and
    # the relay ends: what that look took must still reach the tail.
    settings = Settings(
        first_token_timeout_s=1, idle_timeout_s=1, heartbeat_s=30, total_timeout_s=3
    )
    first, usage_chunk, done = NATIVE_HELLO[0], NATIVE_HELLO[2], NATIVE_HELLO[3]
    ai = FakeAi({LLAMA.id: [first, Delay(0.4), usage_chunk, done]}, observe_lag=0.1)
    got = answer(ai, LLAMA, settings=settings)
    assert got.between == first + usage_chunk + done
    assert got.final.data["usage"] == USAGE
    assert got.session.outcome.truncated is False


def test_a_long_answer_without_an_end_is_marked_truncated() -> None:
    parts = [("content", f"word{i} ") for i in range(1000)]
    chunks = openai_stream(*parts, finish_reason=None, done=False)
    assert len(b"".join(chunks)) > 2 * TAIL_BYTES
    got = answer(FakeAi({GLM.id: chunks}), settings=CALM)
    assert got.final.name == "done"
    assert got.final.data["finish_reason"] is None
    assert got.session.outcome.truncated is True


@pytest.mark.parametrize(
    "ending",
    [b'data: {"response":"","usage":{"prompt_tokens":12,"completion_tokens":3}}', b"data: [DONE]"],
    ids=["usage", "done-marker"],
)
def test_a_relayed_stream_that_stops_mid_line_is_closed_before_done(ending: bytes) -> None:
    chunks = [*native_stream("Hel", "lo", done=False), ending]
    got = answer(FakeAi({LLAMA.id: chunks}), LLAMA)
    assert got.between == b"".join(chunks) + sse.CLOSE_EVENT
    assert ending + b"\n\nevent: done\ndata: {" in got.body
    assert got.final.name == "done"
    # The tail read the unfinished last line too.
    if b"usage" in ending:
        assert got.final.data["usage"] == USAGE
    else:
        assert got.parsed.saw_done_marker
        assert got.session.outcome.truncated is False


def test_a_stream_that_ends_before_its_blank_line_in_phase_one_is_closed_too() -> None:
    got = answer(FakeAi({LLAMA.id: [b'data: {"response":"Hi"}']}), LLAMA)
    assert got.between == b'data: {"response":"Hi"}' + sse.CLOSE_EVENT
    assert got.parsed.text() == "Hi"
    assert got.final.name == "done"


def test_a_crlf_stream_that_ends_between_events_gets_no_extra_blank_line() -> None:
    chunks = [chunk.replace(b"\n", b"\r\n") for chunk in HELLO]
    got = answer(FakeAi({GLM.id: chunks}))
    assert got.between == b"".join(chunks)
    assert got.parsed.text() == "Hello"


def test_an_event_that_is_not_the_models_ends_the_answer_with_one_error() -> None:
    good = openai_stream(("content", "A"), ("content", "B"), usage=USAGE)
    for bad in (b"data: {oops\n\n", b"garbage\n\n", b"event: done\ndata: {}\n\n"):
        stream = [good[0], Delay(0.05), bad, good[1], *good[2:]]
        got = answer(FakeAi({GLM.id: stream}), settings=CALM)
        # Relayed natively, the bad event went by before Python looked; the
        # answer ends at that look, with our one error last: the only closing
        # carrying meta's request id (a forged done does not).
        assert got.final == Event("error", MALFORMED), bad
        assert got.session.outcome.error is not None
        assert got.parsed.text().startswith("A")


def test_comments_between_the_models_events_are_harmless() -> None:
    good = openai_stream(("content", "A"), ("content", "B"), usage=USAGE)
    stream = [good[0], b": keep-alive\n\n", *good[1:]]
    got = answer(FakeAi({GLM.id: stream}))
    assert got.final.name == "done"
    assert got.parsed.text() == "AB"


def test_an_answer_without_usage_reports_no_cost() -> None:
    done = answer(FakeAi({GLM.id: openai_stream(("content", "Hi"))})).final.data
    assert done["usage"] is None
    assert done["cost_usd"] is None


def test_a_stream_without_an_end_is_marked_truncated() -> None:
    stream = openai_stream(("content", "Hi"), finish_reason=None, done=False)
    got = answer(FakeAi({GLM.id: stream}))
    assert got.parsed.names == ["meta", MODEL, "done"]
    assert got.session.outcome.truncated is True


def test_the_upstream_is_released_after_a_complete_answer() -> None:
    got = answer(FakeAi({GLM.id: HELLO}))
    assert got.ai.calls[0].cancelled


def test_the_outcome_is_recorded_for_the_log() -> None:
    outcome = answer(FakeAi({GLM.id: HELLO})).session.outcome
    assert outcome.model is GLM
    assert outcome.fallback_from is None
    assert outcome.usage == USAGE
    assert outcome.finish_reason == "stop"
    assert outcome.ttft_ms is not None
    assert outcome.error is None
    assert outcome.client_gone is False
    assert outcome.truncated is False


def test_time_to_first_token_counts_until_the_first_text() -> None:
    got = answer(FakeAi({GLM.id: [EMPTY, Delay(0.1), *HELLO]}))
    assert got.final.data["ttft_ms"] >= 100  # not the empty chunk at once
    assert got.session.outcome.ttft_ms == got.final.data["ttft_ms"]


# --- a complete JSON document instead of a stream --------------------------------------


@pytest.mark.parametrize(
    ("document", "sent", "text", "reasoning"),
    [
        ({"response": "Whole answer", "usage": USAGE}, None, "Whole answer", ""),
        (
            {
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"content": "你好!", "reasoning_content": "hmm"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            },
            None,
            "你好!",
            "hmm",
        ),
        # The REST API's envelope: the client gets what is inside.
        (
            {"result": {"response": "Whole answer", "usage": USAGE}, "success": True},
            {"response": "Whole answer", "usage": USAGE},
            "Whole answer",
            "",
        ),
    ],
    ids=["native", "openai", "envelope"],
)
def test_a_whole_json_answer_becomes_one_data_event_then_done(
    document: dict[str, Any], sent: dict[str, Any] | None, text: str, reasoning: str
) -> None:
    body = json.dumps(document, ensure_ascii=False).encode()
    got = answer(FakeAi({LLAMA.id: [body[:7], body[7:]]}), LLAMA)
    parsed = got.parsed
    assert parsed.names == ["meta", MODEL, "done"]
    assert parsed.model_events == [Event(MODEL, sent or document)]
    assert (parsed.text(), parsed.reasoning()) == (text, reasoning)
    assert parsed.final.data["usage"] == USAGE
    assert got.session.outcome.ttft_ms is not None
    # A whole document is complete by itself, without [DONE] or a finish reason.
    assert got.session.outcome.truncated is False


# --- fallback: only while the client has seen nothing of the model -------------------


def test_done_names_the_model_fallen_back_from_at_open() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    assert got.parsed.meta == {"request_id": "req-1", "model": LLAMA.id}
    assert got.final.name == "done"
    assert got.final.data["model"] == LLAMA.id
    assert got.final.data["fallback_from"] == GLM.id
    assert got.between == b"".join(NATIVE_HELLO)


def test_done_has_no_fallback_from_when_the_first_model_answered() -> None:
    got = answer(FakeAi({GLM.id: HELLO, LLAMA.id: NATIVE_HELLO}))
    assert "fallback_from" not in got.final.data


def test_a_stream_that_fails_before_any_byte_falls_back() -> None:
    ai = FakeAi({GLM.id: [Fail(UpstreamBusy(detail="3040: mid-stream"))], LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    assert got.between == b"".join(NATIVE_HELLO)
    assert got.final.data["model"] == LLAMA.id
    assert got.final.data["fallback_from"] == GLM.id
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[0].cancelled
    assert ai.calls[1].inputs["max_tokens"] == 256
    assert got.session.outcome.model is LLAMA
    assert got.session.outcome.fallback_from is GLM


def test_bytes_before_the_first_text_are_held_back_so_a_fallback_leaves_no_trace() -> None:
    glm = [
        ROLE,
        EMPTY,
        b'data: {"choices":[{"index":0,"delta":{"cont',
        Fail(UpstreamTimeout(detail="3007")),
    ]
    ai = FakeAi({GLM.id: glm, LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    # Nothing of GLM reached the client: the answer is Llama's, byte for byte.
    assert got.between == b"".join(NATIVE_HELLO)
    assert b"assistant" not in got.body
    assert got.final.data["fallback_from"] == GLM.id
    assert got.upstream(0).reads == 4
    assert got.upstream(0).relays == 0
    assert got.ai.calls[0].cancelled


@pytest.mark.parametrize("first", ["content", "reasoning"])
def test_no_model_switch_once_text_was_sent(first: str) -> None:
    failure = UpstreamBusy(detail="3040: mid-stream")
    said = openai_stream((first, "Par"), finish_reason=None, done=False)
    ai = FakeAi({GLM.id: [*said, Fail(failure)], LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    # A failed relay may have stopped anywhere, so the error may come after a
    # closing blank line; nothing else comes between.
    assert got.between.removesuffix(sse.CLOSE_EVENT) == b"".join(said)
    assert got.parsed.names == ["meta", MODEL, "error"]
    assert got.final == error_event(failure)
    assert ai.models_called == [GLM.id]
    assert ai.calls[0].cancelled
    assert got.session.outcome.error is failure


def test_other_errors_before_the_first_text_do_not_fall_back() -> None:
    failure = UpstreamBadRequest(detail="3003")
    ai = FakeAi({GLM.id: [ROLE, Fail(failure)], LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    assert got.parsed.names == ["meta", "error"]
    assert got.between == b""  # the held role chunk is dropped with the error
    assert got.final == error_event(failure)
    assert ai.models_called == [GLM.id]


def test_the_fallback_models_silence_is_its_own() -> None:
    # GLM sent a chunk, then failed; Llama takes a while to start. The idle
    # deadline counts Llama's silence, not the time since GLM's chunk.
    settings = Settings(
        first_token_timeout_s=1.5, idle_timeout_s=0.2, heartbeat_s=30, total_timeout_s=3
    )
    glm: list[Step] = [ROLE, Delay(0.15), Fail(UpstreamBusy(detail="3040"))]
    ai = FakeAi({GLM.id: glm, LLAMA.id: [Delay(0.3), *NATIVE_HELLO]})
    got = answer(ai, settings=settings)
    assert got.final.name == "done"
    assert got.final.data["fallback_from"] == GLM.id
    assert got.between == b"".join(NATIVE_HELLO)


def test_the_last_error_is_reported_when_no_fallback_answers() -> None:
    last = UpstreamQuotaExhausted(detail="3036")
    ai = FakeAi({GLM.id: [Fail(UpstreamBusy(detail="3040"))], LLAMA.id: last})
    got = answer(ai)
    assert got.parsed.names == ["meta", "error"]
    assert got.final == error_event(last)
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[0].cancelled
    assert got.session.outcome.error is last


# --- failures: one final error, nothing internal ----------------------------------------


def test_error_events_carry_only_public_fields() -> None:
    failure = UpstreamRateLimited(detail="3021: AI binding env.AI said: secret detail")
    ai = FakeAi({GLM.id: [*openai_stream(("content", "a"), done=False), Fail(failure)]})
    got = answer(ai)
    assert got.final == Event(
        "error",
        public("upstream_rate_limited", UpstreamRateLimited.public_message, True),
    )
    assert b"secret" not in got.body
    assert b"env.AI" not in got.body
    assert b"3021" not in got.body


@pytest.mark.parametrize("phase", ["before the first text", "while relaying"])
def test_an_unexpected_failure_becomes_a_generic_error_event(phase: str) -> None:
    said = openai_stream(("content", "a"), done=False) if phase == "while relaying" else []
    ai = FakeAi({GLM.id: [*said, Fail(RuntimeError("boom with internals"))]})
    got = answer(ai)
    assert got.parsed.names == ["meta", *[MODEL] * len(said), "error"]
    assert got.final == Event(
        "error",
        public("internal_error", "Something went wrong on our side. Please try again.", False),
    )
    assert b"boom" not in got.body
    assert b"RuntimeError" not in got.body
    assert "RuntimeError: boom with internals" in str(got.session.outcome.error)
    assert got.ai.calls[0].cancelled


def test_a_malformed_stream_without_text_ends_with_an_error() -> None:
    garbage = [b"data: {not json\n\n", b"hello there\n\n", b"data: [1, 2]\n\n", b"data: [DONE]\n\n"]
    ai = FakeAi({GLM.id: garbage, LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    assert got.parsed.names == ["meta", "error"]
    assert got.between == b""  # the garbage was held back, not relayed
    assert got.final == Event("error", MALFORMED)
    assert ai.models_called == [GLM.id]
    assert "3 malformed lines" in str(got.session.outcome.error)


def test_a_stream_that_says_nothing_for_too_long_is_given_up() -> None:
    chunks = [EMPTY] * (MAX_HELD_BYTES // len(EMPTY) + 2)
    got = answer(FakeAi({GLM.id: [*chunks, *HELLO]}), settings=CALM)
    assert got.final == Event("error", MALFORMED)
    assert got.between == b""
    assert isinstance(got.session.outcome.error, UpstreamMalformed)
    # It stopped reading at the limit, not at the end.
    assert got.upstream().reads == MAX_HELD_BYTES // len(EMPTY) + 1
    assert got.upstream().relays == 0
    assert got.ai.calls[0].cancelled


ODD_UPSTREAMS: dict[str, list[Step]] = {
    "empty": [],
    "only-done": [b"data: [DONE]\n\n"],
    "malformed": [b"data: {not json\n\n", b"data: [1]\n\n"],
    "binary": [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe\x80", b"\x00\x01\x02\n\n"],
    "binary-after-text": [*openai_stream(("content", "a"), done=False), b"\xff\xfe\x00garbage"],
    "stalled": [STALL],
    "stalled-mid-event": [*openai_stream(("content", "a"), done=False), b'data: {"cho', STALL],
    "whole-json": [b'{"response": "all at once"}'],
    "whole-json-broken": [b'{"response": "cut sho'],
    "text-then-failure": [*openai_stream(("content", "a"), done=False), Fail(UpstreamBusy())],
}


@pytest.mark.parametrize("steps", ODD_UPSTREAMS.values(), ids=ODD_UPSTREAMS.keys())
def test_every_upstream_ends_in_exactly_one_final_event(steps: list[Step]) -> None:
    got = answer(FakeAi({GLM.id: steps}))
    # ``final`` checks there is exactly one done/error, and that it is last.
    parsed = parse(got.body, errors="replace")
    assert parsed.final.name in ("done", "error")
    assert parsed.names[0] == "meta"
    assert got.ai.calls[0].cancelled
    assert got.body.endswith(b"\n\n")


# --- deadlines: the upstream is aborted, one error ends the stream ----------------------


def test_the_first_token_deadline_aborts_a_silent_model() -> None:
    got, _ = deadline_run([STALL])
    assert got.parsed.names == ["meta", "error"]
    assert got.between == b""
    assert "no first token" in str(got.session.outcome.error)


def test_a_model_silent_past_its_first_token_deadline_gives_way_to_the_next() -> None:
    ai = FakeAi({GLM.id: [ROLE, STALL], LLAMA.id: NATIVE_HELLO})
    got = answer(ai)
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[0].cancelled
    # Nothing of GLM reached the client: meta names it, then Llama's answer.
    assert got.parsed.names[0] == "meta"
    assert got.between == b"".join(NATIVE_HELLO)
    assert got.final.name == "done"
    assert got.final.data["model"] == LLAMA.id
    assert got.final.data["fallback_from"] == GLM.id


def test_the_first_token_deadline_counts_text_not_chunks() -> None:
    got, _ = deadline_run([step for _ in range(40) for step in (Delay(0.03), EMPTY)])
    assert got.between == b""  # the empty chunks were held back
    assert "no first token" in str(got.session.outcome.error)
    assert got.upstream().reads < 40  # stopped, not read to the end


def test_a_partial_first_event_is_held_back_when_the_model_stalls() -> None:
    partial = b'data: {"choices":[{"index":0,"delta":{"content":"Hel'
    got, _ = deadline_run([partial, STALL])
    assert got.parsed.names == ["meta", "error"]
    assert got.between == b""  # no closing blank line needed: nothing was sent


def test_the_idle_deadline_holds_before_the_first_text_too() -> None:
    settings = Settings(
        first_token_timeout_s=0.8, idle_timeout_s=0.2, heartbeat_s=30, total_timeout_s=1
    )
    got, _ = deadline_run([ROLE, STALL], settings)
    assert "silent" in str(got.session.outcome.error)


def test_the_idle_deadline_aborts_a_model_that_stops_mid_answer() -> None:
    said = openai_stream(("content", "Hal"), done=False)
    got, _ = deadline_run([*said, STALL])
    assert got.between.removesuffix(sse.CLOSE_EVENT) == b"".join(said)
    assert got.parsed.names == ["meta", MODEL, "error"]
    assert "silent" in str(got.session.outcome.error)


def test_a_stall_inside_an_event_is_closed_with_a_blank_line_before_the_error() -> None:
    said = openai_stream(("content", "Hal"), done=False)
    partial = b'data: {"choices":[{"index":0,"delta":{"content":"lo'
    got, _ = deadline_run([*said, EMPTY, partial, STALL])
    # The line the model left open is ended and dispatched before ours begins.
    assert got.between == b"".join(said) + EMPTY + partial + sse.CLOSE_EVENT
    assert got.body.endswith(
        b'"lo\n\nevent: error\ndata: '
        + json.dumps(DEADLINE, separators=(",", ":")).encode()
        + b"\n\n"
    )
    assert got.parsed.model_events[-1] == Event(MODEL, partial[len(b"data: ") :].decode())


def test_the_idle_deadline_restarts_with_every_chunk() -> None:
    # Chunks 0.08 s apart: longer in total than the 0.15 s idle deadline,
    # never silent for that long.
    chunks = openai_stream(*[("content", str(i)) for i in range(4)])
    steps = [step for chunk in chunks for step in (Delay(0.08), chunk)]
    settings = Settings(
        first_token_timeout_s=0.3, idle_timeout_s=0.15, heartbeat_s=30, total_timeout_s=2
    )
    got = answer(FakeAi({GLM.id: steps}), settings=settings)
    assert got.final.name == "done"
    assert got.between == b"".join(chunks)
    assert got.parsed.text() == "0123"


def test_the_total_deadline_ends_an_answer_that_never_stops() -> None:
    chunk = openai_stream(("content", "la"), finish_reason=None, done=False)[0]
    steps: list[Step] = [step for _ in range(400) for step in (Delay(0.01), chunk)]
    settings = Settings(
        first_token_timeout_s=0.2, idle_timeout_s=0.2, heartbeat_s=30, total_timeout_s=0.4
    )
    got, _ = deadline_run(steps, settings)
    names = got.parsed.names
    assert names[0] == "meta"
    assert set(names[1:-1]) == {MODEL}
    assert len(names) > 5
    assert "total deadline" in str(got.session.outcome.error)
    assert got.session.outcome.ttft_ms is not None
    upstream = got.upstream()
    assert upstream.reads + upstream.chunks_relayed < 400  # stopped, not played out


def test_a_deadline_during_a_fallback_call_ends_the_stream() -> None:
    # GLM fails before its first token; Llama's call never returns. The
    # first-token deadline must still end the stream.
    ai = FakeAi(
        {GLM.id: [Fail(UpstreamBusy(detail="3040"))], LLAMA.id: NATIVE_HELLO},
        open_delay={LLAMA.id: STALL},
    )
    got = answer(ai)
    assert got.parsed.names == ["meta", "error"]
    assert got.final == Event("error", DEADLINE)
    assert ai.calls[1].abandoned


# --- heartbeats: only while the model is silent before its first text ------------------

HEARTBEAT = Settings(
    first_token_timeout_s=0.8, idle_timeout_s=0.8, heartbeat_s=0.05, total_timeout_s=2
)


def test_heartbeats_while_the_model_is_silent_before_its_first_text() -> None:
    got = answer(FakeAi({GLM.id: [Delay(0.35), *HELLO]}), settings=HEARTBEAT)
    parsed = got.parsed
    assert parsed.pings >= 2
    # meta, the pings, then the model's bytes untouched.
    assert parsed.items[1 : 1 + parsed.pings] == [PING] * parsed.pings
    assert got.between == sse.PING * parsed.pings + b"".join(HELLO)
    assert parsed.final.name == "done"


def test_heartbeats_never_split_the_held_bytes() -> None:
    chunks = [ROLE, EMPTY, *HELLO]
    got = answer(FakeAi({GLM.id: [ROLE, EMPTY, Delay(0.35), *HELLO]}), settings=HEARTBEAT)
    pings = got.parsed.pings
    assert pings >= 2
    # The pings during the silence went out before the held chunks, which
    # reach the client whole and in order once the model spoke.
    assert got.between == sse.PING * pings + b"".join(chunks)


def test_heartbeats_while_the_model_sends_only_bytes_that_are_held_back() -> None:
    # Empty chunks keep coming, but they are held back: the client sees only
    # meta, so the connection needs the pings as much as in a true silence.
    steps = [step for _ in range(12) for step in (Delay(0.03), EMPTY)]
    got = answer(FakeAi({GLM.id: [*steps, *HELLO]}), settings=HEARTBEAT)
    pings = got.parsed.pings
    assert pings >= 2
    assert got.between == sse.PING * pings + joined(steps) + b"".join(HELLO)


def test_no_heartbeat_between_relayed_chunks_even_in_a_long_silence() -> None:
    # Silent for seven heartbeat periods mid-answer: the relay cannot be
    # paused to write a ping, so none is written (the idle deadline bounds it).
    chunks = openai_stream(*[("content", str(i)) for i in range(4)])
    steps = [chunks[0], chunks[1], Delay(0.35), *chunks[2:]]
    got = answer(FakeAi({GLM.id: steps}), settings=HEARTBEAT)
    assert got.parsed.pings == 0
    assert got.between == b"".join(chunks)
    assert got.final.name == "done"


# --- the client goes away: the upstream is cancelled -----------------------------------


def test_a_client_gone_during_the_relay_cancels_the_upstream() -> None:
    many = openai_stream(*[("content", str(i)) for i in range(50)])
    sink = FakeSink(gone_after=2)  # meta and the first words
    got = answer(FakeAi({GLM.id: many}), sink=sink)
    assert got.body.startswith(b"event: meta\n")
    assert got.body.endswith(many[0])
    assert got.parsed.names == ["meta", MODEL]
    assert sink.failed_writes == 1  # no error event is attempted for a gone client
    assert got.session.outcome.client_gone is True
    assert got.ai.calls[0].cancelled
    assert got.upstream().chunks_relayed <= 2


def test_a_client_gone_before_meta() -> None:
    got = answer(FakeAi({GLM.id: HELLO}), sink=FakeSink(gone_after=0))
    assert got.body == b""
    assert got.session.outcome.client_gone is True
    assert got.ai.calls[0].cancelled
    assert got.upstream().reads == 0
    assert got.upstream().relays == 0


def test_a_client_gone_when_the_first_words_are_written() -> None:
    got = answer(FakeAi({GLM.id: HELLO}), sink=FakeSink(gone_after=1))
    assert got.parsed.names == ["meta"]
    assert got.session.outcome.client_gone is True
    assert got.ai.calls[0].cancelled
    assert got.upstream().relays == 0


def test_a_client_gone_before_the_error_event() -> None:
    failure = UpstreamBadRequest(detail="3003")
    got = answer(FakeAi({GLM.id: [Fail(failure)]}), sink=FakeSink(gone_after=1))
    assert got.parsed.names == ["meta"]
    assert got.session.outcome.error is failure
    assert got.session.outcome.client_gone is True


def test_a_client_gone_during_a_heartbeat_cancels_a_silent_upstream() -> None:
    # Only the heartbeat writes while the model is silent, so only it can
    # notice the client left; the upstream must then be cancelled at once,
    # before any deadline.
    got = answer(FakeAi({GLM.id: [STALL]}), settings=HEARTBEAT, sink=FakeSink(gone_after=1))
    assert got.parsed.names == ["meta"]
    assert got.sink.failed_writes == 1
    assert got.ai.calls[0].cancelled
    assert got.session.outcome.client_gone is True
    assert got.session.outcome.error is None  # it ended with the client, not a deadline


# --- a comparison's answer: its model alone, and a blind one's events -----------------


def test_a_comparisons_answer_does_not_fall_back() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: NATIVE_HELLO})
    request = dataclasses.replace(chat_request(GLM), slot=Slot("c" * 24, 0))
    session = AnswerUnderTest(request, FAST, ai, request_id="req-1")
    with pytest.raises(UpstreamBusy):
        asyncio.run(session.open())
    assert ai.models_called == [GLM.id]


@pytest.mark.parametrize("blind", [False, True])
def test_a_blind_answers_meta_and_done_name_no_model_and_no_cost(blind: bool) -> None:
    slot = Slot("c" * 24, 2, blind=blind)
    framing = ChatFraming("req-1", None, slot)
    ai = FakeAi({GLM.id: HELLO})
    got = Answered(AnswerUnderTest(chat_request(GLM), FAST, ai, framing=framing), FakeSink(), ai)
    asyncio.run(_pumped(got))
    meta, done = got.parsed.meta, got.final.data
    shown = {"id": "c" * 24, "slot": 2, "blind": blind}
    assert meta == {"request_id": "req-1", "model": None if blind else GLM.id, "comparison": shown}
    assert done["comparison"] == shown
    assert done["model"] == (None if blind else GLM.id)
    assert done["cost_usd"] == (None if blind else cost_usd(GLM, USAGE))
    # What the page shows of a blind answer: its tokens and its time to first token.
    assert done["usage"] == USAGE
    assert done["ttft_ms"] is not None
    # The outcome (what the comparison keeps) knows the model all along.
    assert got.session.outcome.model is GLM
    assert got.session.outcome.tokens_per_s() is None or got.session.outcome.tokens_per_s() > 0


async def _pumped(got: Answered) -> None:
    await got.session.open()
    await asyncio.wait_for(got.session.stream(got.sink), HANG_S)
