"""Builders of the model's own stream, as Workers AI sends it, for every test suite.

GLM and Kimi stream OpenAI ``chat.completion.chunk`` events
(``choices[0].delta.reasoning_content`` is the thinking, ``.content`` the
answer); Llama streams native ``{"response": …}`` events. Both end with the
binding's ``{"response": "", "usage": …}`` chunk and ``data: [DONE]``
(tools/emulator/README.md, "The run() contract"). Every builder returns SSE
text, one event per string, ready for an emulator ``chunks`` script or for a
hand-written ``/chat`` body, where edgechat relays these events byte for byte.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["DONE", "native_chunk", "native_end", "openai_chunk", "openai_end", "usage"]

DONE = "data: [DONE]\n\n"


def _event(obj: object) -> str:
    # As Workers AI writes them: one line of JSON, the model's text escaped inside it.
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"


def usage(prompt_tokens: int = 12, completion_tokens: int = 5) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def openai_chunk(
    *,
    content: str | None = None,
    reasoning: str | None = None,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> str:
    """One GLM/Kimi ``chat.completion.chunk``: ``reasoning`` goes in
    ``delta.reasoning_content``, ``content`` in ``delta.content``."""
    delta: dict[str, str] = {}
    if reasoning is not None:
        delta["reasoning_content"] = reasoning
    if content is not None:
        delta["content"] = content
    choice: dict[str, Any] = {"index": 0, "delta": delta}
    if finish_reason is not None:
        choice["finish_reason"] = finish_reason
    body: dict[str, Any] = {"object": "chat.completion.chunk", "choices": [choice]}
    if usage is not None:
        body["usage"] = usage
    return _event(body)


def native_chunk(text: str, *, usage: dict[str, int] | None = None) -> str:
    """One Llama ``{"response": text}`` event."""
    body: dict[str, Any] = {"response": text}
    if usage is not None:
        body["usage"] = usage
    return _event(body)


def openai_end(prompt_tokens: int = 12, completion_tokens: int = 5) -> list[str]:
    """How a GLM/Kimi stream ends: the choice with ``finish_reason``, the
    binding's native usage chunk, ``[DONE]``."""
    counts = usage(prompt_tokens, completion_tokens)
    return [
        openai_chunk(finish_reason="stop", usage=counts),
        native_chunk("", usage=counts),
        DONE,
    ]


def native_end(prompt_tokens: int = 12, completion_tokens: int = 5) -> list[str]:
    """How a Llama stream ends: an empty response carrying the usage, ``[DONE]``."""
    return [native_chunk("", usage=usage(prompt_tokens, completion_tokens)), DONE]
