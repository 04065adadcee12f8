"""Speech out: Markdown read as prose, the language found, the request
shapes of /api/speech and /v1/audio/speech, and MeloTTS's answer."""

from __future__ import annotations

import asyncio
import base64

import pytest

from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.faults import UpstreamMalformed
from edgechat.media.speech import (
    TTS_MODEL,
    language_of,
    parse_openai_speech,
    parse_speech,
    speak,
    speakable,
)
from tests.unit.fakes import FakeAi

MARKDOWN = """# Result

The **answer** is *42*, see [the docs](https://example.com) and `len(x)`.

- first point
- second point

```python
print("not read aloud")
```

| name | value |
| --- | --- |
| a | 1 |
"""


def test_markdown_is_read_as_prose() -> None:
    assert speakable(MARKDOWN) == (
        "Result\nThe answer is 42, see the docs and len(x).\nfirst point\nsecond point\n"
        "(code)\nname, value\na, 1"
    )
    assert "print" not in speakable(MARKDOWN)
    assert speakable("snake_case stays, 2 * 3 * 4 too") == "snake_case stays, 2 * 3 * 4 too"


@pytest.mark.parametrize(
    ("text", "lang"),
    [("Hello there", "en"), ("你好世界", "zh"), ("这是 GLM 的回答", "zh"), ("Use 的 once", "en")],
)
def test_the_language_is_the_texts_own(text: str, lang: str) -> None:
    assert language_of(text) == lang


def test_the_speech_request() -> None:
    assert parse_speech({"text": "**Hi**"}, 100) == ("Hi", "en")
    assert parse_speech({"text": "Hi", "lang": "zh"}, 100) == ("Hi", "zh")
    for bad, message in [
        ({"text": ""}, "text must be text to read aloud."),
        ({"text": 5}, "text must be text to read aloud."),
        (
            {"text": "x" * 101},
            "text is longer than 100 characters (MAX_SPEECH_CHARS); read it aloud in pieces.",
        ),
        ({"text": "hi", "lang": "fr"}, "lang must be one of en, zh."),
        (
            {"text": "hi", "voice": "x"},
            'The request must be {"text": "...", "lang"?: "en" | "zh"}.',
        ),
        ({"text": "```\ncode only\n```"}, None),
        ({"text": "<br>"}, "text has nothing to read aloud once its Markdown is read."),
    ]:
        if message is None:
            assert parse_speech(bad, 100) == ("(code)", "en")
            continue
        with pytest.raises(BadRequest) as caught:
            parse_speech(bad, 100)
        assert caught.value.to_json()["error"]["message"] == message


def test_the_openai_speech_request() -> None:
    body = {"model": "melotts", "input": "你好", "voice": "alloy", "response_format": "mp3"}
    assert parse_openai_speech(body, 100) == ("你好", "zh")
    assert parse_openai_speech({**body, "model": TTS_MODEL, "speed": 1.0}, 100)[1] == "zh"
    with pytest.raises(ModelNotFound):
        parse_openai_speech({**body, "model": "tts-1"}, 100)
    for bad, message in [
        ({**body, "response_format": "wav"}, "response_format must be mp3: MeloTTS makes MP3."),
        ({**body, "speed": 1.5}, "speed must be 1: MeloTTS speaks at one speed."),
        ({"model": "melotts", "input": "hi"}, "voice is required."),
        (
            {**body, "stream_format": "sse"},
            "The request takes input, instructions, model, response_format, speed, voice only.",
        ),
    ]:
        with pytest.raises(BadRequest) as caught:
            parse_openai_speech(bad, 100)
        assert caught.value.to_json()["error"]["message"] == message


def test_speak_returns_meloTTS_audio_and_refuses_none() -> None:
    mp3 = b"ID3\x03\x00\x00\x00\x00\x00\x00\xff\xfb"
    ai = FakeAi({}, runs={TTS_MODEL: [{"audio": base64.b64encode(mp3).decode()}, {"audio": "%%"}]})
    assert asyncio.run(speak(ai, "Hi", "en", {})) == mp3
    assert ai.run_calls[0].inputs == {"prompt": "Hi", "lang": "en"}
    with pytest.raises(UpstreamMalformed):
        asyncio.run(speak(ai, "Hi", "en", {}))
