"""Moderation with Llama Guard: verdicts, what the guard reads, the check's
timeout, the settings, and the input and output checks through ``app.handle``.

Concurrency is asserted with the fake's ordered events and gates that open on
an event, never with guessed times; the only real waits are a patched, small
``CHECK_TIMEOUT_S`` where the timeout itself is under test.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from edgechat.answer import moderation, recording
from edgechat.answer.moderation import GUARD_MODEL, Verdict, answer_text, parse_verdict
from edgechat.apis.openai import error_body
from edgechat.config.settings import Settings
from edgechat.core.errors import ContentRefused, ModerationUnavailable
from edgechat.core.faults import UpstreamBusy, UpstreamError, from_binding_error
from edgechat.core.http import Incoming, Reply
from edgechat.core.requests import ChatRequest, Message
from edgechat.web import app
from tests.kit.sse import Parsed, parse
from tests.unit.fakes import (
    STALL,
    FakeAi,
    FakeKv,
    FakePlatform,
    FakeSink,
    Gate,
    RunStep,
    finish_within,
    model,
    native_stream,
    openai_stream,
    usage,
)

GLM = model("glm")
GLM_ID = GLM.id
LLAMA_ID = model("llama").id
SAFE: dict[str, Any] = {"response": {"safe": True, "categories": []}}
UNSAFE: dict[str, Any] = {"response": {"safe": False, "categories": ["S1", "S10"]}}
TOKEN = "tok-moderation-1"
HEADERS = {"content-type": "application/json", "cf-connecting-ip": "203.0.113.7"}
CHAT_BODY = json.dumps({"messages": [{"role": "user", "content": "Hello there"}]}).encode()
V1_BODY = json.dumps(
    {"model": GLM_ID, "messages": [{"role": "user", "content": "Hello there"}], "stream": True}
).encode()
HELLO = openai_stream(("content", "Hi!"), usage=usage(20, 2))
# Only a guard that turns a hang into a failure; no test measures speed.
HANG_S = 5.0


# --- parse_verdict ----------------------------------------------------------------


def test_json_verdicts() -> None:
    assert parse_verdict(SAFE) == Verdict(True, ())
    assert parse_verdict({"response": {"safe": True}}) == Verdict(True, ())
    assert parse_verdict(UNSAFE) == Verdict(False, ("S1", "S10"))


def test_json_verdict_codes_are_normalised_deduplicated_and_unknown_ones_dropped() -> None:
    result = {"response": {"safe": False, "categories": [" s3 ", "S1", "S99", "X", "S1", 7]}}
    assert parse_verdict(result) == Verdict(False, ("S3", "S1"))


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ("safe", Verdict(True)),
        ("  Safe\n", Verdict(True)),
        ("unsafe\nS1,S10", Verdict(False, ("S1", "S10"))),
        ("unsafe\nS1\nS10", Verdict(False, ("S1", "S10"))),
        ("UNSAFE\n s2 , S99,S2", Verdict(False, ("S2",))),
        ("unsafe", Verdict(False, ())),
    ],
)
def test_text_verdicts(text: str, verdict: Verdict) -> None:
    assert parse_verdict({"response": text}) == verdict


@pytest.mark.parametrize(
    "result",
    [
        None,
        "safe",
        [],
        {},
        {"response": None},
        {"response": 3},
        {"response": ""},
        {"response": "maybe"},
        {"response": "unsafety\nS1"},
        {"response": {"safe": "yes"}},
        {"response": {"safe": 1, "categories": []}},
        {"response": {"safe": False, "categories": "S1"}},
        {"response": {}},
    ],
)
def test_anything_else_is_no_verdict(result: Any) -> None:
    with pytest.raises(ValueError, match="verdict"):
        parse_verdict(result)


def test_verdict_json() -> None:
    assert Verdict(False, ("S1", "S10")).to_json() == {"safe": False, "categories": ["S1", "S10"]}
    assert Verdict(True).to_json() == {"safe": True, "categories": []}


def test_categories_are_the_docs() -> None:
    page = Path(__file__).parents[3] / "docs" / "operating" / "moderation.md"
    section = page.read_text()
    table: dict[str, str] = {}
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        for code, name in zip(cells[::2], cells[1::2], strict=False):
            if re.fullmatch(r"S\d+", code):
                table[code] = name
    assert table == moderation.CATEGORIES
    assert list(moderation.CATEGORIES) == [f"S{n}" for n in range(1, 15)]


# --- conversation -------------------------------------------------------------------


def request_of(*messages: Message) -> ChatRequest:
    return ChatRequest(
        messages=messages, model=GLM, temperature=None, max_tokens=64, reasoning=None
    )


def test_conversation_keeps_user_and_assistant_turns_only() -> None:
    request = request_of(
        Message("system", "You are a pirate."),
        Message("user", "Hi"),
        Message("assistant", "Ahoy", {"tool_calls": [{"id": "c1"}]}),
        Message("tool", '{"weather": "sunny"}', {"tool_call_id": "c1"}),
        Message("assistant", "  "),  # a tool call's empty text
        Message("user", "And now?"),
    )
    assert moderation.conversation(request) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Ahoy"},
        {"role": "user", "content": "And now?"},
    ]


def test_conversation_appends_the_answer_as_the_assistants() -> None:
    request = request_of(Message("system", "x"), Message("user", "Hi"))
    assert moderation.conversation(request, "Hello!") == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
    ]
    # An empty answer is still the answer to check.
    assert moderation.conversation(request, "")[-1] == {"role": "assistant", "content": ""}


# --- check -------------------------------------------------------------------------


TURNS = [{"role": "user", "content": "Hi"}]


def test_check_asks_llama_guard_in_json_mode() -> None:
    ai = FakeAi({}, runs={GUARD_MODEL: [UNSAFE]})
    options = {"gateway": {"id": "gw", "skipCache": False, "cacheTtl": 60}}
    verdict = asyncio.run(moderation.check(ai, TURNS, options))
    assert verdict == Verdict(False, ("S1", "S10"))
    [call] = ai.run_calls
    assert call.model_id == "@cf/meta/llama-guard-3-8b"
    assert call.inputs == {"messages": TURNS, "response_format": {"type": "json_object"}}
    assert call.options == options
    assert ai.calls == []  # no stream


@pytest.mark.parametrize(
    ("step", "error"),
    [
        (UpstreamBusy(detail="3040: busy", binding_code=3040), UpstreamBusy),
        ({"response": "no idea"}, ValueError),
    ],
)
def test_check_failures_raise(step: RunStep, error: type[Exception]) -> None:
    ai = FakeAi({}, runs={GUARD_MODEL: [step]})
    with pytest.raises(error) as raised:
        asyncio.run(moderation.check(ai, TURNS, {}))
    assert isinstance(raised.value, moderation.CHECK_FAILURES)


def test_check_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    assert moderation.CHECK_TIMEOUT_S == 10.0  # the docs' figure (docs/operating/moderation.md)
    monkeypatch.setattr(moderation, "CHECK_TIMEOUT_S", 0.01)
    ai = FakeAi({}, runs={GUARD_MODEL: [STALL]})

    with pytest.raises(TimeoutError) as raised:
        asyncio.run(finish_within(HANG_S, moderation.check(ai, TURNS, {})))
    assert isinstance(raised.value, moderation.CHECK_FAILURES)
    assert ai.run_calls[0].abandoned  # the call is given up, not left running


# --- answer_text (what the output check reads) -------------------------------------


def test_answer_text_of_an_openai_stream_is_its_content_only() -> None:
    stream = openai_stream(
        ("reasoning", "Let me think"), ("content", "Hel"), ("content", "lo"), usage=usage(3, 2)
    )
    assert answer_text(b"".join(stream)) == "Hello"


def test_answer_text_of_a_native_stream() -> None:
    assert answer_text(b"".join(native_stream("Bon", "jour", usage=usage(3, 2)))) == "Bonjour"


def test_answer_text_decodes_escapes() -> None:
    text = 'say "hi"\nthen é \u2028 \\ done 😀'
    assert answer_text(b"".join(openai_stream(("content", text)))) == text


def test_answer_text_of_nothing() -> None:
    assert answer_text(b"") == ""
    assert answer_text(b"".join(openai_stream(("reasoning", "only thoughts")))) == ""


# --- settings --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "moderate"),
    [
        (None, (False, False)),
        ("", (False, False)),
        ("off", (False, False)),
        ("input", (True, False)),
        ("input,output", (True, True)),
        (" output , input ", (True, True)),
        ("input,input", (True, False)),
    ],
)
def test_moderation_setting(value: str | None, moderate: tuple[bool, bool]) -> None:
    s = Settings.from_mapping({} if value is None else {"MODERATION": value})
    assert (s.moderate_input, s.moderate_output) == moderate


@pytest.mark.parametrize("value", ["output", "on", "all", "input,off", "true", "input;output"])
def test_bad_moderation_settings(value: str) -> None:
    with pytest.raises(ValueError, match=r"^MODERATION must be off, input, or input,output$"):
        Settings.from_mapping({"MODERATION": value})


def test_moderation_setting_ignores_case_like_the_others() -> None:
    s = Settings.from_mapping({"MODERATION": "Input,OUTPUT"})
    assert (s.moderate_input, s.moderate_output) == (True, True)


@pytest.mark.parametrize(
    ("value", "closed"), [(None, False), ("open", False), ("closed", True), (" CLOSED ", True)]
)
def test_moderation_fail_setting(value: str | None, closed: bool) -> None:
    s = Settings.from_mapping({} if value is None else {"MODERATION_FAIL": value})
    assert s.moderation_fail_closed is closed


def test_bad_moderation_fail_setting() -> None:
    with pytest.raises(ValueError, match=r"^MODERATION_FAIL must be one of open, closed$"):
        Settings.from_mapping({"MODERATION_FAIL": "shut"})


# --- errors ------------------------------------------------------------------------


def test_content_refused_names_the_categories() -> None:
    exc = ContentRefused(categories=("S1", "S10"), detail="internal")
    assert (exc.status, exc.code) == (400, "content_refused")
    assert exc.to_json() == {
        "error": {
            "code": "content_refused",
            "message": "This request was refused by the content safety check.",
            "categories": ["S1", "S10"],
        }
    }
    assert error_body(exc) == (
        400,
        {
            "error": {
                "message": "This request was refused by the content safety check.",
                "type": "invalid_request_error",
                "param": None,
                "code": "content_refused",
                "categories": ["S1", "S10"],
            }
        },
    )
    assert "internal" not in json.dumps(error_body(exc))


def test_moderation_unavailable() -> None:
    exc = ModerationUnavailable(detail="TimeoutError")
    assert (exc.status, exc.code, exc.retryable) == (503, "moderation_unavailable", True)
    assert exc.headers() == {"Retry-After": "10"}
    assert "categories" not in error_body(exc)[1]["error"]


# --- through app.handle -------------------------------------------------------------


def chat_in(path: str = "/chat") -> Incoming:
    headers = dict(HEADERS)
    if path.startswith("/v1/"):
        headers["authorization"] = f"Bearer {TOKEN}"
    return Incoming(method="POST", path=path, origin="https://chat.example.com", headers=headers)


def where(ai: FakeAi, body: bytes = CHAT_BODY, **vars: object) -> FakePlatform:
    return FakePlatform(vars={"CACHE_MODE": "off", **vars}, body=body, ai=ai)


async def _handle(path: str, platform: FakePlatform, sink: FakeSink) -> Reply:
    reply = await app.handle(chat_in(path), platform)
    if reply.stream is not None:
        await reply.stream(sink)
    return reply


def serve(path: str, platform: FakePlatform) -> tuple[Reply, FakeSink]:
    sink = FakeSink()

    return asyncio.run(finish_within(HANG_S, _handle(path, platform, sink))), sink


def log_record(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1, lines
    record: dict[str, Any] = json.loads(lines[0])
    return record


def events(sink: FakeSink) -> Parsed:
    return parse(sink.body)


def stream_ok(reply: Reply, sink: FakeSink) -> dict[str, Any]:
    assert reply.status == 200
    parsed = events(sink)
    assert parsed.text() == "Hi!"
    final = parsed.final
    assert final.name == "done", final
    done: dict[str, Any] = final.data
    return done


@pytest.mark.parametrize("main_call", ["still opening", "already open"])
def test_unsafe_input_is_refused_and_the_model_call_stopped(
    main_call: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if main_call == "still opening":
        # The verdict comes while the binding has not answered the main call.
        ai = FakeAi(
            {GLM_ID: HELLO},
            open_delay={GLM_ID: STALL},
            runs={GUARD_MODEL: [Gate(UNSAFE, after=f"stream:{GLM_ID}")]},
        )
    else:
        # The verdict comes once the main call's stream is there.
        ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [Gate(UNSAFE, after=f"opened:{GLM_ID}")]})
    reply, sink = serve("/chat", where(ai, MODERATION="input"))
    assert reply.status == 400
    assert json.loads(reply.body) == ContentRefused(categories=("S1", "S10")).to_json()
    assert sink.writes == []
    [call] = ai.calls
    assert call.model_id == GLM_ID
    if main_call == "still opening":
        assert call.abandoned
    else:
        assert call.cancelled
        assert call.upstream is not None
        assert call.upstream.reads == 0  # nothing read
    # The guard and the main call ran at the same time: both began before the verdict.
    assert ai.events.index(f"run:{GUARD_MODEL}") < ai.events.index(f"ran:{GUARD_MODEL}")
    assert ai.events.index(f"stream:{GLM_ID}") < ai.events.index(f"ran:{GUARD_MODEL}")
    record = log_record(capsys)
    assert (record["status"], record["error_code"]) == (400, "content_refused")
    assert record["moderation"] == "unsafe:S1,S10"
    assert "Hello there" not in json.dumps(record)


def test_the_guard_reads_the_conversation_not_the_system_prompt() -> None:
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE]})
    platform = where(ai, MODERATION="input", SYSTEM_PROMPT="You are SYSTEM-MARKER.")
    serve("/chat", platform)
    [guard] = ai.run_calls
    assert guard.inputs == {
        "messages": [{"role": "user", "content": "Hello there"}],
        "response_format": {"type": "json_object"},
    }
    # The main call still gets the system prompt.
    assert ai.calls[0].inputs["messages"][0] == {
        "role": "system",
        "content": "You are SYSTEM-MARKER.",
    }


def test_safe_input_streams_and_the_main_call_starts_before_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The guard answers only once the main call is open: a check awaited
    # before the model call started would never get its verdict.
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [Gate(SAFE, after=f"opened:{GLM_ID}")]})
    reply, sink = serve("/chat", where(ai, MODERATION="input"))
    done = stream_ok(reply, sink)
    assert "moderation" not in done  # only the output check goes into done
    record = log_record(capsys)
    assert record["moderation"] == "safe"
    assert "moderation_error" not in record


def test_nothing_is_released_before_the_verdict() -> None:
    gate = Gate(SAFE)
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [gate]})
    platform = where(ai, MODERATION="input")
    sink = FakeSink()

    async def run() -> Reply:
        answering = asyncio.ensure_future(_handle("/chat", platform, sink))
        await asyncio.wait_for(ai.happened(f"opened:{GLM_ID}"), HANG_S)
        for _ in range(50):  # every turn the loop may take, and then some
            await asyncio.sleep(0)
        assert not answering.done()
        assert sink.writes == []
        upstream = ai.calls[0].upstream
        assert upstream is not None
        assert upstream.reads == 0
        gate.open()
        return await finish_within(HANG_S, answering)

    reply = asyncio.run(run())
    stream_ok(reply, sink)


def test_moderation_off_calls_no_guard() -> None:
    ai = FakeAi({GLM_ID: HELLO})
    reply, sink = serve("/chat", where(ai))
    done = stream_ok(reply, sink)
    assert ai.run_calls == []
    assert "moderation" not in done


FAILED_CHECKS: list[tuple[RunStep, str]] = [
    (UpstreamError(detail="5000: guard down"), "UpstreamError: 5000: guard down"),
    ({"response": "perhaps"}, "ValueError: not a Llama Guard verdict"),
    (STALL, "TimeoutError: "),
]


@pytest.mark.parametrize(("step", "logged"), FAILED_CHECKS)
def test_a_failed_input_check_fails_open_by_default(
    step: RunStep, logged: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(moderation, "CHECK_TIMEOUT_S", 0.05)
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [step]})
    reply, sink = serve("/chat", where(ai, MODERATION="input"))
    stream_ok(reply, sink)
    record = log_record(capsys)
    assert record["moderation_error"].startswith(logged)
    assert "moderation" not in record
    assert "error_code" not in record


@pytest.mark.parametrize(("step", "logged"), FAILED_CHECKS)
def test_a_failed_input_check_fails_closed(
    step: RunStep, logged: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(moderation, "CHECK_TIMEOUT_S", 0.05)
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [step]})
    reply, sink = serve("/chat", where(ai, MODERATION="input", MODERATION_FAIL="closed"))
    assert reply.status == 503
    assert json.loads(reply.body) == {
        "error": {
            "code": "moderation_unavailable",
            "message": ModerationUnavailable.public_message,
        }
    }
    assert reply.headers["Retry-After"] == "10"
    assert sink.writes == []
    assert ai.calls[0].cancelled or ai.calls[0].abandoned
    record = log_record(capsys)
    assert record["error_code"] == "moderation_unavailable"
    assert record["moderation_error"].startswith(logged)
    assert "guard down" not in reply.body.decode()


def test_unsafe_input_on_v1_is_an_openai_error(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [UNSAFE]})
    platform = where(ai, V1_BODY, MODERATION="input", API_TOKEN=TOKEN)
    reply, sink = serve("/v1/chat/completions", platform)
    assert reply.status == 400
    assert json.loads(reply.body) == error_body(ContentRefused(categories=("S1", "S10")))[1]
    assert json.loads(reply.body)["error"]["categories"] == ["S1", "S10"]
    assert sink.writes == []
    assert ai.calls[0].cancelled or ai.calls[0].abandoned
    assert log_record(capsys)["error_code"] == "content_refused"


# --- the output check (/chat only) ------------------------------------------------------


def test_input_and_output_checks_put_the_verdict_in_done(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE, SAFE]})
    reply, sink = serve("/chat", where(ai, MODERATION="input,output"))
    done = stream_ok(reply, sink)
    assert done["moderation"] == {"safe": True, "categories": []}
    first, second = ai.run_calls
    assert first.inputs["messages"] == [{"role": "user", "content": "Hello there"}]
    assert second.inputs["messages"] == [
        {"role": "user", "content": "Hello there"},
        {"role": "assistant", "content": "Hi!"},
    ]
    # The answer is checked once it is complete: after the model's stream.
    assert (
        ai.events.index(f"opened:{GLM_ID}")
        < [index for index, event in enumerate(ai.events) if event == f"run:{GUARD_MODEL}"][1]
    )
    record = log_record(capsys)
    assert (record["moderation"], record["answer_moderation"]) == ("safe", "safe")


def test_a_flagged_answer_is_still_streamed_and_named_in_done(
    capsys: pytest.CaptureFixture[str],
) -> None:
    flagged = {"response": "unsafe\nS11"}
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE, flagged]})
    reply, sink = serve("/chat", where(ai, MODERATION="input,output"))
    done = stream_ok(reply, sink)  # the text went out before the verdict
    assert done["moderation"] == {"safe": False, "categories": ["S11"]}
    assert done["model"] == GLM_ID
    assert log_record(capsys)["answer_moderation"] == "unsafe:S11"


def test_the_output_check_is_not_made_on_v1(capsys: pytest.CaptureFixture[str]) -> None:
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE]})
    platform = where(ai, V1_BODY, MODERATION="input,output", API_TOKEN=TOKEN)
    reply, sink = serve("/v1/chat/completions", platform)
    assert reply.status == 200
    assert b"moderation" not in sink.body
    assert sink.body.rstrip().endswith(b"data: [DONE]")
    assert len(ai.run_calls) == 1
    record = log_record(capsys)
    assert record["moderation"] == "safe"
    assert "answer_moderation" not in record


def test_output_check_only_for_chat_with_input_only() -> None:
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE]})
    reply, sink = serve("/chat", where(ai, MODERATION="input"))
    stream_ok(reply, sink)
    assert len(ai.run_calls) == 1


@pytest.mark.parametrize("fail", ["open", "closed"])
def test_an_answer_too_long_to_check_follows_moderation_fail(
    fail: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(recording, "MAX_RECORDED_BYTES", 200)
    long = openai_stream(*(("content", "word " * 20),) * 5, usage=usage(20, 100))
    ai = FakeAi({GLM_ID: long}, runs={GUARD_MODEL: [SAFE]})
    reply, sink = serve("/chat", where(ai, MODERATION="input,output", MODERATION_FAIL=fail))
    assert reply.status == 200
    parsed = events(sink)
    assert parsed.text() == "word " * 100  # streamed whole all the same
    assert len(ai.run_calls) == 1  # the answer was not sent to the guard
    record = log_record(capsys)
    assert record["answer_moderation_error"] == "ValueError: the answer is longer than 200 bytes"
    if fail == "open":
        assert parsed.final.name == "done"
        assert "moderation" not in parsed.final.data
        assert "error_code" not in record
    else:
        assert parsed.final.name == "error"
        assert parsed.final.data["code"] == "moderation_unavailable"
        assert record["error_code"] == "moderation_unavailable"


@pytest.mark.parametrize("fail", ["open", "closed"])
def test_a_failed_output_check_follows_moderation_fail(
    fail: str, capsys: pytest.CaptureFixture[str]
) -> None:
    down = UpstreamError(detail="5000: guard down")
    ai = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE, down]})
    reply, sink = serve("/chat", where(ai, MODERATION="input,output", MODERATION_FAIL=fail))
    assert reply.status == 200
    parsed = events(sink)
    assert parsed.text() == "Hi!"
    record = log_record(capsys)
    assert record["answer_moderation_error"] == "UpstreamError: 5000: guard down"
    if fail == "open":
        assert parsed.final.name == "done"
        assert "moderation" not in parsed.final.data
    else:
        assert parsed.final.name == "error"
        assert parsed.final.data["code"] == "moderation_unavailable"
    assert b"guard down" not in sink.body


def test_a_fallback_answer_is_checked_as_the_one_that_answered() -> None:
    busy = UpstreamBusy(detail="3040: busy", binding_code=3040)
    ai = FakeAi(
        {GLM_ID: busy, LLAMA_ID: native_stream("Hi!", usage=usage(20, 2))},
        runs={GUARD_MODEL: [SAFE, SAFE]},
    )
    reply, sink = serve("/chat", where(ai, MODERATION="input,output"))
    done = stream_ok(reply, sink)
    assert done["model"] == LLAMA_ID
    assert done["moderation"] == {"safe": True, "categories": []}
    assert ai.run_calls[1].inputs["messages"][-1] == {"role": "assistant", "content": "Hi!"}


def test_a_cached_answer_waits_for_the_verdict_too(capsys: pytest.CaptureFixture[str]) -> None:
    kv = FakeKv()
    body = json.dumps({"messages": [{"role": "user", "content": "Hello there"}]}).encode()
    first = FakeAi({GLM_ID: HELLO}, runs={GUARD_MODEL: [SAFE]})
    platform = where(first, body, MODERATION="input", CACHE_MODE="all")
    platform.kv = kv
    serve("/chat", platform)
    asyncio.run(platform.settle())
    assert any(key.startswith("answer:") for key in kv.items)
    capsys.readouterr()

    again = FakeAi({}, runs={GUARD_MODEL: [UNSAFE]})
    platform = where(again, body, MODERATION="input", CACHE_MODE="all")
    platform.kv = kv
    reply, sink = serve("/chat", platform)
    assert reply.status == 400
    assert json.loads(reply.body)["error"]["categories"] == ["S1", "S10"]
    assert sink.writes == []
    assert again.calls == []  # answered from the cache, but refused first
    record = log_record(capsys)
    assert (record["cache"], record["moderation"]) == ("hit", "unsafe:S1,S10")


def test_a_refusal_after_a_failed_model_call_leaves_no_stray_task_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad = from_binding_error("3003: bad input BINDING-DETAIL")
    ai = FakeAi({GLM_ID: bad}, runs={GUARD_MODEL: [Gate(UNSAFE, after=f"stream:{GLM_ID}")]})
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        reply, _ = serve("/chat", where(ai, MODERATION="input"))
        gc.collect()
    assert reply.status == 400
    assert json.loads(reply.body)["error"]["code"] == "content_refused"
    assert [record.getMessage() for record in caplog.records] == []


def test_the_guard_reads_the_text_of_a_message_with_images_not_the_images() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    request = request_of(
        Message("user", "What is this?", parts=({"type": "text", "text": "What is this?"}, image))
    )
    turns = moderation.conversation(request)
    assert turns == [{"role": "user", "content": "What is this?"}]
    assert "data:" not in json.dumps(turns)


def test_a_conversation_of_images_alone_is_not_sent_to_the_guard() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    request = request_of(Message("user", "", parts=(image,)))
    assert moderation.conversation(request) == []
