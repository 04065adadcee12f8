"""The judge of a shadow trial (``SHADOW_JUDGE``): a model shown one
conversation and two answers to it, the answering model's and the
challenger's, as A and B in an order drawn for each trial (a judge tends to
favour a position: drawing it spreads that bias over both models), asked for
exactly one of ``A``, ``B`` or ``TIE``. Anything else is no verdict.

The judge reads at most ``CLIP_BYTES`` of each part (the conversation's
end, each answer's start), so its prompt, and so its cost, has a bound known
before it is asked: ``MAX_PROMPT_TOKENS``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "CLIP_BYTES",
    "JUDGE_PROMPT",
    "MAX_OUTPUT_TOKENS",
    "MAX_PROMPT_TOKENS",
    "Order",
    "Verdict",
    "conversation_text",
    "parse",
]

# The whole prompt, its three parts filled in (docs/operating/shadow.md
# quotes it).
JUDGE_PROMPT = """\
You compare two answers to the same conversation between a user and an assistant.
Decide which answer serves the user better: correct, helpful, clear, and complete for \
what was asked. Length is no merit in itself, and the order of the answers means nothing.

<conversation>
{conversation}
</conversation>

<answer_a>
{a}
</answer_a>

<answer_b>
{b}
</answer_b>

Reply with exactly one word: A if answer A is better, B if answer B is better, \
TIE if neither is. Write nothing else."""

# The most of each part the judge reads, in UTF-8 bytes: the conversation's
# last bytes, each answer's first.
CLIP_BYTES = 6_000
# Where a part was cut (counted within CLIP_BYTES).
CUT = "[…]"
# The judge's prompt tokens, at most: the catalog's models tokenize
# byte-level (a token is at least one byte of UTF-8), so the prompt's bytes
# bound its tokens; the chat template adds a few of its own (the roles'
# markers), far fewer than the margin left here. A unit test holds the
# template and CLIP_BYTES to it.
MAX_PROMPT_TOKENS = 20_000
# One word is asked for; a judge that thinks first (Kimi ignores
# enable_thinking: false) is cut here and gives no verdict.
MAX_OUTPUT_TOKENS = 16


class Verdict(enum.Enum):
    """Which answer the judge found better."""

    CHALLENGER = "challenger"
    PRIMARY = "primary"
    TIE = "tie"


# What the judge may answer: exactly these, whitespace around them aside.
_WORDS = ("A", "B", "TIE")


def parse(text: str) -> str | None:
    """``A``, ``B`` or ``TIE`` when the judge's whole answer is exactly that
    word (spaces and line ends around it aside); None for anything else."""
    word = text.strip()
    return word if word in _WORDS else None


@dataclass(frozen=True, slots=True)
class Order:
    """Where the challenger's answer stands for the judge: A or B."""

    challenger_first: bool

    def prompt(self, conversation: str, primary: str, challenger: str) -> str:
        first, second = (challenger, primary) if self.challenger_first else (primary, challenger)
        return JUDGE_PROMPT.format(
            conversation=_tail(conversation), a=_head(first), b=_head(second)
        )

    def verdict(self, text: str) -> Verdict | None:
        """The judge's answer read back to the two models; None: no verdict."""
        word = parse(text)
        if word is None:
            return None
        if word == "TIE":
            return Verdict.TIE
        challenger_is_a = self.challenger_first
        return Verdict.CHALLENGER if (word == "A") == challenger_is_a else Verdict.PRIMARY


def conversation_text(turns: Iterable[dict[str, str]]) -> str:
    """The conversation as the judge reads it: ``User:`` and ``Assistant:``
    turns (``moderation.conversation``'s, text alone)."""
    names = {"user": "User", "assistant": "Assistant"}
    return "\n\n".join(f"{names.get(t['role'], t['role'])}: {t['content']}" for t in turns)


def _head(text: str) -> str:
    """``text``'s first CLIP_BYTES bytes (whole characters), marked where cut."""
    data = text.encode()
    if len(data) <= CLIP_BYTES:
        return text
    keep = CLIP_BYTES - len(CUT.encode())
    return data[:keep].decode("utf-8", "ignore") + CUT


def _tail(text: str) -> str:
    """``text``'s last CLIP_BYTES bytes (whole characters), marked where cut."""
    data = text.encode()
    if len(data) <= CLIP_BYTES:
        return text
    keep = CLIP_BYTES - len(CUT.encode())
    return CUT + data[-keep:].decode("utf-8", "ignore")
