"""The fake OpenAI-compatible provider of tests/kit: wire shapes, scripts,
auth, stalls, records, and a teardown that never hangs.

It lives with the unit tests so that ``npm test`` runs it (pytest's
testpaths); it tests a tool of the tests, not the Worker.
"""

from __future__ import annotations

import json
import select
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.kit.fake_provider import HANG_GUARD_S, Fail, FakeProvider, Redirect, Reply, Stall

KEY = "sk-test-123"


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=HANG_GUARD_S, headers={"authorization": f"Bearer {KEY}"}) as c:
        yield c


def chat(**body: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "messages": [{"role": "user", "content": "say hi"}], **body}


def sse(text: str) -> list[Any]:
    """The events of an SSE body, JSON parsed, ``[DONE]`` kept as a string."""
    assert text.endswith("\n\n"), text[-40:]
    events = []
    for block in text[:-2].split("\n\n"):
        assert block.startswith("data: "), block
        assert "\n" not in block, block
        data = block.removeprefix("data: ")
        events.append(data if data == "[DONE]" else json.loads(data))
    return events


def test_non_stream_answer_and_the_record(provider: FakeProvider, client: httpx.Client) -> None:
    provider.default = Reply("Hello there, friend.")
    response = client.post(f"{provider.url}/chat/completions", json=chat(temperature=0.2))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "gpt-test"
    assert body["id"] == "chatcmpl-fake-1"
    assert body["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "Hello there, friend."},
            "finish_reason": "stop",
        }
    ]
    assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}

    recorded = provider.wait_for_request(1)
    assert recorded.method == "POST"
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["authorization"] == f"Bearer {KEY}"
    assert recorded.headers["content-type"] == "application/json"
    assert recorded.body == chat(temperature=0.2)
    assert json.loads(recorded.raw) == recorded.body
    assert provider.wait_for_end(1) == "complete"
    assert provider.requests == [recorded]


def test_stream_role_content_finish_usage_done(
    provider: FakeProvider, client: httpx.Client
) -> None:
    provider.answer(Reply("One two three", finish_reason="length"))
    body = chat(stream=True, stream_options={"include_usage": True})
    with client.stream("POST", f"{provider.url}/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["transfer-encoding"] == "chunked"
        events = sse(response.read().decode())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(e["object"] == "chat.completion.chunk" and e["model"] == "gpt-test" for e in chunks)
    assert chunks[0]["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}
    ]
    contents = [e["choices"][0]["delta"]["content"] for e in chunks[1:4]]
    assert contents == ["One", " two", " three"]
    assert chunks[4]["choices"] == [{"index": 0, "delta": {}, "finish_reason": "length"}]
    # With include_usage: null usage on every choice chunk, then a choices: [] chunk.
    assert all(e["usage"] is None for e in chunks[:5])
    assert chunks[5]["choices"] == []
    assert chunks[5]["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    assert len(chunks) == 6


def test_stream_without_include_usage_has_no_usage(
    provider: FakeProvider, client: httpx.Client
) -> None:
    provider.answer(Reply(chunks=("你好", "、世界")))
    url = f"{provider.url}/chat/completions"
    events = sse(client.post(url, json=chat(stream=True)).text)
    assert all("usage" not in e for e in events[:-1])
    assert "".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]) == "你好、世界"
    assert [e["choices"][0]["finish_reason"] for e in events[:-1]] == [None, None, None, "stop"]


def test_answers_are_taken_in_order_then_the_default(
    provider: FakeProvider, client: httpx.Client
) -> None:
    provider.answer(
        Fail(429, headers={"retry-after": "7"}),
        Fail(503),
        Fail(500, message="boom", code="internal"),
        Reply("third time lucky"),
    )
    url = f"{provider.url}/chat/completions"
    limited = client.post(url, json=chat())
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "7"
    assert limited.json() == {
        "error": {
            "message": "Rate limit reached for requests.",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    busy = client.post(url, json=chat(stream=True))
    assert busy.status_code == 503
    assert busy.json()["error"]["type"] == "server_error"
    broken = client.post(url, json=chat())
    assert broken.status_code == 500
    assert broken.json()["error"] == {
        "message": "boom",
        "type": "server_error",
        "param": None,
        "code": "internal",
    }
    assert client.post(url, json=chat()).json()["choices"][0]["message"]["content"] == (
        "third time lucky"
    )
    default = client.post(url, json=chat()).json()["choices"][0]["message"]["content"]
    assert default == "Hello from the fake provider."
    assert [r.body.get("stream") for r in provider.requests] == [
        None,
        True,
        None,
        None,
        None,
    ]


def test_a_redirect_and_its_target_record(provider: FakeProvider, client: httpx.Client) -> None:
    with FakeProvider() as target:
        provider.answer(
            Redirect(f"{target.url}/chat/completions", status=308),
            Redirect(f"{target.url}/chat/completions"),
        )
        moved = client.post(f"{provider.url}/chat/completions", json=chat(stream=True))
        assert moved.status_code == 308
        assert moved.headers["location"] == f"{target.url}/chat/completions"
        assert moved.text == f"Moved to {target.url}/chat/completions\n"
        assert provider.wait_for_end(1) == "complete"
        assert target.requests == []  # not followed: the target saw nothing
        followed = client.post(
            f"{provider.url}/chat/completions", json=chat(), follow_redirects=True
        )
        assert followed.status_code == 200  # the target's default answer
        arrived = target.wait_for_request(1)
        assert (arrived.method, arrived.path) == ("POST", "/v1/chat/completions")
        # httpx drops Authorization on a redirect to another origin (port).
        assert "authorization" not in arrived.headers


def test_bearer_key_is_required(provider: FakeProvider) -> None:
    url = f"{provider.url}/chat/completions"
    provider.answer(Reply("only for the right key"))
    with httpx.Client(timeout=HANG_GUARD_S) as bare:
        missing = bare.post(url, json=chat())
        wrong = bare.post(url, json=chat(), headers={"authorization": "Bearer sk-other"})
        right = bare.post(url, json=chat(), headers={"authorization": f"Bearer {KEY}"})
    for refused in (missing, wrong):
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    # A refused request takes no answer from the queue.
    assert right.json()["choices"][0]["message"]["content"] == "only for the right key"
    assert len(provider.requests) == 3
    assert "authorization" not in provider.requests[0].headers


def test_base_path_unknown_paths_methods_and_bad_json(client: httpx.Client) -> None:
    with FakeProvider(api_key=KEY, base_path="/openai/v1/") as fake:
        assert fake.url.endswith("/openai/v1")
        assert client.post(f"{fake.url}/chat/completions", json=chat()).status_code == 200
        elsewhere = client.post(f"http://127.0.0.1:{fake.port}/v1/chat/completions", json=chat())
        assert elsewhere.status_code == 404
        assert elsewhere.json()["error"]["message"] == (
            "Unknown request URL: POST /v1/chat/completions."
        )
        wrong_method = client.get(f"{fake.url}/chat/completions")
        assert wrong_method.status_code == 405
        assert wrong_method.headers["allow"] == "POST"
        not_json = client.post(f"{fake.url}/chat/completions", content=b"{nope")
        assert not_json.status_code == 400
        assert [(r.method, r.path, r.body) for r in fake.requests] == [
            ("POST", "/openai/v1/chat/completions", chat()),
            ("POST", "/v1/chat/completions", chat()),
            ("GET", "/openai/v1/chat/completions", None),
            ("POST", "/openai/v1/chat/completions", None),
        ]
        assert fake.requests[3].raw == b"{nope"
    with FakeProvider(base_path="") as root:
        assert client.post(f"{root.url}/chat/completions", json=chat()).status_code == 200


# -- stalls: a raw socket shows exactly what was sent, nothing inferred from time


def raw_request(fake: FakeProvider, body: dict[str, Any]) -> socket.socket:
    payload = json.dumps(body).encode()
    sock = socket.create_connection(("127.0.0.1", fake.port), timeout=HANG_GUARD_S)
    head = (
        f"POST {fake.base_path}/chat/completions HTTP/1.1\r\nHost: x\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\n\r\n"
    )
    sock.sendall(head.encode() + payload)
    return sock


def nothing_waiting(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return not readable


def read_until(sock: socket.socket, count: int, marker: bytes) -> bytes:
    data = b""
    while data.count(marker) < count:
        more = sock.recv(65536)
        assert more, f"closed after {data!r}"
        data += more
    return data


def test_stall_before_the_first_byte_until_the_client_goes(provider: FakeProvider) -> None:
    provider.answer(Stall())
    sock = raw_request(provider, chat(stream=True))
    provider.wait_for_stall(1)
    assert provider.wait_for_request(1).body == chat(stream=True)
    assert nothing_waiting(sock), "a stall sent bytes"
    sock.close()
    assert provider.wait_for_end(1) == "client_gone"


def test_stall_after_n_events_then_the_client_goes(provider: FakeProvider) -> None:
    provider.answer(Reply("a b c d", stall_after=3))
    sock = raw_request(provider, chat(stream=True))
    provider.wait_for_stall(1)
    data = read_until(sock, 3, b"\n\n")  # the role chunk and two content chunks
    assert data.startswith(b"HTTP/1.1 200")
    assert data.count(b"data: ") == 3
    assert b'"content": " b"' in data
    assert b'" c"' not in data
    assert nothing_waiting(sock), "more than 3 events were sent"
    sock.close()
    assert provider.wait_for_end(1) == "client_gone"


def test_stall_after_headers_on_a_non_stream_request(provider: FakeProvider) -> None:
    provider.answer(Reply("never sent", stall_after=0))
    sock = raw_request(provider, chat())
    provider.wait_for_stall(1)
    head = read_until(sock, 1, b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert head.endswith(b"\r\n\r\n"), "a byte of the body was sent"
    assert nothing_waiting(sock)
    sock.close()
    assert provider.wait_for_end(1) == "client_gone"


def test_drop_after_n_events_ends_the_body_unfinished(
    provider: FakeProvider, client: httpx.Client
) -> None:
    provider.answer(Reply("a b c d", drop_after=2))
    url = f"{provider.url}/chat/completions"
    pieces: list[bytes] = []
    with client.stream("POST", url, json=chat(stream=True)) as response:
        raw = response.iter_raw()
        with pytest.raises(httpx.RemoteProtocolError):
            pieces.extend(raw)
    received = b"".join(pieces)
    assert received.count(b"data: ") == 2
    assert b"[DONE]" not in received
    assert provider.wait_for_end(1) == "dropped"


def test_stop_ends_stalls_and_idle_connections_at_once() -> None:
    fake = FakeProvider(api_key=KEY, default=Stall()).start()
    fake.answer(Reply("x"))
    # A keep-alive connection, idle after one whole answer: its handler waits
    # for a next request.
    idle = raw_request(fake, chat())
    head = read_until(idle, 1, b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(head.split(b"\r\n\r\n", 1)[1]) < length:
        head += idle.recv(65536)
    assert fake.wait_for_end(1) == "complete"
    stalled = [raw_request(fake, chat(stream=True)) for _ in range(2)]
    try:
        fake.wait_for_stall(2)
        fake.wait_for_stall(3)
        stopper = threading.Thread(target=fake.stop)
        stopper.start()
        stopper.join(HANG_GUARD_S)
        assert not stopper.is_alive(), "stop() hung"
        assert fake.wait_for_end(2) == "server_stopped"
        assert fake.wait_for_end(3) == "server_stopped"
        for sock in [idle, *stalled]:
            assert sock.recv(1) == b"", "the connection is still open"
    finally:
        for sock in [idle, *stalled]:
            sock.close()
        fake.stop()
    fake.stop()  # a second stop is harmless


def test_waits_fail_instead_of_hanging(provider: FakeProvider, client: httpx.Client) -> None:
    with pytest.raises(AssertionError, match=r"request 1 did not arrive within 0\.01 s"):
        provider.wait_for_request(1, timeout=0.01)
    client.post(f"{provider.url}/chat/completions", json=chat())
    assert provider.wait_for_end(1) == "complete"
    with pytest.raises(AssertionError, match="request 1 did not stall"):
        provider.wait_for_stall(1, timeout=0.01)
