"""``POST /api/conversations``: many conversations written in one request
(a device's first sync), each as its own ``PUT`` would be, over HTTP against
the runner's real local D1. A refused write leaves the others written.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.checks import assert_error
from tests.api.conftest import ClientFactory, Server, ServerPool, token_client
from tests.api.test_history import conversation, create, fresh_id

ERIN = "erin-token-5d0b8c2e61f94a37"
FRED = "fred-token-93a6e1f0d7c42b58"
MAX_CONVERSATIONS = 6
MAX_CONVERSATION_BYTES = 20_000
MAX_BATCH_BYTES = 60_000
MAX_BATCH_CONVERSATIONS = 5


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(
        {
            "API_KEYS": f"erin:{ERIN},fred:{FRED}",
            "MAX_CONVERSATIONS": str(MAX_CONVERSATIONS),
            "MAX_CONVERSATION_BYTES": str(MAX_CONVERSATION_BYTES),
            "MAX_BATCH_BYTES": str(MAX_BATCH_BYTES),
            "MAX_BATCH_CONVERSATIONS": str(MAX_BATCH_CONVERSATIONS),
        }
    )


@pytest.fixture
def erin(new_client: ClientFactory, server: Server) -> httpx.Client:
    client = token_client(new_client, server, ERIN)
    _empty(client)
    return client


@pytest.fixture
def fred(new_client: ClientFactory, server: Server) -> httpx.Client:
    client = token_client(new_client, server, FRED)
    _empty(client)
    return client


def _empty(client: httpx.Client) -> None:
    assert client.delete("/api/my-data", headers={"if-match": "*"}).status_code == 204


def new(cid: str, *texts: str) -> dict[str, Any]:
    return {"conversation": conversation(cid, *texts), "if_none_match": "*"}


def batch(client: httpx.Client, *writes: Any) -> list[dict[str, Any]]:
    answered = client.post("/api/conversations", json={"put": list(writes)})
    assert answered.status_code == 200, answered.text
    assert answered.headers["cache-control"] == "no-store"
    results: list[dict[str, Any]] = answered.json()["results"]
    assert len(results) == len(writes)
    return results


def test_a_batch_writes_each_conversation_as_its_put_would(erin: httpx.Client) -> None:
    kept = fresh_id()
    tag = create(erin, kept, "first words")
    stale = fresh_id()
    old = create(erin, stale, "v1")
    current = erin.put(
        f"/api/conversations/{stale}",
        json=conversation(stale, "v2 from another device"),
        headers={"if-match": old},
    ).headers["etag"]
    made = fresh_id()
    bad = conversation(fresh_id(), "hi", "there")
    bad["nodes"][1]["role"] = "user"
    unsure = fresh_id()
    results = batch(
        erin,
        new(made, "made in a batch", "an answer"),
        {"conversation": conversation(kept, "first words", "more"), "if_match": tag},
        {"conversation": conversation(stale, "v2 from this device"), "if_match": old},
        {"conversation": bad, "if_none_match": "*"},
        {"conversation": conversation(unsure, "no precondition")},
    )
    # Every result says which conversation it is about, refused ones too.
    assert [result["id"] for result in results] == [made, kept, stale, bad["id"], unsure]
    assert results[0]["status"] == 201
    assert results[0]["id"] == made
    assert results[1]["status"] == 200
    assert results[1]["etag"] != tag
    assert results[2]["status"] == 412
    assert results[2]["error"]["code"] == "version_conflict"
    assert results[2]["error"]["etag"] == current
    assert results[3]["status"] == 400
    assert "nodes[1].role" in results[3]["error"]["message"]
    assert results[4]["status"] == 428
    assert results[4]["error"]["code"] == "precondition_required"

    # What the results say is what the server holds, seq and ETag included.
    got = erin.get(f"/api/conversations/{made}")
    assert got.headers["etag"] == results[0]["etag"]
    assert [n["content"] for n in got.json()["nodes"]] == ["made in a batch", "an answer"]
    assert erin.get(f"/api/conversations/{kept}").headers["etag"] == results[1]["etag"]
    assert erin.get(f"/api/conversations/{stale}").json()["nodes"][0]["content"] == (
        "v2 from another device"
    )
    listed = erin.get("/api/conversations", params={"since": "0"}).json()
    seqs = {c["id"]: c["seq"] for c in listed["conversations"]}
    assert seqs[made] == results[0]["seq"]
    assert seqs[kept] == results[1]["seq"]
    assert results[1]["seq"] == results[0]["seq"] + 1


def test_a_batch_meets_the_users_limits_in_order(erin: httpx.Client) -> None:
    for _ in range(MAX_CONVERSATIONS - 2):
        create(erin, fresh_id(), "x")
    too_big = fresh_id()
    ids = [fresh_id() for _ in range(3)]
    results = batch(
        erin,
        new(ids[0], "fits"),
        {"conversation": conversation(too_big, "x" * MAX_CONVERSATION_BYTES), "if_none_match": "*"},
        new(ids[1], "fits, the last one"),
        new(ids[2], "one too many"),
    )
    assert [r["status"] for r in results] == [201, 413, 201, 409]
    assert str(MAX_CONVERSATION_BYTES) in results[1]["error"]["message"]
    assert results[3]["error"]["limit"] == "max_conversations"
    assert results[3]["error"]["max"] == MAX_CONVERSATIONS
    assert erin.get(f"/api/conversations/{ids[1]}").status_code == 200
    assert erin.get(f"/api/conversations/{ids[2]}").status_code == 404
    assert erin.get(f"/api/conversations/{too_big}").status_code == 404


def test_a_malformed_batch_is_refused_whole(erin: httpx.Client, server: Server) -> None:
    limits = httpx.get(server.url + "/api/limits").json()
    assert limits["max_batch_bytes"] == MAX_BATCH_BYTES
    assert limits["max_batch_conversations"] == MAX_BATCH_CONVERSATIONS
    many = [new(fresh_id(), "x") for _ in range(MAX_BATCH_CONVERSATIONS + 1)]
    for body, named in (
        ({"put": []}, "one write or more"),
        ({"put": {}}, "one write or more"),
        ({"put": [new(fresh_id(), "x")], "more": 1}, "one write or more"),
        ({"put": many}, f"at most {MAX_BATCH_CONVERSATIONS} conversations"),
        ({"put": ["x"]}, "put[0] must be an object with a conversation"),
        ({"put": [{**new("a", "x"), "if_match": 3}]}, "must be strings"),
        ({"put": [{**new("a", "x"), "etag": "*"}]}, "takes conversation, if_match or"),
        ({"put": [{"conversation": {"id": "a b"}, "if_none_match": "*"}]}, "conversation id"),
    ):
        refused = erin.post("/api/conversations", json=body)
        if refused.status_code == 200:
            # Shape errors inside one write are that write's result.
            (result,) = refused.json()["results"]
            assert result["status"] == 400, body
            # Every result says which conversation it is about, when it names one.
            written = body["put"][0] if isinstance(body["put"], list) else None
            named_id = written["conversation"]["id"] if isinstance(written, dict) else None
            assert result["id"] == (named_id if named_id == "a" else None), body
            assert named in result["error"]["message"], body
        else:
            assert_error(refused, 400, "invalid_request")
            assert named in refused.json()["error"]["message"], body
    big = [new(fresh_id(), "y" * 15_000) for _ in range(MAX_BATCH_CONVERSATIONS)]
    over = erin.post("/api/conversations", json={"put": big}, headers={"connection": "close"})
    assert_error(over, 413, "payload_too_large")
    assert str(MAX_BATCH_BYTES) in over.json()["error"]["message"]
    assert over.json()["error"]["limit"] == "max_batch_bytes"
    assert over.json()["error"]["max"] == MAX_BATCH_BYTES
    text = erin.post(
        "/api/conversations", content=b'{"put": []}', headers={"content-type": "text/plain"}
    )
    assert_error(text, 415, "unsupported_media_type")
    assert erin.get("/api/conversations").json()["conversations"] == []


def test_a_batch_cannot_touch_another_users_conversations(
    erin: httpx.Client, fred: httpx.Client
) -> None:
    cid = fresh_id("secret")
    tag = create(erin, cid, "erin's private words")
    results = batch(
        fred,
        {"conversation": conversation(cid, "fred was here"), "if_match": tag},
        {"conversation": conversation(cid, "fred again"), "if_match": "*"},
    )
    assert [r["status"] for r in results] == [412, 412]
    assert all(r["error"]["etag"] is None for r in results)
    (own,) = batch(fred, new(cid, "fred's own"))
    assert own["status"] == 201
    got = erin.get(f"/api/conversations/{cid}")
    assert got.json()["nodes"][0]["content"] == "erin's private words"
    assert got.headers["etag"] == tag


def test_without_identity_a_batch_is_refused(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    anonymous = new_client(servers.get({"MAX_SHARES": "3"}).url)
    refused = anonymous.post("/api/conversations", json={"put": [new("c1", "x")]})
    assert_error(refused, 403, "sign_in_required")
