"""The routes that answer a question: ``POST /chat`` and the OpenAI API's
``/v1/chat/completions``, ``/v1/responses``, ``/v1/embeddings`` and
``/v1/models``, all over ``answer.pipeline``; a comparison's answers go
on through ``compare``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from edgechat.answer import embedding, pipeline
from edgechat.answer.context import Context
from edgechat.apis import embeddings, responses
from edgechat.apis import openai as openai_api
from edgechat.apis.chat import ChatFraming
from edgechat.apis.chat_body import parse_chat_request, read_slot
from edgechat.apis.embeddings_body import parse_embeddings_request
from edgechat.apis.openai_body import parse_openai_request
from edgechat.apis.responses_body import parse_responses_request
from edgechat.core.http import Reply, json_reply
from edgechat.core.models import Model
from edgechat.core.requests import Limits, OpenAIRequest
from edgechat.media import documents
from edgechat.web import compare, knowledge
from edgechat.web.steps import allow_cors, query_params, question_body, route, who

__all__ = ["chat", "completions", "v1_embeddings", "v1_models", "v1_responses"]


async def chat(ctx: Context) -> Reply:
    settings = ctx.settings
    cors = allow_cors(ctx)
    user = await who(ctx)
    # A comparison's answer: its rate-limit token was the comparison's.
    slot = read_slot(query_params(ctx))
    body = await question_body(ctx, user, rated=slot is None)
    request = parse_chat_request(
        body, settings.limits, settings.models, settings.default_model, settings.presets, slot
    )
    if request.slot is not None:
        return await compare.answer_slot(ctx, request, cors)
    request = await documents.attach(ctx.platform.ai, request, settings.limits, settings.models)
    request, sources = await knowledge.with_passages(ctx, request)
    request = await route(ctx, request)
    framing = ChatFraming(ctx.request_id, request.route, sources=sources)
    return await pipeline.answer(ctx, request, framing, cors)


# What both of the OpenAI API's answer routes hand their framings: the
# request id, the model asked for, the output token cap.
Facts = tuple[str, Model, int]
Sources = list[dict[str, Any]] | None


async def _openai_question(
    ctx: Context, parse: Callable[[bytes, Limits, Sequence[str], str], OpenAIRequest]
) -> tuple[OpenAIRequest, Facts, Sources, int, dict[str, str]]:
    """A ``/v1`` question through the checks and ``parse``: the request,
    its facts, its knowledge base's sources (None: it named none), the time
    it was asked and the CORS headers."""
    settings = ctx.settings
    cors = allow_cors(ctx)
    user = await who(ctx, api=True)
    body = await question_body(ctx, user)
    parsed = parse(body, settings.limits, settings.models, settings.default_model)
    if parsed.compare_with:
        # A token for each other answer, and the checks, before any model is asked.
        await compare.admit(ctx, user, 1 + len(parsed.compare_with), taken=1)
    chat = await documents.attach(ctx.platform.ai, parsed.chat, settings.limits, settings.models)
    chat, sources = await knowledge.with_passages(ctx, chat)
    chat = await route(ctx, chat)
    if chat is not parsed.chat:  # documents or passages were attached, or auto routed
        parsed = dataclasses.replace(parsed, chat=chat)
    facts = (ctx.request_id, chat.model, chat.max_tokens)
    return parsed, facts, sources, int(time.time()), cors


async def completions(ctx: Context) -> Reply:
    """``POST /v1/chat/completions``: the OpenAI API over the same pipeline."""
    parsed, facts, sources, created, cors = await _openai_question(ctx, parse_openai_request)
    if parsed.compare_with:
        return await compare.v1_compare(ctx, parsed, created, cors)
    if not parsed.stream:
        whole = openai_api.CompletionFraming(*facts, created=created, sources=sources)
        return await pipeline.document(ctx, parsed.chat, whole, cors)
    chunks = openai_api.ChunkFraming(
        *facts, include_usage=parsed.include_usage, created=created, sources=sources
    )
    return await pipeline.answer(ctx, parsed.chat, chunks, cors)


async def v1_responses(ctx: Context) -> Reply:
    """``POST /v1/responses``: the Responses API over the same pipeline."""
    parsed, facts, sources, created, cors = await _openai_question(ctx, parse_responses_request)
    if not parsed.stream:
        whole = responses.ResponseDocument(*facts, created=created, sources=sources)
        return await pipeline.document(ctx, parsed.chat, whole, cors)
    events = responses.ResponseEvents(*facts, created=created, sources=sources)
    return await pipeline.answer(ctx, parsed.chat, events, cors)


async def v1_embeddings(ctx: Context) -> Reply:
    """``POST /v1/embeddings``: one binding call for the request's texts,
    refused like an answer once the day's budget is spent (the check runs
    beside the call), and paid for like one."""
    settings = ctx.settings
    cors = allow_cors(ctx)
    body = await question_body(ctx, await who(ctx, api=True))
    request = parse_embeddings_request(body, settings.limits)
    ctx.log["model"] = request.model.id
    ctx.log["inputs"] = len(request.texts)
    options = pipeline.ai_options(ctx, refresh=False)
    # No provider embeds: the account's Neuron limit refuses too.
    spent = pipeline.spend_check(ctx, pinned=True)
    try:
        embedded = await embedding.embed(
            ctx.platform.ai,
            request.texts,
            timeout_s=settings.total_timeout_s,
            model=request.model,
            options=options,
        )
    except BaseException:
        if spent is not None:
            spent.close()  # its read settles by itself, never awaited
        raise
    if spent is not None:
        await spent
    ctx.log["prompt_tokens"] = embedded.tokens
    embedding.charge(ctx, embedded)
    listed = embeddings.embeddings_json(request, embedded.vectors, embedded.tokens)
    return json_reply(200, listed, cors)


async def v1_models(ctx: Context) -> Reply:
    await who(ctx, api=True)
    return json_reply(200, openai_api.models_json(ctx.settings.models))
