"""The bodies of the hardening issue, one by one, over HTTP: each once ended
the runner's isolate, reached the model broken, or gave a 500. Each now gets
a 400 that names the rule (and never the input), and the runner lives on.
``test_fuzz.py`` looks for more of their kind. None of them is a body an
OpenAPI schema can describe (nesting past any parser, lone surrogates, a
model's stream split inside a character), so schemathesis
(``test_schema.py``) never sends them: they stay here."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, LLAMA, assert_error, post_chat
from tests.api.conftest import Server, ServerPool
from tests.kit.fake_provider import FakeProvider
from tests.kit.upstream import DONE, native_chunk, usage

TOKEN = "test-token-hostile-2c9e"
AUTH = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
MARKER = "HOSTILE-MARKER-41d7"
TOO_DEEP = "The request body nests arrays and objects deeper than 32 levels."


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(api_key="sk-hostile") as fake:
        yield fake


@pytest.fixture
def server(servers: ServerPool, provider: FakeProvider) -> Server:
    # A fallback provider: where a lone surrogate used to end up (its request
    # body could not be encoded), when Workers AI cannot answer.
    return servers.get(
        {
            "API_TOKEN": TOKEN,
            "PROVIDERS": "acme",
            "ACME_BASE_URL": provider.url,
            "ACME_MODEL": "acme-1",
            "ACME_API_KEY": "sk-hostile",
        },
        rate_limited=False,
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers=AUTH, timeout=30.0) as client:
        yield client


def assert_alive(server: Server, http: httpx.Client) -> None:
    assert server.runner.process.poll() is None, "the runner died"
    assert http.get("/healthz").json() == {"status": "ok"}


@pytest.mark.parametrize("route", ["/chat", "/v1/chat/completions"])
def test_eight_thousand_brackets_are_a_400_and_the_runner_lives(
    server: Server, http: httpx.Client, route: str
) -> None:
    # 8 KB: it overflowed Pyodide's stack in json.loads and ended the runner.
    response = http.post(route, content=b"[" * 8000)
    assert response.status_code == 400
    assert response.json()["error"]["message"] == TOO_DEEP
    assert_alive(server, http)
    assert server.ai.calls() == []


def test_a_schema_nested_1500_deep_with_a_seed_is_a_400_and_the_runner_lives(
    server: Server, http: httpx.Client
) -> None:
    # It passed validation and overflowed the stack in the cache key's json.dumps.
    schema = '{"type": "object", "properties": {"x": ' * 1500 + "{}" + "}}" * 1500
    body = (
        '{"messages": [{"role": "user", "content": "hi"}], "seed": 7, "response_format": '
        '{"type": "json_schema", "json_schema": {"name": "deep", "schema": ' + schema + "}}}"
    )
    response = http.post("/v1/chat/completions", content=body.encode())
    assert response.status_code == 400
    assert response.json()["error"] == {
        "message": TOO_DEEP,
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request",
    }
    assert_alive(server, http)
    assert server.ai.calls() == []


def with_tool_description(text: str) -> dict[str, Any]:
    tool = {"type": "function", "function": {"name": "lookup", "description": text}}
    return {"messages": [{"role": "user", "content": "hi"}], "tools": [tool]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            with_tool_description(f"{MARKER} \ud800"),
            "tools[0].function.description is not valid Unicode text.",
        ),
        (
            {"messages": [{"role": "user", "content": "hi", "name": f"{MARKER}\udfff"}]},
            "messages[0].name is not valid Unicode text.",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "stop": [MARKER, "\ud83d"]},
            "stop[1] is not valid Unicode text.",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "metadata": {f"{MARKER}\udc00": 1}},
            "metadata has a field name that is not valid Unicode.",
        ),
    ],
)
def test_a_lone_surrogate_in_any_field_is_a_400_naming_it(
    server: Server, http: httpx.Client, provider: FakeProvider, body: Any, message: str
) -> None:
    # Workers AI cannot answer: this is the path to the provider that gave a 500.
    server.ai.script({"error": "3040: Capacity temporarily exceeded"})
    before = len(provider.requests)
    # json.dumps writes each lone surrogate as its escape, as a client would.
    response = http.post("/v1/chat/completions", content=json.dumps(body).encode())
    assert_error_v1(response, message)
    assert server.ai.calls() == []
    assert len(provider.requests) == before


def assert_error_v1(response: httpx.Response, message: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["message"] == message
    assert error["type"] == "invalid_request_error"
    assert MARKER not in response.text


def test_chat_has_the_same_unicode_rule(server: Server, http: httpx.Client) -> None:
    content = [{"type": "text", "text": f"{MARKER}\ud800"}]
    body = json.dumps({"messages": [{"role": "user", "content": content}]}).encode()
    chat = post_chat(http, content=body)
    assert_error(chat.response, 400, "invalid_request", MARKER)
    assert chat.response.json()["error"]["message"] == (
        "messages[0].content[0].text is not valid Unicode text."
    )


def openai_event(content: str) -> str:
    """A GLM chunk written by hand: ``content`` is already JSON-escaped."""
    body = '{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"'
    return f"data: {body}{content}" + '"}}]}\n\n'


@pytest.mark.parametrize(
    ("halves", "text"),
    [
        # An emoji's surrogate pair split across two chunks, each decoded alone.
        (["smile \\ud83d", "\\ude00!"], "smile \U0001f600!"),
        (["cut \\ud83d"], "cut \ufffd"),
    ],
)
def test_a_whole_completion_with_split_surrogates_is_repaired(
    server: Server, http: httpx.Client, halves: list[str], text: str
) -> None:
    chunks = [openai_event(half) for half in halves]
    chunks += [native_chunk("", usage=usage(3, 2)), DONE]
    server.ai.script({"match": {"model": GLM}, "chunks": chunks})
    body = {"messages": [{"role": "user", "content": "hi"}], "model": "glm"}
    response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == text
    assert response.content.decode("utf-8")  # the body is UTF-8 throughout


def test_a_models_refusal_of_its_input_is_a_400_on_v1(server: Server, http: httpx.Client) -> None:
    server.ai.script({"error": f"5006: Bad input {MARKER}"})
    response = http.post(
        "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}
    )
    assert_error_v1(response, "The model could not read this request's input.")
    # Another model would be sent the same input: no fallback.
    assert [call["model"] for call in server.ai.wait_for_calls(1)] == [GLM]
    assert LLAMA not in json.dumps(server.ai.calls())
