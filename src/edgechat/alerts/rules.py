"""What an alert is about and when it is due.

A subject is one daily limit and the spend row of the ``spend`` table
(``users.budget``) it is held against:

- the account's ``DAILY_NEURON_LIMIT``, in Neurons (the row ``*``);
- each user's daily budget, ``USER_DAILY_USD`` and ``USER_DAILY_NEURONS``
  (a named key's own ``KEY_DAILY_*``), each its own subject (the user's row);
- the shadow trials' daily cap, in dollars (the row ``*shadow``).

A subject reaches ALERT_AT's threshold ``t`` when its spend is at least
``t`` percent of its limit. An answer alerts the thresholds it crossed (its
spend took the total from below ``t`` to at least ``t``); the cron run,
every threshold reached that has no alert yet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlsplit

from edgechat.config.settings import Settings
from edgechat.users.budget import ACCOUNT, Limits, Spend

__all__ = ["SHADOW", "Alert", "Policy", "Subject", "amount", "format_of", "policy_of", "reached"]

Kind = Literal["account", "user", "shadow"]
Unit = Literal["usd", "neurons"]

# The shadow trials' own row of the ``spend`` table, beside the account's ``*``.
SHADOW = "*shadow"

# Where ALERT_FORMAT=auto finds Slack's and Discord's incoming webhooks
# (https://api.slack.com/messaging/webhooks, https://discord.com/developers/docs/resources/webhook).
SLACK_HOSTS = frozenset(("hooks.slack.com",))
DISCORD_HOSTS = frozenset(
    ("discord.com", "discordapp.com", "ptb.discord.com", "canary.discord.com")
)


@dataclass(frozen=True, slots=True)
class Policy:
    """Where alerts go and what they watch: the webhook (a credential: never
    shown), its payload format (``slack``, ``discord``, ``json``), ALERT_AT's
    percents, the daily budgets and the shadow trials' cap (None: none)."""

    webhook: str = field(repr=False)
    format: str
    thresholds: tuple[int, ...]
    limits: Limits
    shadow_usd: float | None = None


def policy_of(settings: Settings) -> Policy | None:
    """The deployment's alert policy; None without ALERT_WEBHOOK."""
    if settings.alert_webhook is None:
        return None
    # The trials' cap, while trials run (SHADOW_RATE above 0).
    shadow_usd = settings.shadow_daily_usd if settings.shadow_rate > 0 else None
    return Policy(
        settings.alert_webhook,
        format_of(settings.alert_webhook, settings.alert_format),
        settings.alert_at,
        settings.budget,
        shadow_usd,
    )


def format_of(url: str, setting: str) -> str:
    """ALERT_FORMAT, with ``auto`` made Slack's or Discord's by the hook's host."""
    if setting != "auto":
        return setting
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host in SLACK_HOSTS:
        return "slack"
    if host in DISCORD_HOSTS and parts.path.startswith("/api/webhooks/"):
        return "discord"
    return "json"


@dataclass(frozen=True, slots=True)
class Subject:
    """One daily limit: whose (``user``: the spend row's id, ``*`` for the
    account, ``*shadow`` for the shadow trials), in which unit, how much."""

    kind: Kind
    user: str
    unit: Unit
    limit: float

    def spent(self, spend: Spend) -> float:
        return spend.usd if self.unit == "usd" else spend.neurons


def amount(value: float, unit: Unit) -> float | int:
    """An amount as alerts show it: dollars to 8 places, Neurons whole."""
    return round(value, 8) if unit == "usd" else round(value)


@dataclass(frozen=True, slots=True)
class Alert:
    """A threshold a subject reached on ``day``, with its spend then."""

    day: str
    subject: Subject
    threshold: int
    spent: float

    @property
    def key(self) -> tuple[str, str, str, str, int]:
        """What makes an alert once per threshold, per subject, per day."""
        subject = self.subject
        return (self.day, subject.kind, subject.user, subject.unit, self.threshold)


def subjects(policy: Policy, user: str) -> tuple[Subject, ...]:
    """The limits a spend row counts against."""
    if user == ACCOUNT:
        limit = policy.limits.account_neurons
        return () if limit is None else (Subject("account", ACCOUNT, "neurons", limit),)
    if user == SHADOW:
        cap = policy.shadow_usd
        return () if cap is None else (Subject("shadow", SHADOW, "usd", cap),)
    if user.startswith("*"):
        return ()  # another account-wide row: no limit of its own to watch
    limits = policy.limits.for_user(user)
    found: list[Subject] = []
    if limits.user_usd is not None:
        found.append(Subject("user", user, "usd", limits.user_usd))
    if limits.user_neurons is not None:
        found.append(Subject("user", user, "neurons", limits.user_neurons))
    return tuple(found)


def reached(
    policy: Policy, day: str, totals: Mapping[str, Spend], added: Spend | None = None
) -> list[Alert]:
    """The thresholds the rows' totals (by user id) have reached on ``day``;
    with ``added`` (what one answer added to each of them) only those that
    answer crossed."""
    return [
        alert
        for user, total in totals.items()
        for subject in subjects(policy, user)
        for alert in _reached(policy.thresholds, day, subject, total, added)
    ]


def _reached(
    thresholds: Iterable[int], day: str, subject: Subject, total: Spend, added: Spend | None
) -> Iterable[Alert]:
    spent = subject.spent(total)
    before = None if added is None else spent - subject.spent(added)
    for threshold in thresholds:
        # In percent on both sides: no division, so 100% of a limit is the limit.
        line = subject.limit * threshold
        if spent * 100 >= line and (before is None or before * 100 < line):
            yield Alert(day, subject, threshold, spent)
