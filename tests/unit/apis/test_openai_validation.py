"""``parse_openai_request``: every field ``/v1/chat/completions`` takes, the
400 each wrong value gets (the message names the rule, never the input), the
model lookup (``ModelNotFound``) and the limits shared with ``/chat``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgechat.apis.chat_body import parse_chat_request
from edgechat.apis.openai_body import parse_openai_request
from edgechat.config.settings import Settings
from edgechat.core.errors import BadRequest, ModelNotFound, PayloadTooLarge
from edgechat.core.models import find
from edgechat.core.requests import ChatRequest, Limits, Message, OpenAIRequest

ALLOWED = ("glm", "kimi", "llama")
LIMITS = Limits()
LLAMA_ID = "@cf/meta/llama-3.1-8b-instruct-fp8"
# Put into refused bodies: no error message may ever repeat it.
MARKER = "SECRET-MARKER-7f3a"

SUPPORTED = (
    "model, messages, stream, stream_options, max_tokens, max_completion_tokens, "
    "temperature, top_p, stop, seed, response_format, tools, tool_choice, "
    "reasoning_effort, frequency_penalty, presence_penalty, n, user, edgechat, "
    "parallel_tool_calls, store, metadata"
)
TOOL_CALL_SHAPE = (
    'must be {"id", "type": "function", "function": {"name", "arguments"}} with string values.'
)


def parse(
    body: object, limits: Limits = LIMITS, allowed: tuple[str, ...] = ALLOWED
) -> OpenAIRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return parse_openai_request(raw, limits, allowed, "glm")


def refused(body: object, limits: Limits = LIMITS, allowed: tuple[str, ...] = ALLOWED) -> str:
    """The public message of the 400 the body must get; it never repeats the input."""
    with pytest.raises(BadRequest) as caught:
        parse(body, limits, allowed)
    assert type(caught.value) is BadRequest  # not ModelNotFound, not a subclass
    assert caught.value.status == 400
    assert caught.value.code == "invalid_request"
    message = caught.value.public_message
    assert MARKER not in message
    assert MARKER not in str(caught.value)  # the log's detail neither
    return message


def user(content: object = "Hello") -> dict[str, object]:
    return {"role": "user", "content": content}


def asks(*messages: dict[str, object], **fields: object) -> dict[str, object]:
    """A body: these messages (a user "Hello" if none) and these fields."""
    return {"messages": list(messages) or [user()], **fields}


def tool_call(
    call_id: str = "call_1", name: str = "lookup", arguments: str = "{}"
) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Looks a word up.",
        "parameters": {"type": "object", "properties": {"word": {"type": "string"}}},
    },
}
TOOL_TURNS = (
    user("What is an edge?"),
    {"role": "assistant", "content": None, "tool_calls": [tool_call()]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"meaning": "a border"}'},
)


# --- the whole request --------------------------------------------------------


def test_a_minimal_request_gets_the_defaults() -> None:
    parsed = parse(asks())
    assert parsed == OpenAIRequest(
        chat=ChatRequest(
            messages=(Message("user", "Hello"),),
            model=parsed.chat.model,
            temperature=None,
            max_tokens=1024,
            reasoning=None,
            server_prompt=False,
        ),
        stream=False,
        include_usage=False,
    )
    assert parsed.chat.model.alias == "glm"
    assert dict(parsed.chat.params) == {}


def test_every_generation_field_is_taken_as_given() -> None:
    body = asks(
        {"role": "system", "content": "Be brief."},
        user("Hi"),
        model="kimi",
        stream=True,
        stream_options={"include_usage": True},
        max_completion_tokens=300,
        temperature=1,
        top_p=1,
        stop=["\n\n", "END"],
        seed=42,
        response_format={"type": "json_object"},
        tools=[TOOL],
        tool_choice="auto",
        reasoning_effort="low",
        frequency_penalty=-2,
        presence_penalty=2,
        n=1,
        user="customer-42",
        parallel_tool_calls=False,
        store=False,
        metadata={"team": "docs"},
    )
    parsed = parse(body)
    chat = parsed.chat
    assert (parsed.stream, parsed.include_usage) == (True, True)
    assert chat.model.alias == "kimi"
    assert chat.max_tokens == 300
    assert chat.temperature == 1.0
    assert type(chat.temperature) is float
    assert chat.reasoning is None
    assert chat.server_prompt is False
    assert dict(chat.params) == {
        "top_p": 1.0,
        "stop": ["\n\n", "END"],
        "seed": 42,
        "response_format": {"type": "json_object"},
        "tools": [TOOL],
        "tool_choice": "auto",
        "reasoning_effort": "low",
        "frequency_penalty": -2.0,
        "presence_penalty": 2.0,
    }
    # n, user and the fields that change nothing are not sent to the model.
    assert {"n", "user", "parallel_tool_calls", "store", "metadata"}.isdisjoint(chat.params)


def test_nulls_mean_not_given() -> None:
    nulls = {
        name: None
        for name in SUPPORTED.split(", ")
        if name not in ("messages", "model", "stream_options")
    }
    parsed = parse(asks(model=None, stream_options=None, **nulls))
    assert parsed.chat.model.alias == "glm"
    assert (parsed.stream, parsed.include_usage) == (False, False)
    assert parsed.chat.max_tokens == 1024
    assert dict(parsed.chat.params) == {}


def test_the_params_cannot_be_changed_afterwards() -> None:
    params = parse(asks(seed=1)).chat.params
    with pytest.raises(TypeError):
        params["seed"] = 2  # type: ignore[index]


def test_the_model_gets_the_callers_messages_under_no_system_prompt_of_ours() -> None:
    chat = parse(asks({"role": "developer", "content": "Rules."}, user("Hi"), seed=3)).chat
    inputs = chat.inputs(chat.model, Settings(system_prompt="OPERATOR PROMPT").system_prompt)
    assert inputs == {
        "messages": [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Hi"}],
        "stream": True,
        "max_completion_tokens": 1024,
        "seed": 3,
    }


def test_an_unknown_field_is_refused_with_the_supported_list() -> None:
    assert refused(asks(logprobs=True)) == (
        f"The request has a field edgechat does not support; supported: {SUPPORTED}."
    )
    assert MARKER not in refused({**asks(), MARKER: 1})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "The request body is not valid JSON."),
        (b'{"messages": NaN}', "The request body is not valid JSON."),
        (b"\xff{}", "The request body is not valid UTF-8."),
        (b"[]", "The request body must be a JSON object."),
        ({}, "messages is required."),
        ({"messages": "hi"}, "messages must be an array."),
        ({"messages": []}, "messages must not be empty."),
        ({"messages": ["hi"]}, "messages[0] must be an object."),
    ],
)
def test_the_body_must_be_a_json_object_with_messages(body: object, message: str) -> None:
    assert refused(body) == message


def test_a_body_over_the_cap_is_413_before_it_is_read() -> None:
    with pytest.raises(PayloadTooLarge) as caught:
        parse(b"{" + b" " * 300 + b"}", Limits(max_body_bytes=200))
    assert caught.value.status == 413
    assert caught.value.public_message == "The request body is larger than 200 bytes."


# --- n, stream, stream_options, user ----------------------------------------


@pytest.mark.parametrize("n", [2, 0, -1, True, "1", 1.0])
def test_n_must_be_one(n: object) -> None:
    assert refused(asks(n=n)) == "n must be 1: edgechat returns one choice."


def test_n_of_one_is_fine() -> None:
    assert parse(asks(n=1)).stream is False


@pytest.mark.parametrize("stream", [True, False])
def test_stream_is_a_boolean(stream: bool) -> None:
    assert parse(asks(stream=stream)).stream is stream


@pytest.mark.parametrize("stream", ["true", 1, 0, [], {}])
def test_stream_of_another_type_is_refused(stream: object) -> None:
    assert refused(asks(stream=stream)) == "stream must be true or false."


@pytest.mark.parametrize(
    ("options", "include_usage"),
    [({"include_usage": True}, True), ({"include_usage": False}, False), ({}, False)],
)
def test_stream_options_say_whether_usage_comes(
    options: dict[str, object], include_usage: bool
) -> None:
    assert parse(asks(stream=True, stream_options=options)).include_usage is include_usage


@pytest.mark.parametrize(
    "options", [True, "include_usage", ["include_usage"], {"include_usage": True, "x": 1}]
)
def test_stream_options_of_another_shape_are_refused(options: object) -> None:
    assert refused(asks(stream=True, stream_options=options)) == (
        'stream_options must be {"include_usage": true|false}.'
    )


@pytest.mark.parametrize("value", ["yes", 1, {}])
def test_include_usage_must_be_a_boolean(value: object) -> None:
    assert refused(asks(stream=True, stream_options={"include_usage": value})) == (
        "stream_options.include_usage must be true or false."
    )


@pytest.mark.parametrize("value", [42, ["me"], {"id": MARKER}])
def test_user_must_be_a_string(value: object) -> None:
    assert refused(asks(user=value)) == "user must be a string."


# --- messages: roles and content -------------------------------------------------


def test_every_role_is_taken_and_developer_is_sent_as_system() -> None:
    messages = parse(
        asks(
            {"role": "system", "content": "S"},
            {"role": "developer", "content": "D"},
            user("U"),
            {"role": "assistant", "content": "A", "tool_calls": [tool_call()]},
            {"role": "tool", "content": "T", "tool_call_id": "call_1"},
        )
    ).chat.messages
    assert [(m.role, m.content) for m in messages] == [
        ("system", "S"),
        ("system", "D"),
        ("user", "U"),
        ("assistant", "A"),
        ("tool", "T"),
    ]


@pytest.mark.parametrize("role", ["function", "System", "", None, 1, MARKER])
def test_any_other_role_is_refused(role: object) -> None:
    assert refused(asks(user(), {"role": role, "content": "x"})) == (
        "messages[1].role must be one of system, developer, user, assistant, tool."
    )


def test_the_conversation_may_end_with_any_role() -> None:
    # Unlike /chat: an OpenAI client may send a tool result last, or an assistant prefix.
    assert parse(asks(*TOOL_TURNS)).chat.messages[-1].role == "tool"
    assert parse(asks(user(), {"role": "assistant", "content": "So"})).chat.messages[-1].content


def test_text_parts_are_joined_by_newlines() -> None:
    parts = [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]
    (message,) = parse(asks(user(parts))).chat.messages
    assert message == Message("user", "first\nsecond")
    assert message.wire() == {"role": "user", "content": "first\nsecond"}


@pytest.mark.parametrize(
    "part",
    [
        {"type": "text"},
        {"type": "text", "text": 3},
        {"type": "text", "text": "x", "cache_control": {}},
        {"text": MARKER},
        MARKER,
    ],
    ids=["no-text", "number", "extra-key", "no-type", "string"],
)
def test_only_text_parts_are_taken(part: object) -> None:
    parts = [{"type": "text", "text": "fine"}, part]
    assert refused(asks(user(parts))) == (
        'messages[0].content[1] must be a text part {"type": "text", "text": "..."}.'
    )


@pytest.mark.parametrize("content", [[], 42, {"type": "text", "text": "x"}, True])
def test_content_must_be_a_string_or_a_list_of_parts(content: object) -> None:
    assert refused(asks(user(content))) == (
        "messages[0].content must be a string or a non-empty list of text, image and file parts."
    )


def test_a_remote_image_url_is_refused_never_fetched() -> None:
    part = {"type": "image_url", "image_url": {"url": "https://example.com/x.png"}}
    assert refused(asks(user([{"type": "text", "text": "fine"}, part]))) == (
        "messages[0].content[1].image_url.url must be a data: URL; edgechat never fetches "
        "an image from a URL."
    )


@pytest.mark.parametrize("content", [None, "", "  \n", [{"type": "text", "text": " "}]])
def test_a_message_without_text_is_refused(content: object) -> None:
    assert refused(asks(user(content))) == "messages[0].content must not be empty."


def test_a_lone_surrogate_is_refused() -> None:
    body = b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}'
    assert refused(body) == "messages[0].content is not valid Unicode text."


def test_an_unknown_message_field_is_refused() -> None:
    assert refused(asks({**user(), "refusal": MARKER})) == (
        "messages[0] has an unknown field; known fields: "
        "role, content, name, tool_calls, tool_call_id, reasoning_content."
    )


def test_a_name_goes_to_the_model() -> None:
    (message,) = parse(asks({**user(), "name": "ada"})).chat.messages
    assert message.wire() == {"role": "user", "content": "Hello", "name": "ada"}


@pytest.mark.parametrize("name", ["", "n" * 65, 7, ["ada"]])
def test_a_name_must_be_1_to_64_characters(name: object) -> None:
    assert refused(asks({**user(), "name": name})) == (
        "messages[0].name must be a string of 1 to 64 characters."
    )


# --- tool turns -------------------------------------------------------------------


def test_tool_turns_go_to_the_model_as_they_came() -> None:
    messages = parse(asks(*TOOL_TURNS, tools=[TOOL])).chat.messages
    assert [m.wire() for m in messages] == [
        {"role": "user", "content": "What is an edge?"},
        # An assistant turn that only called tools has no text.
        {"role": "assistant", "content": "", "tool_calls": [tool_call()]},
        {"role": "tool", "content": '{"meaning": "a border"}', "tool_call_id": "call_1"},
    ]


# An agent loop sends the assistant's turn back as /v1 gave it: its thinking too.
THOUGHT_TURNS = (
    TOOL_TURNS[0],
    {**TOOL_TURNS[1], "reasoning_content": "The user wants a definition: look it up."},
    TOOL_TURNS[2],
)


@pytest.mark.parametrize("alias", ["glm", "kimi"])
def test_the_thinking_of_an_assistant_turn_goes_back_to_a_thinking_model(alias: str) -> None:
    chat = parse(asks(*THOUGHT_TURNS, tools=[TOOL], model=alias)).chat
    sent = chat.inputs(chat.model, "")["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [tool_call()],
        "reasoning_content": "The user wants a definition: look it up.",
    }
    assert "reasoning_content" not in sent[0]
    assert "reasoning_content" not in sent[2]


def test_the_thinking_is_dropped_for_a_model_that_does_not_think() -> None:
    turns = (user("Hi"), {"role": "assistant", "content": "Hello!", "reasoning_content": "Greet."})
    chat = parse(asks(*turns, user("Again"), model="llama")).chat
    assert chat.inputs(chat.model, "")["messages"][1] == {"role": "assistant", "content": "Hello!"}
    # ...and sent to one that does, should the fallback chain reach it.
    glm = find("glm")
    assert glm is not None
    assert chat.inputs(glm, "")["messages"][1]["reasoning_content"] == "Greet."


@pytest.mark.parametrize(
    ("message", "rule"),
    [
        (
            {"role": "user", "content": "x", "reasoning_content": "y"},
            "messages[0].reasoning_content is only for assistant messages.",
        ),
        (
            {"role": "assistant", "content": "x", "reasoning_content": 7},
            "messages[0].reasoning_content must be a string.",
        ),
        (
            {"role": "assistant", "content": "x", "reasoning_content": MARKER * 1000},
            f"messages[0].reasoning_content is longer than {LIMITS.max_message_chars} characters.",
        ),
    ],
)
def test_the_thinking_of_a_turn_keeps_the_rules(message: dict[str, object], rule: str) -> None:
    assert refused(asks(message, user())) == rule


def test_the_thinking_counts_against_the_conversations_characters() -> None:
    limits = Limits(max_total_chars=100)
    thought = {"role": "assistant", "content": "ok", "reasoning_content": "t" * 90}
    assert refused(asks(user("0123456789"), thought, user()), limits) == (
        "messages are longer than 100 characters in total."
    )


@pytest.mark.parametrize("call_id", [None, "", 12])
def test_a_tool_message_needs_its_tool_call_id(call_id: object) -> None:
    tool: dict[str, object] = {"role": "tool", "content": "42"}
    if call_id is not None:
        tool["tool_call_id"] = call_id
    assert refused(asks(*TOOL_TURNS[:2], tool)) == (
        "messages[2].tool_call_id is required for tool messages."
    )


@pytest.mark.parametrize("role", ["user", "assistant", "system"])
def test_only_tool_messages_carry_a_tool_call_id(role: str) -> None:
    assert refused(asks({"role": role, "content": "x", "tool_call_id": "call_1"})) == (
        "messages[0].tool_call_id is only for tool messages."
    )


@pytest.mark.parametrize("role", ["user", "system", "tool"])
def test_only_assistant_messages_carry_tool_calls(role: str) -> None:
    message = {"role": role, "content": "x", "tool_calls": [tool_call()], "tool_call_id": "c"}
    assert refused(asks(message)) == "messages[0].tool_calls is only for assistant messages."


@pytest.mark.parametrize("calls", [[], {}, "call", tool_call()])
def test_tool_calls_must_be_a_non_empty_array(calls: object) -> None:
    assert refused(asks(user(), {"role": "assistant", "content": None, "tool_calls": calls})) == (
        "messages[1].tool_calls must be a non-empty array."
    )


@pytest.mark.parametrize(
    "call",
    [
        {**tool_call(), "type": "code"},
        {**tool_call(), "id": 1},
        {"type": "function", "function": {"name": "f", "arguments": "{}"}},
        {**tool_call(), "extra": MARKER},
        {**tool_call(), "function": {"name": "f", "arguments": {"a": 1}}},
        {**tool_call(), "function": {"name": "f"}},
        {**tool_call(), "function": {"name": "f", "arguments": "{}", "x": 1}},
        {**tool_call(), "function": "f({})"},
        MARKER,
    ],
    ids=[
        "type",
        "id-type",
        "no-id",
        "extra-key",
        "object-arguments",
        "no-arguments",
        "function-extra",
        "function-string",
        "string",
    ],
)
def test_each_tool_call_has_the_openai_shape(call: object) -> None:
    calls = [tool_call(), call]
    assert refused(asks(user(), {"role": "assistant", "content": None, "tool_calls": calls})) == (
        f"messages[1].tool_calls[1] {TOOL_CALL_SHAPE}"
    )


def test_tool_call_text_counts_towards_the_limits() -> None:
    limits = Limits(max_message_chars=20, max_total_chars=30)
    big = {"role": "assistant", "content": None, "tool_calls": [tool_call(arguments="x" * 21)]}
    assert refused(asks(user(), big), limits) == (
        "messages[1].tool_calls[0].function is longer than 20 characters."
    )
    calls = [tool_call(arguments="a" * 10), tool_call(arguments="b" * 10)]
    message = {"role": "assistant", "content": "hi", "tool_calls": calls}
    assert refused(asks(user("x" * 10), message), limits) == (
        "messages are longer than 30 characters in total."
    )


def test_tools_are_taken_with_their_schema() -> None:
    bare = {"type": "function", "function": {"name": "now"}}
    assert parse(asks(tools=[TOOL, bare])).chat.params["tools"] == [TOOL, bare]


TOOL_SHAPE = 'must be {"type": "function", "function": {"name", "description"?, "parameters"?}}.'


@pytest.mark.parametrize("tools", [[], {"type": "function"}, "lookup", [TOOL] * 129])
def test_tools_must_be_a_list_of_1_to_128(tools: object) -> None:
    assert refused(asks(tools=tools)) == "tools must be a list of 1 to 128 tools."


@pytest.mark.parametrize(
    "tool",
    [
        {"type": "retrieval"},
        {"type": "function"},
        {"type": "function", "function": {"name": ""}},
        {"type": "function", "function": {"name": "n" * 65}},
        {"type": "function", "function": {"name": 1}},
        {"type": "function", "function": {"name": "f", "parameters": "{}"}},
        {"type": "function", "function": {"name": "f", "description": 1}},
        MARKER,
    ],
    ids=["type", "no-function", "empty-name", "long-name", "name-type", "parameters",
         "description", "string"],
)  # fmt: skip
def test_each_tool_is_a_function(tool: object) -> None:
    message = refused(asks(tools=[TOOL, tool]))
    assert message.startswith('tools[1] must be {"type": "function", "function": {"name", ')


def test_the_tool_shape_message_has_balanced_braces() -> None:
    message = refused(asks(tools=[{"type": "retrieval"}]))
    assert message == f"tools[0] {TOOL_SHAPE}"


@pytest.mark.parametrize(
    "choice", ["none", "auto", "required", {"type": "function", "function": {"name": "lookup"}}]
)
def test_tool_choice_with_tools(choice: object) -> None:
    assert parse(asks(tools=[TOOL], tool_choice=choice)).chat.params["tool_choice"] == choice


@pytest.mark.parametrize(
    "choice", ["auto", "required", {"type": "function", "function": {"name": "lookup"}}]
)
def test_tool_choice_needs_tools(choice: object) -> None:
    assert refused(asks(tool_choice=choice)) == "tool_choice needs tools."


def test_tool_choice_none_needs_no_tools() -> None:
    assert parse(asks(tool_choice="none")).chat.params["tool_choice"] == "none"


@pytest.mark.parametrize(
    "choice", ["any", MARKER, {"type": "function"}, {"type": "function", "function": {}}, 1]
)
def test_tool_choice_of_another_value_is_refused(choice: object) -> None:
    assert refused(asks(tools=[TOOL], tool_choice=choice)) == (
        'tool_choice must be "none", "auto", "required" or '
        '{"type": "function", "function": {"name": ...}}.'
    )


# --- what Llama (native format, no tools) cannot take ---------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stop", "END"),
        ("response_format", {"type": "json_object"}),
        ("reasoning_effort", "high"),
        ("tools", [TOOL]),
    ],
)
def test_an_openai_only_parameter_on_llama_is_refused_naming_the_model(
    field: str, value: object
) -> None:
    assert refused(asks(model="llama", **{field: value})) == (
        f"{field} is not supported by {LLAMA_ID}."
    )


def test_tool_turns_on_llama_are_refused_even_without_tools() -> None:
    assert refused(asks(*TOOL_TURNS, model="llama")) == f"tools is not supported by {LLAMA_ID}."
    assert refused(asks(*TOOL_TURNS, model=LLAMA_ID)) == f"tools is not supported by {LLAMA_ID}."


def test_llama_takes_the_parameters_it_reads() -> None:
    parsed = parse(
        asks(
            model="llama",
            temperature=0,
            top_p=0.5,
            seed=7,
            frequency_penalty=0.1,
            presence_penalty=-0.1,
            response_format={"type": "text"},  # what every model does anyway
        )
    )
    assert parsed.chat.model.id == LLAMA_ID
    assert dict(parsed.chat.params) == {
        "top_p": 0.5,
        "seed": 7,
        "frequency_penalty": 0.1,
        "presence_penalty": -0.1,
    }


def test_unfit_names_what_a_model_cannot_read() -> None:
    glm, llama = find("glm"), find("llama")
    assert glm is not None
    assert llama is not None
    chat = parse(asks(stop="END")).chat
    assert chat.unfit(glm) is None
    assert chat.unfit(llama) == "stop"
    tools = parse(asks(*TOOL_TURNS)).chat
    assert tools.unfit(glm) is None
    assert tools.unfit(llama) == "tools"
    assert parse(asks(seed=1)).chat.unfit(llama) is None


# --- generation parameters --------------------------------------------------------


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    assert parse(asks(max_tokens=100, max_completion_tokens=200)).chat.max_tokens == 200
    assert parse(asks(max_tokens=100)).chat.max_tokens == 100
    assert parse(asks(max_completion_tokens=4096)).chat.max_tokens == 4096
    assert parse(asks(max_tokens=100, max_completion_tokens=None)).chat.max_tokens == 100


@pytest.mark.parametrize("value", [0, 4097, 1.5, "100", True])
def test_max_tokens_is_an_integer_within_the_cap(value: object) -> None:
    assert refused(asks(max_tokens=value)) == "max_tokens must be an integer from 1 to 4096."


def test_a_bad_max_completion_tokens_is_named_as_such() -> None:
    message = refused(asks(max_completion_tokens=0))
    assert message == "max_completion_tokens must be an integer from 1 to 4096."


def test_the_output_cap_follows_the_limits() -> None:
    limits = Limits(default_output_tokens=10, max_output_tokens=20)
    assert parse(asks(), limits).chat.max_tokens == 10
    assert refused(asks(max_tokens=21), limits) == "max_tokens must be an integer from 1 to 20."


@pytest.mark.parametrize(
    ("field", "bad", "message"),
    [
        ("temperature", [-0.1, 2.1, "1", True], "temperature must be a number from 0 to 2."),
        ("top_p", [0, 1.1, "1", False], "top_p must be a number above 0 and at most 1."),
        (
            "frequency_penalty",
            [-2.1, 2.1, "0", True],
            "frequency_penalty must be a number from -2 to 2.",
        ),
        (
            "presence_penalty",
            [-2.1, 2.1, "0", True],
            "presence_penalty must be a number from -2 to 2.",
        ),
        ("seed", [-1, 1.0, "7", True], "seed must be a non-negative integer."),
        (
            "reasoning_effort",
            ["max", "LOW", 1, ""],
            "reasoning_effort must be one of low, medium, high.",
        ),
    ],
)
def test_numbers_and_words_out_of_range_are_refused(
    field: str, bad: list[object], message: str
) -> None:
    for value in bad:
        assert refused(asks(**{field: value})) == message, value


@pytest.mark.parametrize(
    ("field", "good"),
    [
        ("temperature", [0, 2, 0.7]),
        ("top_p", [1, 0.01]),
        ("frequency_penalty", [-2, 2, 0]),
        ("presence_penalty", [-2, 2, 0.5]),
        # 2^53 - 1: the largest integer JavaScript holds (json_body.MAX_SAFE_INTEGER).
        ("seed", [0, 2**53 - 1]),
        ("reasoning_effort", ["low", "medium", "high"]),
    ],
)
def test_numbers_and_words_in_range_are_taken(field: str, good: list[object]) -> None:
    for value in good:
        chat = parse(asks(**{field: value})).chat
        taken = chat.temperature if field == "temperature" else chat.params[field]
        assert taken == value


@pytest.mark.parametrize("stop", ["END", ["a"], ["a", "b", "c", "d"], ["x" * 100]])
def test_stop_is_a_string_or_up_to_four(stop: object) -> None:
    assert parse(asks(stop=stop)).chat.params["stop"] == stop


@pytest.mark.parametrize("stop", ["", [], ["a"] * 5, ["x" * 101], [1], [""], {"s": "a"}])
def test_stop_of_another_shape_is_refused(stop: object) -> None:
    assert refused(asks(stop=stop)) == (
        "stop must be a string or a list of 1 to 4 strings of 1 to 100 characters."
    )


def test_response_format() -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}
    assert parse(asks(response_format=schema)).chat.params["response_format"] == schema
    assert "response_format" not in parse(asks(response_format={"type": "text"})).chat.params
    assert refused(asks(response_format={"type": "xml"})) == (
        "response_format.type must be one of text, json_object, json_schema."
    )
    assert refused(asks(response_format="json_object")) == (
        "response_format.type must be one of text, json_object, json_schema."
    )
    assert refused(asks(response_format={"type": "json_schema"})) == (
        "response_format.json_schema must be an object."
    )


# --- the model ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["glm", "@cf/zai-org/glm-4.7-flash", "kimi", "llama", LLAMA_ID])
def test_the_model_by_alias_or_id(name: str) -> None:
    model = parse(asks(model=name)).chat.model
    assert name in (model.alias, model.id)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("gpt-4o", ALLOWED),
        (MARKER, ALLOWED),
        ("GLM", ALLOWED),
        ("kimi", ("glm", "llama")),  # in the catalog, not allowed here
        ("@cf/moonshotai/kimi-k2.6", ("glm",)),
    ],
)
def test_a_model_not_served_is_model_not_found(name: str, allowed: tuple[str, ...]) -> None:
    with pytest.raises(ModelNotFound) as caught:
        parse(asks(model=name), allowed=allowed)
    assert caught.value.public_message == (
        "model is not available; GET /api/models lists the models you can use."
    )
    assert name not in caught.value.public_message
    assert name not in str(caught.value)


@pytest.mark.parametrize("name", [1, ["glm"], {"id": "glm"}, True])
def test_a_model_that_is_no_string_is_a_bad_request(name: object) -> None:
    assert refused(asks(model=name)) == "model must be a string."


# --- the limits /chat has too ----------------------------------------------------


def _both(body: dict[str, object], limits: Limits) -> tuple[str, str]:
    """The message each endpoint gives the same conversation."""
    raw = json.dumps(body).encode()
    messages: list[str] = []
    for parser in (parse_chat_request, parse_openai_request):
        with pytest.raises(BadRequest) as caught:
            parser(raw, limits, ALLOWED, "glm")
        messages.append(caught.value.public_message)
    return messages[0], messages[1]


@pytest.mark.parametrize(
    ("messages", "limits", "message"),
    [
        ([user("a")] * 3, Limits(max_messages=2), "messages has more than 2 entries."),
        (
            [user("x" * 11)],
            Limits(max_message_chars=10),
            "messages[0].content is longer than 10 characters.",
        ),
        (
            [user("x" * 8), {"role": "assistant", "content": "y" * 8}, user("z" * 8)],
            Limits(max_message_chars=10, max_total_chars=20),
            "messages are longer than 20 characters in total.",
        ),
    ],
    ids=["count", "per-message", "total"],
)
def test_the_limits_are_the_same_as_for_chat(
    messages: list[dict[str, object]], limits: Limits, message: str
) -> None:
    assert _both({"messages": messages}, limits) == (message, message)


def test_the_limits_hold_exactly_at_their_edge() -> None:
    limits = Limits(max_messages=2, max_message_chars=10, max_total_chars=20)
    parsed = parse(asks(user("x" * 10), {"role": "assistant", "content": "y" * 10}), limits)
    assert len(parsed.chat.messages) == 2


def test_text_parts_count_with_their_newlines() -> None:
    parts = [{"type": "text", "text": "x" * 5}, {"type": "text", "text": "y" * 5}]
    assert refused(asks(user(parts)), Limits(max_message_chars=10)) == (
        "messages[0].content is longer than 10 characters."
    )
    assert parse(asks(user(parts)), Limits(max_message_chars=11)).chat.messages[0].content


# --- nothing the client sent comes back ----------------------------------------------

_REFUSED_PLACES = [
    lambda text: asks(user(text), {"role": "nobody", "content": text}),
    lambda text: asks(user(text), model=text),
    lambda text: asks(user([{"type": "text", "text": text}, {"type": "image", "url": text}])),
    lambda text: asks(user(text), {"role": "tool", "content": text}),
    lambda text: asks(user(text), stop=[text] * 5),
    lambda text: asks(user(text), tools=[{"type": "function", "function": {"name": text * 70}}]),
    lambda text: asks(user(text), tool_choice={"type": "function", "function": {"name": text}}),
    lambda text: asks(user(text), user=[text]),
    lambda text: asks(user(text), **{text: 1}),
    lambda text: asks(user(text * 1100)),
    lambda text: asks(user(text), model="llama", stop=text),
]


@given(
    text=st.text(min_size=8, max_size=30).filter(lambda t: t.strip() and t.isprintable()),
    place=st.sampled_from(range(len(_REFUSED_PLACES))),
)
def test_no_refusal_repeats_what_the_client_sent(text: str, place: int) -> None:
    sent = "§" + text  # no message of ours holds a "§"
    body = _REFUSED_PLACES[place](sent)
    with pytest.raises(BadRequest) as caught:
        parse(body, Limits(max_body_bytes=1 << 22))
    assert sent not in caught.value.public_message
    assert sent not in str(caught.value)
    assert json.dumps(sent)[1:-1] not in caught.value.public_message


# --- what any body may not hold (json_body), as both endpoints see it -------------------


def nested_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}}
    return schema


def test_a_schema_nested_past_the_depth_limit_is_refused_before_anything_walks_it() -> None:
    # The body: it passed validation and overflowed the stack in the
    # cache key's json.dumps (a seed makes the answer cacheable). Written by
    # hand: json.dumps itself would recurse 1,500 times.
    schema = '{"type": "object", "properties": {"x": ' * 1500 + "{}" + "}}" * 1500
    text = json.dumps(asks(seed=1))[:-1]
    text += ', "response_format": {"type": "json_schema", "json_schema": {"schema": '
    text += schema + "}}}"
    assert text.count("{") == text.count("}")
    assert refused(text.encode()) == (
        "The request body nests arrays and objects deeper than 32 levels."
    )
    # Within the limit the same shape is taken, and the limit is the operator's.
    assert parse(asks(response_format={"type": "json_schema", "json_schema": nested_schema(14)}))
    assert refused(asks(seed=[[[[1]]]]), Limits(max_json_depth=4)) == (
        "The request body nests arrays and objects deeper than 4 levels."
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            asks(tools=[{**TOOL, "function": {**TOOL["function"], "description": "a\ud800"}}]),
            "tools[0].function.description is not valid Unicode text.",
        ),
        (asks({**user(), "name": "ada\udc00"}), "messages[0].name is not valid Unicode text."),
        (asks(stop=["ok", "\ud800"]), "stop[1] is not valid Unicode text."),
        (asks(stop="\udbff"), "stop is not valid Unicode text."),
        (
            asks(user([{"type": "text", "text": "\ud800"}])),
            "messages[0].content[0].text is not valid Unicode text.",
        ),
        (
            asks(tools=[{**TOOL, "function": {"name": "f", "parameters": {MARKER: "\ud800"}}}]),
            "tools[0].function.parameters holds text that is not valid Unicode.",
        ),
        (
            asks(metadata={MARKER + "\ud800": "x"}),
            "metadata has a field name that is not valid Unicode.",
        ),
        (asks(user="\ud800"), "user is not valid Unicode text."),
        # Before the unknown-field rule: the same answer wherever the surrogate is.
        (
            {**asks(), MARKER + "\ud800": 1},
            "The request body has a field name that is not valid Unicode.",
        ),
    ],
)
def test_a_lone_surrogate_anywhere_is_a_400_naming_where(body: object, message: str) -> None:
    assert refused(body) == message


def test_a_chat_body_follows_the_same_unicode_rule() -> None:
    body = {"messages": [{"role": "user", "content": [{"type": "text", "text": "\udfff"}]}]}
    with pytest.raises(BadRequest) as caught:
        parse_chat_request(json.dumps(body).encode(), LIMITS, ALLOWED, "glm")
    assert caught.value.public_message == "messages[0].content[0].text is not valid Unicode text."


def test_a_seed_javascript_cannot_hold_is_refused() -> None:
    assert refused(asks(seed=2**53)) == (
        "The request body has a number out of range: integers must be within 2^53 - 1 of zero, "
        "and decimals finite."
    )


# --- edgechat.compare_with: a comparison through the OpenAI API -----------------------


def test_compare_with_names_the_other_models_in_order() -> None:
    parsed = parse(asks(model="glm", edgechat={"compare_with": ["llama", "kimi"]}, n=3))
    assert [m.alias for m in parsed.compare_with] == ["llama", "kimi"]
    assert parsed.chat.model.alias == "glm"
    assert parse(asks(model="glm")).compare_with == ()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"edgechat": {"compare_with": []}},
            "edgechat.compare_with must list 1 to 2 models to answer beside model.",
        ),
        (
            {"edgechat": {"compare_with": ["kimi", "llama", "glm"]}},
            "edgechat.compare_with must list 1 to 2 models to answer beside model.",
        ),
        (
            {"edgechat": {"MARKER": 1}},
            'edgechat must be an object of {"compare_with": [model, ...]}, '
            '{"knowledge": "<base id>"} and {"semantic_cache": true}.',
        ),
        (
            {"edgechat": {}},
            'edgechat must be an object of {"compare_with": [model, ...]}, '
            '{"knowledge": "<base id>"} and {"semantic_cache": true}.',
        ),
        (
            {"edgechat": {"semantic_cache": "yes"}},
            "edgechat.semantic_cache must be true or false.",
        ),
        (
            {"edgechat": {"semantic_cache": True, "compare_with": ["kimi"]}},
            "edgechat.semantic_cache does not go with compare_with.",
        ),
        (
            {"edgechat": {"knowledge": "MARKER"}},
            "edgechat.knowledge must be the id of a knowledge base (GET /api/knowledge).",
        ),
        (
            {"edgechat": {"compare_with": ["kimi"], "knowledge": "k" * 24}},
            "edgechat.compare_with and edgechat.knowledge do not go together.",
        ),
        (
            {"edgechat": {"compare_with": ["MARKER"]}},
            "edgechat.compare_with must name different models of GET /v1/models, not auto.",
        ),
        (
            {"edgechat": {"compare_with": ["kimi", "kimi"]}},
            "edgechat.compare_with must name different models of GET /v1/models, not auto.",
        ),
        (
            {"edgechat": {"compare_with": ["glm"]}},
            "model and edgechat.compare_with must name different models, not auto.",
        ),
        (
            {"edgechat": {"compare_with": ["kimi"]}, "stream": True},
            "edgechat.compare_with needs stream false: "
            "the answers come as one completion's choices.",
        ),
        (
            {"edgechat": {"compare_with": ["kimi"]}, "n": 1},
            "n must be the number of models compared (model and edgechat.compare_with).",
        ),
    ],
)
def test_a_malformed_comparison_names_its_field(fields: dict[str, object], message: str) -> None:
    assert refused(asks(model="glm", **fields)) == message


def test_the_semantic_cache_takes_part_only_when_asked() -> None:
    assert parse(asks(model="glm")).chat.semantic_cache is False
    assert parse(asks(model="glm", edgechat={"semantic_cache": False})).chat.semantic_cache is False
    asked = parse(asks(model="glm", edgechat={"semantic_cache": True}))
    assert asked.chat.semantic_cache is True
    assert asked.compare_with == ()
