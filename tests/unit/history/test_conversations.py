"""conversations.py: the import rules of transfer.js on the server, each
refusal naming the field at fault and never echoing a value."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from edgechat.core.errors import BadRequest
from edgechat.history.conversations import MAX_DEPTH, MAX_NODES, check_conversation

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
