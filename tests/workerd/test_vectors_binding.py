"""``env.VECTORS`` as a Python Worker sees it under ``npm start``: the
emulator's Vectorize index (tools/emulator/vectorize.mjs), bound in-process
by the launcher in place of the real index, which has no local simulation.
The probe calls it as edgechat's seam does (``platform.bindings``
``BindingVectors``: JavaScript objects in, ``to_py`` out), and the emulator's
log shows each call."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

from tests.harness import Runner, VectorsLog


def call(runner: Runner, method: str, *args: Any) -> httpx.Response:
    body = json.dumps({"method": method, "args": list(args)})
    return httpx.post(runner.base_url + "/vectors", content=body, timeout=15)


def axis(i: int, j: int | None = None, share: float = 0.0) -> list[float]:
    values = [0.0] * 1024
    values[i] = (1 - share * share) ** 0.5
    if j is not None:
        values[j] = share
    return values


def test_upsert_then_query_once_applied_with_namespace_filter_and_metadata(
    probe: Runner, probe_vectors: VectorsLog
) -> None:
    probe_vectors.reset()
    space = f"probe-{uuid.uuid4().hex[:12]}"
    alpha = {"kind": "chunk", "owner": "u1", "text": "alpha"}
    vectors = [
        {"id": f"{space}-a", "values": axis(0), "namespace": space, "metadata": alpha},
        {
            "id": f"{space}-b",
            "values": axis(0, 1, 0.6),
            "namespace": space,
            "metadata": {"kind": "answer", "owner": "u1"},
        },
        {"id": f"{space}-c", "values": axis(0), "namespace": "elsewhere", "metadata": alpha},
    ]
    upserted = call(probe, "upsert", vectors)
    assert upserted.status_code == 200, upserted.text
    assert set(upserted.json()) == {"mutationId"}
    # Mutations are asynchronous: a query waits for the "applied" record, not a time.
    (applied,) = probe_vectors.wait_until_applied()
    assert (applied["method"], applied["count"]) == ("upsert", 3)

    options = {"topK": 5, "namespace": space, "returnMetadata": "all"}
    found = call(probe, "query", axis(0), options).json()
    assert found["count"] == 2
    assert [m["id"] for m in found["matches"]] == [f"{space}-a", f"{space}-b"]
    assert found["matches"][0]["score"] == 1
    assert abs(found["matches"][1]["score"] - 0.8) < 1e-6
    assert found["matches"][0]["metadata"] == alpha

    filtered = {**options, "filter": {"kind": {"$in": ["answer"]}, "owner": "u1"}}
    assert [m["id"] for m in call(probe, "query", axis(0), filtered).json()["matches"]] == [
        f"{space}-b"
    ]
    got = call(probe, "getByIds", [f"{space}-b", "missing"]).json()
    assert [(v["id"], v["namespace"], len(v["values"])) for v in got] == [
        (f"{space}-b", space, 1024)
    ]

    # The log says what each query carried.
    queries = probe_vectors.queries()
    assert [(q["namespace"], q["filter"], q["topK"]) for q in queries] == [
        (space, None, 5),
        (space, {"kind": {"$in": ["answer"]}, "owner": "u1"}, 5),
    ]

    assert call(probe, "deleteByIds", [v["id"] for v in vectors]).status_code == 200
    probe_vectors.wait_until_applied()
    assert call(probe, "query", axis(0), options).json()["matches"] == []


def test_the_index_refuses_as_the_binding_does(probe: Runner, probe_vectors: VectorsLog) -> None:
    probe_vectors.reset()
    wrong = call(probe, "upsert", [{"id": "x", "values": [1.0, 2.0, 3.0]}])
    assert wrong.status_code == 502
    assert wrong.json()["error"] == (
        "Error: VECTOR_UPSERT_ERROR: vector has 3 dimensions, the index has 1024"
    )
    too_many = call(probe, "query", axis(0), {"topK": 21, "returnMetadata": "all"})
    assert too_many.status_code == 502
    assert "VECTOR_QUERY_ERROR: topK 21 is over 20" in too_many.json()["error"]
    assert [call_["error"][:19] for call_ in probe_vectors.calls()] == [
        "VECTOR_UPSERT_ERROR",
        "VECTOR_QUERY_ERROR:",
    ]
