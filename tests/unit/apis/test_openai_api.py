"""The OpenAI API's shapes (``openai_api``): ``chat.completion.chunk`` streams
(``ChunkFraming``), whole ``chat.completion`` answers (``CompletionFraming``
through ``Answer.whole``), ``error_body``, ``models_json``; and the
``/v1/`` routes through ``app.handle``: the token, the model list, the
OpenAI error shape and the AI Gateway options.

The framings are driven two ways: fed by hand (with the session's outcome set
as the session sets it at the end of a stream), and through ``Answer``
with a scripted ``FakeAi``, whose streams record the batching pauses instead
of waiting them (``FakeUpstream.pauses``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgechat.answer import upstream
from edgechat.answer.delivery import FORWARD_BATCH_MAX_S, FORWARD_BATCH_S, forward_batch
from edgechat.answer.framing import Outcome
from edgechat.answer.upstream import UpstreamReader
from edgechat.apis.openai import (
    CATALOG_CREATED,
    ChunkFraming,
    CompletionFraming,
    error_body,
    finish_reason,
    models_json,
)
from edgechat.config.settings import Settings
from edgechat.core import sse
from edgechat.core.errors import (
    ApiDisabled,
    BadRequest,
    EdgechatError,
    Forbidden,
    MethodNotAllowed,
    Misconfigured,
    ModelNotFound,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    StoreUnavailable,
    Unauthorized,
    UnsupportedMediaType,
)
from edgechat.core.faults import (
    DeadlineExceeded,
    UpstreamBusy,
    UpstreamError,
    UpstreamMalformed,
    UpstreamQuotaExhausted,
    UpstreamRateLimited,
    UpstreamRequestTooLarge,
    UpstreamTimeout,
)
from edgechat.core.http import Incoming, Reply
from edgechat.core.models import CATALOG, Model, Usage
from edgechat.core.ports import Ai
from edgechat.web import app
from tests.kit import upstream as wire
from tests.kit.sse import MODEL, Event, parse
from tests.unit.fakes import (
    STALL,
    AnswerUnderTest,
    Delay,
    Fail,
    FakeAi,
    FakePlatform,
    FakeRateLimiter,
    FakeSink,
    Step,
    chat_request,
    model,
    native_stream,
    openai_stream,
    usage,
)

GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")
BGE_M3 = "@cf/baai/bge-m3"
CREATED = 1_800_000_000
REQUEST_ID = "req-1"
USAGE = usage(12, 3)
# Deadlines that never matter here; a test that wants one sets its own.
CALM = Settings(first_token_timeout_s=8, idle_timeout_s=8, heartbeat_s=30, total_timeout_s=20)
HANG_S = 10.0
DONE = b"data: [DONE]\n\n"
SELF = "https://chat.example.com"

# A GLM answer as the binding streams it: the model's chunks, then the
# binding's native usage chunk and [DONE], which an OpenAI client must not see.
GLM_CHUNKS = openai_stream(
    ("reasoning", "Hmm."), ("content", "Hel"), ("content", "lo"), usage=USAGE
)
GLM_OWN = GLM_CHUNKS[:3]  # the chat.completion.chunk events
LLAMA_CHUNKS = native_stream("Hel", "lo, ", "edge ☁️!", usage=USAGE)


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: Usage | None = None,
) -> bytes:
    """One OpenAI chunk event with any delta (tool calls included)."""
    body: dict[str, Any] = {
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}],
    }
    if usage is not None:
        body["usage"] = usage
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def envelope(model_id: str = GLM.id) -> dict[str, Any]:
    """The id, object, created and model every chunk of the completion has."""
    return {
        "id": f"chatcmpl-{REQUEST_ID}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": model_id,
    }


def ours(*events: bytes, model_id: str = GLM.id) -> bytes:
    """The model's chunks as the client gets them: the completion's
    envelope, no running usage, the rest as the model wrote it."""
    out = b""
    for event in events:
        obj = json.loads(event.removeprefix(b"data: "))
        rest = {k: v for k, v in obj.items() if k not in ("id", "object", "created", "model")}
        rest.pop("usage", None)
        out += sse.data({**envelope(model_id), **rest})
    return out


def role(model_id: str = GLM.id) -> bytes:
    """The first chunk: the role, as OpenAI's first chunk has it."""
    choice = {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    return sse.data({**envelope(model_id), "choices": [choice]})


# GLM's chunks exactly as Workers AI writes them (the emulator writes the
# same): compact JSON, the model's id, created and model name first, the
# running usage last, nested counts and non-ASCII text included.
def workers_ai_chunk(delta: dict[str, Any], n: int, finish: str | None = None) -> bytes:
    body = {
        "id": "chatcmpl-9f3e",
        "object": "chat.completion.chunk",
        "created": 1_799_999_999,
        "model": "zai-org/GLM-4.7-Flash",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": n,
            "total_tokens": 9 + n,
            "prompt_tokens_details": {"cached_tokens": 0} if n % 2 else None,
        },
    }
    compact = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return b"data: " + compact.encode() + b"\n\n"


WORKERS_AI_OWN = [
    workers_ai_chunk({"reasoning_content": "想一想"}, 1),
    workers_ai_chunk({"content": "你好"}, 2),
    workers_ai_chunk({"content": ' "usage":{} ☁️'}, 3),
    workers_ai_chunk({}, 3, finish="stop"),
]


def cuts(body: bytes, points: Sequence[int]) -> list[bytes]:
    """``body`` cut at these byte offsets."""
    edges = [0, *sorted({p for p in points if 0 < p < len(body)}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


cut_points = st.lists(st.integers(min_value=0, max_value=700), max_size=12)


def session_for(
    chosen: Model = GLM,
    *,
    ai: Ai | None = None,
    stream: bool = True,
    include_usage: bool = False,
    max_tokens: int = 256,
    settings: Settings = CALM,
) -> AnswerUnderTest:
    request = chat_request(chosen, max_tokens=max_tokens)
    facts = (REQUEST_ID, chosen, request.max_tokens)
    framing: ChunkFraming | CompletionFraming
    if stream:
        framing = ChunkFraming(*facts, include_usage=include_usage, created=CREATED)
    else:
        framing = CompletionFraming(*facts, created=CREATED)
    return AnswerUnderTest(
        request,
        settings,
        ai or FakeAi({}),
        request_id=REQUEST_ID,
        framing=framing,
    )


def chunks_of(session: AnswerUnderTest) -> ChunkFraming:
    framing = session.framing
    assert isinstance(framing, ChunkFraming)
    return framing


def end_as_the_session_does(session: AnswerUnderTest, stream: bytes) -> None:
    """Sets the outcome the session would have at the end of ``stream``."""
    reader = UpstreamReader()
    reader.feed(stream)
    reader.finish()
    session.outcome.model = session.first_model
    session.outcome.finish_reason = reader.finish_reason
    session.outcome.usage = reader.usage


def frame(
    pieces: Sequence[bytes], chosen: Model = GLM, *, include_usage: bool = False, **kw: Any
) -> tuple[list[bytes], bytes]:
    """Feeds ``pieces`` by hand; returns what each feed gave and the closing."""
    session = session_for(chosen, include_usage=include_usage, **kw)
    framing = chunks_of(session)
    assert framing.opening(chosen) == b""
    # Split and checked as the delivery does before the framing sees them;
    # the first piece as the first words.
    events = sse.EventSplitter()
    fed = [
        (framing.first_words(chosen, checked) if index == 0 else framing.feed(checked))
        for index, checked in enumerate(
            upstream.model_events(events.feed(piece)) for piece in pieces
        )
    ]
    rest = events.finish()
    left = framing.feed(upstream.model_events(rest + b"\n\n")) if rest.strip() else b""
    end_as_the_session_does(session, b"".join(pieces))
    return fed, left + framing.closing(session.outcome, True)


def assert_chunk(data: Any, model_id: str) -> dict[str, Any]:
    """``data`` is one of our own ``chat.completion.chunk`` objects; returns its choice."""
    assert isinstance(data, dict), data
    assert set(data) == {"id", "object", "created", "model", "choices"}
    assert data["id"] == f"chatcmpl-{REQUEST_ID}"
    assert data["object"] == "chat.completion.chunk"
    assert data["created"] == CREATED
    assert data["model"] == model_id
    (choice,) = data["choices"]
    assert set(choice) == {"index", "delta", "finish_reason"}
    assert choice["index"] == 0
    result: dict[str, Any] = choice
    return result


def model_events(body: bytes) -> list[Event]:
    parsed = parse(body)
    assert parsed.names == [MODEL] * len(parsed.events), parsed.names
    return parsed.events


def assert_openai_stream(body: bytes) -> list[dict[str, Any]]:
    """What every OpenAI client needs: each event a JSON object with a
    ``choices`` list, then exactly one ``[DONE]``, last. Returns the objects."""
    events = model_events(body)
    assert events, "nothing was written"
    assert [e.data for e in events].count("[DONE]") == 1
    assert events[-1].data == "[DONE]"
    assert body.endswith(DONE)
    objects = [e.data for e in events[:-1]]
    for obj in objects:
        assert isinstance(obj, dict), obj
        assert isinstance(obj.get("choices"), list), obj
        assert "response" not in obj
    return objects


def content_of(objects: list[dict[str, Any]]) -> str:
    return "".join(o["choices"][0]["delta"].get("content") or "" for o in objects if o["choices"])


# --- ChunkFraming: GLM and Kimi's chunks, as OpenAI's -------------------------------


def test_openai_chunks_go_out_with_the_role_first_and_the_completions_envelope() -> None:
    fed, closing = frame(GLM_OWN)
    assert fed == [role() + ours(GLM_OWN[0]), ours(GLM_OWN[1]), ours(GLM_OWN[2])]
    assert closing == DONE


def test_workers_ai_chunks_keep_their_bytes_but_the_envelope_and_the_running_usage() -> None:
    fed, closing = frame([b"".join(WORKERS_AI_OWN)])
    (out,) = fed
    assert out == role() + ours(*WORKERS_AI_OWN)
    assert b'"usage":{' not in out.replace(b' \\"usage\\":{}', b"")
    assert b"chatcmpl-9f3e" not in out
    assert b"zai-org/GLM-4.7-Flash" not in out
    assert "想一想".encode() in out
    assert closing == DONE


@given(points=cut_points)
def test_workers_ai_chunks_come_out_the_same_however_they_are_cut(points: list[int]) -> None:
    body = b"".join(WORKERS_AI_OWN)
    fed, closing = frame(cuts(body, points), include_usage=True)
    out = b"".join(fed) + closing
    assert out.startswith(role() + ours(*WORKERS_AI_OWN))
    objects = assert_openai_stream(out)
    # Usage once, last, with the model's own last counts.
    assert [o.get("usage") for o in objects] == [None] * 5 + [usage(9, 3)]
    assert {(o["id"], o["created"], o["model"]) for o in objects} == {
        (f"chatcmpl-{REQUEST_ID}", CREATED, GLM.id)
    }


# Kimi's answer in Chinese: cuts fall inside UTF-8 characters too.
KIMI_OWN = openai_stream(
    ("reasoning", "用户问候。"), ("content", "你好"), ("content", "☁️ edge"), done=False
)


@given(points=cut_points, own=st.sampled_from([GLM_OWN, KIMI_OWN]))
def test_openai_chunks_go_out_byte_for_byte_however_they_are_cut(
    points: list[int], own: list[bytes]
) -> None:
    body = b"".join(own)
    fed, closing = frame(cuts(body, points))
    assert b"".join(fed) == role() + ours(*own)
    assert closing == DONE


@given(points=cut_points)
def test_the_binding_extras_are_dropped_however_the_stream_is_cut(points: list[int]) -> None:
    # GLM_CHUNKS ends with the native usage chunk and [DONE]: a batch that
    # holds one goes event by event, and the model's chunks still pass as bytes.
    fed, closing = frame(cuts(b"".join(GLM_CHUNKS), points))
    assert b"".join(fed) == role() + ours(*GLM_OWN)
    assert closing == DONE


def test_the_binding_usage_chunk_and_done_never_pass() -> None:
    fed, closing = frame(GLM_CHUNKS)
    assert fed == [role() + ours(GLM_OWN[0]), ours(GLM_OWN[1]), ours(GLM_OWN[2]), b"", b""]
    assert b"[DONE]" not in b"".join(fed)
    assert b'"response"' not in b"".join(fed)
    assert closing.count(b"[DONE]") == 1
    assert closing.endswith(DONE)


@pytest.mark.parametrize(
    "usage_only",
    [
        b'data: {"id":"x","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}\n\n',
        b'data: {"id": "x", "choices": [], "usage": {"prompt_tokens": 12}}\n\n',
    ],
    ids=["compact", "spaced"],
)
def test_a_usage_only_chunk_is_held_for_the_end(usage_only: bytes) -> None:
    before, after = GLM_OWN[1], GLM_OWN[2]
    fed, closing = frame([before + usage_only + after])
    assert fed == [role() + ours(before, after)]
    assert closing == DONE


def test_a_usage_only_chunk_in_the_models_own_envelope_is_held_for_the_end() -> None:
    # It begins as the model's other chunks do: only its empty choices set it apart.
    first, before, after = WORKERS_AI_OWN[:3]
    envelope = before[: before.index(b'"choices"')]
    usage_only = envelope + b'"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2}}\n\n'
    fed, _ = frame([first, before + usage_only + after])
    assert fed == [role() + ours(first), ours(before, after)]


def test_the_models_text_saying_done_or_response_changes_nothing() -> None:
    # JSON escapes the quotes: only [DONE] could match, and it only costs a parse.
    tricky = [
        chunk({"content": 'say {"response": "x"} and "choices":[] or [DONE]'}),
        chunk({"content": "data: [DONE]"}, finish_reason="stop"),
    ]
    fed, closing = frame(tricky)
    assert b"".join(fed) == role() + ours(*tricky)
    objects = assert_openai_stream(b"".join(fed) + closing)
    assert content_of(objects) == 'say {"response": "x"} and "choices":[] or [DONE]data: [DONE]'


def test_a_batch_of_native_text_and_openai_chunks_keeps_its_order() -> None:
    mixed = [
        wire.native_chunk("one ").encode(),
        wire.native_chunk("two ").encode(),
        chunk({"content": "three"}),
        wire.native_chunk(" four").encode(),
        chunk({}, finish_reason="stop"),
    ]
    fed, closing = frame([b"".join(mixed)])
    objects = assert_openai_stream(b"".join(fed) + closing)
    assert content_of(objects) == "one two three four"
    # Native text in a row is one chunk of ours; the model's chunks keep their place.
    assert len(objects) == 5
    assert objects[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert objects[1]["choices"][0]["delta"] == {"content": "one two "}
    assert b"".join(fed).count(ours(chunk({"content": "three"}))) == 1


def test_unreadable_events_end_the_answer_and_comments_are_dropped() -> None:
    for bad in (b"data: {oops\n\n", b"data: [1, 2]\n\n", b"event: error\ndata: {}\n\n"):
        with pytest.raises(UpstreamMalformed):
            frame([bad + wire.native_chunk("Hi").encode()], LLAMA)
    fed, _ = frame([b": a comment\n\n" + wire.native_chunk("Hi").encode()], LLAMA)
    events = model_events(b"".join(fed))
    assert len(events) == 2
    assert assert_chunk(events[0].data, LLAMA.id)["delta"] == {"role": "assistant", "content": ""}
    assert assert_chunk(events[1].data, LLAMA.id)["delta"] == {"content": "Hi"}


def test_an_event_left_open_at_the_end_still_goes_out() -> None:
    last = GLM_OWN[2].rstrip(b"\n")
    fed, closing = frame([GLM_OWN[1], last])
    assert fed == [role() + ours(GLM_OWN[1]), b""]
    assert closing == ours(last + b"\n\n") + DONE


def test_a_native_event_left_open_at_the_end_is_translated() -> None:
    fed, closing = frame([b'data: {"response":"Hi"}'], LLAMA)
    assert fed == [role(LLAMA.id)]
    objects = assert_openai_stream(closing)
    assert content_of(objects) == "Hi"
    assert [o["choices"][0]["finish_reason"] for o in objects] == [None, "stop"]


# --- ChunkFraming: Llama's native stream becomes chunks ----------------------------------


def test_native_text_becomes_chat_completion_chunks() -> None:
    fed, closing = frame(LLAMA_CHUNKS, LLAMA)
    objects = assert_openai_stream(b"".join(fed) + closing)
    choices = [assert_chunk(obj, LLAMA.id) for obj in objects]
    assert [c["delta"] for c in choices] == [
        {"role": "assistant", "content": ""},
        {"content": "Hel"},
        {"content": "lo, "},
        {"content": "edge ☁️!"},
        {},
    ]
    assert [c["finish_reason"] for c in choices] == [None, None, None, None, "stop"]
    # The usage chunk and [DONE] gave nothing of their own.
    assert fed[3:] == [b"", b""]


@given(points=cut_points)
def test_native_text_arrives_whole_however_the_stream_is_cut(points: list[int]) -> None:
    body = b"".join(LLAMA_CHUNKS)
    fed, closing = frame(cuts(body, points), LLAMA)
    objects = assert_openai_stream(b"".join(fed) + closing)
    choices = [assert_chunk(obj, LLAMA.id) for obj in objects]
    assert content_of(objects) == "Hello, edge ☁️!"
    assert choices[0]["delta"]["role"] == "assistant"
    assert all("role" not in c["delta"] for c in choices[1:])
    assert choices[-1] == {"index": 0, "delta": {}, "finish_reason": "stop"}


def test_native_events_with_workers_ai_padding_translate_without_it() -> None:
    # Workers AI pads each native event with "p" (against token-length side channels).
    padded = [
        b'data: {"response":"As","p":"abcde"}\n\n',
        b'data: {"response":" an AI","p":"abcdefghijklmnopqrs"}\n\n',
        b'data: {"response":"","p":"ab"}\n\n',
        b'data: {"response":"","usage":{"prompt_tokens":24,"completion_tokens":17,'
        b'"total_tokens":41}}\n\n',
        DONE,
    ]
    fed, closing = frame(padded, LLAMA, include_usage=True)
    out = b"".join(fed) + closing
    objects = assert_openai_stream(out)
    assert content_of(objects) == "As an AI"
    assert b'"p"' not in out
    assert objects[-1]["usage"] == {
        "prompt_tokens": 24,
        "completion_tokens": 17,
        "total_tokens": 41,
    }


def test_a_native_answer_that_used_every_token_ends_with_length() -> None:
    _, closing = frame(native_stream("Hi", usage=usage(12, 64)), LLAMA, max_tokens=64)
    finish = assert_openai_stream(closing)[0]
    assert assert_chunk(finish, LLAMA.id)["finish_reason"] == "length"


def test_the_finish_chunk_is_ours_only_when_the_model_gave_none() -> None:
    _, glm_closing = frame(GLM_CHUNKS)
    assert glm_closing == DONE  # GLM said "stop" in its own chunk
    _, llama_closing = frame(LLAMA_CHUNKS, LLAMA)
    (finish,) = assert_openai_stream(llama_closing)
    assert assert_chunk(finish, LLAMA.id)["finish_reason"] == "stop"


# --- ChunkFraming: the end ----------------------------------------------------------------


@pytest.mark.parametrize(("chosen", "chunks"), [(GLM, GLM_CHUNKS), (LLAMA, LLAMA_CHUNKS)])
def test_include_usage_adds_one_usage_chunk_before_done(chosen: Model, chunks: list[bytes]) -> None:
    fed, closing = frame(chunks, chosen, include_usage=True)
    objects = assert_openai_stream(b"".join(fed) + closing)
    usage_chunks = [o for o in objects if o["choices"] == []]
    assert len(usage_chunks) == 1
    assert objects[-1] is usage_chunks[0]  # the last before [DONE]
    assert usage_chunks[0] == {
        "id": f"chatcmpl-{REQUEST_ID}",
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": chosen.id,
        "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


def test_without_include_usage_no_usage_chunk_comes() -> None:
    _, closing = frame(LLAMA_CHUNKS, LLAMA)
    assert all(o["choices"] for o in assert_openai_stream(closing))


def test_include_usage_without_usage_from_the_model_says_null() -> None:
    _, closing = frame(openai_stream(("content", "Hi")), include_usage=True)
    (usage_chunk,) = assert_openai_stream(closing)
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] is None


@given(points=cut_points, crlf=st.booleans())
def test_crlf_and_cr_streams_come_out_as_the_same_events(points: list[int], crlf: bool) -> None:
    lf = b"".join([*GLM_CHUNKS[:2], *LLAMA_CHUNKS[:2], *GLM_CHUNKS[2:]])
    body = lf.replace(b"\n", b"\r\n") if crlf else lf.replace(b"\n", b"\r")
    fed, closing = frame(cuts(body, points), GLM)
    out = b"".join(fed) + closing
    assert b"\r" not in out
    objects = assert_openai_stream(out)
    assert content_of(objects) == "HelHello, lo"
    # The model's own chunks came through with the completion's envelope.
    for own in GLM_OWN:
        assert json.loads(ours(own)[6:]) in objects


# A legal SSE event may spread its data over several lines (joined by "\n").
MULTILINE = b'data: {"choices":\r\ndata: [{"index":0,"delta":{"content":"Hi"}}]}\r\n\r\n'


def test_a_crlf_event_of_several_data_lines_stays_one_event() -> None:
    fed, _ = frame([MULTILINE])
    (_, event) = model_events(b"".join(fed))
    assert event.data["choices"][0]["delta"] == {"content": "Hi"}


def test_a_native_event_of_several_data_lines_is_read_whole() -> None:
    fed, _ = frame([b'data: {"response":\ndata: "Hi there"}\n\n'], LLAMA)
    (_, event) = model_events(b"".join(fed))
    assert assert_chunk(event.data, LLAMA.id)["delta"] == {"content": "Hi there"}


def test_a_crlf_event_cut_between_its_cr_and_lf_stays_one_event() -> None:
    cut = MULTILINE.index(b"\r") + 1
    fed, _ = frame([MULTILINE[:cut], MULTILINE[cut:]])
    (_, event) = model_events(b"".join(fed))
    assert event.data["choices"][0]["delta"] == {"content": "Hi"}


def test_a_failure_is_one_openai_error_event() -> None:
    framing = chunks_of(session_for())
    failed = framing.failure(DeadlineExceeded(detail="upstream silent for 30 s"), False)
    (event,) = model_events(failed)
    assert event.data == {
        "error": {
            "message": DeadlineExceeded.public_message,
            "type": "server_error",
            "param": None,
            "code": "deadline_exceeded",
        }
    }
    assert b"silent" not in failed
    assert b"[DONE]" not in failed


def test_the_chunk_framing_relays_through_python_and_pings() -> None:
    framing = chunks_of(session_for())
    assert framing.relays_natively is False
    assert framing.ping == sse.PING
    completion = session_for(stream=False).framing
    assert completion.relays_natively is False
    assert completion.ping == b""
    assert completion.opening(GLM) == b""


# --- ChunkFraming through Answer ---------------------------------------------------


@dataclass
class Streamed:
    session: AnswerUnderTest
    sink: FakeSink
    ai: FakeAi

    @property
    def body(self) -> bytes:
        return self.sink.body

    @property
    def pauses(self) -> list[float]:
        """The pauses Python took before its reads, on every model asked."""
        return [p for call in self.ai.calls if call.upstream for p in call.upstream.pauses]


def stream_answer(
    ai: FakeAi, chosen: Model = GLM, *, include_usage: bool = False, **kw: Any
) -> Streamed:
    session = session_for(chosen, ai=ai, include_usage=include_usage, **kw)
    sink = FakeSink()

    async def run() -> None:
        await session.open()
        await asyncio.wait_for(session.stream(sink), HANG_S)

    asyncio.run(run())
    assert sink.closed == 1
    return Streamed(session, sink, ai)


def test_a_glm_answer_streams_its_chunks_then_done() -> None:
    got = stream_answer(FakeAi({GLM.id: GLM_CHUNKS}))
    assert got.body == role() + ours(*GLM_OWN) + DONE
    assert got.session.outcome.finish_reason == "stop"
    assert got.session.outcome.usage == USAGE
    # Python forwards in batches: after each chunk it let the next ones gather.
    assert got.pauses
    assert all(0 < s <= FORWARD_BATCH_S for s in got.pauses)


def test_a_llama_answer_streams_chunks_of_ours() -> None:
    got = stream_answer(FakeAi({LLAMA.id: LLAMA_CHUNKS}), LLAMA, include_usage=True)
    objects = assert_openai_stream(got.body)
    assert content_of(objects) == "Hello, edge ☁️!"
    assert objects[-1]["usage"] == USAGE
    assert [o["choices"][0]["finish_reason"] for o in objects[:-1]][-1] == "stop"


def test_after_a_fallback_the_chunks_name_the_model_that_answered() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: LLAMA_CHUNKS})
    got = stream_answer(ai, include_usage=True)
    assert ai.models_called == [GLM.id, LLAMA.id]
    objects = assert_openai_stream(got.body)
    assert {o["model"] for o in objects} == {LLAMA.id}
    assert content_of(objects) == "Hello, edge ☁️!"


def test_a_failure_mid_stream_ends_with_an_error_event_and_no_done() -> None:
    steps: list[Step] = [GLM_OWN[1], Fail(UpstreamError(detail="network lost: SECRET"))]
    got = stream_answer(FakeAi({GLM.id: steps}))
    events = model_events(got.body)
    assert events[0].data == json.loads(role()[6:])
    assert events[1].data == json.loads(ours(GLM_OWN[1])[6:])
    assert events[-1].data == {
        "error": {
            "message": UpstreamError.public_message,
            "type": "server_error",
            "param": None,
            "code": "upstream_error",
        }
    }
    assert b"[DONE]" not in got.body
    assert b"SECRET" not in got.body


def test_a_whole_json_answer_becomes_one_chunk() -> None:
    whole = {
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "reasoning_content": "Think.",
                    "content": "Answer.",
                },
                "finish_reason": "length",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
    got = stream_answer(FakeAi({GLM.id: [json.dumps(whole).encode()]}))
    objects = assert_openai_stream(got.body)
    first = assert_chunk(objects[0], GLM.id)
    assert first["delta"] == {
        "role": "assistant",
        "reasoning_content": "Think.",
        "content": "Answer.",
    }
    assert got.session.outcome.finish_reason == "length"


def test_a_whole_json_answer_tells_the_client_why_it_ended() -> None:
    whole = {"choices": [{"message": {"content": "Hi."}, "finish_reason": "length"}]}
    got = stream_answer(FakeAi({GLM.id: [json.dumps(whole).encode()]}))
    reasons = [o["choices"][0]["finish_reason"] for o in assert_openai_stream(got.body)]
    assert "length" in reasons


def test_a_whole_json_answer_with_tool_calls_gives_them_with_their_index() -> None:
    calls = [
        {"id": "call_1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"id": "call_2", "type": "function", "function": {"name": "b", "arguments": "[]"}},
    ]
    whole = {"choices": [{"message": {"content": None, "tool_calls": calls}}]}
    got = stream_answer(FakeAi({GLM.id: [json.dumps(whole).encode()]}))
    delta = assert_chunk(assert_openai_stream(got.body)[0], GLM.id)["delta"]
    assert delta == {
        "role": "assistant",
        "tool_calls": [{"index": 0, **calls[0]}, {"index": 1, **calls[1]}],
    }


def test_a_whole_native_answer_becomes_one_chunk_and_a_finish() -> None:
    got = stream_answer(FakeAi({LLAMA.id: [b'{"response": "Hi there", "usage": {}}']}), LLAMA)
    objects = assert_openai_stream(got.body)
    choices = [assert_chunk(obj, LLAMA.id) for obj in objects]
    assert [c["delta"] for c in choices] == [{"role": "assistant", "content": "Hi there"}, {}]
    assert choices[-1]["finish_reason"] == "stop"


# --- CompletionFraming through Answer.whole() ------------------------------------


def completed(session: AnswerUnderTest) -> dict[str, Any]:
    """Opens ``session`` and reads its whole answer (raising what ended it)."""

    async def run() -> None:
        await session.open()
        await asyncio.wait_for(session.whole(), HANG_S)

    asyncio.run(run())
    completion = session.framing
    assert isinstance(completion, CompletionFraming)
    return completion.result(session.outcome)


def complete(ai: FakeAi, chosen: Model = GLM, **kw: Any) -> dict[str, Any]:
    body = completed(session_for(chosen, ai=ai, stream=False, **kw))
    json.dumps(body)  # it is JSON
    return body


def test_a_completion_holds_the_answer_and_its_usage() -> None:
    body = complete(FakeAi({GLM.id: GLM_CHUNKS}))
    assert body == {
        "id": f"chatcmpl-{REQUEST_ID}",
        "object": "chat.completion",
        "created": CREATED,
        "model": GLM.id,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Hello", "reasoning_content": "Hmm."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


def test_a_completion_without_reasoning_has_no_reasoning_field() -> None:
    body = complete(FakeAi({GLM.id: openai_stream(("content", "Hi"))}))
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hi"}
    assert body["usage"] is None


TOOL_PIECES = [
    chunk({"role": "assistant"}),
    chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": ""},
                }
            ]
        }
    ),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"wo'}}]}),
    chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'rd": "edge"}'}}]}),
    chunk(
        {
            "tool_calls": [
                {"index": 1, "id": "call_2", "function": {"name": "now", "arguments": "{}"}}
            ]
        }
    ),
    chunk({}, finish_reason="tool_calls", usage=usage(30, 9)),
    wire.DONE.encode(),
]


def test_a_completion_assembles_streamed_tool_calls() -> None:
    body = complete(FakeAi({GLM.id: TOOL_PIECES}))
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,  # only tool calls: no text
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "lookup", "arguments": '{"word": "edge"}'},
            },
            {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": "{}"}},
        ],
    }
    assert body["usage"] == usage(30, 9)


@given(points=st.lists(st.integers(0, 1500), max_size=8))
def test_tool_calls_assemble_however_the_stream_is_cut(points: list[int]) -> None:
    body = complete(FakeAi({GLM.id: cuts(b"".join(TOOL_PIECES), points)}))
    calls = body["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["arguments"] for c in calls] == ['{"word": "edge"}', "{}"]


def test_a_completion_keeps_text_next_to_tool_calls() -> None:
    pieces = [chunk({"content": "Let me look."}), *TOOL_PIECES[1:]]
    message = complete(FakeAi({GLM.id: pieces}))["choices"][0]["message"]
    assert message["content"] == "Let me look."
    assert [c["id"] for c in message["tool_calls"]] == ["call_1", "call_2"]


@pytest.mark.parametrize(("completion_tokens", "reason"), [(3, "stop"), (256, "length")])
def test_a_native_completion_says_why_it_ended(completion_tokens: int, reason: str) -> None:
    chunks = native_stream("Hel", "lo", usage=usage(12, completion_tokens))
    body = complete(FakeAi({LLAMA.id: chunks}), LLAMA)
    assert body["model"] == LLAMA.id
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello"}
    assert body["choices"][0]["finish_reason"] == reason
    assert finish_reason_of(body) == reason


def finish_reason_of(body: dict[str, Any]) -> str:
    reason: str = body["choices"][0]["finish_reason"]
    return reason


def test_a_completion_from_a_whole_json_answer() -> None:
    whole = {
        "choices": [{"message": {"content": "Whole.", "reasoning_content": "R"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2},
    }
    body = complete(FakeAi({GLM.id: [json.dumps(whole).encode()]}))
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "Whole.",
        "reasoning_content": "R",
    }
    assert body["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def test_a_completion_after_a_fallback_names_the_model_that_answered() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: LLAMA_CHUNKS})
    body = complete(ai)
    assert body["model"] == LLAMA.id
    assert body["choices"][0]["message"]["content"] == "Hello, edge ☁️!"


def test_a_failure_mid_answer_raises_and_is_the_outcome() -> None:
    ai = FakeAi({GLM.id: [GLM_OWN[1], Fail(UpstreamError(detail="lost"))]})
    session = session_for(GLM, ai=ai, stream=False)

    async def run() -> None:
        await session.open()
        await session.whole()

    with pytest.raises(UpstreamError):
        asyncio.run(run())
    assert isinstance(session.outcome.error, UpstreamError)
    assert ai.calls[0].cancelled


def test_an_unexpected_failure_mid_answer_is_an_edgechat_error() -> None:
    ai = FakeAi({GLM.id: [GLM_OWN[1], Fail(RuntimeError("bug"))]})
    session = session_for(GLM, ai=ai, stream=False)

    async def run() -> None:
        await session.open()
        await session.whole()

    with pytest.raises(EdgechatError) as caught:
        asyncio.run(run())
    assert type(caught.value) is EdgechatError
    assert session.outcome.error is caught.value


def test_a_model_that_never_speaks_fails_the_completion_with_the_deadline() -> None:
    fast = Settings(first_token_timeout_s=0.05, idle_timeout_s=0.05, total_timeout_s=1)
    ai = FakeAi({GLM.id: [STALL], LLAMA.id: [STALL]})
    session = session_for(GLM, ai=ai, stream=False, settings=fast)
    with pytest.raises(DeadlineExceeded):
        completed(session)
    assert ai.models_called == [GLM.id, LLAMA.id]  # each had its first-token deadline
    assert all(call.cancelled for call in ai.calls)


class ReadCounter:
    """``ports.Ai`` over a ``FakeAi`` that counts the session's ``read`` calls."""

    def __init__(self, ai: FakeAi) -> None:
        self._ai = ai
        self.reads = 0

    async def stream(self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]) -> Any:
        upstream = await self._ai.stream(model_id, inputs, options)
        counter = self

        class Counted:
            async def read(self, within: float) -> Any:
                counter.reads += 1
                return await upstream.read(within)

            async def relay(self, sink: Any) -> Any:
                return await upstream.relay(sink)

            async def forward(self, sink: Any) -> Any:
                return await upstream.forward(sink)

            async def cancel(self) -> None:
                await upstream.cancel()

        return Counted()


SILENT_THEN_HI = [Delay(0.3), *openai_stream(("content", "Hi"))]
# Heartbeats every 50 ms: a 0.3 s silence is six of them.
PINGING = Settings(heartbeat_s=0.05, first_token_timeout_s=5, idle_timeout_s=5, total_timeout_s=9)


def test_a_silent_model_is_read_once_per_heartbeat_when_streaming() -> None:
    counter = ReadCounter(FakeAi({GLM.id: SILENT_THEN_HI}))
    session = session_for(GLM, ai=counter, settings=PINGING)
    sink = FakeSink()

    async def run() -> None:
        await session.open()
        await asyncio.wait_for(session.stream(sink), HANG_S)

    asyncio.run(run())
    assert parse(sink.body).pings >= 1
    assert counter.reads < 50


def test_a_silent_model_is_not_read_in_a_busy_loop_for_a_whole_completion() -> None:
    # CompletionFraming has no heartbeat (ping b""): a silence must not turn
    # the first-words loop into reads with a bound <= 0 once HEARTBEAT_S passed.
    counter = ReadCounter(FakeAi({GLM.id: SILENT_THEN_HI}))
    session = session_for(GLM, ai=counter, stream=False, settings=PINGING)
    assert completed(session)["choices"][0]["message"]["content"] == "Hi"
    # Six heartbeat intervals of silence: a few wakes at most, not thousands.
    assert counter.reads < 50


def test_a_refused_call_raises_from_open() -> None:
    ai = FakeAi({GLM.id: UpstreamMalformed(detail="x"), LLAMA.id: LLAMA_CHUNKS})
    session = session_for(GLM, ai=ai, stream=False)
    with pytest.raises(UpstreamMalformed):
        asyncio.run(session.open())
    assert ai.models_called == [GLM.id]  # not worth a fallback


# --- error_body, models_json, finish_reason --------------------------------------------


@pytest.mark.parametrize(
    ("error", "status", "kind", "code", "param"),
    [
        (BadRequest(public="n must be 1."), 400, "invalid_request_error", "invalid_request", None),
        (Unauthorized(), 401, "authentication_error", "unauthorized", None),
        (ApiDisabled(), 403, "permission_error", "api_disabled", None),
        (Forbidden(), 403, "permission_error", "cross_site_request", None),
        (NotFound(), 404, "not_found_error", "not_found", None),
        (MethodNotAllowed(allow=["GET"]), 405, "invalid_request_error", "method_not_allowed", None),
        (PayloadTooLarge(), 413, "invalid_request_error", "payload_too_large", None),
        (UpstreamRequestTooLarge(), 413, "invalid_request_error", "conversation_too_large", None),
        (UnsupportedMediaType(), 415, "invalid_request_error", "unsupported_media_type", None),
        (RateLimited(), 429, "rate_limit_error", "rate_limited", None),
        (UpstreamQuotaExhausted(), 429, "rate_limit_error", "quota_exhausted", None),
        (UpstreamRateLimited(), 429, "rate_limit_error", "upstream_rate_limited", None),
        (EdgechatError(), 500, "server_error", "internal_error", None),
        (Misconfigured(), 500, "server_error", "misconfigured", None),
        (UpstreamError(), 502, "server_error", "upstream_error", None),
        (UpstreamBusy(), 503, "server_error", "model_busy", None),
        (StoreUnavailable(), 503, "server_error", "store_unavailable", None),
        (UpstreamTimeout(), 504, "server_error", "upstream_timeout", None),
        (DeadlineExceeded(), 504, "server_error", "deadline_exceeded", None),
    ],
)  # fmt: skip
def test_error_body_for_each_family(
    error: EdgechatError, status: int, kind: str, code: str, param: str | None
) -> None:
    assert error_body(error) == (
        status,
        {"error": {"message": error.public_message, "type": kind, "param": param, "code": code}},
    )


def test_error_body_of_an_unknown_model_is_a_404_naming_the_param() -> None:
    status, body = error_body(ModelNotFound(public="model is not available.", detail="gpt-4o"))
    assert status == 404
    assert body == {
        "error": {
            # The OpenAI API lists its models at /v1/models, not /api/models.
            "message": "The model is not available; GET /v1/models lists the models you can use.",
            "type": "not_found_error",
            "param": "model",
            "code": "model_not_found",
        }
    }


def test_error_body_gives_the_public_message_never_the_detail() -> None:
    error = UpstreamBusy(detail="3040: Capacity temporarily exceeded on AI binding SECRET")
    _, body = error_body(error)
    assert "SECRET" not in json.dumps(body)
    assert body["error"]["message"] == UpstreamBusy.public_message


def test_models_json_lists_the_allowed_models_by_id_in_order() -> None:
    body = models_json(("llama", "glm", "@cf/zai-org/glm-4.7-flash", "nonsense"))
    assert body == {
        "object": "list",
        "data": [
            {"id": LLAMA.id, "object": "model", "created": CATALOG_CREATED, "owned_by": "llama"},
            {"id": GLM.id, "object": "model", "created": CATALOG_CREATED, "owned_by": "glm"},
            # The embedding models follow the chat models.
            {"id": BGE_M3, "object": "model", "created": CATALOG_CREATED, "owned_by": "baai"},
        ],
    }


def test_models_json_knows_every_catalog_model() -> None:
    ids = [entry["id"] for entry in models_json([m.alias for m in CATALOG])["data"]]
    assert ids == [m.id for m in CATALOG] + [BGE_M3]


@pytest.mark.parametrize(
    ("said", "counts", "expected"),
    [
        ("tool_calls", USAGE, "tool_calls"),
        ("stop", usage(1, 500), "stop"),  # the model's word wins
        (None, usage(1, 99), "stop"),
        (None, usage(1, 100), "length"),
        (None, None, "stop"),
    ],
)
def test_finish_reason(said: str | None, counts: Usage | None, expected: str) -> None:
    outcome = Outcome(model=LLAMA, finish_reason=said, usage=counts)
    assert finish_reason(outcome, 100) == expected


# --- the /v1 routes through app.handle -------------------------------------------------

TOKEN = "tok-123-0123456789"
AUTH = {
    "content-type": "application/json",
    "authorization": f"Bearer {TOKEN}",
    "cf-connecting-ip": "203.0.113.7",
}
HELLO_BODY = {"model": "glm", "messages": [{"role": "user", "content": "Hi"}]}


def incoming(method: str, path: str, headers: dict[str, str] | None = None) -> Incoming:
    return Incoming(method=method, path=path, origin=SELF, headers=headers or {})


def v1(
    *,
    ai: FakeAi | None = None,
    body: object = HELLO_BODY,
    token: str | None = TOKEN,
    **vars: object,
) -> FakePlatform:
    if token is not None:
        vars["API_TOKEN"] = token
    return FakePlatform(
        vars=vars,
        body=json.dumps(body).encode(),
        ai=ai or FakeAi({GLM.id: GLM_CHUNKS, LLAMA.id: LLAMA_CHUNKS}),
    )


def serve(request: Incoming, where: FakePlatform) -> tuple[Reply, bytes]:
    """``handle`` and, for a stream, its whole body."""

    async def run() -> tuple[Reply, bytes]:
        reply = await app.handle(request, where)
        sink = FakeSink()
        if reply.stream is not None:
            await asyncio.wait_for(reply.stream(sink), HANG_S)
        return reply, reply.body or sink.body

    return asyncio.run(run())


def post(where: FakePlatform, headers: dict[str, str] | None = None) -> tuple[Reply, bytes]:
    return serve(incoming("POST", "/v1/chat/completions", {**AUTH, **(headers or {})}), where)


def openai_error(reply: Reply, body: bytes) -> dict[str, Any]:
    """The OpenAI error shape, exactly: ``{"error": {message, type, param, code}}``."""
    assert reply.headers["Content-Type"] == "application/json"
    parsed = json.loads(body)
    assert set(parsed) == {"error"}
    assert set(parsed["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = parsed["error"]
    return error


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("POST", "/v1/embeddings")],
)
def test_without_api_token_the_api_is_off(method: str, path: str) -> None:
    where = v1(token=None)
    reply, body = serve(incoming(method, path, AUTH), where)
    assert reply.status == 403
    assert openai_error(reply, body) == {
        "message": ApiDisabled.public_message,
        "type": "permission_error",
        "param": None,
        "code": "api_disabled",
    }
    assert where.ai.calls == []
    assert where.body_reads == []


@pytest.mark.parametrize(
    "authorization", [None, "Bearer wrong", f"Basic {TOKEN}", f"Bearer {TOKEN}x", TOKEN]
)
@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("POST", "/v1/embeddings")],
)
def test_a_missing_or_wrong_token_is_401(authorization: str | None, method: str, path: str) -> None:
    headers = {k: v for k, v in AUTH.items() if k != "authorization"}
    if authorization is not None:
        headers["authorization"] = authorization
    where = v1()
    reply, body = serve(incoming(method, path, headers), where)
    assert reply.status == 401
    assert reply.headers["WWW-Authenticate"] == 'Bearer realm="edgechat"'
    error = openai_error(reply, body)
    assert (error["type"], error["code"], error["param"]) == (
        "authentication_error",
        "unauthorized",
        None,
    )
    assert TOKEN.encode() not in body
    assert where.ai.calls == []


def test_v1_models_lists_the_allowed_models_by_id() -> None:
    where = v1(MODELS="llama,glm", DEFAULT_MODEL="glm", FALLBACK_CHAIN="glm")
    reply, body = serve(incoming("GET", "/v1/models", {"authorization": f"bearer {TOKEN}"}), where)
    assert reply.status == 200
    assert json.loads(body) == models_json(("llama", "glm"))
    assert [entry["id"] for entry in json.loads(body)["data"]] == [LLAMA.id, GLM.id, BGE_M3]


@pytest.mark.parametrize(
    ("method", "path", "status", "kind", "code"),
    [
        ("GET", "/v1/nothing", 404, "not_found_error", "not_found"),
        ("GET", "/v1/chat/completions", 405, "invalid_request_error", "method_not_allowed"),
        ("POST", "/v1/models", 405, "invalid_request_error", "method_not_allowed"),
    ],
)
def test_every_v1_error_has_the_openai_shape(
    method: str, path: str, status: int, kind: str, code: str
) -> None:
    reply, body = serve(incoming(method, path, AUTH), v1())
    assert reply.status == status
    error = openai_error(reply, body)
    assert (error["type"], error["code"]) == (kind, code)
    if status == 405:
        assert reply.headers["Allow"]


def test_chat_errors_keep_their_own_shape() -> None:
    reply, body = serve(incoming("GET", "/chat", AUTH), v1())
    assert reply.status == 405
    assert json.loads(body) == {
        "error": {"code": "method_not_allowed", "message": "Method not allowed."}
    }


def test_a_bad_body_is_an_openai_400() -> None:
    where = v1(body={"messages": [{"role": "user", "content": "Hi"}], "n": 3})
    reply, body = post(where)
    assert reply.status == 400
    assert openai_error(reply, body) == {
        "message": "n must be 1: edgechat returns one choice.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request",
    }
    assert where.ai.calls == []


def test_an_unknown_model_is_an_openai_404_naming_the_param() -> None:
    where = v1(body={"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]})
    reply, body = post(where)
    assert reply.status == 404
    error = openai_error(reply, body)
    assert (error["type"], error["code"], error["param"]) == (
        "not_found_error",
        "model_not_found",
        "model",
    )
    assert b"gpt-4o" not in body


def test_a_tool_request_for_llama_is_400_naming_the_model() -> None:
    tools = [{"type": "function", "function": {"name": "f"}}]
    where = v1(body={**HELLO_BODY, "model": "llama", "tools": tools})
    reply, body = post(where)
    assert reply.status == 400
    assert openai_error(reply, body)["message"] == f"tools is not supported by {LLAMA.id}."


def test_a_body_that_is_not_json_typed_is_an_openai_415() -> None:
    reply, body = post(v1(), {"content-type": "text/plain"})
    assert reply.status == 415
    assert openai_error(reply, body)["type"] == "invalid_request_error"


def test_a_rate_limited_client_gets_an_openai_429_with_retry_after() -> None:
    where = v1()
    where.rate_limiter = FakeRateLimiter(allow=0)
    reply, body = post(where)
    assert reply.status == 429
    assert reply.headers["Retry-After"] == "60"
    assert openai_error(reply, body)["type"] == "rate_limit_error"
    assert where.ai.calls == []


def test_a_model_that_fails_before_answering_is_an_openai_5xx() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040 SECRET", retry_after=5)})
    reply, body = post(v1(ai=ai, FALLBACK_CHAIN="glm"))
    assert reply.status == 503
    assert reply.headers["Retry-After"] == "5"
    error = openai_error(reply, body)
    assert (error["type"], error["code"]) == ("server_error", "model_busy")
    assert b"SECRET" not in body


def test_the_fallback_skips_a_model_that_cannot_take_the_request() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: LLAMA_CHUNKS})
    tools = [{"type": "function", "function": {"name": "f"}}]
    reply, body = post(v1(ai=ai, body={**HELLO_BODY, "tools": tools}))
    assert ai.models_called == [GLM.id]  # Llama reads no tools: no fallback
    assert reply.status == 503
    assert openai_error(reply, body)["code"] == "model_busy"


def test_the_fallback_takes_a_model_that_can() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: LLAMA_CHUNKS})
    _, body = post(v1(ai=ai, body={**HELLO_BODY, "seed": 5}))
    assert ai.models_called == [GLM.id, LLAMA.id]
    assert ai.calls[1].inputs["seed"] == 5
    assert json.loads(body)["model"] == LLAMA.id


def test_a_bad_configuration_is_an_openai_500() -> None:
    reply, body = serve(incoming("GET", "/v1/models", AUTH), v1(CACHE_MODE="sometimes"))
    assert reply.status == 500
    assert openai_error(reply, body) == {
        "message": Misconfigured.public_message,
        "type": "server_error",
        "param": None,
        "code": "misconfigured",
    }
    assert b"CACHE_MODE" not in body


def test_a_preflight_from_an_allowed_origin_reaches_the_api() -> None:
    partner = "https://partner.example.org"
    headers = {"origin": partner}
    reply, _ = serve(
        incoming("OPTIONS", "/v1/chat/completions", headers), v1(ALLOWED_ORIGINS=partner)
    )
    assert reply.status == 204
    assert reply.headers["Access-Control-Allow-Origin"] == partner
    assert "authorization" in reply.headers["Access-Control-Allow-Headers"]


def test_a_cross_site_browser_is_refused_in_the_openai_shape() -> None:
    reply, body = post(v1(), {"origin": "https://evil.example"})
    assert reply.status == 403
    error = openai_error(reply, body)
    assert (error["type"], error["code"]) == ("permission_error", "cross_site_request")


def test_a_streamed_completion_through_the_app() -> None:
    where = v1(body={**HELLO_BODY, "stream": True, "stream_options": {"include_usage": True}})
    reply, body = post(where)
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    objects = assert_openai_stream(body)
    assert content_of(objects) == "Hello"
    assert objects[-1]["usage"] == USAGE
    request_id = reply.headers["X-Request-Id"]
    assert objects[-1]["id"] == f"chatcmpl-{request_id}"
    # The model got the caller's messages as they are, with no system prompt of ours.
    assert where.ai.calls[0].inputs["messages"] == [{"role": "user", "content": "Hi"}]


def test_a_whole_completion_through_the_app() -> None:
    reply, body = post(v1())
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json"
    completion = json.loads(body)
    assert completion["object"] == "chat.completion"
    assert completion["id"] == "chatcmpl-" + reply.headers["X-Request-Id"]
    assert completion["choices"][0]["message"]["content"] == "Hello"
    assert completion["usage"] == USAGE


def test_the_api_logs_one_line_per_request(capsys: pytest.CaptureFixture[str]) -> None:
    post(v1(body={**HELLO_BODY, "messages": [{"role": "user", "content": "PROMPT-MARKER"}]}))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert record["route"] == "/v1/chat/completions"
    assert record["status"] == 200
    assert record["model"] == GLM.id
    assert "PROMPT-MARKER" not in lines[0]


# --- AI Gateway options ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "skip"),
    [({}, False), ({"cache-control": "no-cache"}, True), ({"cache-control": "No-Cache, x"}, True)],
)
def test_with_a_gateway_every_call_names_it(headers: dict[str, str], skip: bool) -> None:
    where = v1(AI_GATEWAY_ID="my-gateway", CACHE_TTL_S="120")
    reply, _ = post(where, headers)
    assert reply.status == 200
    # GLM has Llama after it in the chain: busy, it hands over at once.
    assert [_without_affinity(call.options) for call in where.ai.calls] == [
        {"gateway": {"id": "my-gateway", "skipCache": skip, "cacheTtl": 120}, "rejectIfBusy": True}
    ]


def _without_affinity(options: dict[str, Any]) -> dict[str, Any]:
    """A model call's options but the conversation's affinity header, which
    every model call carries (its own tests: test_affinity, the API's)."""
    rest = {name: value for name, value in options.items() if name != "extraHeaders"}
    assert list(options["extraHeaders"]) == ["x-session-affinity"]
    return rest


def test_the_gateway_options_are_the_same_for_chat() -> None:
    where = v1(AI_GATEWAY_ID="gw", body={"messages": [{"role": "user", "content": "Hi"}]})
    headers = {**AUTH, "cache-control": "no-cache"}
    serve(incoming("POST", "/chat", headers), where)
    assert _without_affinity(where.ai.calls[0].options) == {
        "gateway": {"id": "gw", "skipCache": True, "cacheTtl": 86_400},
        "rejectIfBusy": True,
    }


def test_without_a_gateway_only_reject_if_busy_is_sent() -> None:
    where = v1()
    post(where, {"cache-control": "no-cache"})
    assert [_without_affinity(call.options) for call in where.ai.calls] == [{"rejectIfBusy": True}]


def test_the_gateway_options_follow_a_fallback() -> None:
    ai = FakeAi({GLM.id: UpstreamBusy(detail="3040"), LLAMA.id: LLAMA_CHUNKS})
    where = v1(ai=ai, AI_GATEWAY_ID="gw")
    _, body = post(where)
    assert json.loads(body)["model"] == LLAMA.id
    assert [call.options["gateway"]["id"] for call in ai.calls] == ["gw", "gw"]


def test_python_reads_a_long_stream_in_batches_not_per_token() -> None:
    # 600 tokens arriving back to back: after the first words Python forwards
    # the rest in batches, and each batch takes everything that arrived.
    tokens = [("content", f" w{i}") for i in range(600)]
    ai = FakeAi({GLM.id: openai_stream(*tokens, usage=USAGE)})
    session = session_for(GLM, ai=ai)
    sink = FakeSink()

    async def run() -> None:
        await session.open()
        await asyncio.wait_for(session.stream(sink), HANG_S)

    asyncio.run(run())
    (call,) = ai.calls
    assert call.upstream is not None
    assert call.upstream.coalesced
    assert call.upstream.reads < 10
    text = parse(sink.body).text()
    assert text == "".join(piece for _, piece in tokens)


def test_a_cut_off_stream_is_an_error_on_v1() -> None:
    # Neither a finish reason nor [DONE]: /chat says finish_reason null, the
    # OpenAI API can only say it with an error.
    cut = native_stream("Half", " an answ", done=False)
    streamed = session_for(LLAMA, ai=FakeAi({LLAMA.id: cut}))
    sink = FakeSink()

    async def run_stream() -> None:
        await streamed.open()
        await asyncio.wait_for(streamed.stream(sink), HANG_S)

    asyncio.run(run_stream())
    events = parse(sink.body).events
    assert events[-1].data["error"]["code"] == "upstream_malformed"
    assert b"[DONE]" not in sink.body
    assert parse(sink.body).text() == "Half an answ"

    whole = session_for(LLAMA, ai=FakeAi({LLAMA.id: list(cut)}), stream=False)
    with pytest.raises(UpstreamMalformed):
        completed(whole)


def test_batches_grow_with_the_answer_up_to_a_second() -> None:
    assert forward_batch(0.0) == FORWARD_BATCH_S
    assert forward_batch(0.5) == FORWARD_BATCH_S
    assert forward_batch(5.0) == pytest.approx(0.5)
    assert forward_batch(30.0) == FORWARD_BATCH_MAX_S
    # A 40 s answer at a model's pace takes some 60 wakes, not 400.
    t, wakes = 0.0, 0
    while t < 40.0:
        t += forward_batch(t)
        wakes += 1
    assert 50 < wakes < 70
