"""The scheduled retention purge (``[triggers] crons``, ``app.scheduled``)
over HTTP: workerd's local entry runs the Worker's scheduled handler on
request (``/cdn-cgi/local/scheduled``), and ``npm start -- --clock-hook`` moves the Worker's wall
clock (a local-only ``DEV_CLOCK`` binding), so days pass in a test.

What goes is checked by routes that do not purge themselves (a conversation
read by id, the export): listing conversations purges the caller's own, so
it would prove nothing about the scheduled run.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.api.checks import log_records
from tests.api.conftest import ClientFactory, Server, ServerPool, token_client
from tests.api.test_files import keep, upload
from tests.api.test_history import create, fresh_id
from tests.kit.images import png

GAIL = "gail-token-2f8d6b0a9c1e4375"
HANK = "hank-token-b7140e3a5d9c62f8"
DAY_MS = 86_400_000


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(
        {"API_KEYS": f"gail:{GAIL},hank:{HANK}", "HISTORY_RETENTION_DAYS": "30"},
        args=("--clock-hook",),
    )


def advance(server: Server, ms: int) -> None:
    moved = httpx.post(server.runner.clock_url, params={"advance_ms": ms})
    assert moved.status_code == 200, moved.text


def scheduled_runs(server: Server) -> list[dict[str, object]]:
    return [r for r in log_records(server.log_text()) if r.get("event") == "scheduled"]


def run_scheduled(server: Server) -> dict[str, object]:
    """Runs the scheduled handler; its log line, once the runner's output
    (read by another thread) has it."""
    before = len(scheduled_runs(server))
    ran = httpx.get(server.url + "/cdn-cgi/local/scheduled", params={"cron": "17 * * * *"})
    assert ran.status_code == 200, ran.text
    deadline = time.monotonic() + 10
    while len(runs := scheduled_runs(server)) == before:
        assert time.monotonic() < deadline, "the scheduled run wrote no log line"
        time.sleep(0.02)
    assert len(runs) == before + 1
    return runs[-1]


def test_the_scheduled_purge_removes_what_outlived_retention_for_every_user(
    server: Server, new_client: ClientFactory
) -> None:
    gail = token_client(new_client, server, GAIL)
    hank = token_client(new_client, server, HANK)
    old_gail, old_hank = fresh_id(), fresh_id()
    create(gail, old_gail, "gail's old words")
    create(hank, old_hank, "hank's old words")
    link = gail.post("/api/shares", json={"conversation": old_gail, "days": 7}).json()

    advance(server, 8 * DAY_MS)
    first = run_scheduled(server)
    assert first["cron"] == "17 * * * *"
    assert first["purged"] == {"expired_share_copies": 1, "conversations": 0, "files": 0}
    # The link expired: its page says so, and its copy is gone from the export.
    expired = httpx.get(server.url + link["url"])
    assert expired.status_code == 410
    assert "This link has expired" in expired.text
    assert "gail's old words" not in expired.text
    assert gail.get(f"/api/conversations/{old_gail}").status_code == 200

    recent = fresh_id()
    create(gail, recent, "written later")
    advance(server, 25 * DAY_MS)
    second = run_scheduled(server)
    assert second["purged"] == {"expired_share_copies": 0, "conversations": 2, "files": 0}
    assert gail.get(f"/api/conversations/{old_gail}").status_code == 404
    assert hank.get(f"/api/conversations/{old_hank}").status_code == 404
    assert gail.get(f"/api/conversations/{recent}").status_code == 200
    exported = gail.get("/api/my-data").json()
    assert [c["id"] for c in exported["conversations"]] == [recent]
    assert "old words" not in json.dumps(exported)


def test_the_clock_moves_only_with_the_local_option(servers: ServerPool) -> None:
    plain = servers.get({"HISTORY_RETENTION_DAYS": "30"})
    # Without --clock-hook nothing is bound as DEV_CLOCK: no clock to move.
    assert plain.runner.clock_url is None


def test_the_scheduled_purge_deletes_dead_links_copies_and_unnamed_old_images(
    server: Server, new_client: ClientFactory
) -> None:
    # After this module's first test (the clock it moved stays moved): only
    # the counts of images are this test's alone.
    hank = token_client(new_client, server, HANK)
    upload(hank, "kept", png(4, 3))
    upload(hank, "purged", png(6, 5))
    old, keeper = fresh_id(), fresh_id()
    keep(hank, old, ("purged", "image/png", 6, 5))
    keep(hank, keeper, ("kept", "image/png", 4, 3))
    link = hank.post("/api/shares", json={"conversation": old, "days": 7, "images": True}).json()
    assert link["images"] == 1
    copy = server.url + f"/s/{link['id']}/images/purged"
    assert httpx.get(copy).status_code == 200

    advance(server, 8 * DAY_MS)
    first = run_scheduled(server)
    assert first["purged"]["files"] == 1  # the expired link's copy
    assert httpx.get(copy).status_code == 404
    assert hank.get("/api/files/purged").status_code == 200
    # The keeper is written again: it lives on, and so does its image.
    tag = hank.get(f"/api/conversations/{keeper}").headers["etag"]
    body = hank.get(f"/api/conversations/{keeper}").json()
    assert (
        hank.put(f"/api/conversations/{keeper}", json=body, headers={"if-match": tag}).status_code
        == 200
    )

    advance(server, 25 * DAY_MS)
    second = run_scheduled(server)
    # The old conversation outlived retention; its image, uploaded as long
    # ago and named by nothing live now, goes in the same run.
    assert second["purged"]["files"] == 1
    assert hank.get(f"/api/conversations/{old}").status_code == 404
    assert hank.get("/api/files/purged").status_code == 404
    kept = hank.get("/api/files/kept")
    assert kept.status_code == 200
    assert kept.content == png(4, 3)
    assert [f["id"] for f in hank.get("/api/my-data").json()["files"]] == ["kept"]
