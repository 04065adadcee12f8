"""``FakeVectors`` (tests/unit/fakes.py), the unit tests' Vectorize index:
it must filter and partition as the emulator's index does
(tools/emulator/vectorize.mjs, tests/js/emulator-vectorize.test.mjs), or a
unit test could pass on a query the real index answers otherwise.

It tests a tool of the tests, not the Worker.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from edgechat.core.ports import VectorsError
from tests.unit.fakes import FakeVectors


def axis(i: int, j: int | None = None, share: float = 0.0) -> list[float]:
    values = [0.0] * 8
    values[i] = (1 - share * share) ** 0.5
    if j is not None:
        values[j] = share
    return values


def ids(found: list[dict[str, Any]]) -> list[str]:
    return [match["id"] for match in found]


def test_namespaces_filters_and_scores_as_the_emulator() -> None:
    index = FakeVectors()

    async def run() -> None:
        near = axis(0, 1, 0.6)
        await index.upsert(
            [
                {"id": "a", "values": axis(0), "namespace": "u1", "metadata": {"owner": "u1"}},
                {"id": "b", "values": near, "namespace": "u1", "metadata": {"kind": "y"}},
                {"id": "c", "values": axis(0), "namespace": "u2", "metadata": {"text": "t"}},
            ]
        )
        found = await index.query(axis(0), top_k=5, namespace="u1")
        assert ids(found) == ["a", "b"]
        assert found[0]["score"] == pytest.approx(1.0)
        assert found[1]["score"] == pytest.approx(0.8)
        assert found[0]["metadata"] == {"owner": "u1"}
        assert ids(await index.query(axis(0), top_k=5)) == ["a", "c", "b"]
        assert ids(await index.query(axis(0), top_k=5, filter={"owner": "u1"})) == ["a"]
        # No metadata index, or no such property: nothing matches, not even $ne.
        assert await index.query(axis(0), top_k=5, filter={"text": "t"}) == []
        assert ids(await index.query(axis(0), top_k=5, filter={"kind": {"$ne": "z"}})) == ["b"]
        assert "metadata" not in (await index.query(axis(0), top_k=1, metadata=False))[0]
        await index.delete_by_ids(["a"])
        assert ids(await index.get_by_ids(["a", "b"])) == ["b"]

    asyncio.run(run())
    assert [call["method"] for call in index.calls][:2] == ["upsert", "query"]
    assert index.calls[1] == {"method": "query", "namespace": "u1", "filter": None, "top_k": 5}


def test_lagging_mutations_wait_for_apply_and_fail_is_a_vectors_error() -> None:
    index = FakeVectors(lagging=True)

    async def run() -> None:
        await index.upsert([{"id": "a", "values": axis(0)}])
        assert await index.query(axis(0), top_k=1) == []
        index.apply()
        assert ids(await index.query(axis(0), top_k=1)) == ["a"]
        index.fail = True
        with pytest.raises(VectorsError):
            await index.query(axis(0), top_k=1)

    asyncio.run(run())
