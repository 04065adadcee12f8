from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgechat.answer import upstream
from edgechat.answer.moderation import answer_text
from edgechat.answer.upstream import Delta, DeltaKind, UpstreamReader
from edgechat.config.settings import Settings
from edgechat.core import sse
from edgechat.core.faults import UpstreamMalformed
from tests.kit import upstream as wire
from tests.unit.fakes import chat_request, model, openai_stream, usage

R, C = DeltaKind.REASONING, DeltaKind.CONTENT
GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")

NATIVE_EXAMPLE = (
    b'data: {"response":"Hel"}\n\n'
    b'data: {"response":"lo"}\n\n'
    b'data: {"response":"","usage":{"prompt_tokens":12,"completion_tokens":2,'
    b'"total_tokens":14}}\n\n'
    b"data: [DONE]\n\n"
)
OPENAI_EXAMPLE = (
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
    '"delta":{"reasoning_content":"Let me think"}}]}\n\n'
    'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,'
    '"delta":{"content":"你好"},"finish_reason":"stop"}],'
    '"usage":{"prompt_tokens":9,"completion_tokens":39,"total_tokens":48}}\n\n'
    'data: {"response":"","usage":{"prompt_tokens":9,"completion_tokens":40,"total_tokens":49}}\n\n'
    "data: [DONE]\n\n"
).encode()


def read(chunks: Iterable[bytes]) -> tuple[list[Delta], UpstreamReader]:
    reader = UpstreamReader()
    deltas: list[Delta] = []
    for chunk in chunks:
        deltas += reader.feed(chunk)
    deltas += reader.finish()
    return deltas, reader


def cut(data: bytes, positions: Iterable[int]) -> list[bytes]:
    edges = [0, *sorted(set(positions)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def texts(deltas: Sequence[Delta]) -> tuple[str, str]:
    return (
        "".join(d.text for d in deltas if d.kind is R),
        "".join(d.text for d in deltas if d.kind is C),
    )


# --- the documented examples -------------------------------------------------


def test_native_example() -> None:
    deltas, reader = read([NATIVE_EXAMPLE])
    assert deltas == [Delta(C, "Hel"), Delta(C, "lo")]
    assert reader.usage == {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}
    assert reader.saw_done
    assert reader.produced
    assert reader.malformed_lines == 0
    assert reader.finish_reason is None


def test_openai_example_with_trailing_native_usage_chunk() -> None:
    deltas, reader = read([OPENAI_EXAMPLE])
    assert deltas == [Delta(R, "Let me think"), Delta(C, "你好")]
    # usage came on two chunks: the last one wins.
    assert reader.usage == {"prompt_tokens": 9, "completion_tokens": 40, "total_tokens": 49}
    assert reader.finish_reason == "stop"
    assert reader.saw_done
    assert reader.malformed_lines == 0


@pytest.mark.parametrize("stream", [NATIVE_EXAMPLE, OPENAI_EXAMPLE])
def test_one_byte_at_a_time(stream: bytes) -> None:
    whole, whole_reader = read([stream])
    deltas, reader = read(bytewise(stream))
    assert deltas == whole
    assert reader.usage == whole_reader.usage
    assert reader.saw_done
    assert reader.malformed_lines == 0


def test_deltas_come_as_soon_as_their_event_is_complete() -> None:
    reader = UpstreamReader()
    assert reader.feed(b'data: {"response":"a"}\n') == []
    assert reader.feed(b'\ndata: {"response":"b"}') == [Delta(C, "a")]
    assert reader.feed(b"\n\n") == [Delta(C, "b")]
    assert reader.finish() == []


def test_multibyte_character_split_across_chunks() -> None:
    stream = 'data: {"response":"你🙂"}\n\n'.encode()
    start = stream.index("你".encode())
    for split in range(start + 1, start + 7):  # inside 你 (3 bytes) and 🙂 (4 bytes)
        deltas, reader = read([stream[:split], stream[split:]])
        assert deltas == [Delta(C, "你🙂")]
        assert reader.malformed_lines == 0


def test_split_inside_a_json_string_escape() -> None:
    stream = b'data: {"response":"a\\"b\\\\c\\u00e9"}\n\n'
    for split in range(len(stream)):
        deltas, _ = read([stream[:split], stream[split:]])
        assert deltas == [Delta(C, 'a"b\\cé')]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_line_endings(newline: bytes) -> None:
    stream = NATIVE_EXAMPLE.replace(b"\n", newline)
    for chunks in ([stream], bytewise(stream)):
        deltas, reader = read(chunks)
        assert deltas == [Delta(C, "Hel"), Delta(C, "lo")]
        assert reader.saw_done
        assert reader.usage is not None
        assert reader.malformed_lines == 0


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    # Events of two data lines each: a CR/LF split read as two line ends would
    # dispatch the first half alone and count it as malformed.
    stream = b'data: {"response":\r\ndata: "x"}\r\n\r\n'
    for split in range(len(stream)):
        deltas, reader = read([stream[:split], stream[split:]])
        assert deltas == [Delta(C, "x")], split
        assert reader.malformed_lines == 0


def test_no_done_at_the_end() -> None:
    deltas, reader = read([b'data: {"response":"a"}\n\ndata: {"response":"b"}\n\n'])
    assert deltas == [Delta(C, "a"), Delta(C, "b")]
    assert not reader.saw_done


def test_last_event_without_its_blank_line_is_still_read() -> None:
    deltas, reader = read([b'data: {"response":"a"}\n\ndata: {"response":"b"}'])
    assert deltas == [Delta(C, "a"), Delta(C, "b")]
    deltas, reader = read([b'data: {"response":"a"}\n\ndata: [DONE]\n'])
    assert reader.saw_done


def test_truncated_last_event_is_malformed() -> None:
    deltas, reader = read([b'data: {"response":"a"}\n\ndata: {"response":"b'])
    assert deltas == [Delta(C, "a")]
    assert reader.malformed_lines == 1


def test_reasoning_before_content_and_the_reasoning_key() -> None:
    stream = (
        b'data: {"choices":[{"delta":{"reasoning":"think "}}]}\n\n'
        b'data: {"choices":[{"delta":{"reasoning_content":"more"}}]}\n\n'
        b'data: {"choices":[{"delta":{"reasoning_content":"x","reasoning":"x",'
        b'"content":"Hi"}}]}\n\n'
    )
    deltas, _ = read([stream])
    assert deltas == [Delta(R, "think "), Delta(R, "more"), Delta(R, "x"), Delta(C, "Hi")]


def test_empty_and_null_deltas_produce_nothing() -> None:
    stream = (
        b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
        b'data: {"choices":[{"delta":{"content":null,"reasoning_content":null}}]}\n\n'
        b'data: {"choices":[{"delta":{}}]}\n\n'
        b'data: {"choices":[]}\n\n'
        b'data: {"response":""}\n\n'
        b'data: {"response":null}\n\n'
        b'data: {"choices":[{"delta":{"content":["not","text"]}}]}\n\n'
        b"data: [DONE]\n\n"
    )
    deltas, reader = read([stream])
    assert deltas == []
    assert not reader.produced
    assert reader.saw_done
    assert reader.malformed_lines == 0


def test_finish_reason_keeps_the_last_one() -> None:
    stream = (
        b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\n\n'
        b'data: {"choices":[{"delta":{},"finish_reason":"length"}]}\n\n'
    )
    _, reader = read([stream])
    assert reader.finish_reason == "length"


def test_malformed_lines_are_skipped_and_counted() -> None:
    stream = (
        b'data: {"response":"a"}\n\n'
        b"data: {not json\n\n"
        b"data: [1, 2]\n\n"
        b'data: "a string"\n\n'
        b'data: {"response":"b"} trailing\n\n'
        b"something that is not SSE\n\n"
        b'data: {"response":"c"}\n\n'
    )
    deltas, reader = read([stream])
    assert deltas == [Delta(C, "a"), Delta(C, "c")]
    assert reader.malformed_lines == 5


def test_comments_and_other_fields_are_ignored() -> None:
    stream = (
        b": keep-alive\n\n"
        b"event: message\nid: 7\nretry: 1000\n"
        b'data: {"response":"a"}\n\n'
        b":\n"
        b'data:{"response":"b"}\n\n'
    )
    deltas, reader = read([stream])
    assert deltas == [Delta(C, "a"), Delta(C, "b")]
    assert reader.malformed_lines == 0


def test_multi_line_data_is_joined_with_newlines() -> None:
    stream = b'data: {"response":\ndata: "a",\ndata:"usage":{"total_tokens":3}}\n\n'
    # Also after a first chunk, when the reader is past its start-of-stream checks.
    for chunks in ([stream], [b": hello\n\n", stream], bytewise(stream)):
        deltas, reader = read(chunks)
        assert deltas == [Delta(C, "a")]
        assert reader.usage == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 3}
        assert reader.malformed_lines == 0


def test_leading_whitespace_and_bom() -> None:
    for prefix in (b"\n\n", b"\xef\xbb\xbf", b"\r\n \xef\xbb\xbf\n"):
        deltas, reader = read(bytewise(prefix + NATIVE_EXAMPLE))
        assert deltas == [Delta(C, "Hel"), Delta(C, "lo")]
        assert reader.malformed_lines == 0


def test_usage_on_every_chunk_keeps_the_last() -> None:
    events: list[dict[str, Any]] = [
        {"choices": [{"delta": {"content": str(i)}}], "usage": {"prompt_tokens": 5,
         "completion_tokens": i, "total_tokens": 5 + i}}
        for i in range(1, 4)
    ]  # fmt: skip
    events.append({"choices": [{"delta": {}}], "usage": None})
    stream = b"".join(b"data: " + json.dumps(event).encode() + b"\n\n" for event in events)
    deltas, reader = read([stream])
    assert texts(deltas) == ("", "123")
    assert reader.usage == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}


@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 4}, (3, 4, 7)),
        ({"prompt_tokens": 3.0, "completion_tokens": 4.9, "total_tokens": 7}, (3, 4, 7)),
        ({"input_tokens": 2, "output_tokens": 1}, (2, 1, 3)),
        ({"prompt_tokens": -1, "completion_tokens": "x", "total_tokens": True}, (0, 0, 0)),
        ({"total_tokens": 9}, (0, 0, 9)),
    ],
)
def test_usage_is_normalised(raw: dict[str, Any], normalised: tuple[int, int, int]) -> None:
    stream = b"data: " + json.dumps({"response": "", "usage": raw}).encode() + b"\n\n"
    _, reader = read([stream])
    assert reader.usage == dict(
        zip(("prompt_tokens", "completion_tokens", "total_tokens"), normalised, strict=True)
    )


@pytest.mark.parametrize(
    ("raw", "cached"),
    [
        ({"prompt_tokens": 30, "prompt_tokens_details": {"cached_tokens": 24}}, 24),
        ({"input_tokens": 30, "output_tokens": 4, "input_tokens_details": {"cached_tokens": 9}}, 9),
        ({"prompt_tokens": 30, "prompt_tokens_details": {"cached_tokens": 99}}, 30),
        ({"prompt_tokens": 30, "prompt_tokens_details": {"cached_tokens": 0}}, None),
        ({"prompt_tokens": 30, "prompt_tokens_details": {"cached_tokens": "7"}}, None),
        ({"prompt_tokens": 30, "prompt_tokens_details": None}, None),
    ],
)  # fmt: skip
def test_cached_prompt_tokens_are_read_from_the_usage_details(
    raw: dict[str, Any], cached: int | None
) -> None:
    stream = b"data: " + json.dumps({"response": "", "usage": raw}).encode() + b"\n\n"
    _, reader = read([stream])
    assert reader.usage is not None
    assert reader.usage.get("cached_tokens") == cached


def test_usage_without_known_counts_is_none() -> None:
    _, reader = read([b'data: {"response":"a","usage":{"foo":1}}\n\n'])
    assert reader.usage is None
    _, reader = read([b'data: {"response":"a","usage":[1]}\n\n'])
    assert reader.usage is None


# --- a whole JSON object instead of SSE ----------------------------------------

OPENAI_BODY = json.dumps(
    {
        "id": "c2",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "reasoning_content": "hmm", "content": "你好!"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7},
    },
    ensure_ascii=False,
).encode()
NATIVE_BODY = (
    b'{"response":"Hello","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'
)


@pytest.mark.parametrize(
    ("body", "expected", "finish_reason"),
    [
        (OPENAI_BODY, [Delta(R, "hmm"), Delta(C, "你好!")], "stop"),
        (NATIVE_BODY, [Delta(C, "Hello")], None),
        (b'  \n{"result":' + NATIVE_BODY + b',"success":true}', [Delta(C, "Hello")], None),
    ],
)
def test_whole_json_body(body: bytes, expected: list[Delta], finish_reason: str | None) -> None:
    for chunks in ([body], bytewise(body)):
        reader = UpstreamReader()
        for chunk in chunks:
            assert reader.feed(chunk) == []  # buffered until the end
        assert reader.finish() == expected
        assert reader.usage is not None
        assert reader.finish_reason == finish_reason
        assert reader.produced
        assert reader.malformed_lines == 0


def test_broken_whole_json_body_is_malformed() -> None:
    deltas, reader = read([b'{"response": "cut sho'])
    assert deltas == []
    assert reader.malformed_lines == 1
    assert not reader.produced


def test_oversized_json_body_is_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upstream, "MAX_BODY_BYTES", 64)
    body = json.dumps({"response": "x" * 100}).encode()
    deltas, reader = read(cut(body, [10, 50, 80]))
    assert deltas == []
    assert reader.malformed_lines == 1


# --- hostile or broken streams -------------------------------------------------


def test_an_oversized_event_is_dropped_and_the_stream_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sse, "MAX_EVENT_BYTES", 100)
    huge = b'data: {"response":"' + b"x" * 500 + b'"}\n\n'
    for newline in (b"\n", b"\r\n", b"\r"):
        stream = (b'data: {"response":"a"}\n\n' + huge + b'data: {"response":"b"}\n\n').replace(
            b"\n", newline
        )
        deltas, reader = read(cut(stream, range(0, len(stream), 37)))
        assert deltas == [Delta(C, "a"), Delta(C, "b")], newline
        assert reader.malformed_lines == 1
        # An oversized line drops its whole event, and nothing of it is read.
        stream = (b'data: {"response":\n: ' + b"x" * 500 + b'\ndata: "c"}\n\n').replace(
            b"\n", newline
        ) + b'data: {"response":"d"}\n\n'
        deltas, reader = read(cut(stream, [3, 30, 200, len(stream) - 9]))
        assert deltas == [Delta(C, "d")], newline
        assert reader.malformed_lines == 1


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    deltas, reader = read([b'data: {"response":"a\xff\xfeb"}\n\n', b'data: {"response":"\xe4\xbd'])
    assert deltas == [Delta(C, "a\ufffd\ufffdb")]
    assert reader.malformed_lines == 1  # the truncated last event


def test_junk_body_produces_nothing() -> None:
    deltas, reader = read([b"<html>Bad gateway</html>\n"])
    assert deltas == []
    assert not reader.produced
    assert reader.malformed_lines == 1
    deltas, reader = read([b"   "])
    assert deltas == []
    assert reader.malformed_lines == 0


def test_deep_nesting_is_malformed_not_a_crash() -> None:
    deltas, reader = read([b"data: " + b"[" * 100_000 + b"\n\n"])
    assert deltas == []
    assert reader.malformed_lines == 1


def test_finish_is_final() -> None:
    reader = UpstreamReader()
    reader.feed(b'data: {"response":"a"}\n\n')
    reader.finish()
    assert reader.finish() == []
    with pytest.raises(RuntimeError):
        reader.feed(b"data: x\n\n")


# --- property: cutting a stream anywhere changes nothing ------------------------

piece = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["你好", "世界", "🙂", "👩‍👩‍👧", "é", '"', "\\", "\\n", "\r\n", "\n", "\r",
                     "data: x", "\n\ndata: [DONE]\n\n", "\u2028", ""]),
)  # fmt: skip
model_text = st.lists(piece, max_size=4).map("".join)
usage_dict = st.fixed_dictionaries(
    {
        "prompt_tokens": st.integers(0, 10**6),
        "completion_tokens": st.integers(0, 10**6),
        "total_tokens": st.integers(0, 2 * 10**6),
    }
)


@st.composite
def stream_events(draw: st.DrawFn) -> tuple[list[str], list[Delta], dict[str, int] | None, bool]:
    """SSE lines (without line ends) and what reading them must give."""
    lines: list[str] = []
    expected: list[Delta] = []
    usage: dict[str, int] | None = None
    ascii_json = draw(st.booleans())
    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))

    def data(obj: dict[str, Any]) -> None:
        text = json.dumps(obj, ensure_ascii=ascii_json, separators=separators)
        if draw(st.booleans()):
            lines.append("data: " + text)
        else:  # one event in several data lines; the reader joins them with "\n"
            lines.extend(["data: {", "data:" + text[1:]])
        lines.append("")

    for _ in range(draw(st.integers(0, 12))):
        kind = draw(
            st.sampled_from(["reasoning", "reasoning_alt", "content", "both", "native", "noise"])
        )
        text, other = draw(model_text), draw(model_text)
        obj: dict[str, Any]
        if kind == "native":
            obj = {"response": text}
            got = [Delta(C, text)]
        elif kind == "noise":
            lines.append(draw(st.sampled_from([": ping", "event: delta", "id: 3", "retry: 5"])))
            continue
        else:
            shapes: dict[str, dict[str, str | None]] = {
                "reasoning": {"reasoning_content": text},
                "reasoning_alt": {"reasoning": text},
                "content": {"content": text, "reasoning_content": None},
                "both": {"reasoning_content": text, "content": other},
            }
            delta = shapes[kind]
            obj = {"id": "c", "object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}  # fmt: skip
            got = [Delta(R, text)] if kind != "content" else [Delta(C, text)]
            if kind == "both":
                got.append(Delta(C, other))
        if draw(st.booleans()):
            usage = draw(usage_dict)
            obj["usage"] = usage
        expected += [delta for delta in got if delta.text]
        data(obj)
    if draw(st.booleans()):
        usage = draw(usage_dict)
        data({"response": "", "usage": usage})
    done = draw(st.booleans())
    if done:
        lines += ["data: [DONE]", ""]
    return lines, expected, usage, done


@settings(max_examples=200)
@given(
    events=stream_events(),
    newline=st.sampled_from(["\n", "\r\n", "\r", "mixed"]),
    data=st.data(),
)
def test_any_cut_of_any_stream_reads_the_same(
    events: tuple[list[str], list[Delta], dict[str, int] | None, bool],
    newline: str,
    data: st.DataObject,
) -> None:
    lines, expected, usage, done = events
    if newline == "mixed":
        ends = data.draw(st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(lines),
                                  max_size=len(lines)))  # fmt: skip
        text = ""
        for line, end in zip(lines, ends, strict=True):
            if not line and text.endswith("\r") and end == "\n":
                end = "\r"  # "\r" + "\n" would be one CRLF, not two line ends
            text += line + end
        stream = text.encode()
    else:
        stream = "".join(line + newline for line in lines).encode()
    positions = data.draw(st.lists(st.integers(0, len(stream)), max_size=20))

    whole, whole_reader = read([stream])
    deltas, reader = read(cut(stream, positions))

    assert deltas == expected
    assert whole == expected
    assert texts(deltas) == texts(expected)
    assert reader.usage == usage == whole_reader.usage
    assert reader.saw_done is done
    assert reader.malformed_lines == 0
    assert reader.produced is bool(expected)


@given(text=model_text, reasoning=model_text, data=st.data())
def test_any_cut_of_a_whole_json_body_reads_the_same(
    text: str, reasoning: str, data: st.DataObject
) -> None:
    body = json.dumps(
        {"choices": [{"message": {"content": text, "reasoning_content": reasoning}}]},
        ensure_ascii=data.draw(st.booleans()),
    ).encode()
    positions = data.draw(st.lists(st.integers(0, len(body)), max_size=10))
    deltas, reader = read(cut(body, positions))
    assert texts(deltas) == (reasoning, text)
    assert reader.malformed_lines == 0


# --- Tail: the end of a relayed stream -------------------------------------------

TAIL = upstream.TAIL_BYTES


def openai_event(delta: dict[str, str], finish_reason: str | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    if finish_reason is not None:
        choice["finish_reason"] = finish_reason
    obj = {"object": "chat.completion.chunk", "choices": [choice]}
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


USAGE_EVENT = (
    b'data: {"response":"","usage":{"prompt_tokens":7,"completion_tokens":900,'
    b'"total_tokens":907}}\n\n'
)
ENDING = openai_event({"content": "."}, "length") + USAGE_EVENT + b"data: [DONE]\n\n"


def long_stream(size: int) -> bytes:
    """An answer of about ``size`` bytes of token events, then the closing events."""
    body = b"".join(openai_event({"content": f"tok{i} 你"}) for i in range(size // 60 + 1))
    return body + ENDING


def tail_of(chunks: Iterable[bytes]) -> upstream.Tail:
    tail = upstream.Tail()
    for chunk in chunks:
        tail.add(chunk)
    return tail


def assert_reads_the_ending(reader: UpstreamReader) -> None:
    assert reader.finish_reason == "length"
    assert reader.usage == {"prompt_tokens": 7, "completion_tokens": 900, "total_tokens": 907}
    assert reader.saw_done
    assert reader.malformed_lines == 0


def test_tail_of_a_short_stream_reads_like_the_whole_stream() -> None:
    for stream in (NATIVE_EXAMPLE, OPENAI_EXAMPLE):
        _, whole = read([stream])
        got = tail_of(bytewise(stream)).read()
        assert (got.usage, got.finish_reason, got.saw_done) == (
            whole.usage,
            whole.finish_reason,
            whole.saw_done,
        )
        assert got.malformed_lines == 0


def test_tail_without_the_closing_events_reports_none_of_them() -> None:
    reader = tail_of([openai_event({"content": "Hi"}), openai_event({"content": "!"})]).read()
    assert (reader.usage, reader.finish_reason, reader.saw_done) == (None, None, False)


@pytest.mark.parametrize(
    ("data", "between"),
    [
        (b"", True),
        (b"data: x\n\n", True),
        (b"data: x\r\n\r\n", True),
        (b"data: x\r\r", True),
        (b"data: x\n\ndata: [DONE]\n\n", True),
        (b'data: {"response":"cut', False),
        (b"data: x\n", False),  # the line ended, the event did not
        (b"data: x\r\n", False),
        (b"data: x\r", False),
        (b"data: x\n\ndata", False),
    ],
)
def test_between_events(data: bytes, between: bool) -> None:
    assert tail_of([data]).between_events is between
    assert tail_of(bytewise(data)).between_events is between


def test_between_events_follows_the_latest_bytes() -> None:
    tail = upstream.Tail()
    tail.add(b'data: {"response":"a"}\n\n')
    assert tail.between_events
    tail.add(b'data: {"resp')
    assert not tail.between_events
    tail.add(b'onse":"b"}\n')
    assert not tail.between_events
    tail.add(b"\n")
    assert tail.between_events


def test_between_events_after_the_start_fell_out() -> None:
    stream = long_stream(3 * TAIL)
    assert tail_of([stream]).between_events
    assert not tail_of([stream, b'data: {"respo']).between_events
    assert not tail_of([stream[:-1]]).between_events


@pytest.mark.parametrize("step", [1000, 4096, TAIL - 1, TAIL, TAIL + 1])
def test_a_long_stream_is_read_from_its_last_bytes(step: int) -> None:
    stream = long_stream(5 * TAIL)
    assert len(stream) > 5 * TAIL
    tail = tail_of(stream[i : i + step] for i in range(0, len(stream), step))
    # The stream's start fell out, and with it an event cut in two: that
    # half is skipped, not counted as a malformed line.
    assert_reads_the_ending(tail.read())


def test_a_big_single_chunk() -> None:
    stream = long_stream(10 * TAIL)
    assert len(stream) > 10 * TAIL
    tail = tail_of([stream])
    assert_reads_the_ending(tail.read())
    assert tail.between_events
    # Small chunks after the big one are kept with the big one's end.
    tail.add(openai_event({"content": "more"}, "stop"))
    assert tail.read().finish_reason == "stop"
    assert tail.read().usage is not None


def test_a_tail_that_starts_in_the_middle_of_the_last_event_reads_nothing_of_it() -> None:
    event = openai_event({"content": "x" * (2 * TAIL)}, "stop")
    reader = tail_of([long_stream(TAIL), event]).read()
    # The only event left has lost its start: it is not read, and not malformed.
    assert reader.finish_reason is None
    assert reader.malformed_lines == 0


def test_read_after_a_cut_does_not_mistake_the_cut_half_for_an_event() -> None:
    # The first kept bytes would read as an event with usage if taken from
    # where the cut fell; in the stream they are the end of a comment line.
    lookalike = USAGE_EVENT
    after = openai_event({"content": "end"}, "stop")
    # A comment line fills the tail up to exactly TAIL_BYTES, so that the cut
    # falls right after the ": " that makes the lookalike a comment.
    fill = TAIL - len(lookalike) - len(after)
    kept = lookalike + b":" + b"." * (fill - 2) + b"\n" + after
    assert len(kept) == TAIL
    stream = openai_event({"content": "start"}) + b": " + kept
    _, whole = read([stream])
    assert whole.usage is None  # the lookalike is a comment

    reader = tail_of([stream]).read()
    assert reader.usage is None
    assert reader.finish_reason == "stop"
    assert reader.malformed_lines == 0
    reader = tail_of(cut(stream, range(0, len(stream), 777))).read()
    assert reader.usage is None
    assert reader.finish_reason == "stop"


def test_a_stream_of_exactly_tail_bytes_keeps_its_first_event() -> None:
    # Nothing has fallen out of a tail that holds exactly TAIL_BYTES, however
    # the bytes arrived: the one event is read.
    head = b'data: {"choices":[{"index":0,"delta":{"content":"'
    end = b'"},"finish_reason":"stop"}]}\n\n'
    event = head + b"x" * (TAIL - len(head) - len(end)) + end
    assert len(event) == TAIL
    for chunks in ([event], [event[:10], event[10:]]):
        reader = tail_of(chunks).read()
        assert reader.finish_reason == "stop"
        assert reader.malformed_lines == 0


@settings(max_examples=50)
@given(data=st.data())
def test_any_cut_of_a_long_stream_reads_the_same_ending(data: st.DataObject) -> None:
    stream = long_stream(data.draw(st.integers(0, 3 * TAIL)))
    if data.draw(st.booleans()):
        stream = stream.replace(b"\n", b"\r\n")
    positions = data.draw(st.lists(st.integers(0, len(stream)), max_size=30))
    tail = tail_of(cut(stream, positions))
    assert_reads_the_ending(tail.read())
    assert tail.between_events


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_an_event_with_a_non_json_number_is_malformed(constant: str) -> None:
    reader = UpstreamReader()
    deltas = reader.feed(f'data: {{"response": "x", "n": {constant}}}\n\n'.encode())
    assert deltas == []
    assert reader.malformed_lines == 1


def test_a_whole_body_with_a_non_json_number_is_malformed() -> None:
    reader = UpstreamReader()
    reader.feed(b'{"response": "x", "usage": {"prompt_tokens": NaN}}')
    assert reader.finish() == []
    assert reader.whole_body is None
    assert reader.malformed_lines == 1


# --- upstream_inputs: what the binding is sent ---------------------------------


def test_inputs_send_the_conversation_as_messages_under_the_system_prompt() -> None:
    settings = Settings(system_prompt="Be brief.")
    request = chat_request(
        GLM,
        messages=(("user", "Hi"), ("assistant", "Hello!"), ("user", "How are you?")),
        max_tokens=300,
    )
    assert request.inputs(GLM, settings.system_prompt) == {
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
    inputs = chat_request(LLAMA, max_tokens=77).inputs(LLAMA, Settings().system_prompt)
    assert inputs["max_tokens"] == 77
    assert "max_completion_tokens" not in inputs
    assert inputs["messages"][0] == {"role": "system", "content": Settings().system_prompt}


def test_inputs_reasoning_false_turns_thinking_off_for_openai_models() -> None:
    inputs = chat_request(GLM, reasoning=False).inputs(GLM, Settings().system_prompt)
    assert inputs["chat_template_kwargs"] == {"enable_thinking": False}


@pytest.mark.parametrize("reasoning", [None, True])
def test_inputs_leave_thinking_alone_unless_reasoning_is_false(reasoning: bool | None) -> None:
    inputs = chat_request(GLM, reasoning=reasoning).inputs(KIMI, Settings().system_prompt)
    assert "chat_template_kwargs" not in inputs


def test_inputs_native_models_get_no_template_kwargs() -> None:
    inputs = chat_request(LLAMA, reasoning=False).inputs(LLAMA, Settings().system_prompt)
    assert "chat_template_kwargs" not in inputs


@pytest.mark.parametrize("temperature", [0.0, 1.5])
def test_inputs_pass_temperature_when_given(temperature: float) -> None:
    inputs = chat_request(GLM, temperature=temperature).inputs(GLM, Settings().system_prompt)
    assert inputs["temperature"] == temperature


def test_inputs_omit_temperature_when_absent() -> None:
    assert "temperature" not in chat_request(GLM).inputs(GLM, Settings().system_prompt)


def test_inputs_follow_the_model_called_not_the_model_asked_for() -> None:
    # Falling back from GLM to Llama must switch to Llama's input shape.
    inputs = chat_request(GLM, reasoning=False).inputs(LLAMA, Settings().system_prompt)
    assert inputs["max_tokens"] == 256
    assert "max_completion_tokens" not in inputs
    assert "chat_template_kwargs" not in inputs


# --- answer_text: the whole answer's text for the output check ---------------------


@given(
    texts=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=30),
    native=st.booleans(),
)
def test_answer_text_is_what_the_reader_reads(texts: list[str], native: bool) -> None:
    if native:
        body = "".join(wire.native_chunk(t) for t in texts) + "".join(wire.native_end())
    else:
        body = (
            wire.openai_chunk(reasoning='thinking "first"')
            + "".join(wire.openai_chunk(content=t) for t in texts)
            + "".join(wire.openai_end())
        )
    reader = UpstreamReader()
    deltas = reader.feed(body.encode()) + reader.finish()
    expected = "".join(text for kind, text in deltas if kind is DeltaKind.CONTENT)
    assert answer_text(body.encode()) == expected == "".join(texts)


def test_answer_text_of_no_answer_is_empty() -> None:
    assert answer_text(b"") == ""
    assert answer_text(wire.openai_chunk(reasoning="only thinking").encode()) == ""


# --- model_events: only the model's events are relayed ------------------------------


def test_the_models_events_pass_as_they_are() -> None:
    whole = b"".join(openai_stream(("reasoning", "hm"), ("content", "Hi"), usage=usage(3, 2)))
    assert upstream.model_events(whole) == whole
    native = NATIVE_EXAMPLE
    assert upstream.model_events(native) == native


@pytest.mark.parametrize(
    "bad",
    [
        b"event: done\ndata: {}\n\n",
        b'event: error\ndata: {"error": 1}\n\n',
        b"data: {not json\n\n",
        b"data: [1, 2]\n\n",
        b'data: "text"\n\n',
        b"garbage\n\n",
    ],
)
def test_anything_else_ends_the_answer(bad: bytes) -> None:
    with pytest.raises(UpstreamMalformed) as failed:
        upstream.model_events(NATIVE_EXAMPLE + bad + NATIVE_EXAMPLE)
    # What came before it in the same piece is the model's, and kept for the
    # client (one read may hold many events).
    assert failed.value.before == upstream.model_events(NATIVE_EXAMPLE)


def test_comments_are_dropped_and_the_rest_kept() -> None:
    event = b'data: {"response":"a"}\n\n'
    assert upstream.model_events(b": keep-alive\n\n" + event + b":\n\n") == event


# --- Redaction: a configured secret never leaves ----------------------------------------


def test_every_configured_secret_is_redacted_in_its_raw_and_json_forms() -> None:
    redact = upstream.Redaction(["sk-live-123456", None, "", 'we"ird\\key'])
    text = b'data: {"content":"key sk-live-123456 and we\\"ird\\\\key"}\n\n'
    out = redact(text)
    assert b"sk-live" not in out
    assert b"ird" not in out
    assert out.count(upstream.Redaction.MARK) == 2
    assert redact.holds_one(text)
    assert not redact.holds_one(out)
    assert upstream.Redaction([])(text) == text
