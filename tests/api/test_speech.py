"""Speech out over HTTP: ``POST /api/speech`` and ``POST /v1/audio/speech``
(with the official client's ``audio.speech``) answer MeloTTS's MP3 from the
emulator, whose tag says what it was asked to speak and whose length follows
the text; bad requests are 400s that call nothing."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.api.checks import assert_error, calls_before_a_later_request
from tests.api.conftest import ClientFactory, Server, ServerPool, openai_client, token_client
from tests.kit.audio import read_mp3

TOKEN = "test-token-speech-9a"
SETTINGS = {"API_TOKEN": TOKEN, "MAX_SPEECH_CHARS": "300"}
MELOTTS = "@cf/myshell-ai/melotts"


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS, rate_limited=False)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return token_client(new_client, server, TOKEN)


def test_an_answer_is_read_aloud_as_prose_in_its_language(
    server: Server, client: httpx.Client
) -> None:
    server.ai.reset()
    response = client.post("/api/speech", json={"text": "## 结果\n\n这是**答案**。"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "audio/mpeg"
    assert response.headers["cache-control"] == "no-store"
    mp3 = read_mp3(response.content)
    assert (mp3.text, mp3.lang) == ("结果\n这是答案。", "zh")
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == MELOTTS
    assert call["inputs"] == {"prompt": "结果\n这是答案。", "lang": "zh"}


def test_the_audio_lasts_as_long_as_the_text(client: httpx.Client) -> None:
    short = read_mp3(client.post("/api/speech", json={"text": "Hello."}).content)
    long = read_mp3(client.post("/api/speech", json={"text": "Hello. " * 20}).content)
    assert short.lang == long.lang == "en"
    # The emulator speaks 60 ms a character: 6 characters and 139 (trailing space gone).
    assert round(short.seconds, 1) == 0.4
    assert round(long.seconds, 1) == 8.4
    assert long.frames > 20 * short.frames // 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"text": ""}, "text must be text to read aloud."),
        (
            {"text": "x" * 301},
            "text is longer than 300 characters (MAX_SPEECH_CHARS); read it aloud in pieces.",
        ),
        ({"text": "hi", "lang": "de"}, "lang must be one of en, zh."),
    ],
)
def test_a_bad_request_calls_nothing(
    server: Server, client: httpx.Client, body: object, message: str
) -> None:
    server.ai.reset()
    response = client.post("/api/speech", json=body)
    assert_error(response, 400, "invalid_request")
    assert response.json()["error"]["message"] == message
    assert calls_before_a_later_request(server.ai, client) == []


def test_speech_needs_the_token_when_one_is_set(server: Server, new_client: ClientFactory) -> None:
    response = new_client(server.url).post("/api/speech", json={"text": "hi"})
    assert_error(response, 401, "unauthorized")


@pytest.fixture
def v1(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server, TOKEN) as made:
        yield made


def test_the_openai_client_speaks(server: Server, v1: openai.OpenAI) -> None:
    server.ai.reset()
    reply = v1.audio.speech.create(model="melotts", voice="alloy", input="Read **this** aloud.")
    mp3 = read_mp3(reply.content)
    assert (mp3.text, mp3.lang) == ("Read this aloud.", "en")
    with pytest.raises(openai.NotFoundError):
        v1.audio.speech.create(model="tts-1", voice="alloy", input="hi")
    with pytest.raises(openai.BadRequestError) as caught:
        v1.audio.speech.create(model="melotts", voice="alloy", input="hi", response_format="wav")
    assert "response_format must be mp3" in str(caught.value)
    assert [c["model"] for c in server.ai.calls()] == [MELOTTS]
