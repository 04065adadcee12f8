"""Conversations on the server and share links, over HTTP against the
runner's real local D1 (the ``DB`` binding, its tables from migrations/).

Two named keys are two users: every route is tried with the other user's
ids. Writes need a precondition; a stale one is a 412 that writes nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import assert_error, log_records
from tests.api.conftest import ClientFactory, Server, ServerPool, token_client

ANN = "ann-token-0c2f6a9e7d1b4358"
BOB = "bob-token-71e9b0d4c3a25f86"
MAX_CONVERSATIONS = 4
MAX_CONVERSATION_BYTES = 20_000
JSON = {"content-type": "application/json"}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(
        {
            "API_KEYS": f"ann:{ANN},bob:{BOB}",
            "MAX_CONVERSATIONS": str(MAX_CONVERSATIONS),
            "MAX_CONVERSATION_BYTES": str(MAX_CONVERSATION_BYTES),
            "MAX_HISTORY_BYTES": "30000",
            "MAX_SHARES": "3",
        }
    )


@pytest.fixture
def ann(new_client: ClientFactory, server: Server) -> httpx.Client:
    return token_client(new_client, server, ANN)


@pytest.fixture
def bob(new_client: ClientFactory, server: Server) -> httpx.Client:
    return token_client(new_client, server, BOB)


@pytest.fixture
def anonymous(servers: ServerPool, new_client: ClientFactory) -> httpx.Client:
    # No identity configured at all: everyone is anonymous.
    return new_client(servers.get({"MAX_SHARES": "3"}).url)


_ids = iter(range(10**6))


def fresh_id(prefix: str = "c") -> str:
    return f"{prefix}-{next(_ids)}-{id(object()):x}"


def conversation(cid: str, *texts: str, title: str = "A title") -> dict[str, Any]:
    nodes = [
        {
            "parent": k - 1 if k else None,
            "role": "user" if k % 2 == 0 else "assistant",
            "content": text,
        }
        for k, text in enumerate(texts)
    ]
    return {"id": cid, "title": title, "updated": 1733100000000, "nodes": nodes}


def create(client: httpx.Client, cid: str, *texts: str) -> str:
    made = client.put(
        f"/api/conversations/{cid}",
        json=conversation(cid, *texts),
        headers={"if-none-match": "*"},
    )
    assert made.status_code == 201, made.text
    return made.headers["etag"]


def delete_all(client: httpx.Client) -> None:
    listed = client.get("/api/conversations", params={"limit": "200"}).json()
    for item in listed["conversations"]:
        gone = client.delete(f"/api/conversations/{item['id']}", headers={"if-match": item["etag"]})
        assert gone.status_code == 200


def test_a_conversation_is_written_read_listed_and_deleted(ann: httpx.Client) -> None:
    delete_all(ann)
    cid = fresh_id()
    tag = create(ann, cid, "hello", "hi there")
    got = ann.get(f"/api/conversations/{cid}")
    assert got.status_code == 200
    assert got.headers["etag"] == tag
    assert got.headers["cache-control"] == "no-store"
    assert [n["content"] for n in got.json()["nodes"]] == ["hello", "hi there"]
    assert ann.get(f"/api/conversations/{cid}", headers={"if-none-match": tag}).status_code == 304

    second = fresh_id()
    create(ann, second, "later")
    listed = ann.get("/api/conversations").json()
    assert [c["id"] for c in listed["conversations"]] == [second, cid]
    since = listed["seq"]

    updated = ann.put(
        f"/api/conversations/{cid}",
        json=conversation(cid, "hello", "hi there", "more"),
        headers={"if-match": tag},
    )
    assert updated.status_code == 200
    new_tag = updated.headers["etag"]
    assert new_tag != tag
    changes = ann.get("/api/conversations", params={"since": since}).json()
    assert [(c["id"], c["etag"]) for c in changes["conversations"]] == [(cid, new_tag)]

    deleted = ann.delete(f"/api/conversations/{cid}", headers={"if-match": new_tag})
    assert deleted.status_code == 200
    assert deleted.json()["deleted"] is True
    changes = ann.get("/api/conversations", params={"since": since}).json()
    assert changes["conversations"][0]["id"] == cid
    assert changes["conversations"][0]["deleted"] is True
    gone = ann.get(f"/api/conversations/{cid}")
    assert_error(gone, 410, "gone")
    assert [c["id"] for c in ann.get("/api/conversations").json()["conversations"]] == [second]


def test_a_stale_write_is_refused_and_writes_nothing(ann: httpx.Client) -> None:
    cid = fresh_id()
    first = create(ann, cid, "v1")
    second = ann.put(
        f"/api/conversations/{cid}",
        json=conversation(cid, "from device one"),
        headers={"if-match": first},
    )
    assert second.status_code == 200
    stale = ann.put(
        f"/api/conversations/{cid}",
        json=conversation(cid, "from device two"),
        headers={"if-match": first},
    )
    assert_error(stale, 412, "version_conflict")
    assert stale.headers["etag"] == second.headers["etag"]
    assert ann.get(f"/api/conversations/{cid}").json()["nodes"][0]["content"] == "from device one"
    stale_delete = ann.delete(f"/api/conversations/{cid}", headers={"if-match": first})
    assert_error(stale_delete, 412, "version_conflict")
    again = ann.put(
        f"/api/conversations/{cid}", json=conversation(cid, "x"), headers={"if-none-match": "*"}
    )
    assert_error(again, 412, "version_conflict")
    blind = ann.put(f"/api/conversations/{cid}", json=conversation(cid, "x"))
    assert_error(blind, 428, "precondition_required")
    assert_error(ann.delete(f"/api/conversations/{cid}"), 428, "precondition_required")


def test_another_users_ids_are_not_found_on_every_route(
    ann: httpx.Client, bob: httpx.Client
) -> None:
    cid = fresh_id("secret")
    tag = create(ann, cid, "ann's private words")
    link = ann.post("/api/shares", json={"conversation": cid}).json()

    assert_error(bob.get(f"/api/conversations/{cid}"), 404, "not_found")
    assert_error(
        bob.get(f"/api/conversations/{cid}", headers={"if-none-match": tag}), 404, "not_found"
    )
    listed = bob.get("/api/conversations", params={"since": "0", "bodies": "1"})
    assert cid not in listed.text
    assert "private words" not in listed.text
    overwrite = bob.put(
        f"/api/conversations/{cid}",
        json=conversation(cid, "bob was here"),
        headers={"if-match": tag},
    )
    assert_error(overwrite, 412, "version_conflict")
    assert "etag" not in overwrite.headers
    any_version = bob.put(
        f"/api/conversations/{cid}", json=conversation(cid, "bob"), headers={"if-match": "*"}
    )
    assert_error(any_version, 412, "version_conflict")
    assert_error(
        bob.delete(f"/api/conversations/{cid}", headers={"if-match": tag}), 404, "not_found"
    )
    assert_error(
        bob.delete(f"/api/conversations/{cid}", headers={"if-match": "*"}), 404, "not_found"
    )
    assert_error(bob.post("/api/shares", json={"conversation": cid}), 404, "not_found")
    assert link["id"] not in bob.get("/api/shares").text
    assert_error(bob.delete(f"/api/shares/{link['id']}"), 404, "not_found")

    # Bob's own conversation of the same id is his, not hers.
    create(bob, cid, "bob's own")
    got = ann.get(f"/api/conversations/{cid}")
    assert got.json()["nodes"][0]["content"] == "ann's private words"
    assert got.headers["etag"] == tag
    assert ann.get(link["url"]).status_code == 200


def test_a_malformed_conversation_is_refused_naming_the_field(ann: httpx.Client) -> None:
    cid = fresh_id()
    body = conversation(cid, "hi", "there")
    body["nodes"][1]["role"] = "user"
    refused = ann.put(f"/api/conversations/{cid}", json=body, headers={"if-none-match": "*"})
    assert_error(refused, 400, "invalid_request")
    assert "nodes[1].role" in refused.json()["error"]["message"]
    other = ann.put(
        f"/api/conversations/{cid}",
        json=conversation("another", "hi"),
        headers={"if-none-match": "*"},
    )
    assert_error(other, 400, "invalid_request")
    assert "id must be the id in the URL" in other.json()["error"]["message"]
    wrong_type = ann.put(
        f"/api/conversations/{cid}",
        content=b"{}",
        headers={"if-none-match": "*", "content-type": "text/plain"},
    )
    assert_error(wrong_type, 415, "unsupported_media_type")
    bad_id = ann.get("/api/conversations/not%20an%20id")
    assert_error(bad_id, 400, "invalid_request")
    assert ann.get(f"/api/conversations/{cid}").status_code == 404


def test_a_body_over_the_limit_is_refused_before_it_is_read(ann: httpx.Client) -> None:
    cid = fresh_id()
    big = conversation(cid, "x" * (MAX_CONVERSATION_BYTES + 10))

    def chunks() -> Iterator[bytes]:
        # A chunked upload: the limit is counted as it arrives.
        text = httpx.Request("PUT", "/", json=big).content
        for start in range(0, len(text), 4096):
            yield text[start : start + 4096]

    declared = ann.put(
        f"/api/conversations/{cid}",
        json=big,
        headers={"if-none-match": "*", "connection": "close"},
    )
    assert_error(declared, 413, "payload_too_large")
    assert str(MAX_CONVERSATION_BYTES) in declared.json()["error"]["message"]
    # A limit refusal names its limit, as /api/limits does.
    assert declared.json()["error"]["limit"] == "max_conversation_bytes"
    assert declared.json()["error"]["max"] == MAX_CONVERSATION_BYTES
    counted = ann.put(
        f"/api/conversations/{cid}",
        content=chunks(),
        headers={**JSON, "if-none-match": "*", "connection": "close"},
    )
    assert_error(counted, 413, "payload_too_large")
    assert counted.json()["error"]["limit"] == "max_conversation_bytes"


def test_the_users_limits_are_named_and_enforced(bob: httpx.Client, server: Server) -> None:
    limits = httpx.get(server.url + "/api/limits").json()
    assert limits["max_conversations"] == MAX_CONVERSATIONS
    assert limits["max_history_bytes"] == 30000
    assert limits["max_shares"] == 3
    delete_all(bob)
    ids = [fresh_id() for _ in range(MAX_CONVERSATIONS)]
    for cid in ids:
        create(bob, cid, "x" * 6000)
    cid = fresh_id()
    over = bob.put(
        f"/api/conversations/{cid}", json=conversation(cid, "x"), headers={"if-none-match": "*"}
    )
    assert_error(over, 409, "too_many_conversations")
    assert over.json()["error"]["limit"] == "max_conversations"
    first = bob.get(f"/api/conversations/{ids[0]}").headers["etag"]
    full = bob.put(
        f"/api/conversations/{ids[0]}",
        json=conversation(ids[0], "y" * 12_000),
        headers={"if-match": first},
    )
    assert_error(full, 413, "history_full")
    assert full.json()["error"]["limit"] == "max_history_bytes"
    delete_all(bob)


def test_the_list_pages_newest_first(ann: httpx.Client) -> None:
    delete_all(ann)
    ids = [fresh_id() for _ in range(3)]
    for cid in ids:
        create(ann, cid, "p")
    first = ann.get("/api/conversations", params={"limit": 2}).json()
    assert [c["id"] for c in first["conversations"]] == ids[::-1][:2]
    rest = ann.get("/api/conversations", params={"limit": 2, "before": first["next"]}).json()
    assert [c["id"] for c in rest["conversations"]] == ids[:1]
    assert rest["next"] is None
    whole = ann.get("/api/conversations", params={"bodies": 1}).json()
    assert whole["conversations"][0]["conversation"]["id"] == ids[-1]
    assert_error(ann.get("/api/conversations", params={"limit": "x"}), 400, "invalid_request")
    assert_error(ann.get("/api/conversations?since=1&since=2"), 400, "invalid_request")
    delete_all(ann)


def test_without_identity_conversations_stay_in_the_browser(anonymous: httpx.Client) -> None:
    for response in (
        anonymous.get("/api/conversations"),
        anonymous.get("/api/conversations/c1"),
        anonymous.put(
            "/api/conversations/c1", json=conversation("c1", "x"), headers={"if-none-match": "*"}
        ),
        anonymous.post("/api/shares", json={"conversation": "c1"}),
        anonymous.get("/api/shares"),
        anonymous.get("/api/my-data"),
        anonymous.delete("/api/my-data", headers={"if-match": "*"}),
    ):
        assert_error(response, 403, "sign_in_required")
        assert "this browser" in response.json()["error"]["message"]


def test_a_share_link_is_a_read_only_copy_anyone_can_open(
    ann: httpx.Client, server: Server
) -> None:
    for link in ann.get("/api/shares").json()["shares"]:
        ann.delete(f"/api/shares/{link['id']}")
    cid = fresh_id()
    tag = create(ann, cid, "Share <this>", "an answer")
    made = ann.post("/api/shares", json={"conversation": cid, "days": 7})
    assert made.status_code == 201
    link = made.json()
    assert re.fullmatch(r"/s/[A-Za-z0-9_-]{24}", link["url"])
    assert link["expires"] - link["created"] == 7 * 86_400_000
    ann.put(
        f"/api/conversations/{cid}",
        json=conversation(cid, "edited after sharing"),
        headers={"if-match": tag},
    )
    # No identity at all: the link is the key.
    page = httpx.get(server.url + link["url"])
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["x-robots-tag"] == "noindex, nofollow"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert "script-src" not in page.headers["content-security-policy"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert "Share &lt;this&gt;" in page.text
    assert "an answer" in page.text
    assert "edited after sharing" not in page.text
    assert '<meta name="robots" content="noindex' in page.text
    assert "<script" not in page.text
    assert httpx.post(server.url + link["url"]).status_code == 405

    mine = ann.get("/api/shares").json()["shares"]
    assert [(s["id"], s["conversation"], s["expired"]) for s in mine] == [(link["id"], cid, False)]
    assert ann.delete(f"/api/shares/{link['id']}").status_code == 204
    revoked = httpx.get(server.url + link["url"])
    assert revoked.status_code == 410
    assert "revoked" in revoked.text
    assert "Share &lt;this&gt;" not in revoked.text
    assert ann.get("/api/shares").json()["shares"] == []
    unknown = httpx.get(server.url + "/s/" + "A" * 24)
    assert unknown.status_code == 404
    assert "does not exist" in unknown.text
    # The link's id is a secret: the Worker's log lines name the route, not it.
    records = log_records(server.log_text())
    assert {r["route"] for r in records if r["route"].startswith("/s/")} == {"/s/*"}
    assert link["id"] not in json.dumps(records)


def test_share_requests_are_checked(ann: httpx.Client) -> None:
    cid = fresh_id()
    create(ann, cid, "x")
    for body, named in (
        ({"conversation": cid, "days": 0}, "days"),
        ({"conversation": cid, "days": 366}, "days"),
        ({"conversation": cid, "days": "7"}, "days"),
        ({"conversation": 5}, "conversation"),
        ({"conversation": cid, "pictures": True}, "conversation, days and images only"),
    ):
        refused = ann.post("/api/shares", json=body)
        assert_error(refused, 400, "invalid_request")
        assert named in refused.json()["error"]["message"]
    assert_error(ann.post("/api/shares", json={"conversation": "nope"}), 404, "not_found")
    for link in ann.get("/api/shares").json()["shares"]:
        ann.delete(f"/api/shares/{link['id']}")
    for _ in range(3):
        assert ann.post("/api/shares", json={"conversation": cid}).status_code == 201
    over = ann.post("/api/shares", json={"conversation": cid})
    assert_error(over, 409, "too_many_shares")
    assert over.json()["error"]["limit"] == "max_shares"
    for link in ann.get("/api/shares").json()["shares"]:
        assert ann.delete(f"/api/shares/{link['id']}").status_code == 204


def test_my_data_exports_and_deletes_everything(
    new_client: ClientFactory, servers: ServerPool
) -> None:
    carol_token = "carol-token-4a7c1e9f0b2d6e83"
    dave_token = "dave-token-8b3e5a1c7f9d2046"
    own = servers.get({"API_KEYS": f"carol:{carol_token},dave:{dave_token}"})
    carol = token_client(new_client, own, carol_token)
    dave = token_client(new_client, own, dave_token)
    create(carol, "mine-1", "carol's first")
    create(carol, "mine-2", "carol's second")
    create(dave, "mine-1", "dave's")
    link = carol.post("/api/shares", json={"conversation": "mine-1"}).json()
    revoked = carol.post("/api/shares", json={"conversation": "mine-2"}).json()
    assert carol.delete(f"/api/shares/{revoked['id']}").status_code == 204
    exported = carol.get("/api/my-data")
    assert exported.status_code == 200
    assert exported.headers["content-disposition"].startswith("attachment")
    data = exported.json()
    assert sorted(c["id"] for c in data["conversations"]) == ["mine-1", "mine-2"]
    assert [s["id"] for s in data["shares"]] == [link["id"]]
    assert "dave's" not in exported.text
    assert_error(carol.delete("/api/my-data"), 428, "precondition_required")
    assert carol.delete("/api/my-data", headers={"if-match": "*"}).status_code == 204
    assert carol.get("/api/my-data").json()["conversations"] == []
    assert carol.get("/api/conversations").json()["conversations"] == []
    assert httpx.get(own.url + link["url"]).status_code == 404
    assert_error(carol.get("/api/conversations/mine-1"), 410, "gone")
    assert dave.get("/api/conversations/mine-1").json()["nodes"][0]["content"] == "dave's"
