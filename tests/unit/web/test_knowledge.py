"""Knowledge bases through ``app.handle`` on the project's migrations in
CPython's SQLite, a bucket and an index in dicts, and a scripted bge-m3:
the routes' shapes, who may call them, what each binding's absence says,
and a document's ingestion after the reply."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from edgechat.core.faults import UpstreamBusy
from edgechat.core.http import Incoming, Reply
from edgechat.users import budget
from edgechat.users.usage import day_of
from edgechat.web import app
from tests.unit.fakes import (
    FakeAi,
    FakeBlobs,
    FakeDb,
    FakePlatform,
    FakeSchedule,
    FakeSink,
    FakeVectors,
)
from tests.unit.knowledge.kit import migrated, vector_of

SELF = "https://chat.example.com"
TOKENS = {"ann": "ann-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}
BGE = "@cf/baai/bge-m3"


def embedding(texts: list[str]) -> dict[str, Any]:
    return {"shape": [len(texts), 1024], "data": [vector_of(t) * 128 for t in texts]}


class Deployment:
    def __init__(self, *, keys: bool = True, vectors: bool = True, **more: str) -> None:
        self.db = migrated()
        self.usage_db: FakeDb | None = None
        self.blobs = FakeBlobs()
        self.index = FakeVectors() if vectors else None
        names = ",".join(f"{name}:{token}" for name, token in TOKENS.items())
        self.vars: dict[str, object] = {**({"API_KEYS": names} if keys else {}), **more}
        self.settings = app.SettingsOnce()
        self.runs: list[Any] = []

    def call(self, method: str, path: str, body: Any = None, user: str | None = "ann") -> Any:
        headers = {"content-type": "application/json", "cf-connecting-ip": "203.0.113.9"}
        if user is not None and self.vars:
            headers["authorization"] = f"Bearer {TOKENS[user]}"
        request = Incoming(method, path, SELF, headers)
        ai = FakeAi({}, runs={BGE: self.runs})
        where = FakePlatform(
            vars=self.vars,
            body=json.dumps(body).encode() if body is not None else b"",
            ai=ai,
            history=self.db,
            files=self.blobs,
            vector_index=self.index,
            db=self.usage_db,
        )

        async def run() -> tuple[Reply, bytes]:
            reply = await app.handle(request, where, self.settings)
            sink = FakeSink()
            if reply.stream is not None:
                await asyncio.wait_for(reply.stream(sink), 2)
            await where.settle()
            return reply, sink.body if reply.stream is not None else reply.body

        reply, raw = asyncio.run(run())
        return reply.status, (json.loads(raw) if raw and raw[:1] == b"{" else raw)


def part(text: str, name: str = "notes.md") -> dict[str, Any]:
    url = "data:text/markdown;base64," + base64.b64encode(text.encode()).decode()
    return {"type": "file", "file": {"filename": name, "file_data": url}}


def test_a_document_is_kept_pending_and_ingested_after_the_reply() -> None:
    site = Deployment()
    status, base = site.call("POST", "/api/knowledge", {"name": "Notes"})
    assert status == 201
    text = "The valve is on the left. The boiler holds two bar."
    site.runs = [embedding([text])]
    status, doc = site.call("POST", f"/api/knowledge/{base['id']}/documents", part(text))
    assert (status, doc["state"]) == (202, "pending")
    status, listed = site.call("GET", f"/api/knowledge/{base['id']}/documents")
    assert status == 200
    assert [(d["state"], d["chunks"], d["embedded"]) for d in listed["documents"]] == [
        ("ready", 1, 1)
    ]
    assert site.index is not None
    assert list(site.index.vectors) == [f"{doc['id']}:0"]


def test_another_users_base_is_not_found_on_every_route() -> None:
    site = Deployment()
    _, base = site.call("POST", "/api/knowledge", {"name": "Ann's"})
    bid = base["id"]
    for method, path in (
        ("GET", f"/api/knowledge/{bid}"),
        ("DELETE", f"/api/knowledge/{bid}"),
        ("GET", f"/api/knowledge/{bid}/documents"),
        ("GET", f"/api/knowledge/{bid}/documents/{'d' * 24}"),
        ("DELETE", f"/api/knowledge/{bid}/documents/{'d' * 24}"),
    ):
        status, body = site.call(method, path, user="bob")
        assert (status, body["error"]["code"]) == (404, "not_found"), (method, path)
    status, body = site.call("POST", f"/api/knowledge/{bid}/documents", part("x"), user="bob")
    assert (status, body["error"]["code"]) == (404, "not_found")


def test_a_base_needs_a_signed_in_user_and_says_which_binding_is_missing() -> None:
    status, body = Deployment(keys=False).call("GET", "/api/knowledge", user=None)
    assert (status, body["error"]["code"]) == (403, "sign_in_required")
    status, body = Deployment(vectors=False).call("GET", "/api/knowledge")
    assert status == 404
    assert "VECTORS" in body["error"]["message"]


def test_the_documents_routes_take_one_segment_each() -> None:
    site = Deployment()
    status, _ = site.call("GET", "/api/knowledge/a/b/documents")
    assert status == 404
    status, _ = site.call("PUT", f"/api/knowledge/{'b' * 24}/documents")
    assert status == 405


def test_an_upload_is_refused_once_the_days_budget_is_spent() -> None:
    site = Deployment(USER_DAILY_USD="0.000001")
    _, base = site.call("POST", "/api/knowledge", {"name": "Notes"})
    site.usage_db = FakeDb()
    site.usage_db.connection.execute(budget.SCHEMA)
    spent = "INSERT INTO spend VALUES (?, 'key:ann', 1, 1.0, 0)"
    site.usage_db.connection.execute(spent, (day_of(),))
    status, body = site.call("POST", f"/api/knowledge/{base['id']}/documents", part("Notes."))
    assert (status, body["error"]["code"]) == (429, "budget_exhausted")
    assert site.call("GET", f"/api/knowledge/{base['id']}/documents")[1]["documents"] == []


def test_the_hourly_run_takes_up_an_ingestion_nobody_looked_at() -> None:
    site = Deployment()
    _, base = site.call("POST", "/api/knowledge", {"name": "Notes"})
    text = "The valve is on the left."
    # The upload's run finds the model busy and lets go; nobody looks again.
    site.runs = [UpstreamBusy(detail="3040")]
    status, doc = site.call("POST", f"/api/knowledge/{base['id']}/documents", part(text))
    assert status == 202
    row = site.db.connection.execute(
        "SELECT state, lease FROM knowledge_documents WHERE id = ?", (doc["id"],)
    ).fetchone()
    assert (row["state"], row["lease"]) == ("embedding", 0)
    schedule = FakeSchedule(
        site.db, site.blobs, ai=FakeAi({}, runs={BGE: [embedding([text])]}), **site.vars
    )
    schedule.vector_index = site.index
    asyncio.run(app.scheduled(schedule, app.SettingsOnce(), 2_000_000_000_000, "17 * * * *"))
    _, listed = site.call("GET", f"/api/knowledge/{base['id']}/documents")
    assert [(d["state"], d["embedded"]) for d in listed["documents"]] == [("ready", 1)]
