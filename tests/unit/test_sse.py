from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgechat import sse
from edgechat.errors import UpstreamBusy

from .sse_parser import parse_stream

LINE_BREAKERS = "\r\n\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"
INJECTIONS = ["event: done", "data: x", "\n\nevent: error\ndata: {}\n\n", "id: 1", "\r\r"]
tricky_text = st.lists(
    st.one_of(
        st.text(alphabet=st.one_of(st.characters(), st.sampled_from(LINE_BREAKERS))),
        st.sampled_from([*INJECTIONS, '"', "\\", ":", "你", "🙂"]),
    ),
    max_size=8,
).map("".join)


def test_event_exact_bytes() -> None:
    assert sse.event("meta", {"model": "glm", "n": 1}) == (
        b'event: meta\ndata: {"model":"glm","n":1}\n\n'
    )


def test_event_keeps_unicode_readable() -> None:
    assert sse.event("token", {"text": "你好 🙂"}) == (
        'event: token\ndata: {"text":"你好 🙂"}\n\n'.encode()
    )


def test_token_and_reasoning_match_generic_event() -> None:
    for text in ["", "a", 'say "hi"\n', "x\u2028y", "\\"]:
        assert sse.token(text) == sse.event("token", {"text": text})
        assert sse.reasoning(text) == sse.event("reasoning", {"text": text})


def test_ping_is_a_comment() -> None:
    assert sse.PING == b": ping\n\n"
    assert parse_stream(sse.PING) == ([], 1)


@pytest.mark.parametrize("name", ["", "a\nb", "a\rb", "a:b", "x\u2028", "tab\t", "\x00"])
def test_event_refuses_names_that_break_framing(name: str) -> None:
    with pytest.raises(ValueError, match="event names"):
        sse.event(name, {})


def test_event_refuses_non_json_data() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        sse.event("done", {"cost": float("nan")})
    with pytest.raises(TypeError):
        sse.event("done", {"x": object()})


def test_event_accepts_any_mapping() -> None:
    from types import MappingProxyType

    assert sse.event("done", MappingProxyType({"a": 1})) == b'event: done\ndata: {"a":1}\n\n'


def test_unicode_line_separators_are_escaped() -> None:
    assert sse.token("a\u2028b\u2029c\x85d") == (
        b'event: token\ndata: {"text":"a\\u2028b\\u2029c\\u0085d"}\n\n'
    )


def test_lone_surrogate_becomes_a_json_escape() -> None:
    chunk = sse.token("a\ud800b")
    assert chunk == b'event: token\ndata: {"text":"a\\ud800b"}\n\n'
    events, _ = parse_stream(chunk)
    assert json.loads(events[0][1]) == {"text": "a\ud800b"}


def test_error_event_carries_only_public_fields() -> None:
    exc = UpstreamBusy("3040: internal detail about binding AI")
    chunk = sse.error(exc)
    events, _ = parse_stream(chunk)
    ((name, data),) = events
    assert name == "error"
    assert json.loads(data) == {
        "code": "model_busy",
        "message": exc.public_message,
        "retryable": True,
    }
    assert b"internal" not in chunk
    assert b"binding" not in chunk


@given(text=tricky_text)
def test_token_is_exactly_one_event_whatever_the_text(text: str) -> None:
    chunk = sse.token(text)
    events, comments = parse_stream(chunk)
    assert comments == 0
    assert len(events) == 1
    name, data = events[0]
    assert name == "token"
    assert json.loads(data) == {"text": text}
    # One physical line of data, even for splitters that break on more than CR/LF.
    assert chunk.count(b"\n") == 3
    assert b"\r" not in chunk
    assert len(chunk.decode().splitlines()) == 3


@given(
    name=st.sampled_from(["meta", "done", "error", "reasoning", "x-y_z"]),
    data=st.dictionaries(st.text(), st.one_of(tricky_text, st.integers(), st.booleans())),
    text=tricky_text,
)
def test_event_round_trips_arbitrary_data(name: str, data: dict[str, object], text: str) -> None:
    stream = sse.event(name, data) + sse.PING + sse.event("token", {"text": text})
    events, comments = parse_stream(stream)
    assert comments == 1
    assert [event for event, _ in events] == [name, "token"]
    assert json.loads(events[0][1]) == data
    assert json.loads(events[1][1]) == {"text": text}
