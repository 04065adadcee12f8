"""``GET /api/usage``'s spend alerts (``web.account``): an admin sees every
alert, a user only their own budget's; read from ``USAGE_DB``."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from edgechat.alerts import ledger
from edgechat.alerts.ledger import Outcome
from edgechat.alerts.rules import SHADOW, Alert, Subject
from edgechat.core.http import Incoming
from edgechat.users.budget import ACCOUNT
from edgechat.users.usage import day_of
from edgechat.web import app
from tests.unit.fakes import FakeDb, FakeKv, FakePlatform

ANN, BO, ROOT = "tok-ann-0123456789abcdef", "tok-bo-0123456789abcdef", "tok-root-0123456789abcd"
VARS = {
    "API_KEYS": f"ann:{ANN},bo:{BO},root:{ROOT}",
    "ADMINS": "root",
    "ALERT_WEBHOOK": "https://alerts.example.com/in",
}


def alerts_seen(db: FakeDb | None, token: str, days: int = 1, **more: str) -> tuple[int, Any]:
    where = FakePlatform(vars={**VARS, **more}, kv=FakeKv(), db=db)
    request = Incoming(
        "GET",
        "/api/usage",
        "https://chat.example",
        {"authorization": f"Bearer {token}"},
        f"days={days}",
    )
    reply = asyncio.run(app.handle(request, where))
    body = json.loads(reply.body)
    return reply.status, body.get("alerts", body)


def claimed(db: FakeDb) -> None:
    now = time.time()
    today, earlier = day_of(now), day_of(now - 3 * 86_400)
    alerts = [
        Alert(today, Subject("user", "key:ann", "usd", 1.0), 50, 0.5),
        Alert(today, Subject("user", "key:bo", "neurons", 1000), 80, 812.4),
        Alert(today, Subject("account", ACCOUNT, "neurons", 10_000), 100, 10_050),
        Alert(today, Subject("shadow", SHADOW, "usd", 2.0), 50, 1.2),
        Alert(earlier, Subject("user", "key:ann", "usd", 1.0), 100, 1.1),
    ]
    held = asyncio.run(ledger.claim(db, alerts, now))
    asyncio.run(ledger.settle(db, [Outcome(held[0], "sent", 1, None, None, now)]))


def test_a_user_sees_only_their_own_budget_s_alerts() -> None:
    db = FakeDb()
    claimed(db)
    status, alerts = alerts_seen(db, ANN)
    assert status == 200
    assert [(a["kind"], a["user"], a["threshold"], a["state"]) for a in alerts] == [
        ("user", "key:ann", 50, "sent")
    ]
    status, alerts = alerts_seen(db, ANN, days=7)
    assert [a["threshold"] for a in alerts] == [100, 50]  # the older day first
    status, alerts = alerts_seen(db, BO)
    assert [(a["user"], a["unit"], a["spent"], a["limit"]) for a in alerts] == [
        ("key:bo", "neurons", 812, 1000)
    ]


def test_an_admin_sees_every_alert_the_account_s_and_the_shadow_trials_too() -> None:
    db = FakeDb()
    claimed(db)
    status, alerts = alerts_seen(db, ROOT)
    assert status == 200
    assert [(a["kind"], a["user"]) for a in alerts] == [
        ("account", None),
        ("shadow", None),
        ("user", "key:ann"),
        ("user", "key:bo"),
    ]


def test_without_usage_db_or_a_webhook_there_are_no_alerts() -> None:
    assert alerts_seen(None, ROOT) == (200, [])
    assert alerts_seen(FakeDb(), ROOT) == (200, [])  # a new database
    db = FakeDb()
    claimed(db)
    before = len(db.batches)
    assert alerts_seen(db, ROOT, ALERT_WEBHOOK="") == (200, [])
    assert len(db.batches) == before  # no read of them at all


def test_a_failing_store_is_a_503() -> None:
    db = FakeDb()
    db.fail = True
    status, body = alerts_seen(db, ANN)
    assert status == 503
    assert body["error"]["code"] == "store_unavailable"
    assert "D1" not in json.dumps(body)
