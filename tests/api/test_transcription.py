"""Speech in over HTTP: ``POST /api/transcribe`` (the audio as the body) and
``POST /v1/audio/transcriptions`` (with the official client's
``audio.transcriptions``) answer the emulator's Whisper, whose transcript is
derived from the bytes it got; audio that is not audio, too large or too long
is a 400 naming the rule that calls nothing."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.api.checks import assert_error, calls_before_a_later_request
from tests.api.conftest import ClientFactory, Server, ServerPool, openai_client, token_client
from tests.kit.audio import emulated_transcript, wav

TOKEN = "test-token-transcribe-5e"
SETTINGS = {"API_TOKEN": TOKEN, "MAX_AUDIO_BYTES": "200000", "MAX_AUDIO_SECONDS": "5"}
WHISPER = "@cf/openai/whisper-large-v3-turbo"


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS, rate_limited=False)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return token_client(new_client, server, TOKEN)


def test_the_audio_is_transcribed_from_its_bytes(server: Server, client: httpx.Client) -> None:
    server.ai.reset()
    audio = wav(1.5)
    response = client.post("/api/transcribe", content=audio, headers={"content-type": "audio/wav"})
    assert response.status_code == 200
    assert response.json() == {
        "text": emulated_transcript(audio, "wav"),
        "language": "en",
        "duration": 1.5,
    }
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == WHISPER
    assert call["inputs"]["task"] == "transcribe"
    assert "language" not in call["inputs"]


def test_the_language_given_goes_to_whisper_and_comes_back(
    server: Server, client: httpx.Client
) -> None:
    server.ai.reset()
    audio = b"OggS" + bytes(500)
    headers = {"content-type": "audio/ogg", "content-language": "zh"}
    response = client.post("/api/transcribe", content=audio, headers=headers)
    assert response.json()["language"] == "zh"
    assert response.json()["text"] == emulated_transcript(audio, "ogg")
    assert server.ai.wait_for_calls(1)[0]["inputs"]["language"] == "zh"


@pytest.mark.parametrize(
    ("audio", "headers", "message"),
    [
        (
            b"%PDF-1.7 not audio",
            {},
            "The audio is not audio: its bytes are none of WebM, Ogg, WAV, MP3, MP4 or FLAC.",
        ),
        (wav(5.5), {}, "The audio is longer than 5 seconds (MAX_AUDIO_SECONDS)."),
        (b"", {}, "The audio is empty: send the recorded audio."),
        (b"OggS", {"content-language": "fr"}, "language must be one of en, zh, or left out."),
    ],
)
def test_bad_audio_is_a_400_that_calls_nothing(
    server: Server, client: httpx.Client, audio: bytes, headers: dict[str, str], message: str
) -> None:
    server.ai.reset()
    response = client.post(
        "/api/transcribe", content=audio, headers={"content-type": "audio/wav", **headers}
    )
    assert_error(response, 400, "invalid_request")
    assert response.json()["error"]["message"] == message
    assert calls_before_a_later_request(server.ai, client) == []


def test_too_many_bytes_are_refused_while_reading(server: Server, client: httpx.Client) -> None:
    response = client.post("/api/transcribe", content=b"OggS" + bytes(300_000))
    assert_error(response, 413, "payload_too_large")
    assert response.json()["error"]["message"] == "The request body is larger than 200000 bytes."


@pytest.fixture
def v1(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server, TOKEN) as made:
        yield made


def test_the_openai_client_transcribes(server: Server, v1: openai.OpenAI) -> None:
    server.ai.reset()
    audio = wav(0.5)
    result = v1.audio.transcriptions.create(model="whisper", file=("note.wav", audio))
    assert result.text == emulated_transcript(audio, "wav")
    text = v1.audio.transcriptions.create(
        model="whisper", file=("note.wav", audio), response_format="text", language="en"
    )
    assert str(text).strip() == emulated_transcript(audio, "wav")
    with pytest.raises(openai.BadRequestError) as caught:
        v1.audio.transcriptions.create(model="whisper", file=("x.wav", b"not audio"))
    assert "file is not audio" in str(caught.value)
    with pytest.raises(openai.NotFoundError):
        v1.audio.transcriptions.create(model="whisper-1", file=("note.wav", audio))
    assert [c["model"] for c in server.ai.calls()] == [WHISPER, WHISPER]
