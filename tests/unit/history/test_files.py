"""history.files, and its routes in web.history, on CPython's SQLite with the
project's migrations and a bucket in a dict: the limits, the keys, who may
read what, the copies a share link makes, and what goes when."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from edgechat.core.errors import (
    BadRequest,
    FilesFull,
    HistoryUnavailable,
    TooManyFiles,
    TooManyShareImages,
)
from edgechat.core.http import Incoming
from edgechat.history import files, shares
from edgechat.history import store as history
from edgechat.history.conversations import check_conversation
from edgechat.web import app
from tests.kit.images import gif, png
from tests.unit.fakes import FakeBlobs, FakeDb, FakePlatform, FakeSchedule
from tests.unit.history.test_history import migrated

QUOTA = files.Quota(files=3, bytes=10_000)
BIG = history.Quota(conversations=100, bytes=1 << 20)
CREATE = history.Precondition(create=True)


def run[T](work: Any) -> T:
    return asyncio.run(work)  # type: ignore[no-any-return]


def with_images(cid: str, *ids: str) -> dict[str, Any]:
    images = [{"id": fid, "type": "image/png", "width": 4, "height": 3} for fid in ids]
    return check_conversation(
        {
            "id": cid,
            "title": "t",
            "updated": 1,
            "nodes": [
                {"parent": None, "role": "user", "content": "look", "images": images},
                {"parent": 0, "role": "assistant", "content": "seen"},
            ],
        }
    )


def keep(db: FakeDb, user: str, c: dict[str, Any]) -> None:
    run(history.put(db, user, c["id"], c, CREATE, BIG, 1000))


def upload(db: FakeDb, blobs: FakeBlobs, user: str, fid: str, data: bytes | None = None) -> Any:
    image = png(4, 3) if data is None else data
    return run(files.upload(db, blobs, user, fid, "image/png", image, QUOTA, 1000))


def test_an_upload_is_checked_kept_under_its_users_prefix_and_read_by_them_alone() -> None:
    db, blobs = migrated(), FakeBlobs()
    described, created = upload(db, blobs, "ann", "i1")
    assert created
    size = len(png(4, 3))
    assert described == {"id": "i1", "type": "image/png", "width": 4, "height": 3, "bytes": size}
    assert list(blobs.objects) == [files.own_key("ann", "i1")]
    assert run(files.read(blobs, "ann", "i1")) == (png(4, 3), "image/png")
    assert run(files.read(blobs, "bob", "i1")) is None
    # Again: replaced, not new.
    assert not upload(db, blobs, "ann", "i1")[1]
    with pytest.raises(BadRequest, match="is not a image/png image"):
        upload(db, blobs, "ann", "i2", gif(2, 2))
    with pytest.raises(BadRequest, match="broken or cut short"):
        upload(db, blobs, "ann", "i2", png(4, 3)[:20])


def test_user_prefixes_cannot_collide_or_leave_their_place() -> None:
    users = ["ann", "ann/f", "a", "key:ann", "ann@example.com", "../x", "", "é"]
    prefixes = [files.user_prefix(user) for user in users]
    assert len(set(prefixes)) == len(users)
    for prefix in prefixes:
        assert prefix.startswith("u/")
        assert prefix.count("/") == 2
        assert ".." not in prefix
    assert not any(a != b and a.startswith(b) for a in prefixes for b in prefixes)


def test_the_limits_hold_and_say_which() -> None:
    db, blobs = migrated(), FakeBlobs()
    for k in range(3):
        upload(db, blobs, "ann", f"i{k}")
    with pytest.raises(TooManyFiles) as many:
        upload(db, blobs, "ann", "i3")
    assert many.value.to_json()["error"]["limit"] == "max_files"
    upload(db, blobs, "ann", "i0")  # a replacement is no new file
    upload(db, blobs, "bob", "i3")  # another user's quota is theirs
    big = files.Quota(files=10, bytes=200)
    db2 = migrated()
    run(files.upload(db2, blobs, "ann", "a", "image/png", png(4, 3), big, 1))
    with pytest.raises(FilesFull) as full:
        run(files.upload(db2, blobs, "ann", "b", "image/png", png(9, 9) + b"\0" * 100, big, 1))
    assert full.value.to_json()["error"] == {
        "code": "files_full",
        "message": full.value.public_message,
        "limit": "max_files_bytes",
        "max": 200,
    }


def test_a_failed_write_to_the_bucket_takes_its_row_away() -> None:
    db, blobs = migrated(), FakeBlobs()
    blobs.fail = True
    with pytest.raises(HistoryUnavailable) as failed:
        upload(db, blobs, "ann", "i1")
    assert failed.value.status == 503
    blobs.fail = False
    assert run(files.mine(db, "ann")) == []


def test_a_replacement_the_bucket_did_not_take_leaves_the_old_description() -> None:
    db, blobs = migrated(), FakeBlobs()
    run(files.upload(db, blobs, "ann", "i1", "image/png", png(4, 3), QUOTA, 1000))
    before = run(files.mine(db, "ann"))
    blobs.fail = True
    with pytest.raises(HistoryUnavailable):
        run(files.upload(db, blobs, "ann", "i1", "image/png", png(9, 7), QUOTA, 2000))
    blobs.fail = False
    assert run(files.mine(db, "ann")) == before
    assert blobs.objects[files.own_key("ann", "i1")][0] == png(4, 3)


def test_a_deleted_conversations_images_go_unless_another_names_them() -> None:
    db, blobs = migrated(), FakeBlobs()
    for fid in ("a", "b", "c"):
        upload(db, blobs, "ann", fid)
    keep(db, "ann", with_images("one", "a", "b"))
    keep(db, "ann", with_images("two", "b"))
    named = run(files.named_by(db, "ann", "one"))
    assert sorted(named) == ["a", "b"]
    run(history.remove(db, "ann", "one", history.Precondition(), 2000))
    run(files.forget_unnamed(db, blobs, "ann", named))
    assert sorted(row["id"] for row in run(files.mine(db, "ann"))) == ["b", "c"]
    assert files.own_key("ann", "a") not in blobs.objects
    assert files.own_key("ann", "b") in blobs.objects


def test_retention_sweeps_old_unnamed_images_and_dead_links_copies() -> None:
    db, blobs = migrated(), FakeBlobs()
    run(files.upload(db, blobs, "ann", "old", "image/png", png(4, 3), QUOTA, 100))
    run(files.upload(db, blobs, "ann", "named", "image/png", png(4, 3), QUOTA, 100))
    run(files.upload(db, blobs, "ann", "new", "image/png", png(4, 3), QUOTA, 5000))
    keep(db, "ann", with_images("c", "named"))
    run(files.sweep(db, blobs, "ann", 1000, 6000))
    assert sorted(row["id"] for row in run(files.mine(db, "ann"))) == ["named", "new"]


DAY_MS = 86_400_000


def test_the_scheduled_purge_sweeps_every_owner_of_something_to_delete() -> None:
    db, blobs = migrated(), FakeBlobs()
    now = 40 * DAY_MS
    for user, fid, at in (
        ("ann", "old", 1000),
        ("ann", "named", 1000),
        ("ann", "recent", now - DAY_MS),
        ("bob", "old", 1000),
        ("carol", "recent", now - DAY_MS),
    ):
        run(files.upload(db, blobs, user, fid, "image/png", png(4, 3), QUOTA, at))
    run(history.put(db, "ann", "c", with_images("c", "named"), CREATE, BIG, now - DAY_MS))
    # Dave's links: one expired, one revoked whose copy was left behind
    # (the revoke's delete failed), one live.
    run(files.upload(db, blobs, "dave", "d", "image/png", png(4, 3), QUOTA, now - DAY_MS))
    run(history.put(db, "dave", "c", with_images("c", "d"), CREATE, BIG, now - DAY_MS))
    quota = files.Quota(files=10, bytes=10_000)
    links = []
    for days in (1, 7, 7):
        link = run(shares.create(db, "dave", "c", days, 10, now - 2 * DAY_MS))
        run(files.share_images(db, blobs, "dave", link["id"], quota, 20, now - 2 * DAY_MS))
        links.append(link["id"])
    expired, revoked, live = links
    run(shares.revoke(db, "dave", revoked))
    batches = len(db.batches)

    # Without retention only the dead links' copies go.
    assert run(files.purge(db, blobs, now, None)) == (2, 0)
    # The owners in one batch, then one sweep of dave's: its rows found in
    # one statement, and forgotten in one.
    assert [len(b) for b in db.batches[batches:]] == [1, 1, 1]
    assert run(files.read_shared(db, blobs, live, "d", now)) == (png(4, 3), "image/png")
    assert not any(f"/s/{sid}/" in key for key in blobs.objects for sid in (expired, revoked))
    assert run(files.purge(db, blobs, now, None)) == (0, 0)

    assert run(files.purge(db, blobs, now, 30)) == (2, 0)
    left = {
        (user, row["id"])
        for user in ("ann", "bob", "carol", "dave")
        for row in run(files.mine(db, user))
    }
    assert left == {("ann", "named"), ("ann", "recent"), ("carol", "recent"), ("dave", "d")}
    assert files.own_key("bob", "old") not in blobs.objects
    assert files.own_key("ann", "named") in blobs.objects
    assert run(files.purge(db, blobs, now, 30)) == (0, 0)


def test_a_scheduled_run_sweeps_at_most_purge_owners_and_leaves_the_rest_to_the_next() -> None:
    db, blobs = migrated(), FakeBlobs()
    now = 40 * DAY_MS
    owners = [f"user-{k:02}" for k in range(files.PURGE_OWNERS + 3)]
    for user in owners:
        run(files.upload(db, blobs, user, "old", "image/png", png(4, 3), QUOTA, 1000))
    assert run(files.purge(db, blobs, now, 30)) == (files.PURGE_OWNERS, 3)
    assert run(files.purge(db, blobs, now, 30)) == (3, 0)
    assert not blobs.objects


def test_the_scheduled_run_purges_images_after_the_conversations_that_named_them(
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, blobs = migrated(), FakeBlobs()
    now = 40 * DAY_MS
    run(files.upload(db, blobs, "ann", "a", "image/png", png(4, 3), QUOTA, 1000))
    run(files.upload(db, blobs, "ann", "b", "image/png", png(4, 3), QUOTA, 1000))
    run(history.put(db, "ann", "old", with_images("old", "a"), CREATE, BIG, 1000))
    run(history.put(db, "ann", "new", with_images("new", "b"), CREATE, BIG, now - DAY_MS))
    schedule = FakeSchedule(db, blobs, HISTORY_RETENTION_DAYS="30")
    run(app.scheduled(schedule, None, now, "17 * * * *"))
    record = json.loads(capsys.readouterr().out)
    assert record["purged"] == {"expired_share_copies": 0, "conversations": 1, "files": 1}
    assert [row["id"] for row in run(files.mine(db, "ann"))] == ["b"]
    assert list(blobs.objects) == [files.own_key("ann", "b")]
    # Without the bucket the log line has no count of it.
    run(app.scheduled(FakeSchedule(db, HISTORY_RETENTION_DAYS="30"), None, now, "17 * * * *"))
    assert "files" not in json.loads(capsys.readouterr().out)["purged"]
    # A failing bucket fails the run, and the log says why.
    run(files.upload(db, blobs, "bob", "x", "image/png", png(4, 3), QUOTA, 1000))
    blobs.fail = True
    with pytest.raises(HistoryUnavailable):
        run(app.scheduled(schedule, None, now, "17 * * * *"))
    assert "R2 is down" in json.loads(capsys.readouterr().out)["error_detail"]
    blobs.fail = False
    assert [row["id"] for row in run(files.mine(db, "bob"))] == ["x"]


def share(db: FakeDb, blobs: FakeBlobs, user: str, cid: str, most: int = 20) -> str:
    link = run(shares.create(db, user, cid, 1, 10, 1000))
    quota = files.Quota(files=10, bytes=10_000)
    run(files.share_images(db, blobs, user, link["id"], quota, most, 1000))
    return str(link["id"])


def test_a_share_copies_its_images_which_outlive_the_originals_until_revoked() -> None:
    db, blobs = migrated(), FakeBlobs()
    upload(db, blobs, "ann", "a")
    keep(db, "ann", with_images("c", "a", "never-uploaded"))
    sid = share(db, blobs, "ann", "c")
    assert run(files.read_shared(db, blobs, sid, "a", 2000)) == (png(4, 3), "image/png")
    assert run(files.read_shared(db, blobs, sid, "never-uploaded", 2000)) is None
    _, page = shares.page(run(shares.read(db, sid)), 2000)
    assert f"/s/{sid}/images/a".encode() in page
    assert b"never-uploaded" not in page
    # The conversation and its image deleted: the link's copy stays.
    run(history.remove(db, "ann", "c", history.Precondition(), 2000))
    run(files.forget_unnamed(db, blobs, "ann", ["a"]))
    assert run(files.read(blobs, "ann", "a")) is None
    assert run(files.read_shared(db, blobs, sid, "a", 2000)) is not None
    # Expired: not readable. Revoked: the copy is gone.
    assert run(files.read_shared(db, blobs, sid, "a", 1000 + 86_400_000)) is None
    run(shares.revoke(db, "ann", sid))
    run(files.unshare(db, blobs, "ann", sid))
    assert run(files.read_shared(db, blobs, sid, "a", 2000)) is None
    assert blobs.objects == {}


def test_a_share_without_images_shows_none_and_too_many_are_refused() -> None:
    db, blobs = migrated(), FakeBlobs()
    upload(db, blobs, "ann", "a")
    upload(db, blobs, "ann", "b")
    keep(db, "ann", with_images("c", "a", "b"))
    plain = run(shares.create(db, "ann", "c", 1, 10, 1000))["id"]
    assert run(files.read_shared(db, blobs, plain, "a", 2000)) is None
    status, page = shares.page(run(shares.read(db, plain)), 2000)
    assert status == 200
    assert b"<img" not in page
    assert shares.headers(run(shares.read(db, plain))) is shares.HEADERS
    with pytest.raises(TooManyShareImages):
        share(db, blobs, "ann", "c", most=1)
    sid = share(db, blobs, "ann", "c")
    row = run(shares.read(db, sid))
    _, page = shares.page(row, 2000)
    assert f'<img src="/s/{sid}/images/a" alt="" width="4" height="3">'.encode() in page
    assert "img-src 'self'" in shares.headers(row)["Content-Security-Policy"]


def test_my_data_delete_takes_every_object_of_the_user_and_no_one_elses() -> None:
    db, blobs = migrated(), FakeBlobs()
    upload(db, blobs, "ann", "a")
    upload(db, blobs, "bob", "a")
    keep(db, "ann", with_images("c", "a"))
    share(db, blobs, "ann", "c")
    blobs.objects[files.user_prefix("ann") + "f/stray"] = (b"x", "image/png")
    run(files.erase(db, blobs, "ann"))
    assert list(blobs.objects) == [files.own_key("bob", "a")]
    assert run(files.mine(db, "ann")) == []


def test_a_node_names_its_images_and_a_bad_one_is_refused_by_field() -> None:
    c = with_images("c", "a")
    assert c["nodes"][0]["images"] == [{"id": "a", "type": "image/png", "width": 4, "height": 3}]
    bad: list[tuple[Any, str]] = [
        ([{"id": "a/b", "type": "image/png", "width": 1, "height": 1}], "images[0].id"),
        ([{"id": "..", "type": "image/png", "width": 1, "height": 1}], "images[0].id"),
        ([{"id": "a", "type": "image/svg+xml", "width": 1, "height": 1}], "images[0].type"),
        ([{"id": "a", "type": "image/png", "width": 0, "height": 1}], "images[0].width"),
        ([{"id": "a", "type": "image/png", "width": 1}], "images[0].height is missing"),
        ([{"id": "a", "type": "image/png", "width": 1, "height": 1, "x": 1}], "images[0].x"),
        ("a", "nodes[0].images must be a list"),
    ]
    for images, named in bad:
        body = {
            "id": "c",
            "title": "t",
            "updated": 1,
            "nodes": [{"parent": None, "role": "user", "content": "x", "images": images}],
        }
        with pytest.raises(BadRequest, match=named.replace("[", r"\[").replace("]", r"\]")):
            check_conversation(body)
    answer = {"parent": 0, "role": "assistant", "content": "x", "images": c["nodes"][0]["images"]}
    with pytest.raises(BadRequest, match="user messages only"):
        check_conversation({**c, "nodes": [c["nodes"][0], answer]})


TOKEN = "ann-token-0123456789abcdef"


def handle(
    method: str, path: str, where: FakePlatform, headers: dict[str, str] | None = None
) -> Any:
    request = Incoming(method, path, "https://chat.example", headers or {}, query="")
    return run(app.handle(request, where))


def test_the_routes_upload_read_and_share_images() -> None:
    db, blobs = migrated(), FakeBlobs()
    where = FakePlatform(
        vars={"API_KEYS": f"ann:{TOKEN}", "MAX_FILE_BYTES": "100"},
        history=db,
        files=blobs,
        body=png(4, 3),
    )
    me = {"authorization": f"Bearer {TOKEN}"}
    put = handle("PUT", "/api/files/i1", where, {**me, "content-type": "image/png"})
    assert put.status == 201
    assert json.loads(put.body)["width"] == 4
    got = handle("GET", "/api/files/i1", where, me)
    assert (got.status, got.body, got.headers["Content-Type"]) == (200, png(4, 3), "image/png")
    assert got.headers["Cache-Control"] == "private"
    assert got.headers["X-Content-Type-Options"] == "nosniff"
    assert handle("GET", "/api/files/nope", where, me).status == 404
    assert handle("GET", "/api/files/i1", where).status == 401  # no key
    wrong = handle("PUT", "/api/files/i1", where, {**me, "content-type": "image/svg+xml"})
    assert wrong.status == 415
    where.body = png(4, 3) + b"\0" * 100
    big = handle("PUT", "/api/files/i2", where, {**me, "content-type": "image/png"})
    assert big.status == 413
    assert json.loads(big.body)["error"]["limit"] == "max_file_bytes"
    assert handle("GET", "/s/" + "A" * 24 + "/images/i1", where).status == 404
    assert handle("GET", "/s/x/images/a/b", where).status == 404
