from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgechat.core import sse
from edgechat.core.faults import UpstreamBusy
from tests.kit.sse import MODEL, Event, parse

LINE_BREAKERS = "\r\n\u2028\u2029\x85\x0b\x0c\x1c\x1d\x1e"
INJECTIONS = ["event: done", "data: x", "\n\nevent: error\ndata: {}\n\n", "id: 1", "\r\r"]
tricky_text = st.lists(
    st.one_of(
        st.text(alphabet=st.one_of(st.characters(), st.sampled_from(LINE_BREAKERS))),
        st.sampled_from([*INJECTIONS, '"', "\\", ":", "你", "🙂"]),
    ),
    max_size=8,
).map("".join)
json_values = st.recursive(
    st.one_of(tricky_text, st.integers(), st.booleans(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(tricky_text, inner)),
    max_leaves=10,
)
payloads = st.dictionaries(tricky_text, json_values, max_size=5)


def one_physical_line(chunk: bytes, prefix_lines: int) -> None:
    """The event is its prefix lines, one line of JSON and the blank line, for
    any line splitter, even one that breaks on more than CR and LF."""
    assert b"\r" not in chunk
    assert chunk.count(b"\n") == prefix_lines + 2
    assert len(chunk.decode().splitlines()) == prefix_lines + 2  # ..., JSON, ""


# --- event: our named events -----------------------------------------------------


def test_event_exact_bytes() -> None:
    assert sse.event("meta", {"model": "glm", "n": 1}) == (
        b'event: meta\ndata: {"model":"glm","n":1}\n\n'
    )


def test_event_keeps_unicode_readable() -> None:
    assert sse.event("done", {"text": "你好 🙂"}) == (
        'event: done\ndata: {"text":"你好 🙂"}\n\n'.encode()
    )


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
    assert sse.event("done", {"text": "a\u2028b\u2029c\x85d"}) == (
        b'event: done\ndata: {"text":"a\\u2028b\\u2029c\\u0085d"}\n\n'
    )


def test_lone_surrogate_becomes_a_json_escape() -> None:
    chunk = sse.event("meta", {"text": "a\ud800b"})
    assert chunk == b'event: meta\ndata: {"text":"a\\ud800b"}\n\n'
    assert parse(chunk).meta == {"text": "a\ud800b"}


# --- data: an unnamed event in the model's own shape -----------------------------


def test_data_exact_bytes() -> None:
    assert sse.data({"response": "Hi", "n": 1}) == b'data: {"response":"Hi","n":1}\n\n'


def test_data_is_read_as_a_model_event() -> None:
    body = {"choices": [{"message": {"content": "你好", "reasoning_content": "hmm"}}]}
    parsed = parse(sse.data(body))
    assert parsed.model_events == [Event(MODEL, body)]
    assert (parsed.text(), parsed.reasoning()) == ("你好", "hmm")


def test_data_escapes_line_separators_and_lone_surrogates() -> None:
    chunk = sse.data({"response": "a\u2028b\x85c\ud800"})
    assert chunk == b'data: {"response":"a\\u2028b\\u0085c\\ud800"}\n\n'
    assert parse(chunk).model_events[0].data == {"response": "a\u2028b\x85c\ud800"}


def test_data_refuses_non_json_values() -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        sse.data({"response": "x", "score": float("inf")})


# --- error, PING, CLOSE_EVENT --------------------------------------------------------


def test_error_event_carries_only_public_fields() -> None:
    exc = UpstreamBusy(detail="3040: internal detail about binding AI")
    chunk = sse.error(exc, "req-1")
    final = parse(META + chunk).final
    assert final == Event(
        "error",
        {
            "code": "model_busy",
            "message": exc.public_message,
            "retryable": True,
            "request_id": "req-1",
        },
    )
    assert b"internal" not in chunk
    assert b"binding" not in chunk


def test_ping_is_a_comment() -> None:
    parsed = parse(sse.PING)
    assert parsed.pings == 1
    assert parsed.events == []


@pytest.mark.parametrize(
    "left_open",
    [
        b'data: {"response":"cut mid-str',  # inside a line
        b'data: {"response":"x"}\n',  # a complete line, the event not dispatched
        b'data: {"response":"x"}\r',  # a CR that may be half of a CRLF
        b"data: [DONE]\n\n",  # between events: the blank line is harmless
        b"",
    ],
)
def test_close_event_ends_whatever_the_upstream_left_open(left_open: bytes) -> None:
    done = {"model": "glm", "request_id": "req-1"}
    parsed = parse(META + left_open + sse.CLOSE_EVENT + sse.event("done", done))
    assert parsed.final == Event("done", done)
    # What the upstream left is its own event, not glued onto ours.
    assert all(event.name == MODEL for event in parsed.events[1:-1])


META = sse.event("meta", {"request_id": "req-1", "model": "glm"})


def test_a_closing_without_metas_request_id_is_not_the_streams_end() -> None:
    ours = sse.event("done", {"model": "glm", "request_id": "req-1"})
    forged = sse.event("done", {"model": "forged"})
    other = sse.event("done", {"model": "forged", "request_id": "req-2"})
    parsed = parse(META + forged + other + ours)
    assert parsed.final == Event("done", {"model": "glm", "request_id": "req-1"})
    with pytest.raises(AssertionError, match="exactly one done/error"):
        _ = parse(META + forged).final


# --- properties ------------------------------------------------------------------------


@given(payload=payloads)
def test_data_is_exactly_one_event_whatever_the_payload(payload: dict[str, object]) -> None:
    chunk = sse.data(payload)
    parsed = parse(chunk)
    assert parsed.pings == 0
    assert parsed.events == [Event(MODEL, payload)]
    one_physical_line(chunk, prefix_lines=0)


@given(name=st.sampled_from(["meta", "done", "error"]), payload=payloads)
def test_event_is_exactly_one_event_whatever_the_payload(
    name: str, payload: dict[str, object]
) -> None:
    chunk = sse.event(name, payload)
    assert parse(chunk).events == [Event(name, payload)]
    one_physical_line(chunk, prefix_lines=1)


@given(meta=payloads, model=payloads, text=tricky_text, done=payloads)
def test_a_whole_stream_round_trips_arbitrary_data(
    meta: dict[str, object], model: dict[str, object], text: str, done: dict[str, object]
) -> None:
    stream = (
        sse.event("meta", meta)
        + sse.PING
        + sse.data(model)
        + sse.data({"response": text})
        + sse.event("done", done)
    )
    parsed = parse(stream)
    assert parsed.pings == 1
    assert parsed.events == [
        Event("meta", meta),
        Event(MODEL, model),
        Event(MODEL, {"response": text}),
        Event("done", done),
    ]


# Bytes an upstream may have stopped in the middle of (no event: lines: those
# are ours alone, and Workers AI does not send them).
LEFTOVERS = ['data: {"response":"x"}', "data: [DON", "data", ":", ": ping", "id: 1", "retry: 9"]
LINE_ENDS_AND_BITS = ["\r", "\n", "\r\n", " ", "你", '"', "{"]
upstream_leftovers = st.lists(st.sampled_from([*LEFTOVERS, *LINE_ENDS_AND_BITS]), max_size=12).map(
    "".join
)


@given(left_open=upstream_leftovers, done=payloads)
def test_close_event_then_ours_is_our_event_whatever_came_before(
    left_open: str, done: dict[str, object]
) -> None:
    done = {**done, "request_id": "req-1"}
    parsed = parse(META + left_open.encode() + sse.CLOSE_EVENT + sse.event("done", done))
    assert parsed.final == Event("done", done)


# --- reading: EventSplitter, events, Fields -------------------------------------------

EVENT = b'data: {"response":"Hel"}\n\n'


def test_an_unfinished_event_waits_for_its_end() -> None:
    split = sse.EventSplitter()
    assert split.feed(EVENT[:10]) == b""
    assert split.feed(EVENT[10:-1]) == b""
    assert split.feed(EVENT[-1:] + EVENT[:5]) == EVENT
    assert split.feed(EVENT[5:]) == EVENT
    assert split.finish() == b""


@pytest.mark.parametrize("newline", [b"\r\n", b"\r"])
def test_every_line_end_comes_out_as_lf(newline: bytes) -> None:
    stream = (EVENT + EVENT).replace(b"\n", newline)
    for cut in range(1, len(stream)):
        split = sse.EventSplitter()
        assert split.feed(stream[:cut]) + split.feed(stream[cut:]) + split.finish() == EVENT * 2


def test_an_oversized_event_is_dropped_to_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sse, "MAX_EVENT_BYTES", 50)
    split = sse.EventSplitter()
    assert split.feed(b'data: {"response":"' + b"x" * 60) == b""
    # The rest of it may read like a field; nothing of it comes out.
    assert split.feed(b'data: boom"}\n') == b""
    assert split.feed(b"\n" + EVENT) == EVENT
    assert split.dropped == 1


def test_an_event_left_open_is_what_finish_gives() -> None:
    split = sse.EventSplitter()
    assert split.feed(EVENT + b"data: [DONE]") == EVENT
    assert split.finish() == b"data: [DONE]"


def test_events_and_their_fields() -> None:
    whole = b"\n\n" + EVENT + b": ping\n\nevent: done\nid: 3\ndata: {}\n\ndata: a\ndata: b\nxyz\n\n"
    events = sse.events(whole)
    assert events[0] == EVENT[:-2]
    fields = [sse.Fields(event) for event in events]
    assert [(f.name, f.data, f.stray_lines) for f in fields] == [
        (None, b'{"response":"Hel"}', 0),
        (None, None, 0),
        (b"done", b"{}", 0),
        (None, b"a\nb", 1),
    ]
