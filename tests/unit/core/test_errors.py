from __future__ import annotations

import json
import re

import pytest

from edgechat.core import errors, faults
from edgechat.core.errors import (
    BadRequest,
    ClientError,
    EdgechatError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
)
from edgechat.core.faults import (
    BINDING_CODES,
    DeadlineExceeded,
    UpstreamBusy,
    UpstreamError,
    UpstreamMisconfigured,
    UpstreamPlanRequired,
    UpstreamQuotaExhausted,
    UpstreamRateLimited,
    UpstreamTimeout,
    from_binding_error,
)
from tests.kit.workers_ai import BINDING_ERRORS

ALL_ERRORS: list[type[EdgechatError]] = [
    value
    for module in (errors, faults)
    for value in vars(module).values()
    if isinstance(value, type) and issubclass(value, EdgechatError)
]


def test_every_documented_binding_code_is_mapped_as_promised() -> None:
    assert set(BINDING_CODES) == set(BINDING_ERRORS)
    for code, promised in BINDING_ERRORS.items():
        exc = from_binding_error(f"{code}: something happened")
        assert type(exc) is BINDING_CODES[code]
        assert (exc.status, exc.code) == (promised.status, promised.code), code
        assert ("Retry-After" in exc.headers()) is promised.retry_after, code
        # A used-up allocation goes to the providers, never to another
        # Workers AI model of the chain.
        chain = exc.fallback_worthy and not isinstance(exc, faults.UpstreamQuotaExhausted)
        assert chain is promised.fallback, code
        assert exc.binding_code == code


def test_the_module_documents_every_class_truthfully() -> None:
    # The module docstring's tree is what a reader trusts: every class is in
    # it with the status and code it really has.
    for cls in ALL_ERRORS:
        exc = MethodNotAllowed(allow=("GET",)) if cls is MethodNotAllowed else cls()
        # A Retry-After is only ever sent with a request that may succeed later.
        assert "Retry-After" not in exc.headers() or exc.retryable, cls
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", exc.code), cls
        assert exc.public_message.endswith("."), cls
        line = re.search(rf"\b{cls.__name__}\s+(\d+) (\w+)", errors.__doc__ or "")
        assert line is not None, cls
        assert (int(line.group(1)), line.group(2)) == (exc.status, exc.code), cls


@pytest.mark.parametrize("cls", ALL_ERRORS, ids=lambda cls: cls.__name__)
def test_no_constructor_takes_a_positional_argument(cls: type[EdgechatError]) -> None:
    # Positional text was the public message in some classes and the internal
    # detail in others; keyword-only leaves no way to pass either by accident.
    with pytest.raises(TypeError):
        cls("3040: internal detail")  # type: ignore[call-arg]
    if cls is MethodNotAllowed:
        with pytest.raises(TypeError):
            MethodNotAllowed(("GET",))  # type: ignore[call-arg]
    # Every keyword the class does take is still accepted.
    extra: dict[str, object] = {"allow": ("GET",)} if cls is MethodNotAllowed else {}
    assert str(cls(detail="for the log", **extra)) == "for the log"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cls", [c for c in ALL_ERRORS if not issubclass(c, ClientError)], ids=lambda c: c.__name__
)
def test_only_client_errors_take_a_public_message(cls: type[EdgechatError]) -> None:
    with pytest.raises(TypeError):
        cls(public="our words")  # type: ignore[call-arg]


def test_hierarchy() -> None:
    for cls in ALL_ERRORS:
        if 400 <= cls.status < 500 and not issubclass(cls, UpstreamError):
            assert issubclass(cls, ClientError), cls
    assert issubclass(DeadlineExceeded, UpstreamError)
    assert issubclass(UpstreamError, EdgechatError)
    assert issubclass(EdgechatError, Exception)
    # (Each class's code is pinned against the docstring's tree above, not
    # against a second copy of itself here.)


def test_detail_stays_inside() -> None:
    exc = UpstreamBusy(detail="3040: capacity; binding AI; account 1234abcd")
    assert "account 1234abcd" in str(exc)
    body = json.dumps(exc.to_json())
    assert "1234abcd" not in body
    assert "binding" not in body
    assert exc.to_json() == {
        "error": {"code": "model_busy", "message": UpstreamBusy.public_message}
    }


def test_client_error_public_message_is_per_instance() -> None:
    exc = BadRequest(public="messages[3].content is longer than 8000 characters.")
    assert exc.to_json() == {
        "error": {
            "code": "invalid_request",
            "message": "messages[3].content is longer than 8000 characters.",
        }
    }
    assert str(exc) == "messages[3].content is longer than 8000 characters."
    exc = BadRequest(public="model must be a string.", detail="got a list")
    assert exc.to_json()["error"]["message"] == "model must be a string."
    assert str(exc) == "got a list"
    # The class default is untouched.
    assert BadRequest().public_message == BadRequest.public_message
    assert "longer" not in BadRequest.public_message


def test_client_error_detail_is_for_logs_only() -> None:
    exc = PayloadTooLarge(detail="body of 99999 bytes")
    assert str(exc) == "body of 99999 bytes"
    assert "99999" not in json.dumps(exc.to_json())


def test_body_too_large_is_the_one_413_naming_the_limit() -> None:
    exc = errors.body_too_large(1500, detail="Content-Length 99999")
    assert isinstance(exc, PayloadTooLarge)
    assert exc.status == 413
    assert exc.to_json() == {
        "error": {
            "code": "payload_too_large",
            "message": "The request body is larger than 1500 bytes.",
        }
    }
    assert str(exc) == "Content-Length 99999"  # the detail is for the log only


def test_retry_after_header() -> None:
    assert RateLimited(retry_after=7).headers() == {"Retry-After": "7"}
    assert RateLimited().headers() == {"Retry-After": "60"}
    assert UpstreamBusy().headers() == {"Retry-After": "10"}
    assert UpstreamBusy(retry_after=3).retry_after == 3
    assert RateLimited(retry_after=-5).headers() == {"Retry-After": "0"}
    assert NotFound().headers() == {}


def test_method_not_allowed_carries_allow() -> None:
    exc = MethodNotAllowed(allow=["GET", "HEAD"])
    assert exc.allow == ("GET", "HEAD")
    assert exc.headers() == {"Allow": "GET, HEAD"}
    assert exc.status == 405


@pytest.mark.parametrize(
    ("message", "cls", "code"),
    [
        ("3040: Capacity temporarily exceeded, please try again.", UpstreamBusy, 3040),
        (
            "AiError: 3036: You have used up your daily free allocation",
            UpstreamQuotaExhausted,
            3036,
        ),
        ("Error: AiError: 5035: needs the Workers Paid plan", UpstreamPlanRequired, 5035),
        ("InferenceUpstreamError: 3007: timeout", UpstreamTimeout, 3007),
        ("  3021 : rate limited", UpstreamRateLimited, 3021),
        ("5007", UpstreamMisconfigured, 5007),
        ("AiError:3042:Invalid model", UpstreamMisconfigured, 3042),
        ("9999: something new", UpstreamError, 9999),
    ],
)
def test_from_binding_error_reads_the_leading_code(
    message: str, cls: type[UpstreamError], code: int
) -> None:
    exc = from_binding_error(message)
    assert type(exc) is cls
    assert exc.binding_code == code
    assert str(exc) == message


@pytest.mark.parametrize(
    "message",
    [
        "",
        "network connection lost",
        "AiError: something went wrong",
        "Error: 30400000: too many digits",
        "capacity 3040 exceeded",  # a number not at the start is not a code
        "AiError: \uff13\uff10\uff14\uff10: full-width digits",
    ],
)
def test_from_binding_error_without_a_code(message: str) -> None:
    exc = from_binding_error(message)
    assert type(exc) is UpstreamError
    assert exc.binding_code is None
    assert exc.status == 502
    assert exc.to_json()["error"]["code"] == "upstream_error"


def test_from_binding_error_can_be_chained() -> None:
    def call_the_binding() -> None:
        try:
            raise RuntimeError("3040: busy")
        except RuntimeError as exc:
            raise from_binding_error(str(exc)) from exc

    with pytest.raises(UpstreamBusy) as caught:
        call_the_binding()
    assert isinstance(caught.value.__cause__, RuntimeError)
