"""One request as every handler sees it, and its log line.

Every request writes exactly one JSON line (Workers Logs indexes them) when
its reply is complete: for a stream, when the stream ends. An answer's
``Outcome`` joins the line there, whatever path the answer took.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from edgechat.answer.candidates import Cooling
from edgechat.answer.framing import Outcome
from edgechat.config.settings import Settings
from edgechat.core.http import Incoming
from edgechat.core.ports import Platform
from edgechat.users.budget import Spend
from edgechat.users.identity import AccessKeys, User

__all__ = ["Context"]


@dataclass(slots=True)
class Context:
    request: Incoming
    platform: Platform
    settings: Settings
    request_id: str
    started: float
    log: dict[str, object]
    # The isolate's models cooling down after a capacity or quota failure.
    cooling: Cooling = field(default_factory=Cooling)
    # Headers for whatever reply this request gets, error replies included.
    reply_headers: dict[str, str] = field(default_factory=dict)
    # The answer's, for the log line (requests that ask a model).
    outcome: Outcome | None = None
    # The isolate's Cloudflare Access keys, and who this request is.
    access_keys: AccessKeys = field(default_factory=AccessKeys)
    user: User | None = None
    # The user's and the account's spend today, once read (routing reads it
    # before the model is asked; the budget's check then reuses it).
    spent: tuple[Spend, Spend] | None = None
    # The last segment of a path routed by its prefix (``/s/<id>``).
    param: str = ""
    # What else keeps the answer's outcome once it is known (a comparison's
    # slot): the pipeline hands it the outcome however the answer ended,
    # through ``waitUntil``.
    after: Callable[[Outcome], Awaitable[None]] | None = None

    def emit(self, status: int) -> None:
        """Writes the request's log line."""
        if self.outcome is not None:
            _log_outcome(self.log, self.outcome)
        record = {
            "request_id": self.request_id,
            **self.log,
            "status": status,
            "duration_ms": round((time.monotonic() - self.started) * 1000, 1),
        }
        print(json.dumps(record, ensure_ascii=False, separators=(",", ":")))


def _log_outcome(log: dict[str, object], outcome: Outcome) -> None:
    if outcome.model is not None:
        log["model"] = outcome.model.id
    if outcome.fallback_from is not None:
        log["fallback_from"] = outcome.fallback_from.id
    if outcome.error is not None:
        log["error_code"] = outcome.error.code
        log["error_detail"] = str(outcome.error)
    if outcome.ttft_ms is not None:
        log["ttft_ms"] = outcome.ttft_ms
    if outcome.usage is not None:
        log["prompt_tokens"] = outcome.usage["prompt_tokens"]
        log["completion_tokens"] = outcome.usage["completion_tokens"]
    if outcome.finish_reason is not None:
        log["finish_reason"] = outcome.finish_reason
    if outcome.client_gone:
        # Whatever failed after the client left is a consequence of its leaving.
        log["error_code"] = "client_closed"
    if outcome.truncated:
        log["truncated"] = True
    if outcome.cached:
        log["cached"] = True
    if outcome.moderation is not None:
        verdict = outcome.moderation
        log["answer_moderation"] = (
            "safe" if verdict.safe else "unsafe:" + ",".join(verdict.categories)
        )
    if outcome.moderation_error is not None:
        log["answer_moderation_error"] = outcome.moderation_error
