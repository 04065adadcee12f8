"""history.store and history.shares on CPython's SQLite with the project's own
migrations (D1 is SQLite): versions, tombstones, the list's order and
``since``, the limits, and that no statement reaches another user's rows."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from edgechat.core.errors import (
    HistoryFull,
    NotFound,
    PreconditionFailed,
    PreconditionRequired,
    TooManyConversations,
    TooManyShares,
)
from edgechat.core.http import Incoming
from edgechat.core.ports import DatabaseError
from edgechat.history import shares
from edgechat.history import store as history
from edgechat.history.conversations import check_conversation
from edgechat.web import app
from tests.unit.fakes import FakeDb, FakePlatform, FakeSchedule

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"
QUOTA = history.Quota(conversations=3, bytes=10_000)
CREATE = history.Precondition(create=True)
ANY = history.Precondition()


def migrated() -> FakeDb:
    db = FakeDb()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        db.connection.executescript(path.read_text())
    return db


def flat(cid: str, *texts: str, title: str = "t", updated: int = 1) -> dict[str, Any]:
    nodes = []
    for k, text in enumerate(texts):
        role = "user" if k % 2 == 0 else "assistant"
        nodes.append({"parent": k - 1 if k else None, "role": role, "content": text})
    return check_conversation({"id": cid, "title": title, "updated": updated, "nodes": nodes})


def run[T](work: Any) -> T:
    return asyncio.run(work)  # type: ignore[no-any-return]


def put(db: FakeDb, user: str, c: dict[str, Any], want: history.Precondition) -> tuple[int, int]:
    version, seq, _ = run(history.put(db, user, c["id"], c, want, QUOTA, 1000))
    return version, seq


def test_a_write_names_its_version_and_a_stale_one_is_refused() -> None:
    db = migrated()
    assert put(db, "ann", flat("a", "hi"), CREATE) == (1, 1)
    with pytest.raises(PreconditionFailed) as created_twice:
        put(db, "ann", flat("a", "again"), CREATE)
    assert created_twice.value.current == 1
    assert put(db, "ann", flat("a", "hi", "hello"), history.Precondition(version=1)) == (2, 2)
    with pytest.raises(PreconditionFailed) as stale:
        put(db, "ann", flat("a", "lost?"), history.Precondition(version=1))
    assert stale.value.current == 2
    version, body = run(history.get(db, "ann", "a"))
    assert version == 2
    assert body is not None
    assert [n["content"] for n in json.loads(body)["nodes"]] == ["hi", "hello"]


def test_a_delete_leaves_a_tombstone_that_the_changes_list() -> None:
    db = migrated()
    put(db, "ann", flat("a", "hi"), CREATE)
    put(db, "ann", flat("b", "yo"), CREATE)
    with pytest.raises(PreconditionFailed):
        run(history.remove(db, "ann", "a", history.Precondition(version=7), 2000))
    assert run(history.remove(db, "ann", "a", history.Precondition(version=1), 2000)) == (2, 3)
    assert run(history.get(db, "ann", "a")) == (2, None)
    with pytest.raises(NotFound):
        run(history.remove(db, "ann", "a", ANY, 2000))
    live = run(history.list_page(db, "ann", {}))
    assert [r["id"] for r in live.rows] == ["b"]
    changes = run(history.list_page(db, "ann", {"since": "1"}))
    assert [(r["id"], r["deleted"]) for r in changes.rows] == [("a", 1), ("b", 0)]
    assert changes.top == 3
    # A tombstone is no conversation: it can be made again, version on.
    assert put(db, "ann", flat("a", "back"), CREATE) == (3, 4)


def test_the_list_is_newest_write_first_and_pages_by_cursor() -> None:
    db = migrated()
    big = history.Quota(conversations=100, bytes=1 << 20)
    for k in range(7):
        c = flat(f"c{k}", "x")
        run(history.put(db, "ann", c["id"], c, CREATE, big, 1000))
    first = run(history.list_page(db, "ann", {"limit": "3"}))
    assert [r["id"] for r in first.rows] == ["c6", "c5", "c4"]
    assert first.next == 5
    second = run(history.list_page(db, "ann", {"limit": "3", "before": str(first.next)}))
    assert [r["id"] for r in second.rows] == ["c3", "c2", "c1"]
    last = run(history.list_page(db, "ann", {"limit": "3", "before": str(second.next)}))
    assert [r["id"] for r in last.rows] == ["c0"]
    assert last.next is None
    body = json.loads(
        run(history.list_page(db, "ann", {"bodies": "1", "limit": "1"})).to_json_bytes()
    )
    assert body["conversations"][0]["conversation"]["nodes"][0]["content"] == "x"
    assert body["conversations"][0]["etag"] == '"1"'
    assert body["seq"] == 7


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"limit": "0"}, "limit"),
        ({"limit": "201"}, "limit"),
        ({"limit": "51", "bodies": "1"}, "limit"),
        ({"since": "-1"}, "since"),
        ({"before": "x"}, "before"),
        ({"bodies": "yes"}, "bodies"),
        ({"sort": "asc"}, "since, before, limit and bodies"),
    ],
)
def test_a_bad_list_query_is_refused_by_name(query: dict[str, str], named: str) -> None:
    with pytest.raises(Exception, match=named) as refused:
        run(history.list_page(migrated(), "ann", query))
    assert refused.value.status == 400  # type: ignore[attr-defined]
    assert named in refused.value.public_message  # type: ignore[attr-defined]


def test_the_limits_hold_and_say_which() -> None:
    db = migrated()
    for cid in "abc":
        put(db, "ann", flat(cid, "x"), CREATE)
    with pytest.raises(TooManyConversations) as many:
        put(db, "ann", flat("d", "x"), CREATE)
    assert many.value.to_json()["error"]["limit"] == "max_conversations"
    # Updating one of the three is no fourth.
    put(db, "ann", flat("a", "x", "y"), history.Precondition(version=1))
    with pytest.raises(HistoryFull) as full:
        put(db, "ann", flat("b", "x" * 9_950), ANY)
    assert full.value.status == 413
    assert full.value.to_json()["error"]["limit"] == "max_history_bytes"
    # Another user's rows count for them only.
    put(db, "bob", flat("d", "x"), CREATE)


def test_no_statement_reaches_another_users_rows() -> None:
    db = migrated()
    put(db, "ann", flat("a", "ann's secret"), CREATE)
    assert run(history.get(db, "bob", "a")) is None
    assert run(history.list_page(db, "bob", {"since": "0"})).rows == []
    with pytest.raises(PreconditionFailed):
        put(db, "bob", flat("a", "mine now"), history.Precondition(version=1))
    with pytest.raises(NotFound):
        run(history.remove(db, "bob", "a", ANY, 1))
    # Bob may have his own "a": a different row.
    put(db, "bob", flat("a", "bob's"), CREATE)
    _, body = run(history.get(db, "ann", "a"))
    assert "ann's secret" in str(body)
    with pytest.raises(NotFound):
        run(shares.create(db, "bob", "zzz", 30, 10, 1))


def test_a_share_is_a_copy_that_expires_and_is_revoked() -> None:
    db = migrated()
    put(db, "ann", flat("a", "first <b>words</b>", "an answer"), CREATE)
    link = run(shares.create(db, "ann", "a", 30, 2, 1000))
    assert shares.is_share_id(link["id"])
    assert link["url"] == "/s/" + link["id"]
    assert link["expires"] == 1000 + 30 * shares.DAY_MS
    put(db, "ann", flat("a", "edited later"), ANY)
    status, page = shares.page(run(shares.read(db, link["id"])), 2000)
    assert status == 200
    assert b"first &lt;b&gt;words&lt;/b&gt;" in page
    assert b"edited later" not in page
    assert b'name="robots" content="noindex' in page
    status, page = shares.page(run(shares.read(db, link["id"])), link["expires"])
    assert status == 410
    assert b"expired" in page
    assert [s["id"] for s in run(shares.mine(db, "ann", 2000))] == [link["id"]]
    assert run(shares.mine(db, "bob", 2000)) == []
    with pytest.raises(NotFound):
        run(shares.revoke(db, "bob", link["id"]))
    run(shares.revoke(db, "ann", link["id"]))
    status, page = shares.page(run(shares.read(db, link["id"])), 2000)
    assert status == 410
    assert b"revoked" in page
    assert shares.page(None, 0)[0] == 404
    run(shares.create(db, "ann", "a", 1, 2, 1000))
    run(shares.create(db, "ann", "a", 1, 2, 1000))
    with pytest.raises(TooManyShares):
        run(shares.create(db, "ann", "a", 1, 2, 1000))


def test_share_ids_are_unguessable() -> None:
    ids = {shares.new_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(shares.is_share_id(i) for i in ids)
    assert shares.ID_BYTES * 8 >= 128


@pytest.mark.parametrize(
    ("headers", "want"),
    [
        ({"if-match": '"3"'}, history.Precondition(version=3)),
        ({"if-match": 'W/"3"'}, history.Precondition(version=3)),
        ({"if-match": "*"}, ANY),
        ({"if-none-match": "*"}, CREATE),
    ],
)
def test_preconditions(headers: dict[str, str], want: history.Precondition) -> None:
    assert history.precondition(headers) == want


def test_a_write_without_a_precondition_is_refused() -> None:
    with pytest.raises(PreconditionRequired):
        history.precondition({})
    with pytest.raises(PreconditionRequired):
        history.precondition({"if-none-match": "*"}, creating_allowed=False)
    with pytest.raises(Exception, match="If-Match"):
        history.precondition({"if-match": "3"})


def handle(method: str, path: str, db: FakeDb | None, headers: dict[str, str] | None = None) -> Any:
    request = Incoming(method, path, "https://chat.example", headers or {}, query="")
    where = FakePlatform(vars={"API_KEYS": f"ann:{TOKEN}"}, history=db)
    return run(app.handle(request, where))


TOKEN = "ann-token-0123456789abcdef"
ANN = {"authorization": f"Bearer {TOKEN}"}


def test_a_failing_database_is_a_503_and_the_routes_are_prefixed() -> None:
    db = migrated()
    db.fail = True
    failed = handle("GET", "/api/conversations", db, ANN)
    assert failed.status == 503
    assert json.loads(failed.body)["error"]["code"] == "store_unavailable"
    assert "conversation store" in json.loads(failed.body)["error"]["message"]
    wrong = handle("POST", "/api/conversations/c1", migrated(), ANN)
    assert wrong.status == 405
    assert wrong.headers["Allow"] == "GET, HEAD, PUT, DELETE"
    assert handle("GET", "/api/conversations/a/b", migrated(), ANN).status == 404
    assert handle("GET", "/api/conversations/", migrated(), ANN).status == 404
    unbound = handle("GET", "/api/conversations", None, ANN)
    assert unbound.status == 404
    assert "DB" in json.loads(unbound.body)["error"]["message"]
    # A share page when the database fails: a 503, no page of someone's.
    db.fail = True
    assert handle("GET", "/s/" + "A" * 24, db).status == 503


def test_retention_deletes_what_was_not_written_for_its_days() -> None:
    db = migrated()
    put(db, "ann", flat("old", "x"), CREATE)  # written at 1000 ms
    c = flat("new", "y")
    run(history.put(db, "ann", "new", c, CREATE, QUOTA, 1000 + 3 * shares.DAY_MS))
    put(db, "bob", flat("old", "bob's"), CREATE)
    link = run(shares.create(db, "ann", "new", 1, 5, 1000))
    run(history.expire(db, "ann", 1000 + 3 * shares.DAY_MS, 2))
    assert run(history.get(db, "ann", "old")) is None
    assert run(history.get(db, "ann", "new")) is not None
    assert run(history.get(db, "bob", "old")) is not None
    # The expired link's copy is gone; its page still says it expired.
    row = run(shares.read(db, link["id"]))
    assert row is not None
    assert row["body"] is None
    status, page = shares.page(row, 1000 + 3 * shares.DAY_MS)
    assert status == 410
    assert b"This link has expired" in page


def test_my_data_is_exported_whole_and_erased_whole() -> None:
    db = migrated()
    put(db, "ann", flat("a", "one"), CREATE)
    put(db, "ann", flat("b", "two"), CREATE)
    put(db, "bob", flat("a", "bob's"), CREATE)
    run(shares.create(db, "ann", "a", 30, 5, 1000))
    data = json.loads(run(history.export(db, "ann")))
    assert [(c["id"], c["etag"]) for c in data["conversations"]] == [("a", '"1"'), ("b", '"1"')]
    assert [s["conversation"] for s in data["shares"]] == ["a"]
    assert "bob's" not in json.dumps(data)
    run(history.erase(db, "ann", 2000))
    assert json.loads(run(history.export(db, "ann")))["conversations"] == []
    assert run(shares.mine(db, "ann", 2000)) == []
    # Tombstones only: the other devices learn of it, and nothing of what was said stays.
    rows = db.connection.execute("SELECT title, body FROM conversations WHERE user = 'ann'")
    assert [tuple(r) for r in rows] == [("", None), ("", None)]
    changes = run(history.list_page(db, "ann", {"since": "2"}))
    assert {(r["id"], r["deleted"]) for r in changes.rows} == {("a", 1), ("b", 1)}
    assert run(history.get(db, "bob", "a")) is not None


def test_a_batch_is_one_transaction_and_only_the_refused_are_read_again() -> None:
    db = migrated()
    put(db, "ann", flat("old", "v1"), CREATE)
    quota = history.Quota(conversations=3, bytes=10_000, each=200)
    writes = [
        ("a", flat("a", "hi"), CREATE),
        ("old", flat("old", "v2"), history.Precondition(version=7)),
        ("big", flat("big", "x" * 300), CREATE),
        ("b", flat("b", "there"), CREATE),
        ("c", flat("c", "one too many"), CREATE),
    ]
    db.batches.clear()
    outcomes = run(history.put_many(db, "ann", writes, quota, 1000))
    assert outcomes[0] == (1, 2, True)
    assert isinstance(outcomes[1], PreconditionFailed)
    assert outcomes[1].current == 1
    assert outcomes[2].status == 413  # type: ignore[union-attr]
    assert outcomes[3] == (1, 3, True)
    assert isinstance(outcomes[4], TooManyConversations)
    # The writes in one batch (the one too big never sent), then one read
    # of each refused write's state.
    assert [len(b) for b in db.batches] == [4, 2]
    assert run(history.put_many(db, "ann", [], quota, 1000)) == []
    assert len(db.batches) == 2


def test_the_scheduled_purge_holds_every_user_to_retention(
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = migrated()
    now = 1000 + 40 * shares.DAY_MS
    put(db, "ann", flat("old", "x"), CREATE)
    put(db, "bob", flat("old", "y"), CREATE)
    run(history.put(db, "bob", "new", flat("new", "z"), CREATE, QUOTA, now - shares.DAY_MS))
    run(shares.create(db, "ann", "old", 1, 5, 1000))
    schedule = FakeSchedule(db, HISTORY_RETENTION_DAYS="30")
    run(app.scheduled(schedule, None, now, "17 * * * *"))
    (line,) = capsys.readouterr().out.splitlines()
    record = json.loads(line)
    assert record["event"] == "scheduled"
    assert record["purged"] == {"expired_share_copies": 1, "conversations": 2}
    assert run(history.get(db, "ann", "old")) is None
    assert run(history.get(db, "bob", "new")) is not None

    # Without retention only expired links' copies go; without DB, nothing.
    run(app.scheduled(FakeSchedule(db), None, now, "17 * * * *"))
    assert json.loads(capsys.readouterr().out)["purged"] == {"expired_share_copies": 0}
    run(app.scheduled(FakeSchedule(None), None, now, "17 * * * *"))
    assert json.loads(capsys.readouterr().out)["skipped"] == "no DB binding"
    db.fail = True
    with pytest.raises(DatabaseError):
        run(app.scheduled(schedule, None, now, "17 * * * *"))
    assert "D1_ERROR" in json.loads(capsys.readouterr().out)["error_detail"]
