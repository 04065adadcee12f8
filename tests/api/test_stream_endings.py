"""What an upstream sends that is not the model's, over HTTP: a provider that
writes its key into the stream, named events, unparseable data, a model that
says nothing in time. Every stream the client reads to its end ends with
exactly one closing, and no secret in it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.api.checks import GLM, LLAMA, assert_done, assert_error_event, post_chat, user
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.fake_provider import FakeProvider, Reply
from tests.kit.sse import parse

KEY = "sk-fake-provider-key-77d1e0"
TOKEN = "test-token-endings"
LEAK = json.dumps(
    {"choices": [{"index": 0, "delta": {"content": f" (my key is {KEY}, Bearer {KEY})"}}]}
)


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def server(servers: ServerPool, provider: FakeProvider) -> Server:
    """Workers AI refuses every question holding "edge down"; a provider answers."""
    server = servers.get(
        {
            "PROVIDERS": "acme",
            "ACME_BASE_URL": provider.url,
            "ACME_MODEL": "acme-chat-1",
            "ACME_API_KEY": KEY,
            "API_TOKEN": TOKEN,
            "CACHE_MODE": "off",
        },
        rate_limited=False,
    )
    server.ai.script({"match": {"contains": "edge down"}, "error": "3040: Capacity exceeded"})
    return server


AUTH = {"authorization": f"Bearer {TOKEN}"}


def v1(server: Server, **extra: object) -> httpx.Response:
    body = {"messages": [{"role": "user", "content": "is the edge down?"}], **extra}
    return httpx.post(server.url + "/v1/chat/completions", json=body, headers=AUTH, timeout=30)


def test_a_providers_key_written_into_its_stream_never_reaches_the_client(
    server: Server, new_client: ClientFactory, provider: FakeProvider
) -> None:
    leak = f"data: {LEAK}\n\n".encode()
    provider.answer(Reply(text="Fine, thanks.", inject=leak))
    chat = post_chat(new_client(server.url), user("is the edge down?"), headers=AUTH)
    assert_done(chat.events, "acme/acme-chat-1", fallback_from=GLM)
    assert KEY not in chat.body.decode()
    assert "[redacted]" in chat.events.text()
    provider.answer(Reply(text="Fine, thanks.", inject=leak))
    streamed = v1(server, stream=True)
    assert KEY not in streamed.text
    assert "[redacted]" in streamed.text
    assert streamed.text.endswith("data: [DONE]\n\n")
    provider.answer(Reply(text="Fine, thanks.", inject=leak))
    whole = v1(server)
    assert whole.status_code == 200
    assert KEY not in whole.text
    assert KEY not in server.log_text()


@pytest.mark.parametrize(
    "stray",
    [
        b'event: done\ndata: {"model":"forged"}\n\n',
        b'event: error\ndata: {"error":{"message":"provider trouble"}}\n\n',
        b"data: {not json\n\n",
    ],
)
def test_a_providers_stray_event_ends_chat_with_its_one_error(
    server: Server, new_client: ClientFactory, provider: FakeProvider, stray: bytes
) -> None:
    provider.answer(Reply(text="Half of it and the rest", inject=stray))
    chat = post_chat(new_client(server.url), user("is the edge down?"), headers=AUTH)
    # Python forwards a provider's stream: nothing of the stray event went out.
    assert stray not in chat.body
    assert_error_event(chat.events, "upstream_malformed")


def test_a_closing_forged_inside_a_relayed_stream_is_not_the_answers_end(
    server: Server, new_client: ClientFactory
) -> None:
    forged = 'event: done\ndata: {"model":"forged","finish_reason":"stop"}\n\n'
    server.ai.script(
        {
            "match": {"contains": "forged"},
            "chunks": [
                'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
                forged,
                'data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\n\n',
                "data: [DONE]\n\n",
            ],
        }
    )
    chat = post_chat(new_client(server.url), user("a forged ending"), headers=AUTH)
    # The platform relays the stream before Python looks at it, so the forged
    # event may reach the client; the closing that names the stream's request
    # is edgechat's error, and it is the last event.
    request_id = chat.events.meta["request_id"]
    assert chat.response.headers["x-request-id"] == request_id
    error = assert_error_event(chat.events, "upstream_malformed")
    assert error["request_id"] == request_id
    assert chat.events.text().startswith("Hel")


@pytest.mark.parametrize(
    "stray", [b"data: {not json\n\n", b'event: error\ndata: {"error":"x"}\n\n', b"junk\n\n"]
)
def test_a_stray_event_ends_v1_with_one_error_the_client_can_read(
    server: Server, stray: bytes
) -> None:
    server.ai.script(
        {
            "match": {"contains": "stray"},
            "chunks": [
                'data: {"choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
                stray.decode(),
                'data: {"choices":[{"index":0,"delta":{"content":"lo"}}]}\n\n',
                "data: [DONE]\n\n",
            ],
        }
    )
    messages = [{"role": "user", "content": "a stray event"}]
    with (
        openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as client,
        pytest.raises(openai.APIError) as failed,
    ):
        for _ in client.chat.completions.create(model="glm", messages=messages, stream=True):
            pass
    assert not isinstance(failed.value, json.JSONDecodeError)
    raw = httpx.post(
        server.url + "/v1/chat/completions",
        json={"model": "glm", "messages": messages, "stream": True},
        headers=AUTH,
        timeout=30,
    ).content
    assert stray not in raw
    errors = [event for event in parse(raw).events if "error" in event.data]
    assert len(errors) == 1
    assert errors[0].data["error"]["code"] == "upstream_malformed"
    assert raw.endswith(b"\n\n")
    assert b"[DONE]" not in raw


def test_a_model_silent_past_its_first_token_deadline_gives_way_to_the_next(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get({"FIRST_TOKEN_TIMEOUT_S": "1", "CACHE_MODE": "off"}, rate_limited=False)
    server.ai.script({"match": {"model": GLM, "contains": "slow"}, "chunks": [{"stall": True}]})
    chat = post_chat(new_client(server.url), user("a slow question"))
    assert_done(chat.events, LLAMA, fallback_from=GLM)
    glm, llama = server.ai.wait_for_calls(2)
    assert (glm["model"], glm["aborted"]) == (GLM, True)
    assert llama["model"] == LLAMA


@pytest.mark.parametrize("whole", [False, True], ids=["event", "whole-body"])
def test_deeply_nested_upstream_json_is_no_answer_and_the_isolate_lives(
    server: Server, new_client: ClientFactory, whole: bool
) -> None:
    bomb = "[" * 8000 + "]" * 8000
    chunks = [bomb] if whole else [f"data: {bomb}\n\n", "data: [DONE]\n\n"]
    server.ai.script({"match": {"contains": "deep"}, "chunks": chunks})
    http = new_client(server.url)
    chat = post_chat(http, user("a deep one"), headers=AUTH)
    assert_error_event(chat.events, "upstream_malformed")
    completion = v1(server, messages=[{"role": "user", "content": "deep again"}])
    assert completion.status_code == 502
    assert http.get("/healthz").json() == {"status": "ok"}
