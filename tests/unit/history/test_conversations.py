"""conversations.py: the import rules of transfer.js on the server, each
refusal naming the field at fault and never echoing a value."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from edgechat.config.settings import MAX_CHUNK_TOKENS, MAX_TOP_K
from edgechat.core.errors import BadRequest
from edgechat.history.conversations import (
    MAX_DEPTH,
    MAX_NODES,
    MAX_SOURCE_TEXT,
    MAX_SOURCES,
    check_conversation,
)
from edgechat.knowledge.chunks import split
from edgechat.knowledge.retrieve import Retrieved

GOOD: dict[str, Any] = {
    "id": "c1",
    "title": "Tea",
    "updated": 1733100000000,
    "pick": 1,
    "preset": "tutor",
    "nodes": [
        {"parent": None, "role": "user", "content": "first"},
        {"parent": None, "role": "user", "content": "first, edited", "pick": 0},
        {
            "parent": 1,
            "role": "assistant",
            "content": "answer",
            "reasoning": "thinking",
            "status": "done",
            "stats": {
                "model": "glm",
                "ttft_ms": 120,
                "usage": {"total_tokens": 9},
                "similar": {"score": 0.96, "question": "the first?"},
                "sources": [
                    {
                        "n": 1,
                        "base": "b1",
                        "document": "d1",
                        "name": "manual.md",
                        "chunk": 4,
                        "id": "d1:4",
                        "score": 0.83,
                        "text": "Section 4. The boiler holds 2 bar.",
                    }
                ],
            },
            "moderation": {"safe": True, "categories": []},
        },
        {"parent": 2, "role": "user", "content": "more"},
        {
            "parent": 3,
            "role": "assistant",
            "content": "",
            "status": "error",
            "error": {"code": "model_busy", "status": 503, "retryable": True},
            # A comparison's answer that failed keeps its comparison too.
            "stats": {"comparison": {"id": "Jq0c" + "a" * 20, "slot": 2, "blind": True}},
        },
    ],
}


def test_a_good_conversation_is_copied_field_by_field() -> None:
    checked = check_conversation(copy.deepcopy(GOOD), "c1")
    assert checked == {
        **GOOD,
        "nodes": [{k: v for k, v in n.items() if k != "pick" or v} for n in GOOD["nodes"]],
    }


def _source(k: int) -> dict[str, Any]:
    return {
        "n": k + 1,
        "base": "b1",
        "document": "d1",
        "name": "a.md",
        "chunk": k,
        "id": f"d1:{k}",
        "score": 0.5,
        "text": "x",
    }


def _first_source(data: dict[str, Any]) -> dict[str, Any]:
    source: dict[str, Any] = data["nodes"][2]["stats"]["sources"][0]
    return source


def bad(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    change(data)
    return data


CASES = [
    (lambda d: d.update(extra=1), "extra is not a known field"),
    (lambda d: d.pop("title"), "title is missing"),
    (lambda d: d.update(id="other"), "id must be the id in the URL"),
    (lambda d: d.update(title="x" * 201), "title is longer than 200"),
    (lambda d: d.update(updated=-1), "updated must be"),
    (lambda d: d.update(updated="yesterday"), "updated must be"),
    (lambda d: d.update(pick=2), "pick must name one of its versions"),
    (lambda d: d.update(nodes={}), "nodes must be a list"),
    (lambda d: d["nodes"][0].update(role="assistant"), "nodes[0].role must be user"),
    (lambda d: d["nodes"][2].update(role="user"), "nodes[2].role must be assistant"),
    (lambda d: d["nodes"][2].update(parent=2), "nodes[2].parent must be null or the index"),
    (lambda d: d["nodes"][2].update(parent=True), "nodes[2].parent"),
    (lambda d: d["nodes"][1].update(pick=1), "nodes[1].pick must name one"),
    (lambda d: d["nodes"][2].update(status="streaming"), "nodes[2].status must be one of"),
    (lambda d: d["nodes"][2]["stats"].update(tps=-1), "nodes[2].stats.tps"),
    (lambda d: d["nodes"][2]["stats"]["usage"].update(total_tokens=1.5), "usage.total_tokens"),
    (lambda d: d["nodes"][2]["stats"]["similar"].update(score=2), "stats.similar.score"),
    (lambda d: d["nodes"][2]["stats"]["similar"].pop("question"), "similar.question is missing"),
    (lambda d: d["nodes"][2]["stats"].update(sources={}), "stats.sources must be a list"),
    (
        lambda d: d["nodes"][2]["stats"].update(
            sources=[_source(k) for k in range(MAX_SOURCES + 1)]
        ),
        f"stats.sources must be a list of at most {MAX_SOURCES} sources",
    ),
    (lambda d: _first_source(d).update(n=2), "stats.sources[0].n must be 1, its place from 1"),
    (lambda d: _first_source(d).update(n=True), "stats.sources[0].n must be 1"),
    (lambda d: _first_source(d).pop("name"), "stats.sources[0].name is missing"),
    (lambda d: _first_source(d).update(url="x"), "stats.sources[0].url is not a known field"),
    (lambda d: _first_source(d).update(chunk=-1), "stats.sources[0].chunk must be a whole"),
    (lambda d: _first_source(d).update(score=1.5), "stats.sources[0].score must be a number"),
    (lambda d: _first_source(d).update(name="x" * 201), "sources[0].name is longer than 200"),
    (
        lambda d: _first_source(d).update(text="x" * (MAX_SOURCE_TEXT + 1)),
        f"stats.sources[0].text is longer than {MAX_SOURCE_TEXT} characters",
    ),
    (lambda d: d["nodes"][4]["stats"]["comparison"].update(id="x/y"), "stats.comparison.id"),
    (lambda d: d["nodes"][4]["stats"]["comparison"].update(slot=3), "slot must be a whole"),
    (lambda d: d["nodes"][4]["stats"]["comparison"].update(slot=True), "comparison.slot"),
    (lambda d: d["nodes"][4]["stats"]["comparison"].update(blind="yes"), "comparison.blind"),
    (lambda d: d["nodes"][4]["stats"]["comparison"].pop("slot"), "comparison.slot is missing"),
    (lambda d: d["nodes"][4]["stats"]["comparison"].update(model="glm"), "comparison.model is not"),
    (lambda d: d["nodes"][2]["moderation"].update(safe="no"), "moderation.safe"),
    (lambda d: d["nodes"][4]["error"].update(retryable="yes"), "nodes[4].error.retryable"),
    (lambda d: d["nodes"][3].update(content=7), "nodes[3].content must be a string"),
    (lambda d: d["nodes"][3].update({"<script>": 1}), "nodes[3].… is not a known field"),
]


@pytest.mark.parametrize(("change", "message"), CASES)
def test_a_bad_field_is_named(change: Any, message: str) -> None:
    with pytest.raises(BadRequest) as refused:
        check_conversation(bad(change), "c1")
    assert message in refused.value.public_message
    assert "<script>" not in refused.value.public_message


def test_a_conversation_that_is_not_an_object_is_refused_as_such() -> None:
    for value in ([], [{"id": "a"}], "a", None):
        with pytest.raises(BadRequest) as refused:
            check_conversation(value)
        assert refused.value.public_message == "The conversation must be an object."


def test_size_and_depth_are_bounded_without_recursion() -> None:
    chain = [
        {
            "parent": k - 1 if k else None,
            "role": "user" if k % 2 == 0 else "assistant",
            "content": "",
        }
        for k in range(MAX_DEPTH)
    ]
    deep = {"id": "c", "title": "", "updated": 0, "nodes": chain}
    assert len(check_conversation(deep)["nodes"]) == MAX_DEPTH
    deep["nodes"] = [*chain, {"parent": MAX_DEPTH - 1, "role": "user", "content": ""}]
    with pytest.raises(BadRequest, match=f"deeper than {MAX_DEPTH}"):
        check_conversation(deep)
    wide = {
        "id": "c",
        "title": "",
        "updated": 0,
        "nodes": [{"parent": None, "role": "user", "content": ""}] * (MAX_NODES + 1),
    }
    with pytest.raises(BadRequest, match=f"more than {MAX_NODES}"):
        check_conversation(wide)


def test_the_most_sources_a_question_can_get_are_kept_whole() -> None:
    """What ``done.sources`` can hold fits ``stats.sources``: as many passages
    as KNOWLEDGE_TOP_K may take, each a chunk of the largest size."""
    text = " ".join(f"word{k}" for k in range(20_000)) + "\n\n" + "长" * 9_000
    chunks = split(text, MAX_CHUNK_TOKENS, 0)
    assert max(len(chunk.text) for chunk in chunks) <= MAX_SOURCE_TEXT
    longest = max(chunks, key=lambda chunk: len(chunk.text))
    assert len(longest.text) > MAX_SOURCE_TEXT * 0.9
    assert MAX_TOP_K <= MAX_SOURCES
    passages = [
        {"document": "d1", "n": k, "name": "a.md", "score": 0.5, "text": longest.text}
        for k in range(MAX_TOP_K)
    ]
    sources = Retrieved({"id": "b1"}, passages).sources()
    data = copy.deepcopy(GOOD)
    data["nodes"][2]["stats"]["sources"] = sources
    assert check_conversation(data, "c1")["nodes"][2]["stats"]["sources"] == sources
