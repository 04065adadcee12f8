"""The Responses API: a body translated into the conversation it means
(``validation.parse_responses_request``) and the framings (``responses``),
fed by hand as the delivery feeds them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgechat.answer import upstream
from edgechat.answer.framing import Outcome, Whole
from edgechat.apis.responses import ResponseDocument, ResponseEvents
from edgechat.apis.responses_body import parse_responses_request
from edgechat.core import sse
from edgechat.core.errors import BadRequest
from edgechat.core.faults import UpstreamBusy, UpstreamMalformed
from edgechat.core.requests import Limits
from tests.kit import upstream as wire
from tests.unit.fakes import model, usage

GLM, LLAMA = model("glm"), model("llama")
ALLOWED = ("glm", "kimi", "llama")
MARKER = "SECRET-MARKER-r5"


def parse_body(body: dict[str, Any]) -> Any:
    return parse_responses_request(json.dumps(body).encode(), Limits(), ALLOWED, "glm")


def refused(body: dict[str, Any]) -> str:
    with pytest.raises(BadRequest) as caught:
        parse_body(body)
    assert MARKER not in caught.value.public_message
    return caught.value.public_message


# --- the body -------------------------------------------------------------------------


def test_instructions_and_input_become_the_conversation() -> None:
    parsed = parse_body(
        {
            "model": "kimi",
            "instructions": "Be brief.",
            "input": [
                {"role": "user", "content": "Weather?"},
                {"type": "reasoning", "content": [{"type": "reasoning_text", "text": "Ask it."}]},
                {"type": "function_call", "call_id": "c1", "name": "w", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "w", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "21"},
                {"type": "function_call_output", "call_id": "c2", "output": "22"},
            ],
            "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
            "tool_choice": {"type": "function", "name": "w"},
            "max_output_tokens": 99,
            "stream": True,
        }
    )
    chat = parsed.chat
    sent = chat.inputs(chat.model, "")
    call = {"type": "function", "function": {"name": "w", "arguments": "{}"}}
    assert sent["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", **call}, {"id": "c2", **call}],
            "reasoning_content": "Ask it.",
        },
        {"role": "tool", "content": "21", "tool_call_id": "c1"},
        {"role": "tool", "content": "22", "tool_call_id": "c2"},
    ]
    assert sent["tools"] == [
        {"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}
    ]
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "w"}}
    assert (chat.max_tokens, parsed.stream) == (99, True)


def test_no_tools_is_no_tools() -> None:
    # What agent SDKs send for an agent without tools.
    chat = parse_body({"input": "Hi", "tools": [], "tool_choice": "auto", "include": []}).chat
    assert "tools" not in chat.params
    assert "tool_choice" not in chat.params


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        (
            {"input": "Hi", "previous_response_id": MARKER},
            "previous_response_id is not supported: edgechat stores no conversations; "
            "send the whole conversation in input.",
        ),
        ({}, "input is required."),
        ({"input": "Hi", "include": [3]}, "include must be a list of strings."),
        ({"input": "Hi", "truncation": "sometimes"}, 'truncation must be "auto" or "disabled".'),
        ({"input": []}, "input must be a string or a non-empty list of items."),
        ({"input": "Hi", "instructions": 3}, "instructions must be a string."),
        (
            {"input": [{"type": MARKER}]},
            "input[0].type must be message, function_call, function_call_output or reasoning.",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_file"}]}]},
            "input[0].content[0].type must be input_text, output_text or input_image.",
        ),
        (
            {"input": [{"type": "function_call", "call_id": "c"}]},
            "input[0] needs call_id, name and arguments as strings.",
        ),
        (
            {"input": "Hi", "tools": [{"type": "web_search"}]},
            "tools[0] must be a function tool; built-in tools are not supported.",
        ),
        (
            {"input": "Hi", "tools": [{"type": "file_search", "vector_store_ids": ["v"]}]},
            "tools[0]: file_search is not supported; ask a knowledge base with "
            '"edgechat": {"knowledge": "<base id>"} (GET /api/knowledge lists them).',
        ),
        (
            {"input": "Hi", "edgechat": {"compare_with": ["kimi"]}},
            'edgechat must be {"knowledge": "<base id>"}.',
        ),
        ({"input": "Hi", "text": {"format": "json"}}, 'text must be {"format": {"type": ...}}.'),
        (
            {"input": "Hi", "reasoning": {"effort": "max"}},
            "reasoning_effort must be one of low, medium, high.",
        ),
        (
            {"input": "Hi", "background": True},
            "The request has a field edgechat does not support; supported: model, input, "
            "instructions, stream, max_output_tokens, temperature, top_p, tools, tool_choice, "
            "text, reasoning, user, store, metadata, parallel_tool_calls, edgechat, include, "
            "truncation, previous_response_id.",
        ),
    ],
)
def test_each_rule_is_a_400_naming_it(body: dict[str, Any], rule: str) -> None:
    assert refused(body) == rule


# --- the streamed framing --------------------------------------------------------------


def framing(chosen: Any = GLM) -> ResponseEvents:
    return ResponseEvents("r1", chosen, 64, created=1_800_000_000)


def feed(events: ResponseEvents, pieces: list[str]) -> list[bytes]:
    """Each piece as the delivery gives it: split and checked, the first as the first words."""
    splitter = sse.EventSplitter()
    out = []
    for index, piece in enumerate(pieces):
        checked = upstream.model_events(splitter.feed(piece.encode()))
        out.append(events.first_words(GLM, checked) if index == 0 else events.feed(checked))
    return out


def typed(body: bytes) -> list[tuple[str, dict[str, Any]]]:
    """The events as the Responses API writes them: ``event: <type>`` and one
    ``data:`` line of JSON whose ``type`` is the same."""
    seen = []
    assert body.endswith(b"\n\n")
    for event in body.decode().split("\n\n")[:-1]:
        name_line, data_line = event.split("\n")
        name = name_line.removeprefix("event: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        seen.append((name, data))
    return seen


def tool_chunk(piece: dict[str, Any]) -> str:
    return (
        "data: "
        + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]})
        + "\n\n"
    )


@given(
    pieces=st.lists(
        st.tuples(st.sampled_from(["content", "reasoning"]), st.text(min_size=1, max_size=8)),
        min_size=1,
        max_size=10,
    ),
    compact=st.booleans(),
)
def test_any_text_in_a_batch_comes_out_as_the_model_wrote_it(
    pieces: list[tuple[str, str]], compact: bool
) -> None:
    # Quotes, backslashes and words such as "reasoning" inside the text, in
    # batches of content alone and of both kinds, compact JSON or not.
    def chunk(kind: str, text: str) -> str:
        body = {"choices": [{"index": 0, "delta": {kind: text}}]}
        if kind == "reasoning":
            body = {"choices": [{"index": 0, "delta": {"reasoning_content": text}}]}
        return "data: " + json.dumps(body, separators=(",", ":") if compact else None) + "\n\n"

    events = framing()
    fed = feed(events, ["".join(chunk(kind, text) for kind, text in pieces)])
    seen = typed(b"".join(fed))
    said = {
        kind: "".join(data["delta"] for name, data in seen if name == f"response.{event}.delta")
        for kind, event in (("content", "output_text"), ("reasoning", "reasoning_text"))
    }
    for kind in ("content", "reasoning"):
        assert said[kind] == "".join(text for k, text in pieces if k == kind)


def test_a_batch_of_text_is_one_delta_event_per_item() -> None:
    events = framing()
    opening = events.opening(GLM)
    thought = wire.openai_chunk(reasoning="Hm, ") + wire.openai_chunk(reasoning="well.")
    text = "".join(wire.openai_chunk(content=t) for t in ("Hel", "lo", "!"))
    fed = feed(events, [thought + text, *wire.openai_end(9, 5)])
    closing = events.closing(Outcome(model=GLM, usage=usage(9, 5), finish_reason="stop"), True)
    seen = typed(opening + b"".join(fed) + closing)
    assert [name for name, _ in seen] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [data["sequence_number"] for _, data in seen] == list(range(1, 14))
    deltas = [data["delta"] for name, data in seen if name.endswith(".delta")]
    assert deltas == ["Hm, well.", "Hello!"]
    completed = seen[-1][1]["response"]
    assert completed["status"] == "completed"
    assert [item["type"] for item in completed["output"]] == ["reasoning", "message"]
    assert completed["output"][1]["content"][0]["text"] == "Hello!"
    assert completed["usage"]["input_tokens"] == 9
    assert completed["usage"]["output_tokens"] == 5


def test_function_calls_stream_their_arguments_and_close_at_the_end() -> None:
    events = framing()
    head = {"index": 0, "id": "call_9", "type": "function", "function": {"name": "w"}}
    piece = {"index": 0, "function": {"arguments": '{"c": '}}
    rest = {"index": 0, "function": {"arguments": "1}"}}
    chunks = [
        wire.openai_chunk(content="Checking."),
        *(
            "data: "
            + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [p]}}]})
            + "\n\n"
            for p in (head, piece, rest)
        ),
    ]
    fed = b"".join(feed(events, chunks))
    closing = events.closing(Outcome(model=GLM, finish_reason="tool_calls"), True)
    seen = typed(fed + closing)
    arguments = [d["delta"] for n, d in seen if n == "response.function_call_arguments.delta"]
    assert "".join(arguments) == '{"c": 1}'
    names = [n for n, _ in seen]
    # The message closes before the call opens; the call closes at the end.
    assert names.index("response.output_text.done") < names.index(
        "response.function_call_arguments.delta"
    )
    assert names[-3:] == [
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    output = seen[-1][1]["response"]["output"]
    assert output[1] == {
        "type": "function_call",
        "id": "fc_r1_0",
        "call_id": "call_9",
        "name": "w",
        "arguments": '{"c": 1}',
        "status": "completed",
    }


def test_an_answer_that_used_every_token_is_incomplete() -> None:
    events = framing(LLAMA)
    feed(events, [wire.native_chunk("Hi"), *wire.native_end(3, 64)])
    closing = events.closing(Outcome(model=LLAMA, usage=usage(3, 64)), True)
    name, data = typed(closing)[-1]
    assert name == "response.incomplete"
    assert data["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_failure_is_response_failed_and_a_cut_off_stream_fails() -> None:
    events = framing()
    feed(events, [wire.openai_chunk(content="Half")])
    ((name, data),) = typed(events.failure(UpstreamBusy(detail="3040 SECRET"), True))
    assert name == "response.failed"
    assert data["response"]["status"] == "failed"
    assert data["response"]["error"] == {
        "code": "model_busy",
        "message": UpstreamBusy.public_message,
    }
    with pytest.raises(UpstreamMalformed):
        framing().closing(Outcome(model=GLM, truncated=True), True)


def test_a_whole_json_answer_is_the_same_items() -> None:
    events = framing()
    whole = Whole(
        body={}, content="Answer.", reasoning="Think.", tool_calls=None, finish_reason="stop"
    )
    out = events.whole(GLM, whole) + events.closing(Outcome(model=GLM, finish_reason="stop"), True)
    output = typed(out)[-1][1]["response"]["output"]
    assert [(i["type"], i["content"][0]["text"]) for i in output] == [
        ("reasoning", "Think."),
        ("message", "Answer."),
    ]


def test_the_document_is_one_response() -> None:
    document = ResponseDocument("r2", GLM, 64, created=7)
    document.feed(
        b"".join(c.encode() for c in [wire.openai_chunk(content="Hi"), *wire.openai_end()])
    )
    outcome = Outcome(model=GLM, usage=usage(12, 5), finish_reason="stop")
    document.closing(outcome, True)
    body = document.result(outcome)
    assert (body["id"], body["object"], body["created_at"], body["status"]) == (
        "resp_r2",
        "response",
        7,
        "completed",
    )
    assert body["output"] == [
        {
            "type": "message",
            "id": "msg_r2",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
        }
    ]
