"""``auto``: the model that answers a question that names it, chosen by
``AUTO_ROUTES``' rules (``config.routes`` says what they mean).

Routing runs after the body is read and its documents converted, before
anything is sent: it replaces the request's ``AUTO`` with the chosen model and
records why (``ChatRequest.route``), so the model call, the cache, the
fallback and every framing see an ordinary request. It reads the request and
the rules only; the day's spent share, when a budget tier needs it, is read
by the caller (``web.steps.route``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from edgechat.config.routes import Routes, Rule
from edgechat.core.errors import BadRequest, PayloadTooLarge
from edgechat.core.models import AUTO, Model, find
from edgechat.core.requests import ChatRequest, Route
from edgechat.media import documents

__all__ = ["baseline", "choose", "estimate_tokens", "wants_spend"]

# The words that ask for code or reasoning are looked for in the last
# question's first and last WINDOW characters (where a question states its
# ask), as a set of words and a few phrases: regular expressions over all of
# a MAX_MESSAGE_CHARS question cost milliseconds in CPython, this tens of
# microseconds (bench/routing_cost.py).
WINDOW = 400
# Punctuation apart from + and # (c++, c#) splits words.
_SPLIT = str.maketrans(dict.fromkeys("!\"$%&'()*,-./:;<=>?@[\\]^_`{|}~", " "))
# Code: a fence anywhere; in the window, a line that starts as code or ends a
# statement or a block, or words that ask for code.
_FENCE = "```"
_CODE_STARTS = frozenset(
    [
        "def",
        "class",
        "import",
        "from",
        "function",
        "const",
        "let",
        "var",
        "fn",
        "func",
        "public",
        "private",
        "#include",
        "package",
        "select",
        "create",
        "return",
        "if",
        "for",
        "while",
    ]
)
_CODE_ENDS = (";", "{", "}", "):")
_CODE_WORDS = frozenset(
    [
        "code",
        "function",
        "script",
        "regex",
        "bug",
        "traceback",
        "compile",
        "compiler",
        "refactor",
        "debug",
        "python",
        "javascript",
        "typescript",
        "rust",
        "golang",
        "sql",
        "api",
        "json",
        "yaml",
        "html",
        "css",
        "bash",
        "c++",
        "c#",
        "java",
    ]
)
_REASONING_WORDS = frozenset(
    [
        "prove",
        "proof",
        "derive",
        "derivation",
        "theorem",
        "lemma",
        "calculate",
        "solve",
        "puzzle",
        "logic",
        "riddle",
    ]
)
_REASONING_PHRASES = ("step by step", "step-by-step", "think through", "why does", "explain why")


def baseline(routes: Routes, default_model: str, allowed: Sequence[str]) -> Model | None:
    """The model ``auto``'s savings are counted against (``/api/usage``):
    ``DEFAULT_MODEL``, or when that is ``auto``, the first allowed model of
    the rules' ``otherwise``."""
    names = (default_model,) if default_model != AUTO.alias else routes.otherwise.use
    found = (find(name) for name in (*names, *allowed) if name in allowed)
    return next((model for model in found if model is not None), None)


def wants_spend(request: ChatRequest, routes: Routes) -> bool:
    """Whether routing this request reads the day's spend (a budget tier)."""
    return request.model is AUTO and bool(routes.budget)


def estimate_tokens(request: ChatRequest) -> int:
    """The conversation's tokens, estimated from its text (documents
    included; ``documents.estimate_tokens``); an image counts as a fixed 1,000."""
    tokens = 0
    for message in request.messages:
        tokens += documents.estimate_tokens(message.content)
        tokens += documents.estimate_tokens(message.attached)
        tokens += 1000 * sum(1 for part in message.parts if part.get("type") == "image_url")
    return tokens


def choose(
    request: ChatRequest, routes: Routes, allowed: Sequence[str], spent_percent: float = 0.0
) -> ChatRequest:
    """``request`` with the model the rules choose in place of ``AUTO`` (any
    other request as it is); raises ``BadRequest`` (no allowed model can
    take it) or ``PayloadTooLarge`` (none has room for it)."""
    if request.model is not AUTO:
        return request
    tokens = estimate_tokens(request) + request.max_tokens
    tier = next((t for t in reversed(routes.budget) if spent_percent >= t.at), None)
    candidates = _fitting(request, allowed, tokens)
    if not candidates:
        raise _nothing_fits(request, allowed, tokens)

    def first(names: Sequence[str]) -> Model | None:
        return next((candidates[name] for name in names if name in candidates), None)

    for rule in _matching(request, routes, tokens):
        model = first(rule.use)
        if model is not None and tier is not None and model.alias not in tier.use:
            model = first(tier.use)
        if model is None:
            continue
        reason = rule.reason if tier is None else f"{rule.reason}; {tier.at}% of budget spent"
        return _routed(request, model, reason)
    # No rule's models fit: the cheapest that does, under the tier if any.
    pool = [candidates[name] for name in tier.use if name in candidates] if tier else []
    cheapest = min(pool or candidates.values(), key=lambda m: (m.price_out_per_m, m.alias))
    return _routed(request, cheapest, "cheapest that fits")


def _routed(request: ChatRequest, model: Model, reason: str) -> ChatRequest:
    return dataclasses.replace(request, model=model, route=Route(model.alias, reason))


def _fitting(request: ChatRequest, allowed: Sequence[str], tokens: int) -> dict[str, Model]:
    found = (find(name) for name in allowed if name != AUTO.alias)
    return {
        model.alias: model
        for model in found
        if model is not None and request.unfit(model) is None and model.context_window >= tokens
    }


def _matching(request: ChatRequest, routes: Routes, tokens: int) -> list[Rule]:
    last = _last_question(request)
    ends = last if len(last) <= 2 * WINDOW else f"{last[:WINDOW]}\n{last[-WINDOW:]}"
    found: list[frozenset[str]] = []

    def words() -> frozenset[str]:
        if not found:
            found.append(frozenset(ends.lower().translate(_SPLIT).split()))
        return found[0]

    held = {
        "images": lambda: any(m.parts for m in request.messages),
        "long": lambda: tokens - request.max_tokens > routes.long_tokens,
        "code": lambda: _FENCE in last or _reads_as_code(ends, words()),
        "reasoning": lambda: (
            request.reasoning is True
            or "reasoning_effort" in request.params
            or not _REASONING_WORDS.isdisjoint(words())
            or any(phrase in ends.lower() for phrase in _REASONING_PHRASES)
        ),
        "short": lambda: (
            len(last) <= routes.short_chars
            and not any(m.role == "assistant" or m.attached for m in request.messages)
            and "tools" not in request.params
        ),
    }
    matched = [rule for rule in routes.rules if rule.condition and held[rule.condition]()]
    return [*matched, routes.otherwise]


def _reads_as_code(text: str, words: frozenset[str]) -> bool:
    if not _CODE_WORDS.isdisjoint(words):
        return True
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.endswith(_CODE_ENDS) or stripped.partition(" ")[0].lower() in _CODE_STARTS:
            return True
    return False


def _last_question(request: ChatRequest) -> str:
    return next((m.content for m in reversed(request.messages) if m.role == "user"), "")


def _nothing_fits(request: ChatRequest, allowed: Sequence[str], tokens: int) -> Exception:
    models = [m for m in (find(name) for name in allowed) if m is not None]
    unfit = [m for m in models if request.unfit(m) is not None]
    if len(unfit) == len(models):
        why = request.unfit(models[0]) if models else None
        what = "images" if why == "images" else why or "this request"
        return BadRequest(
            public=f"auto found no model for this request: none of this deployment's "
            f"models takes {what}."
        )
    return PayloadTooLarge(
        public=f"auto found no model with room for this conversation: about {tokens} "
        "tokens with the answer, more than any of this deployment's models takes.",
        detail=f"{tokens} tokens",
    )
