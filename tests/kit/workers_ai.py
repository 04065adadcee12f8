"""Workers AI's binding error codes, and what edgechat's clients get for each:
the one table every suite checks against.

The codes and their meanings are Cloudflare's
(https://developers.cloudflare.com/workers-ai/platform/errors/); the status,
public code, Retry-After and fallback are edgechat's promise (docs/api/errors.md,
docs/api/chat.md). Tests read this table; they never copy it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["BINDING_ERRORS", "FALLBACK_CODES", "NO_FALLBACK_CODES", "Promised"]


class Promised(NamedTuple):
    status: int
    code: str
    retry_after: bool  # a Retry-After header comes with it
    fallback: bool  # the next model of the chain is tried


BINDING_ERRORS: dict[int, Promised] = {
    3040: Promised(503, "model_busy", True, True),  # out of capacity
    # The account's daily free allocation is used up: every Workers AI model
    # answers the same, so no other model of the chain is asked (only the
    # providers' own APIs, when configured).
    3036: Promised(429, "quota_exhausted", True, False),
    4006: Promised(429, "quota_exhausted", True, False),  # not in the table; seen in practice
    3021: Promised(429, "upstream_rate_limited", True, False),  # per-minute rate reached
    3007: Promised(504, "upstream_timeout", False, True),  # timeout
    3008: Promised(504, "upstream_timeout", False, True),  # aborted
    3006: Promised(413, "conversation_too_large", False, False),  # request too large
    5007: Promised(502, "model_unavailable", False, False),  # no such model
    3042: Promised(502, "model_unavailable", False, False),  # invalid model id
    5035: Promised(502, "model_unavailable", False, True),  # needs the Workers Paid plan
    3003: Promised(502, "upstream_error", False, False),  # incomplete request
    # Not in Cloudflare's table: "Bad input", the input's schema refused (an
    # image a model cannot read). The request's fault, so a 400.
    5006: Promised(400, "invalid_request", False, False),
}

FALLBACK_CODES = [code for code, promised in BINDING_ERRORS.items() if promised.fallback]
NO_FALLBACK_CODES = [code for code, promised in BINDING_ERRORS.items() if not promised.fallback]
