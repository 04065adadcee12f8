"""The OpenAI-compatible API over HTTP: the official ``openai`` client from
PyPI pointed at the runner, and the exact wire shape with raw HTTP.

The official client from npm runs the same scenarios in ``test_openai_node.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.api.checks import (
    GLM,
    LLAMA,
    chunk_of,
    last_user_text,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.ratelimit import in_one_window
from tests.kit.sse import parse
from tests.kit.upstream import DONE, native_chunk, openai_chunk, usage

TOKEN = "test-token-v1-7d1f"
BGE_M3 = "@cf/baai/bge-m3"
SETTINGS = {"API_TOKEN": TOKEN, "CACHE_MODE": "off"}
AUTH = {"authorization": f"Bearer {TOKEN}"}
HELLO = [{"role": "user", "content": "Hello there"}]

# A GLM tool call as Workers AI streams it: the call's id and name first,
# its arguments in pieces, then the finish, the binding's usage chunk, [DONE].
WEATHER_ARGS = '{"city": "Zürich", "unit": "c"}'
TOOL_CALL_CHUNKS = [
    chunk_of({"role": "assistant"}),
    chunk_of(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        }
    ),
    chunk_of({"tool_calls": [{"index": 0, "function": {"arguments": WEATHER_ARGS[:12]}}]}),
    chunk_of({"tool_calls": [{"index": 0, "function": {"arguments": WEATHER_ARGS[12:]}}]}),
    chunk_of({}, finish="tool_calls", usage=usage(30, 9)),
    native_chunk("", usage=usage(30, 9)),
    DONE,
]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    # Every request here carries the same token, the rate limiter's key: this
    # runner has no limiter (test_rate_limited_by_token has one).
    return servers.get(SETTINGS, rate_limited=False)


@pytest.fixture
def client(server: Server) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as c:
        yield c


@pytest.fixture
def http(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def post(http: httpx.Client, body: dict[str, Any], **headers: str) -> httpx.Response:
    return http.post("/v1/chat/completions", json=body, headers={**AUTH, **headers})


def events_of(response: httpx.Response) -> list[Any]:
    """The data of every event, in order (JSON parsed, "[DONE]" as it is)."""
    return [event.data for event in parse(response.content).events]


# --- the official client ---------------------------------------------------------


def test_models_lists_the_allowed_models_by_id(client: openai.OpenAI) -> None:
    models = client.models.list()
    # auto first: MODELS lists it (wrangler.toml), and it is a name a client may send.
    assert [m.id for m in models] == ["auto", GLM, "@cf/moonshotai/kimi-k2.6", LLAMA, BGE_M3]
    for model in models:
        assert model.object == "model"
        assert isinstance(model.created, int)
        # auto is edgechat's own routing; every other model its family's.
        assert model.owned_by in ("edgechat", "glm", "kimi", "llama", "baai")
    assert models.data[0].owned_by == "edgechat"


def test_embeddings_with_the_official_client(server: Server, client: openai.OpenAI) -> None:
    texts = ["边缘计算", "edge computing", "边缘计算"]
    # The client asks for base64 unless told otherwise, and decodes it.
    packed = client.embeddings.create(model="bge-m3", input=texts)
    floats = client.embeddings.create(model=BGE_M3, input=texts, encoding_format="float")
    assert packed.model == floats.model == BGE_M3
    assert [e.index for e in packed.data] == [0, 1, 2]
    for a, b in zip(packed.data, floats.data, strict=True):
        assert len(a.embedding) == len(b.embedding) == 1024
        assert a.embedding == pytest.approx(b.embedding, abs=1e-6)
    same, other = floats.data[0].embedding, floats.data[1].embedding
    assert floats.data[2].embedding == same
    assert sum(x * x for x in same) == pytest.approx(1.0)
    assert sum(x * y for x, y in zip(same, other, strict=True)) < 0.5
    # The binding counts none for BGE-M3: edgechat's estimate, a token for
    # each CJK character and for four other characters (4 + 4 + 4).
    assert floats.usage.prompt_tokens == packed.usage.prompt_tokens == 12
    calls = server.ai.wait_for_calls(2)
    assert [c["inputs"] for c in calls] == [{"text": texts}] * 2
    with pytest.raises(openai.BadRequestError) as bad:
        client.embeddings.create(model="bge-m3", input=[[1, 2, 3]])
    assert "token arrays" in str(bad.value.body)
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="glm", input="x")


def test_a_whole_completion(server: Server, client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(model="glm", messages=HELLO)  # type: ignore[arg-type]
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == GLM
    (choice,) = completion.choices
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert "emulator" in (choice.message.content or "")
    assert "Hello there" in (choice.message.content or "")
    # The thinking of GLM travels as reasoning_content, as Workers AI sends it.
    assert (choice.message.model_extra or {}).get("reasoning_content")
    assert completion.usage is not None
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )
    (call,) = server.ai.wait_for_calls(1)
    # The caller's conversation, as it is: no server system prompt on /v1.
    assert call["inputs"]["messages"] == HELLO


def test_a_stream_reads_like_openai_with_usage_last(client: openai.OpenAI) -> None:
    whole = client.chat.completions.create(model="glm", messages=HELLO)  # type: ignore[arg-type]
    stream = client.chat.completions.create(
        model="glm",
        messages=HELLO,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks, "no chunks"
    # The usual loop works on every chunk: each has a choices list.
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.completion_tokens > 0
    assert all(c.object == "chat.completion.chunk" for c in chunks)


def test_llamas_native_stream_becomes_openai_chunks(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="llama",
        messages=[{"role": "user", "content": "Hi llama"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "emulator" in text
    assert text.endswith("«Hi llama»")
    with_choices = [c for c in chunks if c.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    assert with_choices[-1].choices[0].finish_reason == "stop"
    assert {c.model for c in chunks} == {LLAMA}
    assert chunks[-1].usage is not None


def test_a_tool_call_round_trip(server: Server, client: openai.OpenAI) -> None:
    server.ai.script(
        {"match": {"model": GLM, "contains": "weather"}, "times": 2, "chunks": TOOL_CALL_CHUNKS},
        # The emulator matches the last *user* message: after two tool calls,
        # the same question gets the answer.
        {
            "match": {"model": GLM, "contains": "weather"},
            "reply": {"content": "It is 21 °C in Zürich."},
        },
    )
    question = [{"role": "user", "content": "What is the weather in Zürich?"}]
    # Streamed: the client's own accumulation of tool-call deltas works.
    stream = client.chat.completions.create(
        model="glm",
        messages=question,  # type: ignore[arg-type]
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        stream=True,
    )
    pieces = [c.choices[0].delta.tool_calls for c in stream if c.choices]
    arguments = "".join(p[0].function.arguments or "" for p in pieces if p and p[0].function)
    assert arguments == WEATHER_ARGS
    # Whole: the calls assembled.
    completion = client.chat.completions.create(
        model="glm",
        messages=question,  # type: ignore[arg-type]
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
        tool_choice="auto",
    )
    (choice,) = completion.choices
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls or []
    assert call.id == "call_w1"
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Zürich", "unit": "c"}  # type: ignore[union-attr]
    # The tool's result goes back, and the model answers with it.
    answer = client.chat.completions.create(
        model="glm",
        messages=[
            *question,  # type: ignore[list-item]
            choice.message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}),  # type: ignore[list-item]
            {"role": "tool", "tool_call_id": "call_w1", "content": '{"result": 21}'},
        ],
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )
    assert answer.choices[0].message.content == "It is 21 °C in Zürich."
    calls = server.ai.wait_for_calls(3)
    assert calls[0]["inputs"]["tools"] == [WEATHER_TOOL]
    assert calls[1]["inputs"]["tool_choice"] == "auto"
    sent = calls[2]["inputs"]["messages"]
    assert sent[1]["role"] == "assistant"
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == WEATHER_ARGS
    assert sent[2] == {"role": "tool", "content": '{"result": 21}', "tool_call_id": "call_w1"}


def test_generation_parameters_reach_the_model(server: Server, client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model="glm",
        messages=[
            {"role": "developer", "content": "Be terse."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
            },  # type: ignore[list-item]
        ],
        max_completion_tokens=77,
        temperature=0.3,
        top_p=0.9,
        stop=["END"],
        seed=7,
        response_format={"type": "json_object"},
        reasoning_effort="low",
        user="someone",
    )
    (call,) = server.ai.wait_for_calls(1)
    inputs = call["inputs"]
    assert inputs["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "one\ntwo"},
    ]
    assert inputs["max_completion_tokens"] == 77
    assert (inputs["temperature"], inputs["top_p"], inputs["seed"]) == (0.3, 0.9, 7)
    assert inputs["stop"] == ["END"]
    assert inputs["response_format"] == {"type": "json_object"}
    assert inputs["reasoning_effort"] == "low"
    assert "user" not in inputs  # who the caller's user is stays here


def test_errors_are_the_clients_exception_types(server: Server, client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as not_found:
        client.chat.completions.create(model="gpt-5", messages=HELLO)  # type: ignore[arg-type]
    assert not_found.value.code == "model_not_found"
    assert "gpt-5" not in str(not_found.value.body)
    with pytest.raises(openai.BadRequestError) as bad:
        client.chat.completions.create(model="glm", messages=HELLO, n=2)  # type: ignore[arg-type]
    assert bad.value.code == "invalid_request"
    with pytest.raises(openai.BadRequestError) as no_tools:
        client.chat.completions.create(model="llama", messages=HELLO, tools=[WEATHER_TOOL])  # type: ignore[arg-type, list-item]
    assert LLAMA in str(no_tools.value.body)
    with (
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0) as stranger,
        pytest.raises(openai.AuthenticationError),
    ):
        stranger.models.list()
    server.ai.script(
        {"match": {"contains": "busy"}, "error": "3040: Capacity temporarily exceeded"}
    )
    with pytest.raises(openai.InternalServerError) as busy:
        client.chat.completions.create(
            model="kimi",  # not in the fallback chain's reach: kimi falls back to glm, llama
            messages=[{"role": "user", "content": "busy busy"}],
        )
    assert busy.value.status_code == 503
    assert busy.value.response.headers["retry-after"]


def test_a_failure_mid_stream_raises_in_the_client(server: Server, client: openai.OpenAI) -> None:
    server.ai.script(
        {
            "match": {"contains": "break"},
            "chunks": [openai_chunk(content="Half an ans"), {"error": "3007: timed out"}],
        }
    )
    stream = client.chat.completions.create(
        model="glm", messages=[{"role": "user", "content": "break please"}], stream=True
    )
    seen: list[str] = []

    def read_all() -> None:
        for chunk in stream:
            seen.append(chunk.choices[0].delta.content or "")

    with pytest.raises(openai.APIError) as failed:
        read_all()
    assert "".join(seen) == "Half an ans"
    # The break carries no reason across the binding (see test_chat_stream).
    assert "upstream_error" in str(failed.value.body)


# --- the wire, with raw HTTP -------------------------------------------------------


def test_glms_chunks_keep_their_bytes_but_the_envelope_and_the_running_usage(
    server: Server, http: httpx.Client
) -> None:
    chunks = [
        chunk_of({"content": "你好"}, id="cmpl-x1", usage=usage(5, 1)),
        chunk_of({"content": " world"}, id="cmpl-x1", usage=usage(5, 2)),
        chunk_of({}, finish="stop", id="cmpl-x1", usage=usage(5, 3)),
    ]
    server.ai.script(
        {
            "match": {"contains": "bytes"},
            "chunks": [*chunks, native_chunk("", usage=usage(5, 3)), DONE],
        }
    )
    response = post(
        http, {"model": "glm", "messages": [{"role": "user", "content": "bytes"}], "stream": True}
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    data = events_of(response)
    assert data[-1] == "[DONE]"
    first, *own = data[:-1]
    # The role first; then the model's chunks with the completion's id and
    # without their running usage; no usage chunk (none was asked for).
    assert first["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    ]
    assert [o["choices"] for o in own] == [json.loads(c[6:])["choices"] for c in chunks]
    assert b'"usage"' not in response.content
    assert b"cmpl-x1" not in response.content
    assert {(o["id"], o["created"], o["model"]) for o in data[:-1]} == {
        (first["id"], first["created"], GLM)
    }


def test_a_stream_is_openais_whatever_the_model_sent(http: httpx.Client) -> None:
    # The emulator streams as Workers AI does: no role, the model's own id
    # and name, the running usage on every chunk, then the binding's usage
    # chunk; the client gets OpenAI's stream.
    whole = post(http, {"model": "kimi", "messages": HELLO}).json()
    response = post(
        http,
        {
            "model": "kimi",
            "messages": HELLO,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    data = events_of(response)
    assert data[-1] == "[DONE]"
    objects = data[:-1]
    assert objects[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all("role" not in o["choices"][0]["delta"] for o in objects[1:-1])
    assert [("usage" in o) for o in objects] == [False] * (len(objects) - 1) + [True]
    assert objects[-1]["choices"] == []
    assert objects[-1]["usage"] == whole["usage"]
    (envelope,) = {(o["id"], o["object"], o["created"], o["model"]) for o in objects}
    assert envelope[0].startswith("chatcmpl-")
    assert envelope[1:] == ("chat.completion.chunk", envelope[2], "@cf/moonshotai/kimi-k2.6")
    deltas = [o["choices"][0]["delta"] for o in objects[:-1]]
    message = whole["choices"][0]["message"]
    assert "".join(d.get("content") or "" for d in deltas) == message["content"]
    assert (
        "".join(d.get("reasoning_content") or "" for d in deltas) == (message["reasoning_content"])
    )


def test_the_thinking_of_a_tool_turn_goes_back_to_the_model(
    server: Server, client: openai.OpenAI
) -> None:
    server.ai.script(
        {
            "match": {"model": "@cf/moonshotai/kimi-k2.6", "last_role": "user"},
            "reply": {
                "reasoning": "I need the weather first.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}}],
            },
        },
        {"match": {"last_role": "tool"}, "reply": {"content": "It is 21 °C."}},
    )
    question = [{"role": "user", "content": "Weather in Zürich?"}]
    first = client.chat.completions.create(
        model="kimi",
        messages=question,  # type: ignore[arg-type]
        tools=[WEATHER_TOOL],  # type: ignore[list-item]
    )
    turn = first.choices[0].message
    (call,) = turn.tool_calls or []
    # Kimi's own id, exactly as the model gave it.
    assert call.id == "functions.get_weather:0"
    # The turn goes back as the client got it: reasoning_content, content null.
    sent_turn = turn.model_dump(exclude_none=False, include={"role", "content", "tool_calls"})
    sent_turn["reasoning_content"] = (turn.model_extra or {})["reasoning_content"]
    assert sent_turn["content"] is None
    conversation = [
        *question,
        sent_turn,
        {"role": "tool", "tool_call_id": call.id, "content": '{"celsius": 21}'},
    ]
    answer = client.chat.completions.create(model="kimi", messages=conversation)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "It is 21 °C."
    thought = {"role": "assistant", "content": "Hi.", "reasoning_content": "Greet them."}
    client.chat.completions.create(model="llama", messages=[*HELLO, thought, *HELLO])  # type: ignore[list-item]
    _, to_kimi, to_llama = server.ai.wait_for_calls(3)
    assert to_kimi["inputs"]["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "functions.get_weather:0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city":"Zürich"}'},
            }
        ],
        "reasoning_content": "I need the weather first.",
    }
    assert to_kimi["inputs"]["messages"][2]["tool_call_id"] == "functions.get_weather:0"
    # Llama does not think: its copy of the turn has no reasoning_content.
    assert "reasoning_content" not in to_llama["inputs"]["messages"][1]


def test_include_usage_translates_the_native_usage_chunk(
    server: Server, http: httpx.Client
) -> None:
    chunks = [chunk_of({"content": "ok"}), chunk_of({}, finish="length")]
    server.ai.script(
        {
            "match": {"contains": "usage"},
            "chunks": [*chunks, native_chunk("", usage=usage(11, 4)), DONE],
        }
    )
    response = post(
        http,
        {
            "messages": [{"role": "user", "content": "usage please"}],
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    data = events_of(response)
    assert data[-1] == "[DONE]"
    last = data[-2]
    assert last["choices"] == []
    assert last["usage"] == usage(11, 4)
    assert last["object"] == "chat.completion.chunk"
    for item in data[:-1]:
        assert isinstance(item["choices"], list)
    assert data.count("[DONE]") == 1


def test_error_bodies_have_the_openai_shape(http: httpx.Client) -> None:
    response = post(http, {"model": "nope", "messages": HELLO})
    assert response.status_code == 404
    assert response.json() == {
        "error": {
            "message": "The model is not available; GET /v1/models lists the models you can use.",
            "type": "not_found_error",
            "param": "model",
            "code": "model_not_found",
        }
    }
    response = http.post("/v1/chat/completions", json={"messages": HELLO})
    assert response.status_code == 401
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert response.json()["error"]["type"] == "authentication_error"
    response = http.post("/v1/chat/completions", content=b"{}", headers={**AUTH})
    assert response.status_code == 415
    response = post(http, {"messages": "not a list"})
    assert response.status_code == 400
    assert response.json()["error"]["type"] == "invalid_request_error"
    response = http.post(
        "/v1/chat/completions",
        content=b"x" * 70_000,
        headers={**AUTH, "content-type": "application/json"},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "payload_too_large"
    response = http.get("/v1/files", headers=AUTH)
    assert response.status_code == 404
    assert response.json()["error"]["type"] == "not_found_error"


def test_without_api_token_the_api_is_off(servers: ServerPool, new_client: ClientFactory) -> None:
    server = servers.get({})
    with openai.OpenAI(base_url=server.url + "/v1", api_key="anything", max_retries=0) as c:
        with pytest.raises(openai.PermissionDeniedError) as refused:
            c.chat.completions.create(model="glm", messages=HELLO)  # type: ignore[arg-type]
        assert refused.value.code == "api_disabled"
        assert "API_TOKEN" in str(refused.value.body)
        with pytest.raises(openai.PermissionDeniedError):
            c.models.list()
    assert server.ai.calls() == []
    # /chat stays open, as before.
    assert new_client(server.url).get("/api/models").status_code == 200


def test_rate_limited_by_token(servers: ServerPool) -> None:
    server = servers.get({"API_TOKEN": TOKEN})
    with openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as c:
        in_one_window()
        for _ in range(20):
            c.models.list()  # not limited: only answers cost
            c.chat.completions.create(model="llama", messages=HELLO, max_tokens=1)  # type: ignore[arg-type]
        with pytest.raises(openai.RateLimitError) as limited:
            c.chat.completions.create(model="llama", messages=HELLO, max_tokens=1)  # type: ignore[arg-type]
    assert limited.value.code == "rate_limited"
    assert int(limited.value.response.headers["retry-after"]) > 0
    assert len(server.ai.calls()) == 20
    assert all(last_user_text(call) == "Hello there" for call in server.ai.calls())
