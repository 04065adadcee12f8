"""A conversation as the server keeps it, checked by the page's import rules.

The page holds a conversation as a tree (``static/js/tree.js``): every node
has ``next``, the versions of the following message, and ``pick``, the one
shown; roles alternate, user first. ``static/js/transfer.js`` checks an
imported file by these rules, and this module is the same rules on the
server, for ``PUT /api/conversations/<id>``: one implementation per side.

On the wire the tree is **flat**: the page's nesting (two JSON levels a
message, 2,000 messages deep) is no JSON ``json.loads`` may parse in
Pyodide, whose WebAssembly stack a few hundred levels overflow
(``json_body``). So a conversation is::

    {"id": str, "title": str, "updated": ms, "pick": int?, "preset": str?,
     "nodes": [{"parent": int | null, "role": "user" | "assistant",
                "content": str, "reasoning": str?, "status": str?,
                "stats": {...}?, "error": {...}?, "moderation": {...}?,
                "pick": int?, "images": [{"id", "type", "width", "height"}]?},
               ...]}

``parent`` is the index of an earlier node (``null``: a first message), so
a node's versions are its children in the order they appear; the tree is
rebuilt without recursion. The rules, as ``transfer.js``'s: no unknown key,
every type, roles in turn, ``pick`` within its versions, at most
``MAX_NODES`` messages and ``MAX_DEPTH`` deep, the same string lengths.
A refusal names the field (``nodes[3].role``), never echoes a value.
A user node's ``images`` name the images kept beside it (``files``,
``PUT /api/files/<id>``), at most ``MAX_NODE_IMAGES``. An answer from a
knowledge base keeps the passages it cites in ``stats.sources`` (``done``'s
``sources``, numbered from 1 in order): at most ``MAX_SOURCES``, each text
at most ``MAX_SOURCE_TEXT`` characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from edgechat.core.errors import BadRequest
from edgechat.core.ids import is_client_id, is_random_id
from edgechat.core.requests import MAX_COMPARED
from edgechat.media.images import IMAGE_TYPES, MAX_IMAGE_SIDE

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "MAX_NODE_IMAGES",
    "MAX_SOURCES",
    "MAX_SOURCE_TEXT",
    "check_conversation",
    "is_image_id",
]

# transfer.js's limits.
MAX_NODES = 20_000
MAX_DEPTH = 2_000
MAX_ID = 100
MAX_TITLE = 200
MAX_PRESET = 32
MAX_TEXT = 1_000_000
STATUSES = frozenset(("done", "stopped", "interrupted", "error"))
MAX_NODE_IMAGES = 16
# An answer's knowledge sources: as many as KNOWLEDGE_TOP_K may take (50 at
# most), each passage whole (a chunk of the largest KNOWLEDGE_CHUNK_TOKENS,
# 2,000 tokens of at most four characters; tests hold these together).
MAX_SOURCES = 50
MAX_SOURCE_TEXT = 8_000

_TOP = (("id", "title", "updated", "nodes"), ("pick", "preset"))
_NODE = (
    ("parent", "role", "content"),
    ("reasoning", "status", "stats", "error", "moderation", "pick", "images"),
)
_IMAGE = ("id", "type", "width", "height")
_STATS = (
    "model",
    "ttft_ms",
    "usage",
    "cost_usd",
    "fallback_from",
    "tps",
    "route",
    "similar",
    "sources",
    "comparison",
)
_ROUTE = ("model", "reason")
# An answer from the semantic cache: the similar question's score and text.
_SIMILAR = ("score", "question")
# A passage an answer from a knowledge base cites: done.sources' items.
_SOURCE = ("n", "base", "document", "name", "chunk", "id", "score", "text")
# A comparison's answer: the comparison (the server's id), its slot, and
# whether it is blind, so a reload or another device can offer its vote.
_COMPARISON = ("id", "slot", "blind")
_USAGE = ("prompt_tokens", "completion_tokens", "total_tokens")
_ERROR = ("code", "status", "message", "retryAfter", "retryable", "offline", "categories")


def _bad(path: str, why: str) -> BadRequest:
    return BadRequest(public=f"The conversation's {path} {why}.")


def _fields(value: Any, path: str, required: Sequence[str], optional: Sequence[str]) -> None:
    if not isinstance(value, dict):
        if not path:
            raise BadRequest(public="The conversation must be an object.")
        raise _bad(path, "must be an object")
    for key in value:
        if key not in required and key not in optional:
            # The key is the client's: named only when it is a plain word.
            name = key if key.isidentifier() and len(key) <= 40 else "…"
            raise _bad(f"{path}.{name}" if path else name, "is not a known field")
    for key in required:
        if key not in value:
            raise _bad(f"{path}.{key}" if path else key, "is missing")


def _string(value: Any, path: str, most: int) -> str:
    if not isinstance(value, str):
        raise _bad(path, "must be a string")
    if len(value) > most:
        raise _bad(path, f"is longer than {most} characters")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _stats(value: Any, path: str) -> dict[str, Any]:
    _fields(value, path, (), _STATS)
    out: dict[str, Any] = {}
    for key in ("model", "fallback_from"):
        if value.get(key) is not None:
            out[key] = _string(value[key], f"{path}.{key}", 200)
    for key in ("ttft_ms", "cost_usd", "tps"):
        n = value.get(key)
        if n is None:
            continue
        if not _number(n) or n < 0:
            raise _bad(f"{path}.{key}", "must be a number, at least 0")
        out[key] = n
    usage = value.get("usage")
    if usage is not None:
        _fields(usage, f"{path}.usage", (), _USAGE)
        out["usage"] = {}
        for key in _USAGE:
            if key not in usage:
                continue
            if not _count(usage[key]):
                raise _bad(f"{path}.usage.{key}", "must be a whole number, at least 0")
            out["usage"][key] = usage[key]
    route = value.get("route")
    if route is not None:
        _fields(route, f"{path}.route", _ROUTE, ())
        out["route"] = {key: _string(route[key], f"{path}.route.{key}", 200) for key in _ROUTE}
    found = value.get("similar")
    if found is not None:
        _fields(found, f"{path}.similar", _SIMILAR, ())
        score = found["score"]
        if not _number(score) or not -1 <= score <= 1:
            raise _bad(f"{path}.similar.score", "must be a number from -1 to 1")
        out["similar"] = {
            "score": score,
            "question": _string(found["question"], f"{path}.similar.question", 1000),
        }
    compared = value.get("comparison")
    if compared is not None:
        out["comparison"] = _comparison(compared, f"{path}.comparison")
    if value.get("sources") is not None:
        out["sources"] = _sources(value["sources"], f"{path}.sources")
    return out


def _sources(value: Any, path: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_SOURCES:
        raise _bad(path, f"must be a list of at most {MAX_SOURCES} sources")
    out = []
    for k, source in enumerate(value):
        where = f"{path}[{k}]"
        _fields(source, where, _SOURCE, ())
        # [n] in the answer is the n-th passage: the numbers are their places.
        if source["n"] != k + 1 or not _count(source["n"]):
            raise _bad(f"{where}.n", f"must be {k + 1}, its place from 1")
        if not _count(source["chunk"]):
            raise _bad(f"{where}.chunk", "must be a whole number, at least 0")
        score = source["score"]
        if not _number(score) or not -1 <= score <= 1:
            raise _bad(f"{where}.score", "must be a number from -1 to 1")
        for key in ("base", "document", "name", "id"):
            _string(source[key], f"{where}.{key}", 200)
        _string(source["text"], f"{where}.text", MAX_SOURCE_TEXT)
        out.append({key: source[key] for key in _SOURCE})
    return out


def _comparison(value: Any, path: str) -> dict[str, Any]:
    _fields(value, path, _COMPARISON, ())
    cid, slot, blind = value["id"], value["slot"], value["blind"]
    if not isinstance(cid, str) or not is_random_id(cid):
        raise _bad(f"{path}.id", "must be a comparison's id (24 base64url characters)")
    if not _count(slot) or slot >= MAX_COMPARED:
        raise _bad(f"{path}.slot", f"must be a whole number from 0 to {MAX_COMPARED - 1}")
    if not isinstance(blind, bool):
        raise _bad(f"{path}.blind", "must be true or false")
    return {"id": cid, "slot": slot, "blind": blind}


def _categories(value: Any, path: str) -> list[str]:
    if not isinstance(value, list) or len(value) > 20:
        raise _bad(path, "must be a list of at most 20 codes")
    return [_string(code, f"{path}[{k}]", 10) for k, code in enumerate(value)]


def _error(value: Any, path: str) -> dict[str, Any]:
    _fields(value, path, (), _ERROR)
    out: dict[str, Any] = {}
    for key, most in (("code", 100), ("message", 1000)):
        if value.get(key) is not None:
            out[key] = _string(value[key], f"{path}.{key}", most)
    for key in ("status", "retryAfter"):
        if value.get(key) is None:
            continue
        if not _count(value[key]):
            raise _bad(f"{path}.{key}", "must be a whole number, at least 0")
        out[key] = value[key]
    if "categories" in value:
        out["categories"] = _categories(value["categories"], f"{path}.categories")
    for key in ("retryable", "offline"):
        if value.get(key) is None:
            continue
        if not isinstance(value[key], bool):
            raise _bad(f"{path}.{key}", "must be true or false")
        out[key] = value[key]
    return out


def _moderation(value: Any, path: str) -> dict[str, Any]:
    _fields(value, path, ("safe", "categories"), ())
    if not isinstance(value["safe"], bool):
        raise _bad(f"{path}.safe", "must be true or false")
    return {
        "safe": value["safe"],
        "categories": _categories(value["categories"], f"{path}.categories"),
    }


def is_image_id(text: str) -> bool:
    """An image's id: what the page makes (a UUID), safe in a URL and an R2 key."""
    return is_client_id(text) and text not in (".", "..")


def _images(value: Any, path: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or len(value) > MAX_NODE_IMAGES:
        raise _bad(path, f"must be a list of at most {MAX_NODE_IMAGES} images")
    out = []
    for k, image in enumerate(value):
        where = f"{path}[{k}]"
        _fields(image, where, _IMAGE, ())
        fid = image["id"]
        if not isinstance(fid, str) or not is_image_id(fid):
            raise _bad(f"{where}.id", "must be 1 to 100 letters, digits, '.', '_' or '-'")
        if image["type"] not in IMAGE_TYPES:
            raise _bad(f"{where}.type", "must be one of " + ", ".join(IMAGE_TYPES))
        for side in ("width", "height"):
            n = image[side]
            if not _count(n) or not 1 <= n <= MAX_IMAGE_SIDE:
                raise _bad(f"{where}.{side}", f"must be a whole number from 1 to {MAX_IMAGE_SIDE}")
        out.append({key: image[key] for key in _IMAGE})
    return out


def _pick(value: Any, versions: int, path: str) -> int:
    if value is None:
        return 0
    if not _count(value) or (value >= versions if versions else value != 0):
        raise _bad(path, "must name one of its versions")
    return int(value)


def _node(node: Any, path: str, role: str) -> dict[str, Any]:
    _fields(node, path, *_NODE)
    if node["role"] != role:
        raise _bad(f"{path}.role", f"must be {role} (roles take turns, user first)")
    out: dict[str, Any] = {
        "parent": node["parent"],
        "role": role,
        "content": _string(node["content"], f"{path}.content", MAX_TEXT),
    }
    if node.get("reasoning") is not None:
        reasoning = _string(node["reasoning"], f"{path}.reasoning", MAX_TEXT)
        if reasoning:
            out["reasoning"] = reasoning
    if node.get("status") is not None:
        if node["status"] not in STATUSES:
            raise _bad(f"{path}.status", "must be one of " + ", ".join(sorted(STATUSES)))
        out["status"] = node["status"]
    if node.get("stats") is not None:
        out["stats"] = _stats(node["stats"], f"{path}.stats")
    if node.get("error") is not None:
        out["error"] = _error(node["error"], f"{path}.error")
    if node.get("moderation"):
        out["moderation"] = _moderation(node["moderation"], f"{path}.moderation")
    if node.get("images"):
        if role != "user":
            raise _bad(f"{path}.images", "are for user messages only")
        out["images"] = _images(node["images"], f"{path}.images")
    return out


def check_conversation(value: Any, expected_id: str | None = None) -> dict[str, Any]:
    """A fresh copy of the known fields of ``value`` (a flat conversation),
    or ``BadRequest`` naming the first field at fault. ``expected_id``: the
    id the URL names, which the body's must equal."""
    _fields(value, "", *_TOP)
    cid = _string(value["id"], "id", MAX_ID)
    if not cid or (expected_id is not None and cid != expected_id):
        raise _bad("id", "must be the id in the URL")
    updated = value["updated"]
    if not _number(updated) or updated < 0:
        raise _bad("updated", "must be a time in milliseconds, at least 0")
    out: dict[str, Any] = {"id": cid, "title": _string(value["title"], "title", MAX_TITLE)}
    out["updated"] = updated
    if value.get("preset") is not None:
        out["preset"] = _string(value["preset"], "preset", MAX_PRESET)
    nodes = value["nodes"]
    if not isinstance(nodes, list):
        raise _bad("nodes", "must be a list")
    if len(nodes) > MAX_NODES:
        raise _bad("nodes", f"has more than {MAX_NODES} messages")
    # Per node: its depth and how many versions follow it; the root is -1.
    depth: list[int] = []
    children: list[int] = []
    roots = 0
    copies: list[dict[str, Any]] = []
    for k, node in enumerate(nodes):
        path = f"nodes[{k}]"
        parent = node.get("parent") if isinstance(node, dict) else None
        if parent is not None and (not _count(parent) or parent >= k):
            raise _bad(f"{path}.parent", "must be null or the index of an earlier node")
        above = -1 if parent is None else depth[parent]
        role = "user" if parent is None or copies[parent]["role"] == "assistant" else "assistant"
        copy = _node(node, path, role)
        if above + 1 >= MAX_DEPTH:
            raise _bad(f"{path}.parent", f"makes the conversation deeper than {MAX_DEPTH} messages")
        depth.append(above + 1)
        children.append(0)
        if parent is None:
            roots += 1
        else:
            children[parent] += 1
        copies.append(copy)
    out["pick"] = _pick(value.get("pick"), roots, "pick")
    for k, (node, copy) in enumerate(zip(nodes, copies, strict=True)):
        pick = _pick(node.get("pick"), children[k], f"nodes[{k}].pick")
        if pick:
            copy["pick"] = pick
    out["nodes"] = copies
    return out
