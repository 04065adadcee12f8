"""Operator settings from [vars] change what /chat does: the system prompt, the
allowed models and default, the fallback chain, and every limit."""

from __future__ import annotations

import httpx
import pytest

from tests.api.checks import (
    GLM,
    KIMI,
    LLAMA,
    assert_done,
    assert_error,
    assert_error_event,
    assert_meta,
    assert_shape,
    assert_stream_headers,
    calls_before_a_later_request,
    post_chat,
    system_then,
    user,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.upstream import openai_chunk

PROMPT = "You are TestBot sysprompt-Q9. Answer briefly."
SETTINGS = {
    "SYSTEM_PROMPT": PROMPT,
    "MODELS": "glm,llama",
    "DEFAULT_MODEL": "llama",
    "FALLBACK_CHAIN": "llama,glm",
    "MAX_BODY_BYTES": "2048",
    "MAX_MESSAGES": "3",
    "MAX_MESSAGE_CHARS": "100",
    "MAX_TOTAL_CHARS": "150",
    "DEFAULT_OUTPUT_TOKENS": "50",
    "MAX_OUTPUT_TOKENS": "100",
}
JSON = {"content-type": "application/json"}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


def refused(server: Server, client: httpx.Client, status: int, code: str, **kwargs: object) -> None:
    chat = post_chat(client, **kwargs)  # type: ignore[arg-type]
    assert_error(chat.response, status, code, "sysprompt-Q9")
    assert calls_before_a_later_request(server.ai, client) == []


def test_models_lists_only_the_configured_ones(client: httpx.Client) -> None:
    models = client.get("/api/models").json()
    assert [(m["alias"], m["id"], m["default"]) for m in models] == [
        ("glm", GLM, False),
        ("llama", LLAMA, True),
    ]


def test_limits_are_published_for_the_page(client: httpx.Client) -> None:
    response = client.get("/api/limits")
    assert response.status_code == 200
    assert response.json() == {
        "max_body_bytes": 2048,
        "max_messages": 3,
        "max_message_chars": 100,
        "max_total_chars": 150,
        "default_output_tokens": 50,
        "max_output_tokens": 100,
        "max_images": 4,
        "max_image_bytes": 3 << 20,
        "max_json_depth": 32,
        "max_documents": 2,
        "max_document_bytes": 2 << 20,
        "max_document_tokens": 32_000,
        "max_speech_chars": 2_000,
        "max_audio_bytes": 4 << 20,
        "max_audio_seconds": 120,
        "max_conversations": 1_000,
        "max_history_bytes": 50 << 20,
        "max_conversation_bytes": 1 << 20,
        "max_batch_bytes": 4 << 20,
        "max_batch_conversations": 50,
        "max_shares": 100,
        "max_share_days": 365,
        "max_file_bytes": 3 << 20,
        "max_files_bytes": 200 << 20,
        "max_files": 2_000,
        "max_share_images": 20,
        "max_feedback_chars": 500,
        "max_knowledge_bases": 20,
        "max_knowledge_documents": 200,
        "max_knowledge_chunks": 10_000,
        "max_knowledge_bytes": 100 << 20,
        "max_knowledge_document_bytes": 4 << 20,
    }


def test_default_model_system_prompt_and_output_cap(server: Server, client: httpx.Client) -> None:
    chat = post_chat(client, user("hi"))
    assert_stream_headers(chat.response)
    assert_meta(chat.events, LLAMA)
    assert_done(chat.events, LLAMA)
    assert "sysprompt-Q9" not in chat.body.decode()
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == LLAMA
    assert call["inputs"]["messages"][0] == {"role": "system", "content": PROMPT}
    system_then([{"role": "user", "content": "hi"}], call)
    assert call["inputs"]["max_tokens"] == 50


@pytest.mark.parametrize("model", ["kimi", KIMI])
def test_a_model_not_configured_is_refused(
    server: Server, client: httpx.Client, model: str
) -> None:
    refused(server, client, 400, "invalid_request", body=user("hi", model=model))


def test_configured_fallback_chain(server: Server, client: httpx.Client) -> None:
    server.ai.script(
        {"match": {"model": LLAMA}, "error": "3040: busy"},
        {"match": {"model": GLM}, "reply": {"content": "GLM stepped in."}},
    )
    parsed = post_chat(client, user("hi")).events
    assert parsed.text() == "GLM stepped in."
    assert_done(parsed, GLM, fallback_from=LLAMA)
    assert [c["model"] for c in server.ai.wait_for_calls(2)] == [LLAMA, GLM]
    assert server.ai.wait_for_calls(2)[1]["inputs"]["max_completion_tokens"] == 50


def test_system_prompt_never_reaches_the_client_in_errors(
    server: Server, client: httpx.Client
) -> None:
    server.ai.script(
        {"match": {"contains": "before"}, "error": f"3003: bad request with {PROMPT}"},
        {
            "match": {"contains": "during"},
            "chunks": [openai_chunk(content="x"), {"error": f"3003: bad request with {PROMPT}"}],
        },
    )
    chat = post_chat(client, user("before"))
    assert_error(chat.response, 502, "upstream_error", "sysprompt-Q9", "TestBot")
    chat = post_chat(client, user("during"))
    assert_shape(chat.events, final="error")
    assert_error_event(chat.events, "upstream_error", "sysprompt-Q9", "TestBot")
    assert b"sysprompt-Q9" not in chat.body


def _turns(*lengths: int) -> dict[str, object]:
    roles = ["user", "assistant"] * 3
    count = len(lengths)
    return {
        "messages": [
            {"role": roles[(count - 1 - i) % 2], "content": "c" * n} for i, n in enumerate(lengths)
        ]
    }


@pytest.mark.parametrize(
    "body",
    [
        _turns(1, 1, 1, 1),
        _turns(101),
        _turns(50, 50, 51),
        user("hi", max_tokens=101),
    ],
    ids=["4-messages", "101-chars", "151-total", "max-tokens-101"],
)
def test_configured_limits_refuse(server: Server, client: httpx.Client, body: object) -> None:
    refused(server, client, 400, "invalid_request", body=body)


@pytest.mark.parametrize(
    "body",
    [_turns(1, 1, 1), _turns(100), _turns(50, 50, 50), user("hi", max_tokens=100)],
    ids=["3-messages", "100-chars", "150-total", "max-tokens-100"],
)
def test_configured_limits_accept(server: Server, client: httpx.Client, body: object) -> None:
    chat = post_chat(client, body)
    assert_stream_headers(chat.response)
    assert_done(chat.events, LLAMA)


def test_configured_body_cap(server: Server, client: httpx.Client) -> None:
    content = b'{"messages": [{"role": "user", "content": "hi"}]' + b" " * 2100 + b"}"
    refused(server, client, 413, "payload_too_large", content=content, headers=JSON)
