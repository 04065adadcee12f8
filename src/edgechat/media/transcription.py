"""Speech in: audio transcribed by Whisper, on ``POST /api/transcribe`` (the
audio itself as the body) and in OpenAI's shape on
``POST /v1/audio/transcriptions`` (a multipart form).

Whisper (https://developers.cloudflare.com/workers-ai/models/whisper-large-v3-turbo/)
takes ``{"audio": <base64>, "language"?, "task"?, "initial_prompt"?}`` and
answers ``{"text", "transcription_info": {"language", "duration", …}, …}``;
without a language it finds the spoken one itself (Chinese and English
among many). What is checked first: the bytes are audio (the signature of
WebM, Ogg, WAV, MP3, MP4/M4A or FLAC), at most ``MAX_AUDIO_BYTES``, and a
WAV at most ``MAX_AUDIO_SECONDS`` long by its header (other formats'
lengths are not read before the call: the page stops recording at that
length). Every refusal names the rule and never repeats the audio.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
from typing import Any

from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.faults import UpstreamMalformed
from edgechat.core.ports import Ai

__all__ = [
    "WHISPER",
    "audio_kind",
    "check_audio",
    "language",
    "parse_form",
    "transcribe",
]

WHISPER = "@cf/openai/whisper-large-v3-turbo"
WHISPER_NAMES = ("whisper", WHISPER)
LANGUAGES = ("en", "zh")
FORMATS = ("json", "text", "verbose_json")
_FORM_FIELDS = frozenset(("file", "model", "language", "prompt", "response_format", "temperature"))


def audio_kind(data: bytes) -> str | None:
    """The audio format the bytes say they are, or None."""
    if data[:4] == b"\x1a\x45\xdf\xa3":
        return "webm"
    if data[:4] == b"OggS":
        return "ogg"
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        return "wav"
    if data[:4] == b"fLaC":
        return "flac"
    if data[4:8] == b"ftyp":
        return "mp4"
    if data[:3] == b"ID3" or (len(data) > 1 and data[0] == 0xFF and data[1] & 0xE0 == 0xE0):
        return "mp3"
    return None


def _wav_seconds(data: bytes) -> float | None:
    # RIFF chunks after "WAVE": "fmt " holds the byte rate (offset 8 of its
    # data), "data" the samples; seconds = data size / byte rate.
    at, rate = 12, 0
    while at + 8 <= len(data):
        name, size = data[at : at + 4], int.from_bytes(data[at + 4 : at + 8], "little")
        if name == b"fmt " and size >= 16:
            rate = int.from_bytes(data[at + 16 : at + 20], "little")
        elif name == b"data":
            return size / rate if rate else None
        at += 8 + size + (size & 1)
    return None


def check_audio(data: bytes, where: str, max_bytes: int, max_seconds: int) -> str:
    """The audio's format, or ``BadRequest`` naming the rule it breaks."""
    if not data:
        raise BadRequest(public=f"{where} is empty: send the recorded audio.")
    if len(data) > max_bytes:
        raise BadRequest(public=f"{where} is larger than {max_bytes} bytes (MAX_AUDIO_BYTES).")
    kind = audio_kind(data)
    if kind is None:
        raise BadRequest(
            public=f"{where} is not audio: its bytes are none of WebM, Ogg, WAV, MP3, MP4 or FLAC."
        )
    if kind == "wav":
        seconds = _wav_seconds(data)
        if seconds is None:
            raise BadRequest(public=f"{where} is not a whole WAV file: its header is broken.")
        if seconds > max_seconds:
            raise BadRequest(
                public=f"{where} is longer than {max_seconds} seconds (MAX_AUDIO_SECONDS)."
            )
    return kind


def language(value: Any) -> str | None:
    if value in (None, ""):
        return None
    if value not in LANGUAGES:
        raise BadRequest(public=f"language must be one of {', '.join(LANGUAGES)}, or left out.")
    return str(value)


def parse_form(content_type: str, body: bytes) -> dict[str, Any]:
    """``/v1/audio/transcriptions``'s multipart form: ``file`` as bytes, the
    other fields as text; ``BadRequest`` for a form that is not one."""
    if not content_type.lower().startswith("multipart/form-data"):
        raise BadRequest(public="The request must be multipart/form-data with a file field.")
    head = f"Content-Type: {content_type}\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, Any] = {}
    for part in message.iter_parts() if message.is_multipart() else ():
        name = part.get_param("name", header="content-disposition")
        if type(name) is not str or name not in _FORM_FIELDS or name in fields:
            raise BadRequest(
                public=f"The form takes {', '.join(sorted(_FORM_FIELDS))}, each once, only."
            )
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        fields[name] = data if name == "file" else data.decode("utf-8", "replace")
    if "file" not in fields:
        raise BadRequest(public="The form needs a file field holding the audio.")
    if fields.get("model") not in WHISPER_NAMES:
        raise ModelNotFound(public=f"model must be {' or '.join(WHISPER_NAMES)}.")
    if fields.setdefault("response_format", "json") not in FORMATS:
        raise BadRequest(public=f"response_format must be one of {', '.join(FORMATS)}.")
    return fields


async def transcribe(
    ai: Ai, data: bytes, spoken: str | None, prompt: str | None = None
) -> dict[str, Any]:
    """Whisper's transcript of ``data``: ``{"text", "language", "duration"}``."""
    inputs: dict[str, Any] = {"audio": base64.b64encode(data).decode(), "task": "transcribe"}
    if spoken:
        inputs["language"] = spoken
    if prompt:
        inputs["initial_prompt"] = prompt[:1000]
    answer = await ai.run(WHISPER, inputs, {})
    text, info = answer.get("text"), answer.get("transcription_info")
    if type(text) is not str:
        raise UpstreamMalformed(detail=f"{WHISPER} answered no text")
    info = info if type(info) is dict else {}
    duration = info.get("duration")
    return {
        "text": text.strip(),
        "language": info.get("language") if type(info.get("language")) is str else spoken,
        "duration": duration if type(duration) in (int, float) else None,
    }
