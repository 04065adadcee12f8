"""A successful /chat over HTTP: headers, the event protocol, the upstream call, the reader.

The emulator plays the model; each test scripts the exact answer and checks
that the client receives exactly that, framed as edgechat's events.
"""

from __future__ import annotations

import base64
import json
import re
import time
from typing import Any

import httpx
import pytest

from tests.api.checks import (
    GLM,
    KIMI,
    LLAMA,
    assert_done,
    assert_error_event,
    assert_meta,
    assert_stream_headers,
    post_chat,
    system_then,
    user,
)
from tests.api.sse import Parsed, SSEParser
from tests.harness import EmulatorControl

PRICES = {GLM: (0.06, 0.40), KIMI: (0.95, 4.00), LLAMA: (0.15, 0.29)}
USAGE = {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168}


def assert_order(parsed: Parsed, final: str = "done") -> None:
    """meta, then reasoning, then tokens, then the one closing event."""
    shape = " ".join(parsed.names)
    assert re.fullmatch(rf"meta( reasoning)*( token)* {final}", shape), shape


def oa(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    """One OpenAI-style chunk event as the binding streams it."""
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}}
    if finish is not None:
        choice["finish_reason"] = finish
    body = {"id": "c1", "object": "chat.completion.chunk", "choices": [choice], **extra}
    return f"data: {json.dumps(body)}\n\n"


def native(**fields: Any) -> str:
    return f"data: {json.dumps(fields)}\n\n"


DONE = "data: [DONE]\n\n"


# --- the protocol ---------------------------------------------------------------


def test_stream_headers_and_event_sequence(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script(
        {"reply": {"content": "Hello there, friend.", "reasoning": "Be kind.", "usage": USAGE}}
    )
    chat = post_chat(client, user("Say hello"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_order(parsed)
    assert_meta(parsed, GLM)
    assert parsed.text("token") == "Hello there, friend."
    assert parsed.text("reasoning") == "Be kind."
    for event in parsed.of("token") + parsed.of("reasoning"):
        assert set(event.data) == {"text"}, event
    done = assert_done(parsed, GLM)
    assert done["finish_reason"] == "stop"
    assert done["usage"] == USAGE
    price_in, price_out = PRICES[GLM]
    expected_cost = (123 * price_in + 45 * price_out) / 1_000_000
    assert done["cost_usd"] == pytest.approx(expected_cost, rel=1e-6, abs=1e-9)


def test_default_answer_arrives_whole_with_the_emulators_usage(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    question = "What is 2 + 2? 你好"
    chat = post_chat(client, user(question))
    parsed = chat.events
    assert_order(parsed)
    assert parsed.text("token") == (
        "This is the edgechat local Workers AI emulator, not a real model "
        f"({GLM}). You asked: «{question}»"
    )
    assert parsed.text("reasoning").startswith("No model runs here")
    done = assert_done(parsed, GLM)
    (call,) = ai.wait_for_calls(1)
    # The emulator counts each message's tokens plus 2; its final usage is what
    # done reports. Recompute it from what the emulator was sent.
    sent = call["inputs"]["messages"]
    tokens = sum(len(_emulator_tokens(m["content"])) + 2 for m in sent)
    completion = len(_emulator_tokens(parsed.text("reasoning"))) + len(
        _emulator_tokens(parsed.text("token"))
    )
    assert done["usage"] == {
        "prompt_tokens": tokens,
        "completion_tokens": completion,
        "total_tokens": tokens + completion,
    }


_CJK = r"\u3000-\u303f\uff00-\uffef\u3040-\u30ff\uac00-\ud7af\u4e00-\u9fff\u3400-\u4dbf"
_TOKEN = re.compile(rf"\s*(?:[{_CJK}]|[^\s{_CJK}]+)|\s+")


def _emulator_tokens(text: str) -> list[str]:
    """The emulator's tokenizer (tools/emulator/ai.mjs), for the characters used here."""
    return _TOKEN.findall(text)


def test_meta_comes_first_and_names_the_model(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script({"reply": {"content": "ok"}})
    for alias, model_id in (("kimi", KIMI), ("llama", LLAMA), (GLM, GLM)):
        chat = post_chat(client, user("hi", model=alias))
        assert_stream_headers(chat.response)
        assert_meta(chat.events, model_id)
        assert_done(chat.events, model_id)
        assert chat.events.text() == "ok"


def test_meta_is_flushed_before_the_model_answers(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script({"chunks": [{"stall": True}]})
    parser = SSEParser()
    deadline = time.monotonic() + 15
    with client.stream("POST", "/chat", json=user("hi")) as response:
        assert_stream_headers(response)
        # One iterator, never abandoned: closing it would drop the connection.
        chunks = response.iter_raw()
        while not parser.parsed.events:
            parser.feed(next(chunks))
            assert time.monotonic() < deadline, "no event while the model is silent"
        # The model has not said a word (a stalled call is logged only when it ends).
        assert ai.calls() == []
        assert parser.parsed.names == ["meta"]
        assert_meta(parser.parsed, GLM)


def test_request_ids_differ(client: httpx.Client, ai: EmulatorControl) -> None:
    ids = {assert_meta(post_chat(client, user("hi")).events, GLM) for _ in range(3)}
    assert len(ids) == 3


def test_llama_native_stream(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script({"reply": {"content": "Native words arrive.", "usage": USAGE}})
    parsed = post_chat(client, user("hi", model="llama")).events
    assert_order(parsed)
    assert parsed.of("reasoning") == []
    assert parsed.text() == "Native words arrive."
    done = assert_done(parsed, LLAMA)
    assert done["usage"] == USAGE
    price_in, price_out = PRICES[LLAMA]
    expected_cost = (123 * price_in + 45 * price_out) / 1_000_000
    assert done["cost_usd"] == pytest.approx(expected_cost, rel=1e-6, abs=1e-9)


def test_output_cut_by_max_tokens_finishes_with_length(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script({"reply": {"content": "one two three four five six"}})
    parsed = post_chat(client, user("hi", max_tokens=3, reasoning=False)).events
    assert parsed.text() == "one two three"
    done = assert_done(parsed, GLM)
    assert done["finish_reason"] == "length"
    assert done["usage"]["completion_tokens"] == 3


# --- the upstream call ------------------------------------------------------------


def test_conversation_goes_upstream_as_messages_after_the_system_prompt(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    messages = [
        {"role": "user", "content": "First question"},
        {"role": "assistant", "content": "First answer\nwith two lines"},
        {"role": "user", "content": "Second question 你好 🎉"},
    ]
    chat = post_chat(client, {"messages": messages})
    assert_done(chat.events, GLM)
    (call,) = ai.wait_for_calls(1)
    assert call["model"] == GLM
    assert call["stream"] is True
    assert call["inputs"]["stream"] is True
    system_then(messages, call)
    assert call["inputs"]["max_completion_tokens"] == 1024
    assert "max_tokens" not in call["inputs"]


@pytest.mark.parametrize(
    ("model", "model_id", "cap_field", "other_field"),
    [
        ("glm", GLM, "max_completion_tokens", "max_tokens"),
        ("kimi", KIMI, "max_completion_tokens", "max_tokens"),
        ("llama", LLAMA, "max_tokens", "max_completion_tokens"),
    ],
)
@pytest.mark.parametrize(("asked", "sent"), [(None, 1024), (1, 1), (4096, 4096), (77, 77)])
def test_output_cap_goes_upstream_in_the_models_field(
    client: httpx.Client,
    ai: EmulatorControl,
    model: str,
    model_id: str,
    cap_field: str,
    other_field: str,
    asked: int | None,
    sent: int,
) -> None:
    body = user("hi", model=model)
    if asked is not None:
        body["max_tokens"] = asked
    assert_done(post_chat(client, body).events, model_id)
    (call,) = ai.wait_for_calls(1)
    assert call["model"] == model_id
    assert call["inputs"][cap_field] == sent
    assert other_field not in call["inputs"]
    system_then([{"role": "user", "content": "hi"}], call)


@pytest.mark.parametrize("temperature", [0, 0.3, 1, 2])
def test_temperature_is_passed_when_given(
    client: httpx.Client, ai: EmulatorControl, temperature: float
) -> None:
    assert_done(post_chat(client, user("hi", temperature=temperature)).events, GLM)
    (call,) = ai.wait_for_calls(1)
    assert call["inputs"]["temperature"] == temperature


def test_reasoning_false_turns_thinking_off(client: httpx.Client, ai: EmulatorControl) -> None:
    parsed = post_chat(client, user("hi", reasoning=False)).events
    assert parsed.of("reasoning") == []
    assert_done(parsed, GLM)
    (call,) = ai.wait_for_calls(1)
    assert call["inputs"]["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.parametrize("body_extra", [{}, {"reasoning": True}])
def test_reasoning_is_streamed_when_not_turned_off(
    client: httpx.Client, ai: EmulatorControl, body_extra: dict[str, Any]
) -> None:
    parsed = post_chat(client, user("hi", **body_extra)).events
    assert parsed.text("reasoning").startswith("No model runs here")
    assert_done(parsed, GLM)
    (call,) = ai.wait_for_calls(1)
    kwargs = call["inputs"].get("chat_template_kwargs", {})
    assert kwargs.get("enable_thinking", True) is True


# --- framing cannot be injected ------------------------------------------------------


INJECTION = (
    'line one\nevent: done\ndata: {"model": "evil"}\n\n'
    "data: x\r\rretry: 1\r\nid: 7\r\n: ping\n\nevent: error\ndata: {}\n\u2028\u2029end"
)


@pytest.mark.parametrize("model", ["glm", "llama"])
def test_model_text_cannot_inject_sse_fields(
    client: httpx.Client, ai: EmulatorControl, model: str
) -> None:
    ai.script({"reply": {"content": INJECTION, "reasoning": "think\r\nevent: token\n\n"}})
    chat = post_chat(client, user("hi", model=model))
    parsed = chat.events  # the strict parser refuses any extra field or raw CR
    assert_order(parsed)
    assert parsed.text() == INJECTION
    if model == "glm":
        assert parsed.text("reasoning") == "think\r\nevent: token\n\n"
    assert parsed.final.name == "done"


# --- the reader, end to end ------------------------------------------------------------

CJK_EMOJI = "你好，世界！こんにちは 🌏👩‍👩‍👧 naïve café 한국어 ✓"  # noqa: RUF001 (full-width punctuation on purpose)


@pytest.mark.parametrize("split", [1, 2, 3, 5])
@pytest.mark.parametrize(("model", "model_id"), [("glm", GLM), ("llama", LLAMA)])
def test_multibyte_text_split_anywhere_renders_exactly(
    client: httpx.Client, ai: EmulatorControl, split: int, model: str, model_id: str
) -> None:
    ai.script({"reply": {"content": CJK_EMOJI, "reasoning": "想一想 🤔", "split_bytes": split}})
    parsed = post_chat(client, user("hi", model=model)).events
    assert parsed.text() == CJK_EMOJI
    if model == "glm":
        assert parsed.text("reasoning") == "想一想 🤔"
    assert_done(parsed, model_id)


@pytest.mark.parametrize(("model", "model_id"), [("glm", GLM), ("llama", LLAMA)])
def test_stream_without_done_marker_still_ends_with_done(
    client: httpx.Client, ai: EmulatorControl, model: str, model_id: str
) -> None:
    ai.script({"reply": {"content": "No marker at the end.", "usage": USAGE, "done": False}})
    parsed = post_chat(client, user("hi", model=model, reasoning=False)).events
    assert_order(parsed)
    assert parsed.text() == "No marker at the end."
    assert assert_done(parsed, model_id)["usage"] == USAGE


def test_whole_json_object_instead_of_stream_openai(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "json": {
                "id": "c1",
                "object": "chat.completion",
                "model": GLM,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": "Whole answer, 一次.",
                            "reasoning_content": "Quietly.",
                        },
                        "finish_reason": "stop",
                    }
                ],
                "usage": USAGE,
            }
        }
    )
    parsed = post_chat(client, user("hi")).events
    assert_order(parsed)
    assert parsed.text() == "Whole answer, 一次."
    assert parsed.text("reasoning") == "Quietly."
    done = assert_done(parsed, GLM)
    assert done["usage"] == USAGE
    assert done["finish_reason"] == "stop"


def test_whole_json_object_instead_of_stream_native(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script({"json": {"response": "Native whole answer.", "usage": USAGE}})
    parsed = post_chat(client, user("hi", model="llama")).events
    assert_order(parsed)
    assert parsed.text() == "Native whole answer."
    assert assert_done(parsed, LLAMA)["usage"] == USAGE


def test_malformed_line_is_skipped(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script(
        {
            "chunks": [
                oa({"content": "Hel"}),
                "data: {not json at all\n\n",
                oa({"content": "lo"}),
                oa({}, finish="stop"),
                native(response="", usage=USAGE),
                DONE,
            ]
        }
    )
    parsed = post_chat(client, user("hi")).events
    assert_order(parsed)
    assert parsed.text() == "Hello"
    done = assert_done(parsed, GLM)
    assert done["usage"] == USAGE
    assert done["finish_reason"] == "stop"


def test_reader_variants_in_one_stream(client: httpx.Client, ai: EmulatorControl) -> None:
    # `reasoning` instead of `reasoning_content`, empty deltas, content null,
    # running usage on every chunk (the last one counts), then a native chunk.
    running = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    ai.script(
        {
            "chunks": [
                oa({"reasoning": "Hmm, "}, usage=running),
                oa({"reasoning_content": "yes."}),
                oa({}),
                oa({"content": None}),
                oa({"role": "assistant", "content": ""}),
                oa({"content": "Ans"}, usage=running),
                oa({"content": "wer"}),
                oa({}, finish="stop", usage={**running, "completion_tokens": 9}),
                native(response="", usage=USAGE),
                DONE,
            ]
        }
    )
    parsed = post_chat(client, user("hi")).events
    assert_order(parsed)
    assert parsed.text("reasoning") == "Hmm, yes."
    assert parsed.text() == "Answer"
    assert all(event.data["text"] for event in parsed.of("token")), "empty token events"
    assert assert_done(parsed, GLM)["usage"] == USAGE


def test_split_events_across_chunks(client: httpx.Client, ai: EmulatorControl) -> None:
    whole = oa({"content": "Sp"}) + oa({"content": "lit 字"}) + native(response="", usage=USAGE)
    data = whole.encode()
    pieces = [data[:7], data[7:8], data[8:41], data[41:90], data[90:], DONE.encode()]
    ai.script({"chunks": [{"b64": base64.b64encode(p).decode()} for p in pieces]})
    parsed = post_chat(client, user("hi")).events
    assert parsed.text() == "Split 字"
    assert assert_done(parsed, GLM)["usage"] == USAGE


@pytest.mark.parametrize(
    "chunks",
    [
        ["data: {garbage\n\n", "data: also not json\n\n", DONE],
        ["data: {garbage\n\n"],
        ["<html>502 Bad Gateway</html>"],
    ],
    ids=["garbage-then-done", "garbage-only", "html"],
)
def test_nothing_but_garbage_ends_with_upstream_malformed(
    client: httpx.Client, ai: EmulatorControl, chunks: list[str]
) -> None:
    ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_order(parsed, final="error")
    assert parsed.of("token") == []
    assert_error_event(parsed, "upstream_malformed", "garbage", "502 Bad Gateway")


def test_mid_stream_error_after_tokens_is_one_error_event(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "chunks": [
                oa({"content": "Partial "}),
                oa({"content": "answer"}),
                {"error": "3040: Capacity temporarily exceeded (detail-X81)"},
            ]
        }
    )
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_order(parsed, final="error")
    assert parsed.text() == "Partial answer"
    data = assert_error_event(parsed, "model_busy", "detail-X81", "Capacity")
    assert data["retryable"] is True
    calls = ai.wait_for_calls(2, timeout=1.0)
    assert len(calls) == 1, "a model was switched after tokens were sent"
