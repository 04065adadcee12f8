"""The Responses API (``POST /v1/responses``) with the official ``openai``
client: whole and streamed answers with their typed events, instructions,
images, a function-calling round trip over a thinking model, structured
output, and the refusals (``previous_response_id``, errors)."""

from __future__ import annotations

import contextlib
import io
import json
import re
from typing import Any

import openai
import pytest

from tests.api.checks import GLM
from tests.api.conftest import Server, ServerPool
from tests.api.test_openai import SETTINGS, TOKEN, WEATHER_TOOL
from tests.harness import ROOT
from tests.kit.images import data_url, png

KIMI = "@cf/moonshotai/kimi-k2.6"
FUNCTION_TOOL = {"type": "function", **WEATHER_TOOL["function"]}  # the Responses API's shape


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS, rate_limited=False)


@pytest.fixture
def client(server: Server) -> Any:
    with openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as c:
        yield c


def test_a_whole_response_with_instructions(server: Server, client: openai.OpenAI) -> None:
    chat = client.chat.completions.create(
        model="glm",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello, responses"},
        ],
    )
    response = client.responses.create(
        model="glm", instructions="Be brief.", input="Hello, responses"
    )
    assert response.object == "response"
    assert response.id.startswith("resp_")
    assert response.status == "completed"
    assert response.model == GLM
    assert response.output_text == chat.choices[0].message.content
    kinds = [item.type for item in response.output]
    assert kinds == ["reasoning", "message"]
    assert response.usage is not None
    assert chat.usage is not None
    assert response.usage.input_tokens == chat.usage.prompt_tokens
    assert response.usage.output_tokens == chat.usage.completion_tokens
    first, second = server.ai.wait_for_calls(2)
    # The same conversation reached the model both ways.
    assert first["inputs"]["messages"] == second["inputs"]["messages"]


def test_a_streamed_response_has_the_typed_events(client: openai.OpenAI) -> None:
    whole = client.responses.create(model="kimi", input="Stream me")
    events = list(client.responses.create(model="kimi", input="Stream me", stream=True))
    types = [event.type for event in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    thinking = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thinking
    assert thinking == whole.output[0].content[0].text  # type: ignore[union-attr, index]
    completed = events[-1].response  # type: ignore[union-attr]
    assert completed.output_text == whole.output_text
    assert completed.usage == whole.usage
    added = [e.item.type for e in events if e.type == "response.output_item.added"]  # type: ignore[union-attr]
    done = [e.item.type for e in events if e.type == "response.output_item.done"]  # type: ignore[union-attr]
    assert added == done == ["reasoning", "message"]


def test_an_image_in_the_input(server: Server, client: openai.OpenAI) -> None:
    image = data_url(png(64, 48), "image/png")
    response = client.responses.create(
        model="kimi",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": image},
                ],
            }
        ],
    )
    assert "I see 1 image: image/png 64\u00d748." in response.output_text
    (call,) = server.ai.wait_for_calls(1)
    assert call["inputs"]["messages"][0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": image},
    }


def test_a_function_call_round_trip(server: Server, client: openai.OpenAI) -> None:
    server.ai.script(
        {
            "match": {"model": KIMI, "last_role": "user"},
            "reply": {
                "reasoning": "I need the weather.",
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Zürich"}}],
            },
        },
        {"match": {"last_role": "tool"}, "reply": {"content": "It is 21 °C in Zürich."}},
    )
    question = [{"role": "user", "content": "Weather in Zürich?"}]
    events = list(
        client.responses.create(
            model="kimi",
            input=question,  # type: ignore[arg-type]
            tools=[FUNCTION_TOOL],  # type: ignore[list-item]
            stream=True,
        )
    )
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert json.loads(arguments) == {"city": "Zürich"}
    first = events[-1].response  # type: ignore[union-attr]
    calls = [item for item in first.output if item.type == "function_call"]
    (call,) = calls
    assert (call.call_id, call.name, call.arguments) == (
        "functions.get_weather:0",
        "get_weather",
        arguments,
    )
    # The output goes back as it came, with the tool's result.
    answer = client.responses.create(
        model="kimi",
        input=[
            *question,
            *[item.model_dump(exclude_none=True) for item in first.output],
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"c": 21}'},
        ],  # type: ignore[arg-type]
        tools=[FUNCTION_TOOL],  # type: ignore[list-item]
    )
    assert answer.output_text == "It is 21 °C in Zürich."
    _, second = server.ai.wait_for_calls(2)
    sent = second["inputs"]["messages"]
    assert sent[1]["tool_calls"][0]["id"] == "functions.get_weather:0"
    assert sent[1]["reasoning_content"] == "I need the weather."
    assert sent[2] == {
        "role": "tool",
        "content": '{"c": 21}',
        "tool_call_id": "functions.get_weather:0",
    }
    assert second["inputs"]["tools"] == [WEATHER_TOOL]


def test_structured_output_and_limits_reach_the_model(
    server: Server, client: openai.OpenAI
) -> None:
    schema = {"type": "object", "properties": {"c": {"type": "integer"}}, "required": ["c"]}
    server.ai.script({"match": {"contains": "json"}, "reply": {"content": '{"c": 21}'}})
    response = client.responses.create(
        model="glm",
        input="json please",
        text={"format": {"type": "json_schema", "name": "t", "schema": schema, "strict": True}},
        reasoning={"effort": "low"},
        max_output_tokens=50,
        temperature=0.2,
    )
    assert json.loads(response.output_text) == {"c": 21}
    (call,) = server.ai.wait_for_calls(1)
    inputs = call["inputs"]
    assert inputs["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "t", "schema": schema, "strict": True},
    }
    assert (inputs["reasoning_effort"], inputs["max_completion_tokens"]) == ("low", 50)
    assert inputs["temperature"] == 0.2


def test_an_answer_cut_by_max_output_tokens_is_incomplete(client: openai.OpenAI) -> None:
    response = client.responses.create(model="llama", input="Hello there", max_output_tokens=3)
    assert response.status == "incomplete"
    assert response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens"


def test_refusals_are_the_clients_exceptions(server: Server, client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as stored:
        client.responses.create(model="glm", input="Hi", previous_response_id="resp_1")
    assert "stores no conversations" in str(stored.value.body)
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="gpt-5", input="Hi")
    with pytest.raises(openai.BadRequestError) as builtin:
        client.responses.create(model="glm", input="Hi", tools=[{"type": "web_search"}])  # type: ignore[list-item]
    assert "built-in tools" in str(builtin.value.body)
    assert server.ai.calls() == []


def test_the_docs_responses_and_embeddings_examples_run(server: Server) -> None:
    """The Python blocks of docs/api/responses.md and docs/api/embeddings.md,
    as written, pointed at the server under test."""
    blocks = []
    for page in ("responses.md", "embeddings.md"):
        text = (ROOT / "docs" / "api" / page).read_text()
        match = re.search(r"```python\n(.*?)```", text, re.DOTALL)
        assert match, f"no Python example on docs/api/{page}"
        blocks.append(match.group(1))
    code = "\n".join(blocks)
    assert code.count("http://127.0.0.1:8787/v1") == 1
    code = code.replace("http://127.0.0.1:8787", server.url).replace(
        '"change-me-to-a-long-secret"', repr(TOKEN)
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "docs/api", "exec"), {"__name__": "docs"})
    whole, streamed, dimensions = printed.getvalue().splitlines()
    assert "What is the edge?»" in whole
    assert streamed.endswith("«Explain Workers AI.»")
    assert dimensions == "1024"
