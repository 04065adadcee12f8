"""Speech in: which bytes are audio, the limits, OpenAI's form, Whisper's answer."""

from __future__ import annotations

import asyncio
import base64

import pytest

from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.faults import UpstreamMalformed
from edgechat.media.transcription import WHISPER, audio_kind, check_audio, parse_form, transcribe
from tests.kit.audio import wav
from tests.unit.fakes import FakeAi


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (b"\x1a\x45\xdf\xa3" + bytes(8), "webm"),
        (b"OggS" + bytes(8), "ogg"),
        (wav(0.1), "wav"),
        (b"fLaC" + bytes(8), "flac"),
        (b"\x00\x00\x00\x20ftypM4A ", "mp4"),
        (b"ID3\x03" + bytes(8), "mp3"),
        (b"\xff\xfb\x90\x64" + bytes(8), "mp3"),
        (b"%PDF-1.7", None),
        (b"hello world", None),
    ],
)
def test_audio_is_known_by_its_signature(data: bytes, kind: str | None) -> None:
    assert audio_kind(data) == kind


def refusal(data: bytes, max_bytes: int = 1 << 20, max_seconds: int = 10) -> str:
    with pytest.raises(BadRequest) as caught:
        check_audio(data, "The audio", max_bytes, max_seconds)
    return str(caught.value.to_json()["error"]["message"])


def test_the_audio_rules_are_named() -> None:
    assert check_audio(wav(9.9), "The audio", 1 << 20, 10) == "wav"
    assert refusal(b"") == "The audio is empty: send the recorded audio."
    assert refusal(b"not audio at all") == (
        "The audio is not audio: its bytes are none of WebM, Ogg, WAV, MP3, MP4 or FLAC."
    )
    assert (
        refusal(wav(1), max_bytes=1000) == "The audio is larger than 1000 bytes (MAX_AUDIO_BYTES)."
    )
    assert refusal(wav(10.5)) == "The audio is longer than 10 seconds (MAX_AUDIO_SECONDS)."
    assert refusal(b"RIFF\x00\x00\x00\x00WAVEjunk") == (
        "The audio is not a whole WAV file: its header is broken."
    )


def form(**fields: str | bytes) -> tuple[str, bytes]:
    boundary = "edgechat-boundary-7"
    body = b""
    for name, value in fields.items():
        extra = '; filename="a.wav"' if name == "file" else ""
        raw = value if isinstance(value, bytes) else value.encode()
        body += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode()
            + raw
            + b"\r\n"
        )
    return f"multipart/form-data; boundary={boundary}", body + f"--{boundary}--\r\n".encode()


def test_the_openai_form() -> None:
    audio = wav(0.2)
    fields = parse_form(*form(file=audio, model="whisper", language="zh"))
    assert fields == {
        "file": audio,
        "model": "whisper",
        "language": "zh",
        "response_format": "json",
    }
    with pytest.raises(ModelNotFound):
        parse_form(*form(file=audio, model="whisper-1"))
    for bad, message in [
        (form(model="whisper"), "The form needs a file field holding the audio."),
        (
            form(file=audio, model="whisper", response_format="srt"),
            "response_format must be one of json, text, verbose_json.",
        ),
        (
            form(file=audio, model="whisper", timestamp_granularities="word"),
            "The form takes file, language, model, prompt, response_format, temperature, "
            "each once, only.",
        ),
        (("application/json", b"{}"), "The request must be multipart/form-data with a file field."),
    ]:
        with pytest.raises(BadRequest) as caught:
            parse_form(*bad)
        assert caught.value.to_json()["error"]["message"] == message


def test_whisper_is_sent_the_audio_and_its_answer_kept() -> None:
    answer = {"text": " 你好 ", "transcription_info": {"language": "zh", "duration": 1.5}}
    ai = FakeAi({}, runs={WHISPER: [answer, {"vtt": "no text"}]})
    assert asyncio.run(transcribe(ai, b"OggS", "zh", "edgechat")) == {
        "text": "你好",
        "language": "zh",
        "duration": 1.5,
    }
    assert ai.run_calls[0].inputs == {
        "audio": base64.b64encode(b"OggS").decode(),
        "task": "transcribe",
        "language": "zh",
        "initial_prompt": "edgechat",
    }
    with pytest.raises(UpstreamMalformed):
        asyncio.run(transcribe(ai, b"OggS", None))
