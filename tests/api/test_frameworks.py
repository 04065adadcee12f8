"""Agent frameworks against /v1, as a new user would point them at it:
LangChain's ``ChatOpenAI`` and ``OpenAIEmbeddings`` from PyPI here,
LangChain.js's from npm through ``clients/langchain_node.mjs``, and the
OpenAI Agents SDK (PyPI ``openai-agents``) over the Responses API. Streamed
text, usage totals equal to the model's, a multi-step tool loop over a
thinking model, structured output, and errors as the framework raises them.

The emulator streams as Workers AI does (no role, the running usage on every
chunk, Kimi's ``functions.<name>:<n>`` tool-call ids), so each of these also
checks what edgechat makes of that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from functools import reduce
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from langchain_core.messages import AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from openai import AsyncOpenAI
from pydantic import BaseModel

from tests.api.conftest import Server, ServerPool
from tests.api.test_openai import SETTINGS, TOKEN
from tests.api.test_openai_node import run_client

KIMI = "@cf/moonshotai/kimi-k2.6"
SCRIPT = Path(__file__).parent / "clients" / "langchain_node.mjs"
FORECAST = {"city": "Zürich", "celsius": 21}

# A thinking model's tool loop: it thinks, calls the tool; once the tool's
# result is in, it answers. Kimi's ids are made up in its own form.
TOOL_LOOP = [
    {
        "match": {"model": KIMI, "contains": "loop", "last_role": "user"},
        "reply": {
            "reasoning": "The user wants the weather: call get_weather first.",
            "tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}}],
        },
    },
    {
        "match": {"model": KIMI, "contains": "loop", "last_role": "tool"},
        "reply": {"reasoning": "The tool said 21.", "content": "It is 21 °C in Zürich."},
    },
    {
        "match": {"contains": "structured"},
        "reply": {"reasoning": "Fill the schema.", "content": json.dumps(FORECAST)},
    },
    {"match": {"contains": "fail"}, "error": "3040: Capacity temporarily exceeded"},
]
FORECAST_SCHEMA = {
    "title": "Forecast",
    "description": "The weather in a city.",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
    "additionalProperties": False,
}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    server = servers.get(SETTINGS, rate_limited=False)
    server.ai.script(*TOOL_LOOP)
    return server


def chat_model(server: Server, model: str = "kimi", **options: Any) -> ChatOpenAI:
    return ChatOpenAI(
        model=model,
        base_url=server.url + "/v1",
        api_key=TOKEN,  # type: ignore[arg-type]
        max_retries=0,
        **options,
    )


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return json.dumps({**FORECAST, "city": city})


def test_langchain_streams_text_with_the_models_usage(server: Server) -> None:
    llm = chat_model(server, stream_usage=True)
    question = [HumanMessage("Hello from LangChain")]
    whole = llm.invoke(question)
    chunks = list(llm.stream(question))
    # LangChain adds up the usage of every chunk it is given.
    total = reduce(lambda a, b: a + b, chunks)
    assert isinstance(total, AIMessageChunk)
    assert total.content == whole.content
    assert "«Hello from LangChain»" in str(total.content)
    assert total.usage_metadata is not None
    assert whole.usage_metadata is not None
    for name in ("input_tokens", "output_tokens", "total_tokens"):
        assert total.usage_metadata[name] == whole.usage_metadata[name]  # type: ignore[literal-required]
    assert total.usage_metadata["output_tokens"] > 1


def test_langchain_runs_a_tool_loop_over_a_thinking_model(server: Server) -> None:
    llm = chat_model(server).bind_tools([get_weather])
    messages: list[BaseMessage] = [HumanMessage("Weather in Zürich? (loop)")]
    for _ in range(3):
        # Streamed, as agents usually run: the chunks add up to the turn.
        turn = reduce(lambda a, b: a + b, llm.stream(messages))
        assert isinstance(turn, AIMessageChunk)
        messages.append(turn)
        if not turn.tool_calls:
            break
        for call in turn.tool_calls:
            assert call["id"] == "functions.get_weather:0"
            messages.append(ToolMessage(get_weather.invoke(call["args"]), tool_call_id=call["id"]))
    assert messages[-1].content == "It is 21 °C in Zürich."
    assert [type(m).__name__ for m in messages] == [
        "HumanMessage",
        "AIMessageChunk",
        "ToolMessage",
        "AIMessageChunk",
    ]
    first, second = server.ai.wait_for_calls(2)
    assert first["inputs"]["tools"][0]["function"]["name"] == "get_weather"
    sent = second["inputs"]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "functions.get_weather:0"
    assert sent[1]["content"] == ""  # LangChain sends null; Workers AI takes a string
    assert sent[2] == {
        "role": "tool",
        "content": json.dumps(FORECAST),
        "tool_call_id": "functions.get_weather:0",
    }


def test_langchain_gets_structured_output(server: Server) -> None:
    llm = chat_model(server, model="glm").with_structured_output(
        FORECAST_SCHEMA, method="json_schema"
    )
    assert llm.invoke("structured weather, please") == FORECAST
    (call,) = server.ai.wait_for_calls(1)
    response_format = call["inputs"]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["city", "celsius"]


def test_langchain_raises_the_clients_errors(server: Server) -> None:
    with pytest.raises(openai.NotFoundError) as not_found:
        chat_model(server, model="gpt-5").invoke("hello")
    assert not_found.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as bad:
        chat_model(server, model="llama").bind_tools([get_weather]).invoke("hello")
    assert bad.value.code == "invalid_request"
    with pytest.raises(openai.AuthenticationError):
        ChatOpenAI(
            model="glm",
            base_url=server.url + "/v1",
            api_key="wrong",  # type: ignore[arg-type]
            max_retries=0,
        ).invoke("hello")
    with pytest.raises(openai.InternalServerError) as busy:
        chat_model(server).invoke("please fail")
    assert busy.value.status_code == 503


def test_langchain_embeds_documents_and_queries(server: Server) -> None:
    embedder = OpenAIEmbeddings(
        model="bge-m3",
        base_url=server.url + "/v1",
        api_key=TOKEN,  # type: ignore[arg-type]
        max_retries=0,
        # LangChain would count tokens with tiktoken first (a download):
        # the texts go as they are.
        check_embedding_ctx_length=False,
    )
    documents = embedder.embed_documents(["边缘计算是什么", "The edge is close to users."])
    query = embedder.embed_query("边缘计算是什么")
    assert [len(v) for v in documents] == [1024, 1024]
    assert query == pytest.approx(documents[0], abs=1e-6)
    (documents_call, query_call) = server.ai.wait_for_calls(2)
    assert documents_call["model"] == "@cf/baai/bge-m3"
    assert query_call["inputs"] == {"text": ["边缘计算是什么"]}


def test_langchain_js_reads_every_shape(server: Server) -> None:
    seen = run_client(SCRIPT, server)
    stream = seen["stream"]
    assert stream["text"] == seen["whole"]["text"]
    assert "«Hello from LangChain.js»" in stream["text"]
    assert stream["usage"] == seen["whole"]["usage"]
    assert stream["usage"]["output_tokens"] > 1
    assert stream["kinds"] == ["AIMessageChunk"]
    loop = seen["loop"]
    assert loop["calls"] == [
        {"id": "functions.get_weather:0", "name": "get_weather", "args": {"city": "Zürich"}}
    ]
    assert loop["answer"] == "It is 21 °C in Zürich."
    assert seen["structured"] == FORECAST
    errors = seen["errors"]
    assert errors["notFound"]["status"] == 404
    assert errors["notFound"]["class"] == "NotFoundError"
    assert errors["auth"]["status"] == 401
    assert errors["busy"]["status"] == 503


# --- the OpenAI Agents SDK, over the Responses API ---------------------------------


@contextlib.asynccontextmanager
async def agent_model(server: Server, model: str = "kimi") -> AsyncIterator[OpenAIResponsesModel]:
    """The Agents SDK's model over edgechat, its client closed in the loop
    that used it (a client left open warns when collected, in another test)."""
    set_tracing_disabled(True)  # its traces would go to OpenAI's servers
    client = AsyncOpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0)
    try:
        yield OpenAIResponsesModel(model=model, openai_client=client)
    finally:
        await client.close()


def run_agent(server: Server, prompt: str, model: str = "kimi", **agent: Any) -> Any:
    async def run() -> Any:
        async with agent_model(server, model) as answering:
            return await Runner.run(Agent(model=answering, **agent), prompt)

    return asyncio.run(run())


@function_tool(name_override="get_weather")
def weather(city: str) -> str:
    """The weather in a city."""
    return json.dumps({**FORECAST, "city": city})


def test_an_openai_agent_runs_its_tool_loop_over_the_responses_api(server: Server) -> None:
    result = run_agent(
        server,
        "Weather in Zürich? (loop)",
        name="forecaster",
        instructions="Answer with the weather.",
        tools=[weather],
    )
    assert result.final_output == "It is 21 °C in Zürich."
    first, second = server.ai.wait_for_calls(2)
    assert first["inputs"]["messages"][0] == {
        "role": "system",
        "content": "Answer with the weather.",
    }
    sent = second["inputs"]["messages"]
    assert sent[2]["tool_calls"][0]["id"] == "functions.get_weather:0"
    assert sent[3]["role"] == "tool"


class Forecast(BaseModel):
    city: str
    celsius: int


def test_an_openai_agent_streams_with_the_models_usage(server: Server) -> None:
    async def run() -> tuple[str, Any]:
        async with agent_model(server) as answering:
            agent = Agent(name="streamer", instructions="Be brief.", model=answering)
            streamed = Runner.run_streamed(agent, "Hello from the agent")
            deltas = [
                event.data.delta
                async for event in streamed.stream_events()
                if event.type == "raw_response_event"
                and event.data.type == "response.output_text.delta"
            ]
            return "".join(deltas), streamed

    text, streamed = asyncio.run(run())
    assert text == streamed.final_output
    assert "«Hello from the agent»" in text
    with openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as client:
        whole = client.responses.create(
            model="kimi", instructions="Be brief.", input="Hello from the agent"
        )
    assert whole.usage is not None
    usage = streamed.context_wrapper.usage
    assert (usage.requests, usage.input_tokens, usage.output_tokens) == (
        1,
        whole.usage.input_tokens,
        whole.usage.output_tokens,
    )


def test_an_openai_agent_gets_structured_output(server: Server) -> None:
    result = run_agent(
        server, "structured weather, please", "glm", name="structured", output_type=Forecast
    )
    assert result.final_output == Forecast(**FORECAST)
    (call,) = server.ai.wait_for_calls(1)
    response_format = call["inputs"]["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["schema"]["required"] == ["city", "celsius"]
