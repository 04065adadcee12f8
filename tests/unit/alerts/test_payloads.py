"""What a spend alert posts (``alerts.payloads``): Slack's, Discord's and
edgechat's own JSON, each held to static/openapi.json's ``webhooks``."""

from __future__ import annotations

import json

import pytest

from edgechat.alerts import payloads
from edgechat.alerts.rules import SHADOW, Alert, Subject
from edgechat.users.budget import ACCOUNT
from tests.kit.conformance import Conformance

DAY = "2026-12-02"
ANN = Alert(DAY, Subject("user", "key:ann", "usd", 0.001), 80, 0.00084)
ACCOUNT_ALERT = Alert(DAY, Subject("account", ACCOUNT, "neurons", 10_000), 50, 5000.4)
SHADOW_ALERT = Alert(DAY, Subject("shadow", SHADOW, "usd", 2.5), 100, 2.51)
WEBHOOK_BODY = "/webhooks/spendAlert/post/requestBody/content/application~1json/schema"
SPEC = Conformance()


def posted(alert: Alert, format: str) -> dict[str, object]:
    body = payloads.body(alert, format)
    assert isinstance(body, bytes)
    loaded: dict[str, object] = json.loads(body)
    assert SPEC.validate(WEBHOOK_BODY, loaded) == []
    return loaded


def test_the_generic_json_holds_the_alert_s_fields() -> None:
    body = posted(ANN, "json")
    assert SPEC.validate("/components/schemas/SpendAlert", body) == []
    assert body == {
        "event": "spend_alert",
        "kind": "user",
        "user": "key:ann",
        "threshold": 80,
        "spent": 0.00084,
        "limit": 0.001,
        "unit": "usd",
        "day": DAY,
        "resets_at": "2026-12-03T00:00:00Z",
        "text": (
            "edgechat: key:ann reached 80% of their daily budget in dollars on 2026-12-02 (UTC): "
            "$0.00084 of $0.001. It resets at 2026-12-03T00:00:00Z."
        ),
    }


def test_the_account_and_the_shadow_trials_name_no_user() -> None:
    account = posted(ACCOUNT_ALERT, "json")
    assert (account["kind"], account["user"], account["spent"], account["limit"]) == (
        "account",
        None,
        5000,
        10_000,
    )
    assert account["text"] == (
        "edgechat: the account reached 50% of DAILY_NEURON_LIMIT on 2026-12-02 (UTC): "
        "5,000 Neurons of 10,000 Neurons. It resets at 2026-12-03T00:00:00Z."
    )
    shadow = posted(SHADOW_ALERT, "json")
    assert (shadow["kind"], shadow["user"], shadow["unit"]) == ("shadow", None, "usd")
    assert "the shadow trials reached 100% of their daily cap" in str(shadow["text"])
    assert "$2.51 of $2.50" in str(shadow["text"])


def test_slack_gets_text_with_its_markup_escaped() -> None:
    odd = Alert(DAY, Subject("user", "key:<!channel>&co", "usd", 1.0), 50, 0.5)
    body = posted(odd, "slack")
    assert SPEC.validate("/components/schemas/SlackAlert", body) == []
    assert list(body) == ["text"]
    assert "key:&lt;!channel&gt;&amp;co reached 50%" in str(body["text"])
    assert "<" not in str(body["text"])


def test_discord_gets_content_that_pings_no_one() -> None:
    mail = Alert(DAY, Subject("user", "access:ann@example.com", "neurons", 2000), 100, 2000)
    body = posted(mail, "discord")
    assert SPEC.validate("/components/schemas/DiscordAlert", body) == []
    assert body["allowed_mentions"] == {"parse": []}
    assert str(body["content"]).startswith(
        "edgechat: access:ann@example.com reached 100% of their daily budget in Neurons"
    )


@pytest.mark.parametrize("day", ["2026-12-31", "2028-02-28", "2026-03-29"])
def test_resets_at_is_the_end_of_the_utc_day(day: str) -> None:
    ends = {"2026-12-31": "2027-01-01", "2028-02-28": "2028-02-29", "2026-03-29": "2026-03-30"}
    assert payloads.resets_at(day) == f"{ends[day]}T00:00:00Z"
