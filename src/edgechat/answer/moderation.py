"""Screening with Llama Guard 3 (``MODERATION``).

The conversation (and, with ``input,output``, the finished answer) goes to
``@cf/meta/llama-guard-3-8b``, which answers ``safe`` or ``unsafe`` with the
hazard categories of the MLCommons taxonomy, S1-S14. The input check runs
concurrently with the main model call (``app``); nothing reaches the client
before its verdict. ``MODERATION_FAIL`` decides what a failed or timed-out
check means: ``open`` lets the request through (and logs it), ``closed``
refuses it with ``503 moderation_unavailable``.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from edgechat.answer.upstream import DeltaKind, UpstreamReader
from edgechat.core.errors import EdgechatError
from edgechat.core.ports import Ai
from edgechat.core.requests import ChatRequest

__all__ = [
    "CATEGORIES",
    "GUARD_MODEL",
    "Verdict",
    "answer_text",
    "check",
    "conversation",
    "parse_verdict",
]

GUARD_MODEL = "@cf/meta/llama-guard-3-8b"

# How long a check may take before it counts as failed.
CHECK_TIMEOUT_S = 10.0

# Llama Guard 3's hazard categories (the MLCommons taxonomy).
CATEGORIES: dict[str, str] = {
    "S1": "Violent crimes",
    "S2": "Non-violent crimes",
    "S3": "Sex-related crimes",
    "S4": "Child sexual exploitation",
    "S5": "Defamation",
    "S6": "Specialized advice",
    "S7": "Privacy",
    "S8": "Intellectual property",
    "S9": "Indiscriminate weapons",
    "S10": "Hate",
    "S11": "Suicide and self-harm",
    "S12": "Sexual content",
    "S13": "Elections",
    "S14": "Code interpreter abuse",
}


@dataclass(frozen=True, slots=True)
class Verdict:
    safe: bool
    categories: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"safe": self.safe, "categories": list(self.categories)}


def parse_verdict(result: Any) -> Verdict:
    """Llama Guard's answer, in either form it takes: ``{"safe": bool,
    "categories": [...]}`` (JSON mode) or the text ``safe`` /
    ``unsafe\\nS1,S10``. Raises ``ValueError`` for anything else."""
    response = result.get("response") if isinstance(result, dict) else None
    if isinstance(response, dict):
        safe = response.get("safe")
        categories = response.get("categories") or []
        if type(safe) is not bool or not isinstance(categories, list):
            raise ValueError("a JSON verdict needs a boolean safe and a list of categories")
        return Verdict(safe, _codes(categories))
    if isinstance(response, str):
        first, _, rest = response.strip().partition("\n")
        word = first.strip().lower()
        if word == "safe":
            return Verdict(True)
        if word == "unsafe":
            return Verdict(False, _codes(rest.replace("\n", ",").split(",")))
    raise ValueError("not a Llama Guard verdict")


def _codes(items: list[Any]) -> tuple[str, ...]:
    codes = (str(item).strip().upper() for item in items)
    return tuple(dict.fromkeys(code for code in codes if code in CATEGORIES))


def conversation(request: ChatRequest, answer: str | None = None) -> list[dict[str, str]]:
    """What Llama Guard reads: the user and assistant turns (its roles), and
    the answer to check last. System prompts and tool results are not the
    user's words and are left out."""
    turns = [
        {"role": m.role, "content": m.content}
        for m in request.messages
        if m.role in ("user", "assistant") and m.content.strip()
    ]
    if answer is not None:
        turns.append({"role": "assistant", "content": answer})
    return turns


async def check(ai: Ai, turns: list[dict[str, str]], options: dict[str, Any]) -> Verdict:
    """One verdict; raises ``EdgechatError`` (the call failed), ``ValueError``
    (an answer that is no verdict) or ``TimeoutError``."""
    inputs = {"messages": turns, "response_format": {"type": "json_object"}}
    result = await asyncio.wait_for(ai.run(GUARD_MODEL, inputs, options), CHECK_TIMEOUT_S)
    return parse_verdict(result)


CHECK_FAILURES = (EdgechatError, ValueError, TimeoutError)


# --- the text of a whole recorded answer ----------------------------------------

# The answer's text pieces in both shapes: "content" (OpenAI deltas or a
# whole message) and "response" (native). JSON escapes every quote inside a
# string, so a match cannot start inside a model's text, and
# "reasoning_content" has no quote before "content".
_TEXT_FIELD = re.compile(rb'"(?:content|response)"\s*:\s*"((?:[^"\\]|\\.)*)"')


def answer_text(stream: bytes) -> str:
    """The answer's text in a whole recorded stream, for the output check:
    one regular-expression pass and one JSON parse of all the pieces at once,
    instead of one parse per event (``bench/request_cost.mjs``, in git history, compared them)."""
    pieces = _TEXT_FIELD.findall(stream)
    if not pieces:
        return ""
    joined = b'["' + b'","'.join(pieces) + b'"]'
    try:
        texts = json.loads(joined.decode("utf-8", "replace"))
    except ValueError:
        # An escape cut in two by a bad stream: fall back to the reader.
        reader = UpstreamReader()
        deltas = reader.feed(stream) + reader.finish()
        return "".join(text for kind, text in deltas if kind is DeltaKind.CONTENT)
    return "".join(texts)
