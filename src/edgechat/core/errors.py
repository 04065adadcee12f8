"""The one error hierarchy of edgechat, and its mapping to HTTP.

Every failure a client can see is one of these; the seam turns anything else
into a plain ``EdgechatError`` (500). The tree (the ``UpstreamError`` branch lives in ``faults``)::

    EdgechatError                      500 internal_error
    ├── ClientError                    400 invalid_request        the request is at fault
    │   ├── BadRequest                 400 invalid_request
    │   │   ├── ContentRefused         400 content_refused        Llama Guard found the input unsafe
    │   │   └── ModelNotFound          400 invalid_request        (404 model_not_found on /v1)
    │   ├── Unauthorized               401 unauthorized
    │   ├── Forbidden                  403 cross_site_request
    │   ├── ApiDisabled                403 api_disabled           /v1 without API_TOKEN
    │   ├── NotFound                   404 not_found
    │   ├── MethodNotAllowed           405 method_not_allowed     (+ Allow)
    │   ├── SignInRequired             403 sign_in_required       history without an identity
    │   ├── AdminRequired              403 admin_required         another user's leaderboard
    │   ├── Gone                       410 gone                   a revoked share link
    │   ├── PreconditionFailed         412 version_conflict       a stale write (+ ETag)
    │   ├── PreconditionRequired       428 precondition_required  a write without If-Match
    │   ├── TooManyConversations       409 too_many_conversations max_conversations
    │   ├── HistoryFull                413 history_full           max_history_bytes
    │   ├── TooManyShares              409 too_many_shares        max_shares
    │   ├── FileTooLarge               413 file_too_large         max_file_bytes
    │   ├── FilesFull                  413 files_full             max_files_bytes
    │   ├── TooManyFiles               409 too_many_files         max_files
    │   ├── TooManyShareImages         409 too_many_share_images  max_share_images
    │   ├── TooManyBases               409 too_many_knowledge_bases max_knowledge_bases
    │   ├── TooManyDocuments           409 too_many_knowledge_documents max_knowledge_documents
    │   ├── KnowledgeFull              413 knowledge_full         max_knowledge_bytes
    │   ├── SlotAnswered               409 slot_answered          a comparison's slot asked twice
    │   ├── AlreadyVoted               409 already_voted          a second vote on a comparison
    │   ├── AnswerUnfinished           409 answer_unfinished      a vote for an answer not finished
    │   ├── PayloadTooLarge            413 payload_too_large
    │   │   └── BodyOverLimit          413 payload_too_large      a limit of /api/limits sizes it
    │   │       ├── ConversationTooLarge 413 payload_too_large    max_conversation_bytes
    │   │       └── BatchTooLarge      413 payload_too_large      max_batch_bytes
    │   ├── UnsupportedMediaType       415 unsupported_media_type
    │   ├── RateLimited                429 rate_limited           (+ Retry-After)
    │   └── BudgetExhausted            429 budget_exhausted       a user's daily budget is spent
    ├── Misconfigured                  500 misconfigured          the operator's [vars] are invalid
    ├── StoreUnavailable               503 store_unavailable      KV failed where it was needed
    │   ├── HistoryUnavailable         503 store_unavailable      D1 failed on a conversation
    │   ├── FeedbackUnavailable        503 store_unavailable      D1 failed on feedback
    │   └── KnowledgeUnavailable       503 store_unavailable      D1, R2 or Vectorize failed
    ├── ModerationUnavailable          503 moderation_unavailable no verdict, MODERATION_FAIL=closed
    ├── IdentityUnavailable            503 identity_unavailable   Access's keys could not be read
    └── UpstreamError                  502 upstream_error         Workers AI failed us
        ├── UpstreamBusy               503 model_busy             3040, retryable, fallback
        ├── UpstreamQuotaExhausted     429 quota_exhausted        3036/4006: the account's daily
        │                                                         allocation, providers only
        ├── UpstreamRateLimited        429 upstream_rate_limited  3021, retryable
        ├── UpstreamTimeout            504 upstream_timeout       3007/3008, retryable, fallback
        ├── UpstreamRequestTooLarge    413 conversation_too_large 3006
        ├── UpstreamMisconfigured      502 model_unavailable      5007/3042
        ├── UpstreamPlanRequired       502 model_unavailable      5035, fallback
        ├── UpstreamBadRequest         502 upstream_error         3003
        ├── UpstreamInvalidInput       400 invalid_request        5006: the model refused the input
        ├── UpstreamMalformed          502 upstream_malformed     unreadable model stream
        ├── UpstreamInterrupted        502 upstream_error         the stream broke off with no
        │                                                         code, retryable, fallback
        ├── ProviderError              502 provider_error         a provider's API failed, fallback
        └── DeadlineExceeded           504 deadline_exceeded      our own deadlines, retryable
            └── NoFirstToken           504 deadline_exceeded      a model was silent, fallback

Generic outward, detailed inward: ``to_json()`` and ``headers()`` use only the
class's public fields, while ``str(exc)`` carries the internal detail for logs.
Every constructor takes keyword arguments only, so no text reaches the client
by position:

- ``public=`` (``ClientError`` and its subclasses only) replaces the class's
  message for this instance; it is our own words, e.g. "messages[3].content is
  longer than 8000 characters." - never user input or exception text;
- ``detail=`` is internal, for logs (``str(exc)``), and never leaves the server;
- ``retry_after=``, ``binding_code=`` (upstream errors) and ``allow=``
  (``MethodNotAllowed``, required) fill the headers and the log.

``fallback_worthy`` marks upstream failures where another model may well
succeed (capacity, quota, plan, timeout); they are only acted on before the
first token reached the client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, ClassVar

__all__ = [
    "AdminRequired",
    "AlreadyVoted",
    "AnswerUnfinished",
    "ApiDisabled",
    "BadRequest",
    "BatchTooLarge",
    "BodyOverLimit",
    "BudgetExhausted",
    "ClientError",
    "ContentRefused",
    "ConversationTooLarge",
    "EdgechatError",
    "FeedbackUnavailable",
    "FileTooLarge",
    "FilesFull",
    "Forbidden",
    "Gone",
    "HistoryFull",
    "HistoryUnavailable",
    "IdentityUnavailable",
    "KnowledgeFull",
    "KnowledgeUnavailable",
    "MethodNotAllowed",
    "Misconfigured",
    "ModelNotFound",
    "ModerationUnavailable",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "PreconditionRequired",
    "RateLimited",
    "SignInRequired",
    "SlotAnswered",
    "StoreUnavailable",
    "TooManyBases",
    "TooManyConversations",
    "TooManyDocuments",
    "TooManyFiles",
    "TooManyShareImages",
    "TooManyShares",
    "Unauthorized",
    "UnsupportedMediaType",
    "body_too_large",
    "utc_iso",
]


class EdgechatError(Exception):
    """Base of every error edgechat reports; by itself, an unexpected failure (500)."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal_error"
    public_message: str = "Something went wrong on our side. Please try again."
    retryable: ClassVar[bool] = False
    fallback_worthy: ClassVar[bool] = False
    # Seconds for Retry-After when a raise does not say; None sends no header.
    default_retry_after: ClassVar[int | None] = None

    retry_after: int | None

    def __init__(self, *, detail: str = "", retry_after: int | None = None) -> None:
        super().__init__(detail or self.public_message)
        self.retry_after = retry_after if retry_after is not None else self.default_retry_after

    def to_json(self) -> dict[str, dict[str, Any]]:
        """The response body: a stable code and a generic message, nothing internal."""
        return {"error": {"code": self.code, "message": self.public_message}}

    def headers(self) -> dict[str, str]:
        """HTTP headers this error implies (Retry-After, Allow)."""
        if self.retry_after is None:
            return {}
        return {"Retry-After": str(max(0, self.retry_after))}


# --- the client's fault -----------------------------------------------------


class ClientError(EdgechatError):
    """The request is at fault: repeating it unchanged will fail again."""

    status = 400
    code = "invalid_request"
    public_message = "The request is invalid."

    def __init__(
        self,
        *,
        public: str | None = None,
        detail: str = "",
        retry_after: int | None = None,
    ) -> None:
        # The public message is ours (a constant or built from field names and
        # limits); it replaces the class default for this instance only.
        if public is not None:
            self.public_message = public
        super().__init__(detail=detail, retry_after=retry_after)


class BadRequest(ClientError):
    status = 400
    code = "invalid_request"
    public_message = "The request is invalid."


class ModelNotFound(BadRequest):
    """The request names a model this deployment does not serve. ``/chat``
    answers 400 like any bad field; the OpenAI API answers 404 ``model_not_found``."""


class ContentRefused(BadRequest):
    """The moderation model found the conversation unsafe; ``categories`` are
    its hazard codes (S1-S14, named in docs/operating/moderation.md)."""

    status = 400
    code = "content_refused"
    public_message = "This request was refused by the content safety check."

    categories: tuple[str, ...]

    def __init__(self, *, categories: Iterable[str] = (), detail: str = "") -> None:
        self.categories = tuple(categories)
        super().__init__(detail=detail)

    def to_json(self) -> dict[str, dict[str, Any]]:
        body = super().to_json()
        body["error"]["categories"] = list(self.categories)
        return body


class Unauthorized(ClientError):
    status = 401
    code = "unauthorized"
    public_message = "A valid API token is required."

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "WWW-Authenticate": 'Bearer realm="edgechat"'}


class Forbidden(ClientError):
    status = 403
    code = "cross_site_request"
    public_message = "Cross-site requests to this API are not allowed."


class ApiDisabled(ClientError):
    """The OpenAI API needs ``API_TOKEN``: open, it would be a free key to the
    owner's Workers AI account."""

    status = 403
    code = "api_disabled"
    public_message = (
        "The OpenAI-compatible API is off: the operator must set the API_TOKEN secret "
        "(npx wrangler secret put API_TOKEN)."
    )


class NotFound(ClientError):
    status = 404
    code = "not_found"
    public_message = "Not found."


class MethodNotAllowed(ClientError):
    status = 405
    code = "method_not_allowed"
    public_message = "Method not allowed."

    allow: tuple[str, ...]

    def __init__(
        self, *, allow: Iterable[str], public: str | None = None, detail: str = ""
    ) -> None:
        self.allow = tuple(allow)
        super().__init__(public=public, detail=detail)

    def headers(self) -> dict[str, str]:
        return {**super().headers(), "Allow": ", ".join(self.allow)}


class PayloadTooLarge(ClientError):
    status = 413
    code = "payload_too_large"
    public_message = "The request body is too large."


def body_too_large(limit: int, *, detail: str) -> PayloadTooLarge:
    """The one 413 for a body over ``limit`` bytes, however it was noticed
    (Content-Length, counting a chunked upload, or the body in hand)."""
    return PayloadTooLarge(public=_larger_than(limit), detail=detail)


def _larger_than(limit: int) -> str:
    return f"The request body is larger than {limit} bytes."


class UnsupportedMediaType(ClientError):
    status = 415
    code = "unsupported_media_type"
    public_message = "Send the request body as application/json."


class RateLimited(ClientError):
    status = 429
    code = "rate_limited"
    public_message = "Too many requests. Please wait a moment and try again."
    retryable = True
    # The rate-limit binding counts over 10 or 60 s windows; 60 is never too early.
    default_retry_after = 60


class SignInRequired(ClientError):
    """Conversations are kept on the server for a user ``identity`` knows;
    an anonymous client keeps its own in the browser."""

    status = 403
    code = "sign_in_required"
    public_message = (
        "Conversations are kept on the server only for a signed-in user (Cloudflare Access "
        "or a named key); yours stay in this browser."
    )


class AdminRequired(ClientError):
    """Only an admin (``ADMINS``) sees what other users did."""

    status = 403
    code = "admin_required"
    public_message = "Only an admin (ADMINS) may see another user's votes and ratings."


class Gone(ClientError):
    status = 410
    code = "gone"
    public_message = "This is gone."


class PreconditionFailed(ClientError):
    """A write named a version that is no longer the current one (another
    device wrote first), or ``If-None-Match: *`` found one: nothing was
    written. ``current`` (the version now, None: none) goes into the ETag."""

    status = 412
    code = "version_conflict"
    public_message = (
        "The conversation changed since this version was read: read it again, merge, and retry."
    )

    def __init__(self, *, current: int | None = None, detail: str = "") -> None:
        self.current = current
        super().__init__(detail=detail)

    def headers(self) -> dict[str, str]:
        if self.current is None:
            return super().headers()
        return {**super().headers(), "ETag": f'"{self.current}"'}

    def to_json(self) -> dict[str, dict[str, Any]]:
        body = super().to_json()
        body["error"]["etag"] = None if self.current is None else f'"{self.current}"'
        return body


class PreconditionRequired(ClientError):
    status = 428
    code = "precondition_required"
    public_message = (
        "A write must say what it replaces: If-Match with the ETag read, If-Match: * "
        "or If-None-Match: * to create."
    )


class UserLimit:
    """A refusal by one of a user's limits (``/api/limits`` names it): the
    limit's name and value go into the body. Mixed into a ``ClientError``."""

    limit_name: ClassVar[str] = ""
    limit: int = 0

    def __init__(self, *, limit: int = 0, detail: str = "", public: str | None = None) -> None:
        self.limit = limit
        super().__init__(public=public, detail=detail)  # type: ignore[call-arg]

    def to_json(self) -> dict[str, dict[str, Any]]:
        body: dict[str, dict[str, Any]] = super().to_json()  # type: ignore[misc]
        body["error"]["limit"] = self.limit_name
        body["error"]["max"] = self.limit
        return body


class BodyOverLimit(UserLimit, PayloadTooLarge):
    """``body_too_large`` for a body one of the user's limits sizes: the same
    message, and the limit named."""

    def __init__(self, *, limit: int = 0, detail: str = "") -> None:
        super().__init__(limit=limit, detail=detail, public=_larger_than(limit))


class ConversationTooLarge(BodyOverLimit):
    limit_name = "max_conversation_bytes"


class BatchTooLarge(BodyOverLimit):
    limit_name = "max_batch_bytes"


class TooManyConversations(UserLimit, ClientError):
    status = 409
    code = "too_many_conversations"
    limit_name = "max_conversations"
    public_message = (
        "You keep as many conversations on the server as max_conversations allows: "
        "delete some first."
    )


class HistoryFull(UserLimit, ClientError):
    status = 413
    code = "history_full"
    limit_name = "max_history_bytes"
    public_message = (
        "Your conversations on the server would be larger than max_history_bytes: "
        "delete some first."
    )


class TooManyShares(UserLimit, ClientError):
    status = 409
    code = "too_many_shares"
    limit_name = "max_shares"
    public_message = "You have as many live share links as max_shares allows: revoke some first."


class FileTooLarge(UserLimit, ClientError):
    status = 413
    code = "file_too_large"
    limit_name = "max_file_bytes"
    public_message = "An image kept on the server is at most max_file_bytes bytes."


class FilesFull(UserLimit, ClientError):
    status = 413
    code = "files_full"
    limit_name = "max_files_bytes"
    public_message = (
        "Your images on the server (share links' copies included) would be larger than "
        "max_files_bytes: delete some conversations or links first."
    )


class TooManyFiles(UserLimit, ClientError):
    status = 409
    code = "too_many_files"
    limit_name = "max_files"
    public_message = (
        "You keep as many images on the server (share links' copies included) as max_files "
        "allows: delete some conversations or links first."
    )


class TooManyShareImages(UserLimit, ClientError):
    status = 409
    code = "too_many_share_images"
    limit_name = "max_share_images"
    public_message = (
        "A link shares at most max_share_images images: share this conversation without its images."
    )


class TooManyBases(UserLimit, ClientError):
    status = 409
    code = "too_many_knowledge_bases"
    limit_name = "max_knowledge_bases"
    public_message = (
        "You have as many knowledge bases as max_knowledge_bases allows: delete one first."
    )


class TooManyDocuments(UserLimit, ClientError):
    status = 409
    code = "too_many_knowledge_documents"
    limit_name = "max_knowledge_documents"
    public_message = (
        "Your knowledge bases hold as many documents as max_knowledge_documents allows: "
        "delete some first."
    )


class KnowledgeFull(UserLimit, ClientError):
    status = 413
    code = "knowledge_full"
    limit_name = "max_knowledge_bytes"
    public_message = (
        "Your knowledge bases' documents would be larger than max_knowledge_bytes: "
        "delete some first."
    )


class SlotAnswered(ClientError):
    """A comparison's slot takes one answer, asked once: it was asked."""

    status = 409
    code = "slot_answered"
    public_message = "This answer of the comparison was asked for already: each takes one request."


class AlreadyVoted(ClientError):
    status = 409
    code = "already_voted"
    public_message = "This comparison has its vote already: a comparison takes one."


class AnswerUnfinished(ClientError):
    """A vote chooses between answers that finished: the one chosen (or,
    for a tie, two of them) has not, or failed."""

    status = 409
    code = "answer_unfinished"
    public_message = (
        "A vote chooses between answers that finished: this one has not finished, or failed."
    )


class ResetsAtMidnight:
    """A refusal that lasts until the next 00:00 UTC: ``resets_at`` (epoch
    seconds, set where a clock is at hand) goes into the body."""

    resets_at: float | None = None

    def reset_json(self, body: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if self.resets_at is not None:
            body["error"]["resets_at"] = utc_iso(self.resets_at)
        return body


def utc_iso(epoch_s: float) -> str:
    """``epoch_s`` as an ISO 8601 UTC time: ``2026-12-03T00:00:00Z``."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


class BudgetExhausted(ResetsAtMidnight, ClientError):
    """The user spent today's ``USER_DAILY_USD`` or ``USER_DAILY_NEURONS``."""

    status = 429
    code = "budget_exhausted"
    public_message = "Your daily budget is used up; it resets at 00:00 UTC."
    retryable = True
    default_retry_after = 3600

    def to_json(self) -> dict[str, dict[str, Any]]:
        return self.reset_json(super().to_json())


# --- the operator's fault ----------------------------------------------------


class Misconfigured(EdgechatError):
    """The Worker's ``[vars]`` are invalid: the operator's fault, not the
    client's. The detail (which variable, which rule) goes to the log only."""

    status = 500
    code = "misconfigured"
    public_message = "The service is not configured correctly. Please try again later."


class StoreUnavailable(EdgechatError):
    """KV failed where an answer needs it (``/api/usage``); the cache and the
    usage counts never fail a chat request."""

    status = 503
    code = "store_unavailable"
    public_message = "The usage store is not available right now. Please try again later."
    retryable = True


class HistoryUnavailable(StoreUnavailable):
    """D1 failed on a conversation or share request: the page keeps its
    local copy and tries again."""

    public_message = "The conversation store is not available right now. Please try again later."


class FeedbackUnavailable(StoreUnavailable):
    """D1 failed on a comparison, a vote, a rating or the leaderboard."""

    public_message = "The feedback store is not available right now. Please try again later."


class KnowledgeUnavailable(StoreUnavailable):
    """D1, the bucket or the vector index failed on a knowledge base."""

    public_message = "The knowledge store is not available right now. Please try again later."


class ModerationUnavailable(EdgechatError):
    """The safety check failed or timed out and ``MODERATION_FAIL`` is ``closed``."""

    status = 503
    code = "moderation_unavailable"
    public_message = "The content safety check is not available right now. Please try again."
    retryable = True
    default_retry_after = 10


class IdentityUnavailable(EdgechatError):
    """Cloudflare Access's signing keys could not be fetched or read, so no
    token can be checked: requests fail closed."""

    status = 503
    code = "identity_unavailable"
    public_message = "Sign-in cannot be checked right now. Please try again shortly."
    retryable = True
    default_retry_after = 10
