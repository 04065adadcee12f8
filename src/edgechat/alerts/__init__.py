"""Spend alerts: a webhook told when a daily limit's spend passes ALERT_AT's
percents, once per threshold, per subject, per UTC day (``rules``: the
subjects and what a spend reached; ``payloads``: Slack's, Discord's or the
generic JSON; ``ledger``: each alert claimed and its state in ``USAGE_DB``;
``send``: after an answer, or from the cron run, retried with backoff).

Imports ``config``, ``users`` and ``core``; ``answer`` (after an answer)
and ``web`` (the cron run, ``/api/usage``) import it."""
