"""What /chat refuses before any model is called: media type, size, shape, limits, models.

Every refusal is an exact JSON error that never echoes the input (each body
carries a marker that must not come back), and the emulator's log shows that
no upstream call was made (a later request's call is logged, and nothing before it).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.api.checks import (
    GLM,
    KIMI,
    LLAMA,
    assert_done,
    assert_error,
    assert_stream_headers,
    calls_before_a_later_request,
    post_chat,
    user,
)
from tests.harness import EmulatorControl

MARK = "zq-MARKER-5531"
JSON = {"content-type": "application/json"}


def assert_no_call(ai: EmulatorControl, client: httpx.Client) -> None:
    # A call the refused request made would be logged before a later one's.
    assert calls_before_a_later_request(ai, client) == []


def refused(
    client: httpx.Client,
    ai: EmulatorControl,
    status: int,
    code: str,
    *,
    body: Any = None,
    content: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    chat = post_chat(client, body, content=content, headers=headers)
    assert_error(chat.response, status, code, MARK)
    assert_no_call(ai, client)
    return chat.response


# --- media type -------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"],
)
def test_chat_needs_json_content_type(
    client: httpx.Client, ai: EmulatorControl, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    content = json.dumps(user(f"hello {MARK}")).encode()
    refused(client, ai, 415, "unsupported_media_type", content=content, headers=headers)


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"],
)
def test_chat_accepts_json_with_or_without_charset(
    client: httpx.Client, ai: EmulatorControl, content_type: str
) -> None:
    content = json.dumps(user("hello")).encode()
    chat = post_chat(client, content=content, headers={"content-type": content_type})
    assert_stream_headers(chat.response)
    assert_done(chat.events, GLM)
    assert len(ai.wait_for_calls(1)) == 1


# --- size ---------------------------------------------------------------------


def test_body_over_64_kib_is_413(client: httpx.Client, ai: EmulatorControl) -> None:
    # Valid JSON whose only fault is its size (one message of 65,600 chars).
    body = user(MARK + "x" * 65_600)
    refused(client, ai, 413, "payload_too_large", body=body)


def test_body_of_exactly_64_kib_is_not_413(client: httpx.Client, ai: EmulatorControl) -> None:
    # 65,536 bytes of JSON: passes the size cap, then fails the 8,000-char limit (400).
    prefix = b'{"messages":[{"role":"user","content":"'
    suffix = b'"}]}'
    content = prefix + b"y" * (65_536 - len(prefix) - len(suffix)) + suffix
    assert len(content) == 65_536
    refused(client, ai, 400, "invalid_request", content=content, headers=JSON)


def test_chunked_body_over_64_kib_is_413(client: httpx.Client, ai: EmulatorControl) -> None:
    payload = json.dumps(user(MARK + "x" * 70_000)).encode()

    def pieces() -> Iterator[bytes]:
        for start in range(0, len(payload), 4096):
            yield payload[start : start + 4096]

    with client.stream("POST", "/chat", content=pieces(), headers=JSON) as response:
        assert "content-length" not in response.request.headers
        assert response.request.headers["transfer-encoding"] == "chunked"
        response.read()
    assert_error(response, 413, "payload_too_large", MARK)
    assert_no_call(ai, client)


def test_oversized_content_length_is_413_even_if_malformed(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    # Checked before parsing: the size wins over the broken JSON.
    content = b"{" + MARK.encode() + b"!" * 70_000
    refused(client, ai, 413, "payload_too_large", content=content, headers=JSON)


# --- shape --------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b'{"messages": [' + MARK.encode(),
        b"\xff\xfe not utf-8 " + MARK.encode(),
        b"null",
        b"[]",
        b'"' + MARK.encode() + b'"',
        b"42",
        b'{"messages": [{"role": "user", "content": "hi"}]} trailing',
    ],
    ids=[
        "empty",
        "truncated",
        "unterminated",
        "not-utf8",
        "null",
        "array",
        "string",
        "number",
        "trailing",
    ],
)
def test_malformed_or_non_object_json_is_400(
    client: httpx.Client, ai: EmulatorControl, content: bytes
) -> None:
    refused(client, ai, 400, "invalid_request", content=content, headers=JSON)


def _ok() -> dict[str, Any]:
    return user(f"hello {MARK}")


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"messages": []},
        {"messages": None},
        {"messages": f"{MARK}"},
        {"messages": {"role": "user", "content": MARK}},
        {"messages": [f"{MARK}"]},
        {"messages": [{"role": "user"}]},
        {"messages": [{"content": MARK}]},
        {"messages": [{"role": "user", "content": None}]},
        {"messages": [{"role": "user", "content": 5}]},
        # Parts: a user's content may be text and image parts, an assistant's not.
        {"messages": [{"role": "user", "content": [{"type": "texts", "text": MARK}]}]},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": MARK, "x": 1}]}]},
        {
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": [{"type": "text", "text": MARK}]},
                {"role": "user", "content": "hi"},
            ]
        },
        {"messages": [{"role": "user", "content": MARK, "name": "x"}]},
        {"messages": [{"role": MARK, "content": "hi"}]},
        {"messages": [{"role": "tool", "content": MARK}]},
        {"messages": [{"role": "system", "content": MARK}, {"role": "user", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "system", "content": MARK}]},
        {"messages": [{"role": "user", "content": MARK}, {"role": "assistant", "content": "x"}]},
        {**_ok(), MARK: 1},
        {**_ok(), "stream": False},
        {**_ok(), "prompt": MARK},
        {**_ok(), "model": MARK},
        {**_ok(), "model": "@cf/zai-org/glm-5.3"},
        {**_ok(), "model": "@cf/openai/gpt-oss-120b"},
        {**_ok(), "model": "GLM"},
        {**_ok(), "model": ""},
        {**_ok(), "model": 1},
        {**_ok(), "temperature": -0.1},
        {**_ok(), "temperature": 2.01},
        {**_ok(), "temperature": "1"},
        {**_ok(), "temperature": True},
        {**_ok(), "max_tokens": 4097},
        {**_ok(), "max_tokens": 0},
        {**_ok(), "max_tokens": -1},
        {**_ok(), "max_tokens": 10.5},
        {**_ok(), "max_tokens": "100"},
        {**_ok(), "max_tokens": True},
        {**_ok(), "reasoning": "false"},
        {**_ok(), "reasoning": 0},
    ],
    ids=lambda body: json.dumps(body).replace(MARK, "M"),
)
def test_invalid_body_is_400_without_echo_or_call(
    client: httpx.Client, ai: EmulatorControl, body: dict[str, Any]
) -> None:
    refused(client, ai, 400, "invalid_request", body=body)


def test_temperature_nan_is_400(client: httpx.Client, ai: EmulatorControl) -> None:
    content = b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'
    refused(client, ai, 400, "invalid_request", content=content, headers=JSON)


# --- limits -------------------------------------------------------------------


def _conversation(count: int, chars: int = 10) -> list[dict[str, str]]:
    roles = ["user", "assistant"]
    # Ends with a user message whatever the count.
    return [{"role": roles[(count - 1 - i) % 2], "content": "m" * chars} for i in range(count)]


def test_51_messages_is_400(client: httpx.Client, ai: EmulatorControl) -> None:
    messages = _conversation(51)
    messages[0]["content"] = MARK
    refused(client, ai, 400, "invalid_request", body={"messages": messages})


def test_50_messages_is_accepted(client: httpx.Client, ai: EmulatorControl) -> None:
    messages = _conversation(50)
    chat = post_chat(client, {"messages": messages})
    assert_stream_headers(chat.response)
    assert chat.events.final.name == "done"
    (call,) = ai.wait_for_calls(1)
    assert call["inputs"]["messages"][1:] == messages


def test_message_over_8000_chars_is_400(client: httpx.Client, ai: EmulatorControl) -> None:
    refused(client, ai, 400, "invalid_request", body=user(MARK + "a" * (8001 - len(MARK))))


def test_message_of_8000_chars_is_accepted(client: httpx.Client, ai: EmulatorControl) -> None:
    # Characters, not bytes: 8,000 CJK characters are 24,000 bytes.
    text = "字" * 8000
    chat = post_chat(client, user(text))
    assert_stream_headers(chat.response)
    assert chat.events.final.name == "done"
    (call,) = ai.wait_for_calls(1)
    assert call["inputs"]["messages"][-1] == {"role": "user", "content": text}


def test_total_over_32000_chars_is_400(client: httpx.Client, ai: EmulatorControl) -> None:
    messages = _conversation(5, 6_401)  # 32,005 in total, each under 8,000
    messages[0]["content"] = MARK + messages[0]["content"][len(MARK) :]
    refused(client, ai, 400, "invalid_request", body={"messages": messages})


def test_total_of_32000_chars_is_accepted(client: httpx.Client, ai: EmulatorControl) -> None:
    messages = _conversation(4, 8_000)
    chat = post_chat(client, {"messages": messages})
    assert_stream_headers(chat.response)
    assert chat.events.final.name == "done"
    assert len(ai.wait_for_calls(1)) == 1


@pytest.mark.parametrize("model", ["glm", GLM, "kimi", KIMI, "llama", LLAMA])
def test_allowed_models_by_alias_or_id_are_accepted(
    client: httpx.Client, ai: EmulatorControl, model: str
) -> None:
    chat = post_chat(client, user("hi", model=model))
    assert_stream_headers(chat.response)
    assert chat.events.final.name == "done"
    (call,) = ai.wait_for_calls(1)
    expected = {"glm": GLM, "kimi": KIMI, "llama": LLAMA}.get(model, model)
    assert call["model"] == expected


def test_the_connection_serves_the_next_request_after_a_413_by_its_length(
    edgechat_url: str,
) -> None:
    # Refused by Content-Length before the body is read; the client sent it
    # whole, as clients do. The same connection then answers the next request.
    host, port = urlsplit(edgechat_url).hostname, urlsplit(edgechat_url).port
    body = b"{" + b"x" * 70_000 + b"}"
    head = b"POST /chat HTTP/1.1\r\nHost: edgechat\r\nContent-Type: application/json\r\n"
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        first = read_response(conn)
        assert first.startswith(b"HTTP/1.1 413 "), first[:80]
        assert b"connection: close" not in first.lower()
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: edgechat\r\n\r\n")
        second = read_response(conn)
    assert second.startswith(b"HTTP/1.1 200 "), second[:80]
    assert second.endswith(b'{"status":"ok"}')


def read_response(conn: socket.socket) -> bytes:
    """One HTTP/1.1 response with a Content-Length, read whole."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"the connection closed after {data[:80]!r}"
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length: *(\d+)", head)
    assert length is not None, head
    while len(rest) < int(length.group(1)):
        chunk = conn.recv(65536)
        assert chunk, "the connection closed mid-body"
        rest += chunk
    return head + b"\r\n\r\n" + rest
