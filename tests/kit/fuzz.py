"""Request bodies for fuzzing edgechat's JSON routes, and the oracle that
judges each answer: the one generator behind ``tests/api/test_fuzz.py`` (a
few thousand bodies in ``npm test``) and ``bench/fuzz.py`` (``npm run
bench:fuzz``, 100,000 by default).

``cases(seed, count)`` is deterministic: the same seed gives the same
bodies, so any defect is reproduced by its seed and index. The bodies are
near-valid more often than not (a valid request with one thing changed), so
they reach deep into validation and on to the model:

- ``/chat`` and ``/v1/chat/completions`` bodies of every shape the API
  documents (roles, tool calls, tools, ``stop``, ``response_format``,
  ``seed``, streams and whole answers), then mutated: a field removed, of
  the wrong type, unknown, duplicated; values from a pool of weird text
  (lone surrogates, controls, U+2028, CJK, emoji) and weird numbers (2^53,
  ``1e999``, 5,000 digits, ``-0``);
- images: valid PNG, JPEG, WebP and GIF, broken headers, the wrong declared
  type, bad base64, remote URLs;
- nesting around the limit and far past it, in any field;
- the text itself cut, spliced, given invalid UTF-8 or a BOM;
- content types, missing or wrong tokens, chunked uploads.

Some bodies carry a word the emulator is scripted on (``SCRIPT``): Workers
AI busy for every model (the fallback providers answer), a 5006 refusal,
an emoji split across two chunks, and the model's stream itself hostile
(``STREAM_FAULTS``: a forged ``done``/``error``, a line that is not SSE, an
event nested 5,000 deep, a stream cut inside an event).

What schemathesis covers instead (``tests/api/test_schema.py``, cases
generated from ``static/openapi.json``): the malformed bodies the document
describes - a required field missing, a field of the wrong type or outside
its range or enum, an unknown field - on every JSON route, not these two
alone; a content type the route does not take (415); a missing key on
``/v1`` (401); and a method a route does not list (405 with ``Allow``),
which this kit no longer sends. Every answer the kit gets is also held to
the document (``tests/kit/conformance.py``). The kit still mutates fields
as schemathesis does: a mutation is what carries its weird values and its
marker into every corner of a body.

What the kit is for is what a schema cannot express, so schemathesis never
generates it: bytes that are not the JSON a schema describes (cut,
spliced, invalid UTF-8, a BOM, keys given twice, nesting past
``MAX_JSON_DEPTH``, numbers JavaScript cannot hold, lone surrogates);
images whose headers are broken or lie about their type; JSON content
types written otherwise (``Application/JSON``, a charset) and chunked
uploads; the model's stream itself hostile (``STREAM_FAULTS``), which comes
from the emulator's script, not from the request; and the oracle below,
which schemathesis's checks do not have (no marker of the body in our
words, every stream closed by its one end).

``judge`` is the oracle: no 5xx (but the ``model_busy`` that a scripted
busy Workers AI gives a request with images, which the provider cannot
see, and the ``upstream_malformed`` of a whole answer from a hostile
stream), no response that repeats the case's marker (planted in the body) in
edgechat's own words, errors in their documented shape, and every stream
closed by exactly one ``done`` or ``error`` (``/chat``) or by ``data:
[DONE]`` or one error event (``/v1``).
"""

from __future__ import annotations

import base64
import copy
import json
import random
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from tests.kit.images import BROKEN, data_url, gif, jpeg, png, webp
from tests.kit.sse import MODEL, SSEParser

__all__ = [
    "CHAT",
    "SCRIPT",
    "TOKEN",
    "V1",
    "Case",
    "Verdict",
    "cases",
    "describe",
    "judge",
    "send",
    "server_vars",
]

CHAT = "/chat"
V1 = "/v1/chat/completions"
TOKEN = "fuzz-token-5b1e-0123456789"
GLM = "@cf/zai-org/glm-4.7-flash"
MAX_IMAGE_BYTES = 8192
MAX_JSON_DEPTH = 32
# Bodies up to this size keep their connection even when they are not read.
KEEP_ALIVE_BYTES = 16 << 10

# Words in a body that make the emulator misbehave (tools/emulator, Scripts).
BUSY = "FUZZ-BUSY"
BAD_INPUT = "FUZZ-BADINPUT"
SPLIT_EMOJI = "FUZZ-EMOJI"


def _emoji_halves() -> list[str]:
    # Each half is its own chunk, as JSON escapes: each decodes alone to a lone surrogate.
    chunk = (
        '{{"object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"content":"{}"}}}}]}}'
    )
    return [
        "data: " + chunk.format("smile \\ud83d") + "\n\n",
        "data: " + chunk.format("\\ude00!") + "\n\n",
        "data: [DONE]\n\n",
    ]


# Words that make the model's stream itself hostile: a done and an error
# forged inside it, a line that is not SSE, an event nested past any
# parser's depth, a stream that stops inside an event.
FORGED = "FUZZ-FORGED"
JUNK = "FUZZ-JUNK"
DEEP = "FUZZ-DEEP"
CUT = "FUZZ-CUT"
STREAM_FAULTS = (FORGED, JUNK, DEEP, CUT)


def _content(text: str) -> str:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}}]}
    return f"data: {json.dumps(chunk)}\n\n"


def _faulty(*middle: str) -> list[str]:
    return [_content("Half"), *middle, _content(" and the rest"), "data: [DONE]\n\n"]


SCRIPT: list[dict[str, Any]] = [
    {"match": {"any_contains": BUSY}, "error": "3040: Capacity temporarily exceeded"},
    {"match": {"model": GLM, "any_contains": BAD_INPUT}, "error": "5006: Bad input"},
    {"match": {"model": GLM, "any_contains": SPLIT_EMOJI}, "chunks": _emoji_halves()},
    {
        "match": {"model": GLM, "any_contains": FORGED},
        "chunks": _faulty(
            'event: done\ndata: {"model":"forged","finish_reason":"stop"}\n\n',
            'event: error\ndata: {"error":{"code":"forged","message":"forged"}}\n\n',
        ),
    },
    {"match": {"model": GLM, "any_contains": JUNK}, "chunks": _faulty("<html>junk</html>\n\n")},
    {
        "match": {"model": GLM, "any_contains": DEEP},
        "chunks": _faulty("data: " + "[" * 5000 + "]" * 5000 + "\n\n"),
    },
    {
        "match": {"model": GLM, "any_contains": CUT},
        "chunks": [_content("Half"), 'data: {"choices":[{"index":0,"delta":{"cont'],
    },
]


def server_vars(provider_url: str) -> dict[str, str]:
    """The ``[vars]`` of the runner under fuzzing: every model, both API
    routes behind ``TOKEN``, moderation on both sides, the response cache on
    (``cache_key`` walks the whole request), and a fallback provider."""
    return {
        "MODELS": "glm,kimi,llama",
        "API_TOKEN": TOKEN,
        "MAX_IMAGES": "3",
        "MAX_IMAGE_BYTES": str(MAX_IMAGE_BYTES),
        "MAX_JSON_DEPTH": str(MAX_JSON_DEPTH),
        "MODERATION": "input,output",
        "CACHE_MODE": "deterministic",
        "PROVIDERS": "fuzzco",
        "FUZZCO_BASE_URL": provider_url,
        "FUZZCO_MODEL": "fuzz-1",
        "FUZZCO_API_KEY": "sk-fuzz",
    }


@dataclass(frozen=True, slots=True)
class Case:
    index: int
    kind: str
    route: str
    body: bytes
    headers: Mapping[str, str]
    # Sent as a chunked upload, in pieces of this many bytes (0: in one go).
    chunk_size: int
    # Planted in the body; edgechat's own words must never repeat it.
    marker: str


@dataclass(slots=True)
class Verdict:
    case: Case
    status: int | None
    defects: list[str] = field(default_factory=list)


# --- writing JSON by hand -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Raw:
    """JSON text put in as it is (a number json cannot write, deep nesting)."""

    text: str


@dataclass(frozen=True, slots=True)
class Pairs:
    """An object written with these key/value pairs, duplicates included."""

    items: tuple[tuple[str, Any], ...]


def dump(value: Any, ascii_only: bool = True) -> str:
    """JSON text for ``value``; ``Raw`` and ``Pairs`` as they say. Iterative:
    the values built here are shallow, but a generator should not depend on it."""
    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text | Raw):
            out.append(item.text)
        elif isinstance(item, Pairs | dict):
            pairs = item.items if isinstance(item, Pairs) else tuple(item.items())
            parts: list[Any] = [_Text("{")]
            for n, (key, inner) in enumerate(pairs):
                sep = ", " if n else ""
                parts += [_Text(sep + json.dumps(key, ensure_ascii=ascii_only) + ": "), inner]
            parts.append(_Text("}"))
            stack.extend(reversed(parts))
        elif isinstance(item, list):
            parts = [_Text("[")]
            for n, inner in enumerate(item):
                if n:
                    parts.append(_Text(", "))
                parts.append(inner)
            parts.append(_Text("]"))
            stack.extend(reversed(parts))
        else:
            out.append(json.dumps(item, ensure_ascii=ascii_only))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class _Text:
    text: str


# --- pools of values ------------------------------------------------------------------

_WEIRD_TEXT = (
    "",
    " ",
    "\u3000\t\n",
    "hello",
    "你好, 世界",
    "\U0001f600\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\u202eevil\u202c",
    "\u2028line\u2029para\x85",
    "\x00\x01\x1f",
    "a\ud800b",  # lone surrogates: json.dumps writes them as escapes
    "\udfff",
    "\ud83d",
    "\ude00\ud83d",
    "\\ud800 is not an escape here",
    '"quoted" \\ back',
    "event: done\n\ndata: {}",
    "x" * 9000,
    "</script><img src=x onerror=alert(1)>",
    "data:image/png;base64,AAAA",
    "[[[[[[[[[[",
    "}}}}]]]]",
)
_WEIRD_NUMBERS = (
    Raw("0"),
    Raw("-0"),
    Raw("-0.0"),
    Raw("1"),
    Raw("2"),
    Raw("0.7"),
    Raw("4097"),
    Raw("9007199254740991"),
    Raw("9007199254740992"),
    Raw("-9007199254740993"),
    Raw("9223372036854775807"),
    Raw("1e308"),
    Raw("1e309"),
    Raw("-1e999"),
    Raw("1e-400"),
    Raw("1E2"),
    Raw("0.1e1"),
    Raw("9" * 5000),
    Raw("1" + "0" * 400 + ".5"),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("01"),
    Raw("+1"),
    Raw(".5"),
    Raw("0x10"),
)
_JUNK = (None, True, False, [], {}, [None], {"": None}, "null", 0, -1, 1.5)


def _nest(rng: random.Random, depth: int, inner: str = "1") -> Raw:
    """``depth`` levels of arrays, objects or both in turn around ``inner``;
    sometimes never closed."""
    kind = rng.randrange(3)
    if kind == 0:
        opens, closes = "[" * depth, "]" * depth
    elif kind == 1:
        opens, closes = '{"k": ' * depth, "}" * depth
    else:
        half = depth // 2
        opens = '[{"k": ' * half + "[" * (depth - 2 * half)
        closes = "]" * (depth - 2 * half) + "}]" * half
    if rng.random() < 0.1:
        closes = ""
    return Raw(opens + inner + closes)


def _depth(rng: random.Random) -> int:
    return rng.choice(
        (
            MAX_JSON_DEPTH - 3,
            MAX_JSON_DEPTH - 2,
            MAX_JSON_DEPTH - 1,
            MAX_JSON_DEPTH,
            MAX_JSON_DEPTH + 1,
            64,
            65,
            1000,
            8000,
        )
    )


class _Gen:
    """One case's randomness, and its marker."""

    def __init__(self, rng: random.Random, marker: str, wild: float) -> None:
        self.rng = rng
        self.marker = marker
        # How often a value is drawn from the weird pools instead of the usual ones.
        self.wild = wild

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, *options: Any) -> Any:
        return self.rng.choice(options)

    def text(self) -> Any:
        if self.chance(self.wild):
            return self.pick(*_WEIRD_TEXT)
        r = self.rng.random()
        if r < 0.75:
            return self.pick("Hello", "What is the edge?", "你好", "Explain Workers AI.", "ok")
        if r < 0.9:
            return f"say {self.marker} now"
        if r < 0.95:
            return self.pick(f"{BUSY} please", f"{BAD_INPUT} x", f"tell {SPLIT_EMOJI}")
        return f"stream {self.pick(*STREAM_FAULTS)} now"

    def number(self) -> Any:
        if self.chance(self.wild):
            return self.pick(*_WEIRD_NUMBERS)
        return self.pick(0, 1, 0.5, 2, 100, 1024, 4096)

    def junk(self) -> Any:
        r = self.rng.random()
        if r < 0.25:
            return copy.deepcopy(self.pick(*_JUNK))
        if r < 0.45:
            return self.number()
        if r < 0.7:
            return self.text()
        if r < 0.8:
            return self.marker
        if r < 0.9:
            return _nest(self.rng, _depth(self.rng), json.dumps(self.marker))
        return [self.junk() for _ in range(self.rng.randint(0, 3))]

    # -- images --

    def image_part(self) -> Any:
        rng = self.rng
        r = rng.random()
        w, h = rng.choice((1, 2, 17, 640)), rng.choice((1, 3, 480))
        if r < 0.4:
            data, kind = self.pick(
                (png(min(w, 64), min(h, 64)), "image/png"),
                (jpeg(w, h, exif_bytes=rng.choice((0, 0, 3000))), "image/jpeg"),
                (webp(w, h, rng.choice(("VP8X", "VP8L", "VP8 "))), "image/webp"),
                (gif(w, h, colours=rng.choice((0, 2, 256))), "image/gif"),
                (png(0, 4), "image/png"),
                (jpeg(20000, 8), "image/jpeg"),
            )
            url = data_url(data, kind)
        elif r < 0.65:
            data, kind = BROKEN[rng.choice(sorted(BROKEN))]
            url = data_url(data, kind)
        elif r < 0.75:
            url = data_url(png(4, 4), self.pick("image/jpeg", "image/gif", "image/svg+xml"))
        elif r < 0.85:
            url = self.pick(
                f"https://{self.marker}.example/cat.png",
                "data:image/png;base64,iVBORw0KGgo",  # length not a multiple of 4
                "data:image/png;base64,iVBORw0KGgo=!==",
                "data:image/png,raw",
                "data:image/png;base64," + "A" * (MAX_IMAGE_BYTES * 2),
                f"data:image/png;base64,{self.marker}",
                "data:image\\/png;base64,iVBORw0KGgoLoP4=",
            )
        else:
            url = self.junk()
        image: dict[str, Any] = {"url": url}
        if self.chance(0.2):
            image["detail"] = self.pick("auto", "low", "high", "ultra", None, self.marker)
        part: dict[str, Any] = {"type": "image_url", "image_url": image}
        if self.chance(0.05):
            part = self.pick(
                {"type": "image_url", "image_url": url},
                {"type": "image_url"},
                {"type": "image_url", "image_url": image, self.marker: 1},
            )
        return part

    def content(self, user: bool) -> Any:
        if user and self.chance(0.25):
            parts: list[Any] = []
            for _ in range(self.rng.randint(1, 4)):
                if self.chance(0.5):
                    parts.append({"type": "text", "text": self.text()})
                else:
                    parts.append(self.image_part())
            return parts
        return self.text()


def _chat_body(g: _Gen) -> dict[str, Any]:
    messages: list[Any] = []
    turns = g.rng.choice((1, 1, 1, 2, 3, 5, 51))
    for n in range(turns):
        role = "user" if (turns - n) % 2 == 1 else "assistant"
        messages.append({"role": role, "content": g.content(role == "user")})
    body: dict[str, Any] = {"messages": messages}
    if g.chance(0.5):
        body["model"] = g.pick("glm", "kimi", "llama", GLM, "glm-5.3", g.marker)
    if g.chance(0.3):
        body["temperature"] = g.pick(0, 0.7, 2, g.number())
    if g.chance(0.3):
        body["max_tokens"] = g.pick(1, 64, 4096, g.number())
    if g.chance(0.2):
        body["reasoning"] = g.pick(True, False, g.junk())
    return body


def _tool(g: _Gen) -> Any:
    function: dict[str, Any] = {"name": g.pick("lookup", "get_weather", g.marker, "x" * 65)}
    if g.chance(0.6):
        function["description"] = g.text()
    if g.chance(0.7):
        function["parameters"] = g.pick(
            {"type": "object", "properties": {"word": {"type": "string"}}},
            {"type": "object", "properties": {g.marker: {"type": g.text()}}},
            {"deep": _nest(g.rng, _depth(g.rng))},
            {"n": g.number()},
            g.junk(),
        )
    return {"type": "function", "function": function}


def _v1_message(g: _Gen, role: str) -> Any:
    message: dict[str, Any] = {"role": role}
    if role == "assistant" and g.chance(0.3):
        message["content"] = None
        message["tool_calls"] = [
            {
                "id": g.pick("call_1", "functions.lookup:0", g.marker),
                "type": "function",
                "function": {
                    "name": "lookup",
                    "arguments": g.pick("{}", '{"word": "x"}', g.text()),
                },
            }
        ]
    elif role == "tool":
        message["tool_call_id"] = g.pick("call_1", g.marker)
        message["content"] = g.text()
    else:
        message["content"] = g.content(role == "user")
    if g.chance(0.1):
        message["name"] = g.pick("ada", g.text())
    return message


def _v1_body(g: _Gen) -> dict[str, Any]:
    roles = g.pick(
        ["user"],
        ["system", "user"],
        ["developer", "user"],
        ["user", "assistant", "user"],
        ["user", "assistant", "tool", "user"],
        ["system", "user", "assistant", "tool"],
    )
    body: dict[str, Any] = {"messages": [_v1_message(g, role) for role in roles]}
    if g.chance(0.7):
        body["model"] = g.pick("glm", "kimi", "llama", GLM, g.marker)
    if g.chance(0.5):
        body["stream"] = g.pick(True, False)
        if body["stream"] and g.chance(0.4):
            body["stream_options"] = {"include_usage": g.pick(True, False)}
    optional: list[tuple[str, Any]] = [
        ("max_tokens", lambda: g.pick(16, 4096, g.number())),
        ("max_completion_tokens", lambda: g.pick(16, g.number())),
        ("temperature", lambda: g.pick(0, 1, g.number())),
        ("top_p", lambda: g.pick(0.9, 1, g.number())),
        ("seed", lambda: g.pick(1, 42, 2**53 - 1, g.number())),
        ("stop", lambda: g.pick("END", ["a", "b"], [g.text()], g.text(), [g.marker] * 5)),
        ("frequency_penalty", lambda: g.pick(0, -2, g.number())),
        ("presence_penalty", lambda: g.pick(0.5, g.number())),
        ("reasoning_effort", lambda: g.pick("low", "high", None, g.marker)),
        ("user", lambda: g.pick("u-1", g.text())),
        ("n", lambda: g.pick(1, 2, g.number())),
        ("metadata", lambda: g.pick({"k": "v"}, {g.marker: g.text()}, g.junk())),
        ("parallel_tool_calls", lambda: g.pick(True, g.junk())),
        (
            "response_format",
            lambda: g.pick(
                {"type": "json_object"},
                {"type": "text"},
                {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
                {"type": "json_schema", "json_schema": {"schema": _nest(g.rng, _depth(g.rng))}},
                {"type": g.marker},
            ),
        ),
        ("tools", lambda: [_tool(g) for _ in range(g.rng.choice((1, 1, 2)))] * g.pick(1, 1, 65)),
        (
            "tool_choice",
            lambda: g.pick(
                "auto", "none", {"type": "function", "function": {"name": "lookup"}}, g.marker
            ),
        ),
    ]
    for name, make in optional:
        if g.chance(0.15):
            body[name] = make()
    return body


def _mutate(g: _Gen, body: dict[str, Any]) -> Any:
    """The body with one thing changed somewhere (or as it is)."""
    rng = g.rng
    # Every container in the body, as (container, key or index).
    spots: list[tuple[Any, Any]] = []
    stack: list[Any] = [body]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, value in item.items():
                spots.append((item, key))
                stack.append(value)
        elif isinstance(item, list):
            for index, value in enumerate(item):
                spots.append((item, index))
                stack.append(value)
    if not spots:
        return body
    container, key = rng.choice(spots)
    r = rng.random()
    if r < 0.4:
        container[key] = g.junk()
    elif r < 0.55 and isinstance(container, dict):
        del container[key]
    elif r < 0.7 and isinstance(container, dict):
        container[g.pick(g.marker, "max_token", "role", "\ud800", "")] = g.junk()
    elif r < 0.8:
        container[key] = _nest(rng, _depth(rng), json.dumps(g.marker))
    elif r < 0.9 and isinstance(container, dict):
        # The same key twice: JSON readers keep the last (or the first).
        items = list(container.items())
        items.insert(rng.randint(0, len(items)), (key, g.junk()))
        replacement = Pairs(tuple(items))
        if container is body:
            return replacement
        for parent, parent_key in spots:
            if parent[parent_key] is container:
                parent[parent_key] = replacement
                break
    else:
        container[key] = g.text()
    return body


def _damage(g: _Gen, text: bytes) -> bytes:
    """The encoded body itself cut, spliced or made invalid UTF-8."""
    rng = g.rng
    at = rng.randint(0, len(text)) if text else 0
    return g.pick(
        lambda: text[:at],
        lambda: text[:at] + rng.choice((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00")) + text[at:],
        lambda: b"\xef\xbb\xbf" + text,
        lambda: text + b" trailing",
        lambda: text + b"\n" + text,
        lambda: text.replace(b'"', b"'", 1),
        lambda: b"",
        lambda: rng.randbytes(rng.randint(1, 64)),
        lambda: b"[" * 8000,
        lambda: b'{"messages": ' + b"[" * 8000,
        lambda: b" " * 70_000 + text,  # over the body cap
        lambda: b'"' + g.marker.encode() + b'"',
    )()


_CONTENT_TYPES = (
    "application/json",
    "application/json; charset=utf-8",
    "Application/JSON",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=x",
    "application/json-patch+json",
    "",
)


def cases(seed: int, count: int, start: int = 0) -> Iterator[Case]:
    """``count`` cases from ``seed`` (the ``start``-th on): each index has
    its own random stream, so a case is reproduced by (seed, index) alone."""
    for index in range(start, start + count):
        rng = random.Random(f"{seed}:{index}")
        marker = f"MRK{rng.getrandbits(40):010x}"
        r = rng.random()
        kind = "built" if r < 0.4 else "mutated" if r < 0.85 else "damaged"
        g = _Gen(rng, marker, wild=0.04 if kind == "built" else 0.4)
        route = CHAT if rng.random() < 0.5 else V1
        body: Any = _chat_body(g) if route == CHAT else _v1_body(g)
        if kind == "mutated":
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                body = _mutate(g, body)
        try:
            text = dump(body, ascii_only=rng.random() < 0.7).encode("utf-8", "surrogatepass")
        except UnicodeEncodeError:
            text = dump(body).encode()
        if kind == "damaged":
            text = _damage(g, text)
        headers = {"content-type": "application/json", "authorization": f"Bearer {TOKEN}"}
        if rng.random() < 0.06:
            kind += "+content-type"
            headers["content-type"] = rng.choice(_CONTENT_TYPES)
            if not headers["content-type"]:
                del headers["content-type"]
        if rng.random() < 0.03:
            kind += "+auth"
            headers["authorization"] = rng.choice(("Bearer wrong", "Basic x", ""))
        if rng.random() < 0.05:
            headers["cache-control"] = "no-cache"
        chunk_size = 0
        if rng.random() < 0.1:
            # Pieces as small as a byte, but at most 64 of them: a slow upload
            # costs time, not coverage.
            chunk_size = max(rng.choice((1, 7, 1024, 65536)), -(-len(text) // 64), 1)
        if chunk_size:
            kind += "+chunked"
        if chunk_size or len(text) > KEEP_ALIVE_BYTES:
            # A body the Worker refuses before reading it ends its connection
            # when it is chunked or large (workerd answers "Connection:
            # close", seen on 1.20261117.1: 20 KB kept, 70 KB closed), possibly
            # while the client is still sending it, and the client may try the
            # connection again: such bodies go on a connection of their own.
            headers["connection"] = "close"
        yield Case(index, kind, route, text, headers, chunk_size, marker)


# --- sending one, and judging what came back ---------------------------------------------

# Deadline for one exchange: far above what the emulator (no delays) takes
# on a loaded machine; reaching it means a stream that never ends.
EXCHANGE_LIMIT_S = 60.0

# What must never reach a client in edgechat's own words.
_LEAKS = (
    re.compile(r"Traceback|File \""),
    re.compile(r"JsException|pyodide|PyProxy", re.IGNORECASE),
    re.compile(r"\b[A-Z]\w+(Error|Exception)\b"),
    re.compile(r"\b\d{4}: "),
)


def _chunks(body: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(body), size):
        yield body[at : at + size]


def send(client: httpx.Client, case: Case) -> Verdict:
    """Sends ``case`` and judges the answer; a transport failure is a defect."""
    content: bytes | Iterator[bytes] = (
        _chunks(case.body, case.chunk_size) if case.chunk_size else case.body
    )
    deadline = time.monotonic() + EXCHANGE_LIMIT_S
    try:
        with client.stream("POST", case.route, content=content, headers=case.headers) as r:
            # Decoded: the runtime compresses a JSON body for a client that
            # accepts gzip, as the edge does.
            raw = bytearray()
            for piece in r.iter_bytes():
                raw += piece
                if time.monotonic() > deadline:
                    return Verdict(case, r.status_code, ["the answer never ended"])
            return judge(case, r.status_code, r.headers, bytes(raw))
    except httpx.HTTPError as exc:
        return Verdict(case, None, [f"transport: {type(exc).__name__}: {exc}"])


def judge(case: Case, status: int, headers: Mapping[str, str], body: bytes) -> Verdict:
    verdict = Verdict(case, status)
    defects = verdict.defects
    if status >= 500 and not _as_scripted(case, status, body):
        defects.append(f"status {status}: {body[:200]!r}")
    kind = headers.get("content-type", "")
    if status != 200:
        _judge_error(case, kind, body, defects)
    elif kind.startswith("text/event-stream"):
        _judge_stream(case, body, defects)
    elif case.route == V1:
        try:
            completion = json.loads(body)
            if completion.get("object") != "chat.completion":
                defects.append(f"200 that is not a chat.completion: {body[:200]!r}")
        except ValueError:
            defects.append(f"200 whose body is not JSON: {body[:200]!r}")
    else:
        defects.append(f"200 from /chat that is not a stream: {kind}")
    return verdict


def _as_scripted(case: Case, status: int, body: bytes) -> bool:
    """A 5xx the script asked for, which is the documented answer (docs/api/errors.md),
    not a defect: every Workers AI model busy and a request with images the
    fallback provider cannot see (503 ``model_busy``); a whole answer from a
    hostile model stream (502 ``upstream_malformed``)."""
    if status == 503:
        words, code = (BUSY,), "model_busy"
    elif status == 502:
        words, code = STREAM_FAULTS, "upstream_malformed"
    else:
        return False
    if not any(word.encode() in case.body for word in words):
        return False
    try:
        return bool(json.loads(body)["error"]["code"] == code)
    except (ValueError, KeyError, TypeError):
        return False


def _our_words(text: str, case: Case, where: str, defects: list[str]) -> None:
    if case.marker in text:
        defects.append(f"{where} repeats the marker planted in the body")
    for pattern in _LEAKS:
        if pattern.search(text):
            defects.append(f"{where} leaks {pattern.pattern!r}: {text[:200]!r}")


def _judge_error(case: Case, kind: str, body: bytes, defects: list[str]) -> None:
    if not kind.startswith("application/json"):
        defects.append(f"an error that is not JSON: {kind}")
        return
    try:
        error = json.loads(body)["error"]
        message = error["message"]
        assert isinstance(message, str)
        assert message.strip()
        assert isinstance(error["code"], str)
    except (ValueError, KeyError, TypeError, AssertionError):
        defects.append(f"an error body not in its documented shape: {body[:200]!r}")
        return
    _our_words(body.decode("utf-8", "replace"), case, "an error reply", defects)


def _judge_stream(case: Case, body: bytes, defects: list[str]) -> None:
    parser = SSEParser(errors="replace")
    try:
        parser.feed(body)
        parsed = parser.close()
    except AssertionError as exc:
        defects.append(f"a stream edgechat framed wrong: {exc}")
        return
    events = parsed.events
    if case.route == CHAT:
        try:
            # meta first; last, the one done or error that names meta's request.
            _ = parsed.final
        except AssertionError as exc:
            defects.append(f"a /chat stream not opened by meta and closed by its one end: {exc}")
        for event in events:
            if event.name != MODEL:
                _our_words(json.dumps(event.data, ensure_ascii=False), case, event.name, defects)
        return
    data = [event.data for event in events]
    errors = [d for d in data if isinstance(d, dict) and "error" in d]
    ends_done = bool(data) and data[-1] == "[DONE]"
    if errors:
        if len(errors) != 1 or data[-1] is not errors[0] or "[DONE]" in data:
            defects.append("a /v1 stream whose error event is not its one last event")
        _our_words(json.dumps(errors, ensure_ascii=False), case, "a /v1 error event", defects)
    elif not ends_done or data.count("[DONE]") != 1:
        defects.append("a /v1 stream not closed by one data: [DONE]")


def describe(case: Case) -> str:
    """One line that says how to get this case again, and what it was."""
    head = base64.b64encode(case.body[:120]).decode()
    return f"#{case.index} {case.kind} {case.route} ({len(case.body)} bytes, b64 head {head})"
