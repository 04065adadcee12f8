"""Speech out: text read aloud by MeloTTS, on ``POST /api/speech`` and in
OpenAI's shape on ``POST /v1/audio/speech``.

MeloTTS (https://developers.cloudflare.com/workers-ai/models/melotts/) takes
``{"prompt", "lang"}`` and answers ``{"audio": <base64 MP3>}``; it reads
Chinese and English among others. The text is made speakable first: Markdown
is read as prose, not symbol by symbol (code blocks are named, not spelt
out; links keep their words; emphasis, headings, list and table marks go),
and the language is the text's own unless the request names one. At most
``MAX_SPEECH_CHARS`` characters a request: a client reads a long answer
aloud in pieces, so its first words play while the next are made.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from edgechat.core.errors import BadRequest, ModelNotFound
from edgechat.core.faults import UpstreamMalformed
from edgechat.core.ports import Ai

__all__ = ["TTS_MODEL", "language_of", "parse_openai_speech", "parse_speech", "speak", "speakable"]

TTS_MODEL = "@cf/myshell-ai/melotts"
# The names /v1/audio/speech takes for it.
TTS_NAMES = ("melotts", TTS_MODEL)
LANGUAGES = ("en", "zh")

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN = re.compile(r"[A-Za-z]")
_FENCE = re.compile(r"^(```|~~~)[^\n]*\n.*?(?:^\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)
_STEPS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"!\[([^\]]*)\]\([^)]*\)"), r"\1"),  # images: their alt text
    (re.compile(r"\[([^\]]+)\]\([^)]*\)"), r"\1"),  # links: their words
    (re.compile(r"`([^`]*)`"), r"\1"),  # inline code: its text
    (re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.MULTILINE), ""),  # headings
    (re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+", re.MULTILINE), ""),  # list marks
    (re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE), ""),  # quotes
    (re.compile(r"^[ \t]*\|?[ \t]*:?-{3,}.*$", re.MULTILINE), ""),  # table rules
    (re.compile(r"[ \t]*\|[ \t]*"), ", "),  # table cells
    (re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # emphasis
    (re.compile(r"<[^>]+>"), ""),  # HTML tags
    (re.compile(r"[ \t]+"), " "),
    (re.compile(r"\n[\n ,]*\n"), "\n"),
)


def speakable(markdown: str, code: str = "(code)") -> str:
    """Markdown as it is read aloud."""
    text = _FENCE.sub(f"{code}\n", markdown)
    for pattern, replacement in _STEPS:
        text = pattern.sub(replacement, text)
    return "\n".join(line.strip(" ,") for line in text.splitlines()).strip()


def language_of(text: str) -> str:
    """``zh`` when Chinese characters outnumber Latin letters by a third, else ``en``."""
    return "zh" if len(_CJK.findall(text)) * 3 > len(_LATIN.findall(text)) else "en"


def _text(value: Any, field: str, most: int) -> str:
    if type(value) is not str or not value.strip():
        raise BadRequest(public=f"{field} must be text to read aloud.")
    if len(value) > most:
        raise BadRequest(
            public=f"{field} is longer than {most} characters (MAX_SPEECH_CHARS); "
            "read it aloud in pieces."
        )
    return value


def _language(value: Any, text: str) -> str:
    if value is None:
        return language_of(text)
    if value not in LANGUAGES:
        raise BadRequest(public=f"lang must be one of {', '.join(LANGUAGES)}.")
    return str(value)


def parse_speech(data: Any, most: int) -> tuple[str, str]:
    """``POST /api/speech``: ``{"text": Markdown, "lang": "en" | "zh"?}``."""
    if type(data) is not dict or not data.keys() <= {"text", "lang"}:
        raise BadRequest(public='The request must be {"text": "...", "lang"?: "en" | "zh"}.')
    text = speakable(_text(data.get("text"), "text", most))
    if not text:
        raise BadRequest(public="text has nothing to read aloud once its Markdown is read.")
    return text, _language(data.get("lang"), text)


_OPENAI_FIELDS = frozenset(("model", "input", "voice", "response_format", "speed", "instructions"))


def parse_openai_speech(data: Any, most: int) -> tuple[str, str]:
    """``POST /v1/audio/speech``: OpenAI's body. ``voice`` is accepted (MeloTTS
    has one voice a language); the language is the input's own."""
    if type(data) is not dict or not data.keys() <= _OPENAI_FIELDS:
        raise BadRequest(public=f"The request takes {', '.join(sorted(_OPENAI_FIELDS))} only.")
    if data.get("model") not in TTS_NAMES:
        raise ModelNotFound(public=f"model must be {' or '.join(TTS_NAMES)}.")
    if type(data.get("voice")) not in (str, dict):
        raise BadRequest(public="voice is required.")
    if data.get("response_format", "mp3") != "mp3":
        raise BadRequest(public="response_format must be mp3: MeloTTS makes MP3.")
    if data.get("speed", 1) != 1:
        raise BadRequest(public="speed must be 1: MeloTTS speaks at one speed.")
    text = speakable(_text(data.get("input"), "input", most))
    if not text:
        raise BadRequest(public="input has nothing to read aloud once its Markdown is read.")
    return text, language_of(text)


async def speak(ai: Ai, text: str, lang: str, options: dict[str, Any]) -> bytes:
    """The MP3 MeloTTS makes of ``text``; a failed call raises its ``UpstreamError``."""
    answer = await ai.run(TTS_MODEL, {"prompt": text, "lang": lang}, options)
    audio = answer.get("audio")
    try:
        data = base64.b64decode(audio, validate=True) if type(audio) is str else b""
    except binascii.Error:
        data = b""
    if not data:
        raise UpstreamMalformed(detail=f"{TTS_MODEL} answered no base64 audio")
    return data
