"""A successful /chat over HTTP: headers, the event protocol, the upstream call, the reader.

The emulator plays the model; each test scripts the answer and checks that
the client receives ``meta``, then exactly the model's bytes, then one closing
event. ``chunks`` scripts fix every upstream byte, so the body between
``meta`` and ``done`` can be compared byte for byte.
"""

from __future__ import annotations

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
    MID_STREAM_FAILURE,
    assert_done,
    assert_error_event,
    assert_meta,
    assert_relayed,
    assert_shape,
    assert_stream_headers,
    b64,
    calls_before_a_later_request,
    chunk_of,
    post_chat,
    relayed,
    script_bytes,
    system_then,
    user,
)
from tests.harness import EmulatorControl
from tests.kit.sse import MODEL, Event, Parsed, SSEParser
from tests.kit.upstream import DONE, native_chunk, openai_chunk

PRICES = {GLM: (0.06, 0.40), KIMI: (0.95, 4.00), LLAMA: (0.15, 0.29)}
USAGE = {"prompt_tokens": 123, "completion_tokens": 45, "total_tokens": 168}


def assert_openai_chunks(parsed: Parsed) -> None:
    """Every model event is what Workers AI streams for GLM/Kimi: a
    ``chat.completion.chunk``, the native closing usage chunk, or ``[DONE]``."""
    assert parsed.model_events, parsed.names
    for event in parsed.model_events:
        data = event.data
        if data == "[DONE]":
            continue
        assert isinstance(data, dict), event
        if "choices" in data:
            assert data["object"] == "chat.completion.chunk", event
        else:
            assert data.get("response") == "", event
            assert isinstance(data.get("usage"), dict), event


def assert_native_events(parsed: Parsed) -> None:
    assert parsed.model_events, parsed.names
    for event in parsed.model_events:
        if event.data != "[DONE]":
            assert isinstance(event.data, dict), event
            assert set(event.data) <= {"response", "usage"}, event
            assert isinstance(event.data["response"], str), event


# --- the protocol ---------------------------------------------------------------


def test_stream_headers_and_event_sequence(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script(
        {"reply": {"content": "Hello there, friend.", "reasoning": "Be kind.", "usage": USAGE}}
    )
    chat = post_chat(client, user("Say hello"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_shape(parsed)
    assert_meta(parsed, GLM)
    assert_openai_chunks(parsed)
    assert parsed.text() == "Hello there, friend."
    assert parsed.reasoning() == "Be kind."
    assert parsed.saw_done_marker
    # The thinking comes first, as the model streamed it.
    deltas = [e.data["choices"][0]["delta"] for e in parsed.model_events if "choices" in e.data]
    kinds = ["r" if d.get("reasoning_content") else "c" if d.get("content") else "" for d in deltas]
    assert re.fullmatch("r+c+", "".join(kinds)), kinds
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
    assert_shape(parsed)
    assert parsed.text() == (
        "This is the edgechat local Workers AI emulator, not a real model "
        f"({GLM}). You asked: «{question}»"
    )
    assert parsed.reasoning().startswith("No model runs here")
    done = assert_done(parsed, GLM)
    (call,) = ai.wait_for_calls(1)
    # The emulator counts each message's tokens plus 2; its final usage is what
    # done reports. Recompute it from what the emulator was sent.
    sent = call["inputs"]["messages"]
    tokens = sum(len(_emulator_tokens(m["content"])) + 2 for m in sent)
    completion = len(_emulator_tokens(parsed.reasoning())) + len(_emulator_tokens(parsed.text()))
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
        assert_shape(chat.events)
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


def test_the_models_events_arrive_one_by_one(client: httpx.Client, ai: EmulatorControl) -> None:
    # Paced like a model: each word is on the wire while the next is not yet written.
    words = ["One", " two", " three", " four"]
    chunks: list[Any] = [chunk_of({"role": "assistant"})]
    for word in words:
        chunks += [openai_chunk(content=word), {"delay_ms": 150}]
    chunks += [openai_chunk(finish_reason="stop"), native_chunk("", usage=USAGE), DONE]
    ai.script({"chunks": chunks})
    parser = SSEParser()
    # For each event: the read that brought it, and whether the upstream call
    # was still running then (the emulator logs a stream when it has ended).
    arrivals: list[tuple[Event, int, bool]] = []
    with client.stream("POST", "/chat", json=user("hi")) as response:
        assert_stream_headers(response)
        body = b""
        for index, chunk in enumerate(response.iter_raw()):
            body += chunk
            for item in parser.feed(chunk):
                if isinstance(item, Event):
                    arrivals.append((item, index, ai.calls() == []))
    parsed = parser.close()
    assert_shape(parsed)
    assert parsed.text() == "".join(words)
    texts = [(e, read, running) for e, read, running in arrivals if e.name == MODEL and e.data]
    worded = [(read, running) for e, read, running in texts if _content(e)]
    assert len(worded) == len(words), arrivals
    reads = [read for read, _ in worded]
    assert reads == sorted(set(reads)), f"words arrived together, in reads {reads}"
    assert all(running for _, running in worded), "a word arrived only after the model finished"
    done_read = next(read for e, read, _ in arrivals if e.name == "done")
    assert done_read > reads[-1]
    assert relayed(body) == script_bytes(chunks)
    assert_done(parsed, GLM)


def _content(event: Event) -> str:
    data = event.data
    if not isinstance(data, dict) or not data.get("choices"):
        return ""
    return str(data["choices"][0].get("delta", {}).get("content") or "")


# --- byte for byte -------------------------------------------------------------------

_OPENAI = [
    # Nothing to show yet: held back until the first text, then sent as it was.
    chunk_of({"role": "assistant", "content": ""}),
    openai_chunk(),
    openai_chunk(reasoning='Let me think: <b>"quoted"</b>\\n 🤔'),
    openai_chunk(content="Hello, 世界 \u2028 é"),
    openai_chunk(content=" and\nmore\r\nlines"),
    openai_chunk(finish_reason="stop"),
    native_chunk("", usage=USAGE),
    DONE,
]
_CRLF = [piece.replace("\n", "\r\n") for piece in _OPENAI]
_NATIVE = [
    native_chunk("Llama "),
    native_chunk("says 你好"),
    native_chunk("", usage=USAGE),
    DONE,
]
_NO_MARKER = [
    openai_chunk(content="Without"),
    openai_chunk(content=" a marker"),
    openai_chunk(finish_reason="stop"),
    native_chunk("", usage=USAGE),
]
_WITH_JUNK = [
    ": a comment the model sent\n\n",
    openai_chunk(content="Junk"),
    "id: 7\ndata: " + json.dumps({"choices": [{"index": 0, "delta": {"content": " in"}}]}) + "\n\n",
    "data:" + json.dumps({"choices": [{"index": 0, "delta": {"content": " between"}}]}) + "\n\n",
    native_chunk("", usage=USAGE),
    DONE,
]
_WHOLE = "".join(_OPENAI).encode()
# Anywhere: inside "data:", inside the JSON, inside "\n\n", inside a UTF-8 character.
_CUTS = sorted(
    {1, 3, 7, 61, 62, 63, 200, 201, 202, 350, len(_WHOLE) - 5}
    | {_WHOLE.index(char.encode()) + 1 for char in ("世", "界", "é")}
    | {_WHOLE.index("🤔".encode()) + n for n in (1, 2, 3)}
)
_SPLIT = [b64(_WHOLE[a:b]) for a, b in zip([0, *_CUTS], [*_CUTS, len(_WHOLE)], strict=True)]


@pytest.mark.parametrize(
    ("model", "chunks", "expected", "text"),
    [
        ("glm", _OPENAI, script_bytes(_OPENAI), "Hello, 世界 \u2028 é and\nmore\r\nlines"),
        ("glm", _CRLF, script_bytes(_CRLF), "Hello, 世界 \u2028 é and\nmore\r\nlines"),
        ("glm", _SPLIT, _WHOLE, "Hello, 世界 \u2028 é and\nmore\r\nlines"),
        ("llama", _NATIVE, script_bytes(_NATIVE), "Llama says 你好"),
        ("glm", _NO_MARKER, script_bytes(_NO_MARKER), "Without a marker"),
        ("glm", _WITH_JUNK, script_bytes(_WITH_JUNK), "Junk in between"),
    ],
    ids=["openai", "crlf", "split-anywhere", "native", "no-done-marker", "comment-junk-fields"],
)
def test_the_body_between_meta_and_done_is_exactly_what_the_model_sent(
    client: httpx.Client,
    ai: EmulatorControl,
    model: str,
    chunks: list[Any],
    expected: bytes,
    text: str,
) -> None:
    ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi", model=model))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_shape(parsed)
    assert chat.relayed == expected
    assert parsed.text() == text
    model_id = {"glm": GLM, "llama": LLAMA}[model]
    assert_meta(parsed, model_id)
    assert assert_done(parsed, model_id)["usage"] == USAGE


def test_llama_native_stream(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script({"reply": {"content": "Native words arrive.", "usage": USAGE}})
    parsed = post_chat(client, user("hi", model="llama")).events
    assert_shape(parsed)
    assert_native_events(parsed)
    assert parsed.reasoning() == ""
    assert parsed.text() == "Native words arrive."
    assert parsed.saw_done_marker
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
    assert parsed.reasoning() == ""
    assert parsed.text()
    assert_done(parsed, GLM)
    (call,) = ai.wait_for_calls(1)
    assert call["inputs"]["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.parametrize("body_extra", [{}, {"reasoning": True}])
def test_reasoning_is_streamed_when_not_turned_off(
    client: httpx.Client, ai: EmulatorControl, body_extra: dict[str, Any]
) -> None:
    parsed = post_chat(client, user("hi", **body_extra)).events
    assert parsed.reasoning().startswith("No model runs here")
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
    ai.script({"reply": {"content": INJECTION, "reasoning": "think\r\nevent: done\n\n"}})
    chat = post_chat(client, user("hi", model=model))
    parsed = chat.events  # the parser refuses an event: line that is not edgechat's
    assert_shape(parsed)
    assert parsed.pings == 0
    assert b"\r" not in chat.body, "the model's text left its JSON string"
    assert parsed.text() == INJECTION
    if model == "glm":
        assert parsed.reasoning() == "think\r\nevent: done\n\n"
    assert parsed.final.data["model"] == {"glm": GLM, "llama": LLAMA}[model]


# --- the reader, end to end ------------------------------------------------------------

CJK_EMOJI = "你好，世界！こんにちは 🌏👩‍👩‍👧 naïve café 한국어 ✓"  # noqa: RUF001 (full-width punctuation on purpose)


@pytest.mark.parametrize("split", [1, 2, 3, 5])
@pytest.mark.parametrize(("model", "model_id"), [("glm", GLM), ("llama", LLAMA)])
def test_multibyte_text_split_anywhere_renders_exactly(
    client: httpx.Client, ai: EmulatorControl, split: int, model: str, model_id: str
) -> None:
    ai.script({"reply": {"content": CJK_EMOJI, "reasoning": "想一想 🤔", "split_bytes": split}})
    parsed = post_chat(client, user("hi", model=model)).events
    assert_shape(parsed)
    assert parsed.text() == CJK_EMOJI
    if model == "glm":
        assert parsed.reasoning() == "想一想 🤔"
    assert_done(parsed, model_id)


@pytest.mark.parametrize(("model", "model_id"), [("glm", GLM), ("llama", LLAMA)])
def test_stream_without_done_marker_still_ends_with_done(
    client: httpx.Client, ai: EmulatorControl, model: str, model_id: str
) -> None:
    ai.script({"reply": {"content": "No marker at the end.", "usage": USAGE, "done": False}})
    parsed = post_chat(client, user("hi", model=model, reasoning=False)).events
    assert_shape(parsed)
    assert not parsed.saw_done_marker
    assert parsed.text() == "No marker at the end."
    assert assert_done(parsed, model_id)["usage"] == USAGE


WHOLE_OPENAI = {
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


def test_whole_json_object_instead_of_stream_openai(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script({"json": WHOLE_OPENAI})
    parsed = post_chat(client, user("hi")).events
    # One event of the model's own shape, then the one closing event.
    assert parsed.names == ["meta", MODEL, "done"]
    assert parsed.model_events[0].data == WHOLE_OPENAI
    assert parsed.text() == "Whole answer, 一次."
    assert parsed.reasoning() == "Quietly."
    done = assert_done(parsed, GLM)
    assert done["usage"] == USAGE
    assert done["finish_reason"] == "stop"


def test_whole_json_object_instead_of_stream_native(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    whole = {"response": "Native whole answer.", "usage": USAGE}
    ai.script({"json": whole})
    parsed = post_chat(client, user("hi", model="llama")).events
    assert parsed.names == ["meta", MODEL, "done"]
    assert parsed.model_events[0].data == whole
    assert parsed.text() == "Native whole answer."
    assert assert_done(parsed, LLAMA)["usage"] == USAGE


def test_a_malformed_line_ends_the_answer_with_one_error(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    chunks = [
        openai_chunk(content="Hel"),
        "data: {not json at all\n\n",
        openai_chunk(content="lo"),
        openai_chunk(finish_reason="stop"),
        native_chunk("", usage=USAGE),
        DONE,
    ]
    ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi"))
    parsed = chat.events
    assert parsed.names[0] == "meta"
    assert parsed.text().startswith("Hel")
    assert_error_event(parsed, "upstream_malformed")


def test_reader_variants_in_one_stream(client: httpx.Client, ai: EmulatorControl) -> None:
    # `reasoning` instead of `reasoning_content`, empty deltas, content null,
    # running usage on every chunk (the last one counts), then a native chunk.
    running = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
    chunks = [
        chunk_of({"reasoning": "Hmm, "}, usage=running),
        openai_chunk(reasoning="yes."),
        openai_chunk(),
        chunk_of({"content": None}),
        chunk_of({"role": "assistant", "content": ""}),
        chunk_of({"content": "Ans"}, usage=running),
        chunk_of({"content": "wer"}),
        chunk_of({}, finish="stop", usage={**running, "completion_tokens": 9}),
        native_chunk("", usage=USAGE),
        DONE,
    ]
    ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi"))
    parsed = chat.events
    assert_shape(parsed)
    assert chat.relayed == script_bytes(chunks)
    assert parsed.reasoning() == "Hmm, yes."
    assert parsed.text() == "Answer"
    done = assert_done(parsed, GLM)
    assert done["usage"] == USAGE
    assert done["finish_reason"] == "stop"


def test_split_events_across_chunks(client: httpx.Client, ai: EmulatorControl) -> None:
    whole = (
        openai_chunk(content="Sp") + openai_chunk(content="lit 字") + native_chunk("", usage=USAGE)
    )
    data = whole.encode()
    pieces = [data[:7], data[7:8], data[8:41], data[41:90], data[90:], DONE.encode()]
    ai.script({"chunks": [b64(p) for p in pieces]})
    chat = post_chat(client, user("hi"))
    assert chat.relayed == b"".join(pieces)
    assert chat.events.text() == "Split 字"
    assert assert_done(chat.events, GLM)["usage"] == USAGE


# --- upstreams that say nothing usable: exactly one error ----------------------------


@pytest.mark.parametrize(
    "chunks",
    [
        ["data: {garbage\n\n", "data: also not json\n\n", DONE],
        ["data: {garbage\n\n"],
        ["<html>502 Bad Gateway</html>"],
        [b64(b"\xff\xfe\x00\x01garbage\x80\xc3(\n\n\x9f")],
        [chunk_of({"role": "assistant"}), openai_chunk(), DONE],
        [],
        ["\n\n  \r\n"],
    ],
    ids=["garbage-then-done", "garbage-only", "html", "binary", "no-text", "empty", "blank"],
)
def test_an_upstream_without_text_ends_with_one_upstream_malformed(
    client: httpx.Client, ai: EmulatorControl, chunks: list[Any]
) -> None:
    ai.script({"chunks": chunks})
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    # What the model sent was held back (no text came), so none of it is here.
    assert parsed.names == ["meta", "error"]
    assert chat.relayed == b""
    assert_error_event(parsed, "upstream_malformed", "garbage", "502 Bad Gateway")
    assert b"garbage" not in chat.body


def test_more_than_64_kib_without_text_ends_with_one_upstream_malformed(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    # Held back while there is no text, but not without bound.
    empty = openai_chunk()
    count = (64 << 10) // len(empty) + 2
    ai.script({"chunks": [empty] * count + [openai_chunk(content="too late"), DONE]})
    chat = post_chat(client, user("hi"))
    parsed = chat.events
    assert parsed.names == ["meta", "error"]
    assert chat.relayed == b""
    assert_error_event(parsed, "upstream_malformed")
    assert ai.wait_for_calls(1)[0]["aborted"] is True


def test_binary_after_text_is_relayed_then_one_closing_event(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    junk = b"\xff\xfe\x00\x01binary\x80\xc3("
    ai.script({"chunks": [openai_chunk(content="Text first"), b64(junk)]})
    chat = post_chat(client, user("hi"), errors="replace")
    parsed = chat.events
    assert parsed.text() == "Text first"
    # The model stopped mid-line; edgechat ends that line before its own event.
    assert_relayed(chat, openai_chunk(content="Text first").encode() + junk)
    assert parsed.final.name in ("done", "error")
    assert [event.name for event in parsed.events if event.name != MODEL] == [
        "meta",
        parsed.final.name,
    ]


def test_mid_stream_error_after_tokens_is_one_error_event(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    chunks: list[Any] = [openai_chunk(content="Partial "), openai_chunk(content="answer")]
    ai.script(
        {
            "chunks": [
                *chunks,
                {"error": "3040: Capacity temporarily exceeded (detail-X81)"},
            ]
        }
    )
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    parsed = chat.events
    assert_shape(parsed, final="error")
    assert_relayed(chat, script_bytes(chunks))
    assert parsed.text() == "Partial answer"
    # A stream that fails part way reaches the Worker without its reason: the
    # binding's body fails as a connection that broke (in workerd, over the
    # emulator's RPC: "ReadableStream received over RPC disconnected
    # prematurely"), so the answer ends with edgechat's generic error.
    data = assert_error_event(parsed, MID_STREAM_FAILURE, "detail-X81", "Capacity")
    assert data["retryable"] is True
    assert b"detail-X81" not in chat.body
    # No other model was asked once words had reached the client.
    calls = calls_before_a_later_request(ai, client)
    assert [call["model"] for call in calls] == [GLM]


def test_mid_event_error_closes_the_event_before_the_error(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "chunks": [
                openai_chunk(content="Half a"),
                'data: {"choices": [{"ind',
                {"error": "3040: busy"},
            ]
        }
    )
    chat = post_chat(client, user("hi"))
    parsed = chat.events
    assert_relayed(chat, (openai_chunk(content="Half a") + 'data: {"choices": [{"ind').encode())
    assert parsed.text() == "Half a"
    assert_error_event(parsed, MID_STREAM_FAILURE)
