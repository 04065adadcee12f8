"""A document's text cut into chunks: the pieces that are embedded, found
and quoted.

A chunk holds at most ``size`` tokens, and each chunk after the first
starts with the last ``overlap`` tokens (at most, to a whole word) of the one before,
so a sentence cut at a boundary is whole in one of them. Tokens are those
of the one estimator (``media.documents.estimate_tokens``: a CJK character
is one token, other text four characters a token), so a chunk's count is
exactly what the estimator says of its text. The cut prefers the end of a
paragraph, then of a line, then of a sentence, within the chunk's last
quarter; otherwise it falls between words (CJK text between any two
characters). A word longer than a whole chunk is cut inside.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from edgechat.media.documents import estimate_tokens

__all__ = ["Chunk", "split"]

_CJK_CLASS = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uff00-\uffef"
# One unit each: a CJK character, a word with the spaces after it, or spaces.
_UNITS = re.compile(rf"[{_CJK_CLASS}]|[^\s{_CJK_CLASS}]+\s*|\s+")
_CJK = re.compile(rf"[{_CJK_CLASS}]")
# What a unit ends with that makes a good place to cut, best first.
_BREAKS = (
    re.compile(r"\n\s*\n\s*$"),
    re.compile(r"\n\s*$"),
    re.compile("[.!?\u3002\uff01\uff1f]\\s*$"),
)


@dataclass(frozen=True, slots=True)
class Chunk:
    n: int
    text: str
    tokens: int


def _units(text: str, size: int) -> list[str]:
    """The text's units; a unit longer than ``size`` tokens is cut in pieces."""
    units: list[str] = []
    most = size * 4
    for unit in _UNITS.findall(text):
        if len(unit) <= most:
            units.append(unit)
        else:
            units.extend(unit[k : k + most] for k in range(0, len(unit), most))
    return units


def split(text: str, size: int, overlap: int) -> list[Chunk]:
    """``text`` in chunks of at most ``size`` tokens overlapping by about
    ``overlap`` (``0 <= overlap < size``); none for text without a letter."""
    if not 0 <= overlap < size:
        raise ValueError("the overlap must be smaller than the chunk")
    units = _units(text, size)
    cjk = [1 if _CJK.fullmatch(unit) else 0 for unit in units]
    others = [len(unit) - c for unit, c in zip(units, cjk, strict=True)]

    def tokens(start: int, end: int) -> int:
        return sum(cjk[start:end]) + math.ceil(sum(others[start:end]) / 4)

    chunks: list[Chunk] = []
    start = 0
    while start < len(units):
        end = start
        while end < len(units) and tokens(start, end + 1) <= size:
            end += 1
        end = max(end, start + 1)
        if end < len(units):
            end = _better_end(units, start, end)
        piece = "".join(units[start:end]).strip()
        if piece:
            chunks.append(Chunk(len(chunks), piece, estimate_tokens(piece)))
        if end >= len(units):
            break
        # The next chunk starts ``overlap`` tokens back, never where this one did.
        back = end
        while back > start + 1 and tokens(back - 1, end) <= overlap:
            back -= 1
        start = back if overlap else end
    return chunks


def _better_end(units: list[str], start: int, end: int) -> int:
    """Where to cut within the chunk's last quarter, by ``_BREAKS``."""
    earliest = start + max(1, (end - start) * 3 // 4)
    for rule in _BREAKS:
        for k in range(end, earliest - 1, -1):
            if rule.search(units[k - 1]):
                return k
    return end
