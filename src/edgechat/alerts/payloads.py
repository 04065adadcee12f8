"""What a spend alert posts: Slack's ``{"text"}``, Discord's ``{"content"}``
or edgechat's own JSON, whose fields are the alert's:

``{"event": "spend_alert", "kind", "user", "threshold", "spent", "limit",
"unit", "day", "resets_at", "text"}`` (``user`` is null for the account and
the shadow trials; ``threshold`` in percent; ``spent`` and ``limit`` in
``unit``, ``usd`` or ``neurons``; ``day`` the UTC day; ``resets_at`` its
end). static/openapi.json describes it (``webhooks.spendAlert``).

Built from the alert alone: a key's name (``key:ci``), never its token, and
never a prompt, an answer or the webhook itself.
"""

from __future__ import annotations

import calendar
import json
import time

from edgechat.alerts.rules import Alert, amount
from edgechat.core.errors import utc_iso

__all__ = ["body", "fields", "text"]

HEADERS = {"content-type": "application/json"}


def resets_at(day: str) -> str:
    """The end of the UTC ``day``, when its limits start again."""
    return utc_iso(calendar.timegm(time.strptime(day, "%Y-%m-%d")) + 86_400)


def _amount(value: float, unit: str) -> str:
    if unit == "usd":
        # Cents at least, fractions of a cent where there are any: $2.50, $0.00084.
        whole, _, cents = f"{value:,.6f}".rstrip("0").partition(".")
        return f"${whole}.{cents.ljust(2, '0')}"
    return f"{round(value):,} Neurons"


def text(alert: Alert) -> str:
    """One line for a person to read."""
    subject = alert.subject
    of = f"{_amount(alert.spent, subject.unit)} of {_amount(subject.limit, subject.unit)}"
    if subject.kind == "account":
        what = "the account reached {t}% of DAILY_NEURON_LIMIT"
    elif subject.kind == "shadow":
        what = "the shadow trials reached {t}% of their daily cap"
    else:
        budget = "dollars" if subject.unit == "usd" else "Neurons"
        what = f"{subject.user} reached {{t}}% of their daily budget in {budget}"
    return (
        f"edgechat: {what.format(t=alert.threshold)} on {alert.day} (UTC): {of}. "
        f"It resets at {resets_at(alert.day)}."
    )


def fields(alert: Alert) -> dict[str, object]:
    """The generic JSON payload."""
    subject = alert.subject
    return {
        "event": "spend_alert",
        "kind": subject.kind,
        "user": subject.user if subject.kind == "user" else None,
        "threshold": alert.threshold,
        "spent": amount(alert.spent, subject.unit),
        "limit": amount(subject.limit, subject.unit),
        "unit": subject.unit,
        "day": alert.day,
        "resets_at": resets_at(alert.day),
        "text": text(alert),
    }


def _slack_escaped(line: str) -> str:
    # Slack reads &, < and > as markup (https://api.slack.com/reference/surfaces/formatting#escaping):
    # a user id such as <!channel> stays text.
    return line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def body(alert: Alert, format: str) -> bytes:
    """The request body for a hook of ``format`` (``slack``, ``discord``, ``json``)."""
    if format == "slack":
        payload: dict[str, object] = {"text": _slack_escaped(text(alert))}
    elif format == "discord":
        # No mention in the text pings anyone (an email or a key name may
        # hold an @): https://discord.com/developers/docs/resources/message#allowed-mentions-object
        payload = {"content": text(alert), "allowed_mentions": {"parse": []}}
    else:
        payload = fields(alert)
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
