"""``auto``'s rules, as data: which model answers a question that names
``auto`` (``AUTO_ROUTES``, a JSON object; ``answer.routing`` applies them).

The rules are tried in order and the first whose condition holds chooses:
the first model of its ``use`` that this deployment allows (``MODELS``) and
that can take the question (sees its images, reads its tools, has room in
its window for the conversation and the answer). A rule none of whose
models fits is passed over; ``otherwise`` chooses when no rule did.

Past a share of the day's budget (``budget``: each tier's ``at``, in
percent of the user's ``USER_DAILY_*`` budget or of the account's
``DAILY_NEURON_LIMIT``, whichever is spent most; on Workers Free,
``DAILY_NEURON_LIMIT=10000`` makes it the free allocation), the choice is
held to the tier's models: the highest tier reached applies, and a chosen
model outside it gives way to the first of the tier's that fits. Without
such a limit there is no share, and no tier applies.

The conditions (``if``) are a fixed set, each cheap to test (the routing
runs before the model is asked):

- ``images``: the conversation holds an image;
- ``long``: the conversation is estimated at more than ``long_tokens``
  tokens (documents included);
- ``code``: the last question holds code (a fenced block, or lines that
  read as code) or asks for it;
- ``reasoning``: the question asks to think (``reasoning: true``, a
  ``reasoning_effort``), or its words ask for proof, derivation or steps;
- ``short``: the last question is at most ``short_chars`` characters, the
  conversation holds no earlier answer, no tools and nothing attached.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from edgechat.core.models import find

__all__ = [
    "CONDITIONS",
    "DEFAULT_ROUTES",
    "Routes",
    "Rule",
    "Tier",
    "parse_routes",
    "routes_json",
]

CONDITIONS = ("images", "long", "code", "reasoning", "short")

# A reason is shown in the page and sent in a header: short printable ASCII.
MAX_REASON_CHARS = 60


@dataclass(frozen=True, slots=True)
class Rule:
    condition: str | None  # None: ``otherwise``
    use: tuple[str, ...]  # catalog aliases, in preference order
    reason: str


@dataclass(frozen=True, slots=True)
class Tier:
    at: int  # percent of the day's budget spent
    use: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Routes:
    rules: tuple[Rule, ...]
    otherwise: Rule
    short_chars: int = 280
    long_tokens: int = 100_000
    budget: tuple[Tier, ...] = ()

    def names(self) -> frozenset[str]:
        """Every model the rules may choose."""
        found = {name for rule in (*self.rules, self.otherwise) for name in rule.use}
        return frozenset(found | {name for tier in self.budget for name in tier.use})


# The defaults: images to a model that sees, long conversations to the
# 1.3M-token GLM 5.3 Flash, code to Kimi's code model, reasoning to the
# strongest, short plain questions to the cheapest Free-plan model; past 50 %
# of the day's budget no model above $1 per million output tokens, past 80 %
# the Free-plan ones alone.
DEFAULT_ROUTES = Routes(
    rules=(
        Rule("images", ("kimi", "glm-5.3-flash"), "images"),
        Rule("long", ("glm-5.3-flash", "glm-5.3", "kimi"), "long conversation"),
        Rule("code", ("kimi-code", "kimi", "glm-5.3"), "code"),
        Rule("reasoning", ("glm-5.3", "kimi", "glm-5.3-flash"), "reasoning"),
        Rule("short", ("glm", "llama"), "short question"),
    ),
    otherwise=Rule(None, ("glm", "kimi", "llama"), "general question"),
    budget=(
        Tier(50, ("glm", "llama", "glm-5.3-flash")),
        Tier(80, ("glm", "llama")),
    ),
)


def routes_json(routes: Routes) -> dict[str, Any]:
    """``routes`` as ``AUTO_ROUTES`` writes them."""
    return {
        "rules": [
            {"if": rule.condition, "use": list(rule.use), "reason": rule.reason}
            for rule in routes.rules
        ],
        "otherwise": {"use": list(routes.otherwise.use), "reason": routes.otherwise.reason},
        "short_chars": routes.short_chars,
        "long_tokens": routes.long_tokens,
        "budget": [{"at": tier.at, "use": list(tier.use)} for tier in routes.budget],
    }


_KEYS = frozenset(("rules", "otherwise", "short_chars", "long_tokens", "budget"))


def parse_routes(value: object, var: str = "AUTO_ROUTES") -> Routes:
    """``AUTO_ROUTES``' JSON (unset: the defaults); raises ``ValueError``
    naming the variable and the entry at fault. Keys left out keep their
    defaults, so ``{"short_chars": 120}`` changes that alone."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return DEFAULT_ROUTES
    data: Any = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError:
            raise ValueError(f"{var} must be a JSON object") from None
    if type(data) is not dict:
        raise ValueError(f"{var} must be a JSON object")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        known = ", ".join(sorted(_KEYS))
        raise ValueError(f"{var} has an unknown key {unknown[0]!r}; known: {known}")
    base = DEFAULT_ROUTES
    rules = base.rules
    if "rules" in data:
        if type(data["rules"]) is not list:
            raise ValueError(f"{var}.rules must be an array")
        rules = tuple(_rule(f"{var}.rules[{n}]", item) for n, item in enumerate(data["rules"]))
    otherwise = base.otherwise
    if "otherwise" in data:
        otherwise = _rule(f"{var}.otherwise", data["otherwise"], otherwise=True)
    budget = base.budget
    if "budget" in data:
        budget = _tiers(f"{var}.budget", data["budget"])
    return Routes(
        rules=rules,
        otherwise=otherwise,
        short_chars=_count(f"{var}.short_chars", data.get("short_chars", base.short_chars)),
        long_tokens=_count(f"{var}.long_tokens", data.get("long_tokens", base.long_tokens)),
        budget=budget,
    )


def _rule(where: str, item: object, *, otherwise: bool = False) -> Rule:
    keys = {"use", "reason"} if otherwise else {"if", "use", "reason"}
    if type(item) is not dict or not item.keys() <= keys or "use" not in item:
        raise ValueError(f"{where} must be an object with {', '.join(sorted(keys))} (use required)")
    condition = None
    if not otherwise:
        condition = item.get("if")
        if condition not in CONDITIONS:
            raise ValueError(f"{where}.if must be one of {', '.join(CONDITIONS)}")
    reason = item.get("reason", condition or "general question")
    if (
        type(reason) is not str
        or not 0 < len(reason) <= MAX_REASON_CHARS
        or not (reason.isascii() and reason.isprintable())
    ):
        raise ValueError(
            f"{where}.reason must be printable ASCII of 1 to {MAX_REASON_CHARS} characters"
        )
    return Rule(condition, _models(f"{where}.use", item["use"]), reason)


def _tiers(where: str, value: object) -> tuple[Tier, ...]:
    if type(value) is not list:
        raise ValueError(f"{where} must be an array of {{at, use}}")
    tiers: list[Tier] = []
    for index, item in enumerate(value):
        at = f"{where}[{index}]"
        if type(item) is not dict or item.keys() != {"at", "use"}:
            raise ValueError(f"{at} must be an object with at and use")
        percent = item["at"]
        if type(percent) is not int or not 1 <= percent <= 100:
            raise ValueError(f"{at}.at must be a whole percent from 1 to 100")
        if tiers and percent <= tiers[-1].at:
            raise ValueError(f"{where} must list its tiers by rising at")
        tiers.append(Tier(percent, _models(f"{at}.use", item["use"])))
    return tuple(tiers)


def _models(where: str, value: object) -> tuple[str, ...]:
    if type(value) is str:
        value = [name.strip() for name in value.split(",") if name.strip()]
    if type(value) is not list or not value:
        raise ValueError(f"{where} must list at least one model")
    aliases: list[str] = []
    for name in value:
        model = find(name) if type(name) is str else None
        if model is None:
            raise ValueError(f"{where} names an unknown model (auto cannot route to auto)")
        aliases.append(model.alias)
    return tuple(dict.fromkeys(aliases))


def _count(where: str, value: object) -> int:
    if type(value) is not int or value < 1 or not math.isfinite(value):
        raise ValueError(f"{where} must be a positive whole number")
    return value
