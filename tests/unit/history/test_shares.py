"""shares.page: the ``/s/<id>`` page of a link's copy. An answer from a
knowledge base lists its passages, each ``[n]`` of its text a plain link to
its passage; everything escaped, no script."""

from __future__ import annotations

import json
from typing import Any

from edgechat.history import shares


def _row(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"id": "c", "title": "Boilers", "updated": 1, "pick": 0, "nodes": nodes}
    return {
        "id": "s1",
        "title": "Boilers",
        "created": 1,
        "expires": 10_000,
        "body": json.dumps(body),
    }


def _source(n: int, text: str) -> dict[str, Any]:
    return {
        "n": n,
        "base": "b1",
        "document": "d1",
        "name": "<manual>.md",
        "chunk": n + 2,
        "id": f"d1:{n + 2}",
        "score": 0.8,
        "text": text,
    }


def test_an_answers_citations_link_to_its_passages_listed_under_it() -> None:
    answer = {
        "parent": 0,
        "role": "assistant",
        "content": "Two bar [1], cold [2]; not [3] nor [0]. <b>",
        "stats": {"sources": [_source(1, "Holds <2> bar."), _source(2, "When cold.")]},
    }
    status, page = shares.page(
        _row([{"parent": None, "role": "user", "content": "[1]?"}, answer]), 1
    )
    text = page.decode()
    assert status == 200
    # The question's [1] is the user's text: no link.
    assert "<pre>[1]?</pre>" in text
    assert (
        '<pre>Two bar <a href="#m1-s1">[1]</a>, cold <a href="#m1-s2">[2]</a>; '
        "not [3] nor [0]. &lt;b&gt;</pre>"
    ) in text
    assert (
        '<h3>Sources</h3><ol><li id="m1-s1"><strong>&lt;manual&gt;.md</strong>, passage 4'
        "<pre>Holds &lt;2&gt; bar.</pre></li>"
    ) in text
    assert '<li id="m1-s2">' in text
    assert "<script" not in text


def test_an_answer_without_sources_is_its_text_alone() -> None:
    answer = {"parent": 0, "role": "assistant", "content": "See [1].", "stats": {"model": "glm"}}
    _, page = shares.page(_row([{"parent": None, "role": "user", "content": "q"}, answer]), 1)
    assert b"<pre>See [1].</pre><footer>" in page
    assert b"Sources" not in page
