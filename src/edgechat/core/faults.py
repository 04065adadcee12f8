"""Workers AI's and the providers' failures: the ``UpstreamError`` branch of
the error tree (``errors`` draws all of it), and the map from the binding's
error codes to it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from edgechat.core.errors import EdgechatError, ResetsAtMidnight

__all__ = [
    "BINDING_CODES",
    "DeadlineExceeded",
    "NoFirstToken",
    "ProviderError",
    "UpstreamBadRequest",
    "UpstreamBusy",
    "UpstreamError",
    "UpstreamInterrupted",
    "UpstreamInvalidInput",
    "UpstreamMalformed",
    "UpstreamMisconfigured",
    "UpstreamPlanRequired",
    "UpstreamQuotaExhausted",
    "UpstreamRateLimited",
    "UpstreamRequestTooLarge",
    "UpstreamTimeout",
    "from_binding_error",
]


class UpstreamError(EdgechatError):
    """Workers AI failed; ``binding_code`` is the code the binding reported, if any."""

    status = 502
    code = "upstream_error"
    public_message = "The model failed to answer. Please try again."

    binding_code: int | None

    def __init__(
        self, *, detail: str = "", binding_code: int | None = None, retry_after: int | None = None
    ) -> None:
        super().__init__(detail=detail, retry_after=retry_after)
        self.binding_code = binding_code


class UpstreamBusy(UpstreamError):
    status = 503
    code = "model_busy"
    public_message = "The model is busy right now. Please try again shortly."
    retryable = True
    fallback_worthy = True
    default_retry_after = 10


class UpstreamQuotaExhausted(ResetsAtMidnight, UpstreamError):
    """The account's daily free allocation is used up (3036, 4006): every
    Workers AI model answers the same until 00:00 UTC, so only the providers'
    own APIs may take over. ``resets_at`` (epoch seconds) is that midnight,
    set where a clock is at hand (``candidates``)."""

    status = 429
    code = "quota_exhausted"
    public_message = (
        "Today's model allocation is used up; it resets at 00:00 UTC. Please try again after that."
    )
    retryable = True
    fallback_worthy = True
    # Until a clock says how long it is to midnight, an hour is a polite guess.
    default_retry_after = 3600

    def to_json(self) -> dict[str, dict[str, Any]]:
        return self.reset_json(super().to_json())


class UpstreamRateLimited(UpstreamError):
    status = 429
    code = "upstream_rate_limited"
    public_message = "The model is receiving too many requests. Please try again shortly."
    retryable = True
    default_retry_after = 60


class UpstreamTimeout(UpstreamError):
    status = 504
    code = "upstream_timeout"
    public_message = "The model took too long to answer. Please try again."
    retryable = True
    fallback_worthy = True


class UpstreamRequestTooLarge(UpstreamError):
    status = 413
    code = "conversation_too_large"
    public_message = "The conversation is too long for this model. Start a new one."


class UpstreamMisconfigured(UpstreamError):
    status = 502
    code = "model_unavailable"
    public_message = "This model is not available right now."


class UpstreamPlanRequired(UpstreamError):
    status = 502
    code = "model_unavailable"
    public_message = "This model is not available right now."
    fallback_worthy = True


class UpstreamBadRequest(UpstreamError):
    status = 502
    code = "upstream_error"
    public_message = "The model could not process this request."


class UpstreamInvalidInput(UpstreamError):
    """The model refused what it was sent as invalid input (5006, "Bad
    input"): an image it cannot read, a value its schema does not take.
    The request is at fault, not the model, so the client gets a 400;
    another model would be sent the same input, so no fallback."""

    status = 400
    code = "invalid_request"
    public_message = "The model could not read this request's input."


class UpstreamMalformed(UpstreamError):
    status = 502
    code = "upstream_malformed"
    public_message = "The model's answer could not be read. Please try again."

    # The model's complete events that came before what could not be read,
    # in the same piece of the stream (``upstream.model_events``).
    before: bytes = b""


class UpstreamInterrupted(UpstreamError):
    """The model's stream broke off part way with no code: the binding's body
    failed as a connection does (workerd: "Network connection lost."; over
    the local emulator's RPC binding: "ReadableStream received over RPC
    disconnected prematurely"). Nothing says the model is at fault, so
    another model may well answer, and so may a retry."""

    retryable = True
    fallback_worthy = True


class ProviderError(UpstreamError):
    """A provider's own API (a fallback after Workers AI) failed before its
    first byte; the detail names the provider and its status, never the key."""

    status = 502
    code = "provider_error"
    public_message = "The fallback model failed to answer. Please try again."
    retryable = True
    fallback_worthy = True


class DeadlineExceeded(UpstreamError):
    """One of our own deadlines (first token, idle, total) passed."""

    status = 504
    code = "deadline_exceeded"
    public_message = "The model took too long to answer. Please try again."
    retryable = True


class NoFirstToken(DeadlineExceeded):
    """A model said nothing within ``FIRST_TOKEN_TIMEOUT_S``: the client has
    seen none of it, so the next model may answer instead."""

    fallback_worthy = True


# Workers AI binding error codes, as documented in
# https://developers.cloudflare.com/workers-ai/platform/errors/
# (a test asserts every documented code is mapped). 5006 is not in that
# table; the API answers it for input its schema refuses ("AiError: Bad
# input: …", seen in anomalyco/opencode#30381) and for images a model cannot
# read (tools/emulator plays it so).
BINDING_CODES: Mapping[int, type[UpstreamError]] = MappingProxyType(
    {
        3040: UpstreamBusy,
        3036: UpstreamQuotaExhausted,
        # Not in the table, same message ("used up your daily free
        # allocation"): seen in practice (OmniRoute #6980, Mail-Otter #88).
        4006: UpstreamQuotaExhausted,
        3021: UpstreamRateLimited,
        3007: UpstreamTimeout,
        3008: UpstreamTimeout,
        3006: UpstreamRequestTooLarge,
        5007: UpstreamMisconfigured,
        3042: UpstreamMisconfigured,
        5035: UpstreamPlanRequired,
        3003: UpstreamBadRequest,
        5006: UpstreamInvalidInput,
    }
)

# "3040: …", "AiError: 3040: …", "Error: AiError: 3040 …": any run of
# "Name:" prefixes, then the numeric code.
_LEADING_CODE = re.compile(r"\s*(?:[A-Za-z_][\w.]*\s*:\s*)*([0-9]{3,5})(?![0-9])", re.ASCII)


def from_binding_error(message: str) -> UpstreamError:
    """Translate the message of an error thrown by ``env.AI.run`` into our hierarchy.

    The original text is kept only as internal detail (``str(exc)``) for logs.
    Raise the result ``from`` the original exception so the chain survives.
    """
    match = _LEADING_CODE.match(message)
    if match is None:
        return UpstreamError(detail=message)
    code = int(match.group(1))
    return BINDING_CODES.get(code, UpstreamError)(detail=message, binding_code=code)
