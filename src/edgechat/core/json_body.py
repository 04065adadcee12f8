"""A request body's JSON, read so that no shape of it can hurt the isolate.

``loads`` is ``json.loads`` behind the checks it needs on a Worker:

- **Nesting** is counted before anything parses: ``json.loads`` recurses
  once per level, and Pyodide's WebAssembly stack is far smaller than
  CPython's, so ``"[" * 8000`` would not raise ``RecursionError`` but
  overflow the stack and end the isolate. Deeper than ``max_depth`` is a 400.
- **Numbers** JavaScript cannot hold are refused: an integer beyond
  ±(2^53 - 1) becomes a ``BigInt`` on its way to the binding, which JSON
  cannot encode; a decimal that overflows to infinity is no JSON value.
  (RFC 7493, I-JSON, section 2.2.)
- **Lone surrogates** (a ``"\\ud800"`` escape with no partner) are refused
  anywhere, keys included: UTF-8 cannot encode them, so whatever later
  writes the value out (a provider's request, a log line) would fail. The
  refusal names where, by the field names edgechat knows.

What it costs: the checks read the body's *structure*, everything outside its
strings, which for an honest body is a few hundred bytes. Strings that hold a
data URL (images: megabytes of base64) are stepped over with ``bytes.find``
(``memchr``), never read byte by byte in Python or by a regular expression;
the rest goes through ``bytes.translate`` and ``split`` in C. Only a body
whose structure could break a rule (more openers than ``max_depth``, a
16-digit or exponent-300 number, a surrogate escape) pays for the exact
check. ``bench/json_body.py`` measures it.

Every refusal is built from limits and field names, never from the body.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Set
from itertools import accumulate
from typing import Any

from edgechat.core.errors import BadRequest, body_too_large

__all__ = ["MAX_SAFE_INTEGER", "loads", "nested_deeper_than"]

MAX_SAFE_INTEGER = 2**53 - 1

# A data URL's string is stepped over whole; past this many, the rest of the
# body is read like any text (still linear, just not skipped). A request has
# at most MAX_IMAGES images, a handful in practice.
_MAX_SKIPPED_STRINGS = 64

# Everything but the quote and the brackets: what ``translate`` drops.
_NOT_STRUCTURE = bytes(sorted(set(range(256)) - set(b'"[]{}')))
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
# Openers to +1, closers to -1 (as a signed byte), for a running sum in C.
_STEPS = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
# A number that may be out of range: 16 digits in a row (2^53 has 16), or an
# exponent of three digits. Only then are numbers parsed through a check.
# Found with one translate (digits to 0, e and E to e, signs to +, the rest
# to a space) and three substring searches: a regex would try every position.
_NUMBER_SHAPES = bytes.maketrans(
    bytes(range(256)),
    bytes(
        ord("0")
        if chr(b).isdigit() and b < 128
        else ord("e")
        if b in b"eE"
        else ord("+")
        if b in b"+-"
        else ord(" ")
        for b in range(256)
    ),
)
_RISKY_SHAPES = (b"0" * 16, b"e000", b"e+000")
# A "\ud800".."\udfff" escape; a body without one cannot hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class _OutOfRange(ValueError):
    pass


def _reject_constant(_name: str) -> None:
    # NaN and Infinity are not JSON; Python's parser accepts them by default.
    raise ValueError("not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _OutOfRange
    return value


def _safe_int(text: str) -> int:
    # JSON integers have no leading zeros: over 16 digits is over 2^53, and
    # int() is spared thousands of digits.
    if len(text) > 17 or (len(text) == 17 and text[0] != "-"):
        raise _OutOfRange
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise _OutOfRange
    return value


def _skip_data_urls(body: bytes) -> bytes:
    """``body`` with its data URL strings emptied (each becomes ``""``): the
    base64 of images, megabytes that hold no structure.

    From a quote before ``data:`` to the next quote, when every backslash
    between them escapes a ``/`` (encoders that write ``\\/`` do), so that
    next quote is not escaped. If the first quote opens a string, that is
    its content; if it is an escaped quote, the rest of the string it is in;
    if it closes a string, ``data:`` right after it is not JSON, and the
    parser stops there, before anything this could hide. Any other
    backslash: the string is left for the full reading."""
    find = body.find
    start = find(b'"data:')
    if start == -1:
        return body
    pieces: list[bytes] = []
    copied = 0
    for _ in range(_MAX_SKIPPED_STRINGS):
        if start == -1:
            break
        end = find(b'"', start + 6)
        if end == -1:
            break
        if find(b"\\", start, end) == -1 or body.count(b"\\", start, end) == body.count(
            b"\\/", start, end
        ):
            pieces.append(body[copied : start + 1])
            copied = end
            start = find(b'"data:', end + 1)
        else:
            start = find(b'"data:', start + 1)
    if not pieces:
        return body
    pieces.append(body[copied:])
    return b"".join(pieces)


def _outside_strings(text: bytes) -> bytes:
    """What of ``text`` lies outside its JSON strings: brackets, numbers,
    literals, punctuation. An unclosed string counts as outside, which can
    only make a body look deeper than it is."""
    # Escaped backslashes, then escaped quotes, pair left to right as a JSON
    # reader pairs them; after that every quote opens or closes. (Each
    # replace costs per match: skipped when there is nothing to replace.)
    if b"\\\\" in text:
        text = text.replace(b"\\\\", b"")
    if b'\\"' in text:
        text = text.replace(b'\\"', b"")
    return b"".join(text.split(b'"')[::2])


def _depth_over(outside: bytes, limit: int) -> bool:
    """Whether brackets nest deeper than ``limit`` anywhere. Closers of
    the wrong kind count as closers: a parser stops at them anyway."""
    if outside.count(b"[") + outside.count(b"{") <= limit:
        return False
    steps = outside.translate(_STEPS, _NOT_BRACKET)
    return max(accumulate(memoryview(steps).cast("b"))) > limit


def nested_deeper_than(data: bytes, limit: int) -> bool:
    """Whether the JSON text ``data`` nests arrays and objects deeper than
    ``limit``, counted without parsing (for any reader of JSON that did not
    come from us: the same check ``loads`` makes)."""
    return _depth_over(_outside_strings(_skip_data_urls(data)), limit)


def loads(body: bytes, *, max_depth: int, max_text_bytes: int, names: Set[str]) -> Any:
    """The JSON value of ``body``, or ``BadRequest`` (``PayloadTooLarge``
    when what is not data URLs is over ``max_text_bytes``, the body's text
    cap). ``names``: the field names a refusal may use to say where."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(public="The request body is not valid UTF-8.") from None
    rest = _skip_data_urls(body)
    if len(rest) > max_text_bytes:
        # Everything left is text the cap counts (apis.body, Images).
        raise body_too_large(max_text_bytes, detail=f"{len(rest)} bytes besides data URLs")
    outside = _outside_strings(rest)
    if _depth_over(outside, max_depth):
        raise BadRequest(
            public=f"The request body nests arrays and objects deeper than {max_depth} levels."
        )
    shapes = outside.translate(_NUMBER_SHAPES)
    checked = any(shape in shapes for shape in _RISKY_SHAPES)
    try:
        if checked:
            data = json.loads(
                text, parse_constant=_reject_constant, parse_float=_finite, parse_int=_safe_int
            )
        else:
            data = json.loads(text, parse_constant=_reject_constant)
    except _OutOfRange:
        raise BadRequest(
            public="The request body has a number out of range: integers must be within "
            "2^53 - 1 of zero, and decimals finite."
        ) from None
    except (ValueError, RecursionError):
        # ValueError covers JSONDecodeError and integers too long to convert.
        raise BadRequest(public="The request body is not valid JSON.") from None
    if b"\\u" in rest and _SURROGATE_ESCAPE.search(
        rest.replace(b"\\\\", b"") if b"\\\\" in rest else rest
    ):
        where = _lone_surrogate(data, names)
        if where is not None:
            raise BadRequest(public=where)
    return data


def _has_surrogate(text: str) -> bool:
    # isascii() is O(1) in CPython: the base64 of an image costs nothing here.
    return not text.isascii() and _SURROGATE.search(text) is not None


def _lone_surrogate(data: Any, names: Set[str]) -> str | None:
    """The refusal for the first string holding a lone surrogate (json.loads
    has already joined every escaped pair), or None. Iterative: the depth is
    bounded, but nothing here should depend on that. The path goes through
    the field names edgechat knows; under any other key (a JSON schema's
    properties, say) it stops, so no client text is named."""
    # Paths start at the fields of an object; a body that is not one is refused anyway.
    stack: list[tuple[Any, str, bool]] = [(data, "", type(data) is dict)]
    while stack:
        value, path, named = stack.pop()
        kind = type(value)
        where = path or "The request body"
        if kind is str:
            if _has_surrogate(value):
                if named:
                    return f"{where} is not valid Unicode text."
                return f"{where} holds text that is not valid Unicode."
        elif kind is dict:
            children: list[tuple[Any, str, bool]] = []
            for key, item in value.items():
                if _has_surrogate(key):
                    return f"{where} has a field name that is not valid Unicode."
                if named and key in names:
                    children.append((item, f"{path}.{key}" if path else key, True))
                else:
                    children.append((item, path, False))
            stack.extend(reversed(children))
        elif kind is list:
            stack.extend(
                reversed(
                    [
                        (item, f"{path}[{index}]" if named else path, named)
                        for index, item in enumerate(value)
                    ]
                )
            )
    return None
