"""The media routes: a document checked and converted, Markdown read aloud
(``/api/speech``, ``/v1/audio/speech``) and recorded speech transcribed
(``/api/transcribe``, ``/v1/audio/transcriptions``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from edgechat.answer.context import Context
from edgechat.apis.body import json_object, parse_document
from edgechat.core.http import API_HEADERS, Reply, json_reply
from edgechat.media import documents, speech, transcription
from edgechat.users.identity import User
from edgechat.web.steps import allow_cors, check_rate, question_body, who

__all__ = ["api_documents", "api_speech", "api_transcribe", "v1_speech", "v1_transcriptions"]


async def api_documents(ctx: Context) -> Reply:
    """``POST /api/documents``: one file part checked and converted as
    ``/chat`` would, and what the page shows of it (its tokens)."""
    settings = ctx.settings
    allow_cors(ctx)
    body = await question_body(ctx, await who(ctx))
    file = parse_document(body, settings.limits)
    return json_reply(200, await documents.describe(ctx.platform.ai, file, settings.limits))


async def api_speech(ctx: Context) -> Reply:
    """``POST /api/speech``: Markdown read aloud, as MP3."""
    return await _speak(ctx, await who(ctx), speech.parse_speech)


async def v1_speech(ctx: Context) -> Reply:
    """``POST /v1/audio/speech``: the same in OpenAI's shape."""
    return await _speak(ctx, await who(ctx, api=True), speech.parse_openai_speech)


async def _speak(ctx: Context, user: User, parse: Callable[[Any, int], tuple[str, str]]) -> Reply:
    allow_cors(ctx)
    body = await question_body(ctx, user)
    limits = ctx.settings.limits
    text, lang = parse(json_object(body, limits), limits.max_speech_chars)
    data = await speech.speak(ctx.platform.ai, text, lang, {})
    ctx.log["audio_bytes"] = len(data)
    headers = {**API_HEADERS, "Content-Type": "audio/mpeg", "Cache-Control": "no-store"}
    return Reply(200, {**headers, **ctx.reply_headers}, data)


async def api_transcribe(ctx: Context) -> Reply:
    """``POST /api/transcribe``: the recorded audio as the body; its
    language, when known, as ``Content-Language`` (``en`` or ``zh``)."""
    allow_cors(ctx)
    data = await _audio_body(ctx, await who(ctx), 0)
    limits = ctx.settings.limits
    transcription.check_audio(data, "The audio", limits.max_audio_bytes, limits.max_audio_seconds)
    spoken = transcription.language(ctx.request.headers.get("content-language"))
    return json_reply(200, await transcription.transcribe(ctx.platform.ai, data, spoken))


async def v1_transcriptions(ctx: Context) -> Reply:
    """``POST /v1/audio/transcriptions``: OpenAI's multipart form."""
    allow_cors(ctx)
    body = await _audio_body(ctx, await who(ctx, api=True), 64 << 10)
    limits = ctx.settings.limits
    form = transcription.parse_form(ctx.request.headers.get("content-type", ""), body)
    data = form["file"]
    transcription.check_audio(data, "file", limits.max_audio_bytes, limits.max_audio_seconds)
    spoken = transcription.language(form.get("language"))
    result = await transcription.transcribe(ctx.platform.ai, data, spoken, form.get("prompt"))
    if form["response_format"] == "text":
        headers = {**API_HEADERS, "Content-Type": "text/plain; charset=utf-8"}
        return Reply(200, {**headers, **ctx.reply_headers}, result["text"].encode())
    if form["response_format"] == "verbose_json":
        return json_reply(200, {"task": "transcribe", **result})
    return json_reply(200, {"text": result["text"]})


async def _audio_body(ctx: Context, user: User, extra: int) -> bytes:
    """An audio upload's body, after the rate limit, within MAX_AUDIO_BYTES
    (and ``extra`` bytes of form around it)."""
    await check_rate(ctx, user)
    return await ctx.platform.read_body(ctx.settings.limits.max_audio_bytes + extra)
