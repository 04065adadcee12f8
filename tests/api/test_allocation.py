"""An account out of its daily free allocation, and a busy model handing over.

The emulator plays the account (``account: {"allocation": "used_up"}``):
every Workers AI model answers 3036 (or 4006), as the real allocation is
account-wide. edgechat must ask no second Workers AI model for it, go to the
providers' own APIs when configured, else give one ``429 quota_exhausted``
until 00:00 UTC; an isolate that saw it asks no Workers AI model again
before then (unless ``COOLDOWN_MAX_S=0``, as the default test runner has).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.api.checks import (
    GLM,
    LLAMA,
    assert_done,
    assert_error,
    calls_before_a_later_request,
    post_chat,
    user,
)
from tests.api.conftest import Server, ServerPool
from tests.harness import EmulatorControl
from tests.kit.fake_provider import FakeProvider, Reply

USED_UP = "used up your daily free allocation"


def seconds_to_midnight_utc() -> float:
    now = time.time()
    return (now // 86_400 + 1) * 86_400 - now


def assert_until_midnight(response: httpx.Response) -> None:
    """A 429 quota_exhausted whose Retry-After and ``resets_at`` name the next 00:00 UTC."""
    assert_error(response, 429, "quota_exhausted", USED_UP, "neurons")
    retry_after = int(response.headers["retry-after"])
    # Within a minute of the true figure either way: the test and the runner
    # read their clocks a moment apart, and midnight may pass in between.
    assert abs(retry_after - seconds_to_midnight_utc()) < 60 or retry_after > 86_340
    resets_at = response.json()["error"]["resets_at"]
    assert resets_at.endswith("T00:00:00Z")
    assert "00:00 UTC" in response.json()["error"]["message"]


@pytest.mark.parametrize("code", [3036, 4006])
def test_no_workers_ai_model_is_asked_twice_for_a_used_up_allocation(
    client: httpx.Client, ai: EmulatorControl, code: int
) -> None:
    ai.script(account={"allocation": "used_up", "code": code})
    chat = post_chat(client, user("hi"))
    assert_until_midnight(chat.response)
    # GLM said so; Llama, next in the chain, is not asked.
    calls = calls_before_a_later_request(ai, client)
    assert [call["model"] for call in calls] == [GLM]
    assert calls[0]["error"].startswith(f"{code}: ")


def test_the_openai_api_gets_the_same_429(servers: ServerPool) -> None:
    server = servers.get({"API_TOKEN": "tok-alloc-1-0123456789"}, rate_limited=False)
    server.ai.script(account={"allocation": "used_up", "code": 4006})
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        response = http.post(
            "/v1/chat/completions",
            headers={"authorization": "Bearer tok-alloc-1-0123456789"},
            json={"model": "glm", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert response.status_code == 429
    assert response.json()["error"]["code"] == "quota_exhausted"
    assert int(response.headers["retry-after"]) > 0
    assert [call["model"] for call in server.ai.calls()] == [GLM]


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(api_key="sk-alloc") as fake:
        yield fake


def with_provider(servers: ServerPool, provider: FakeProvider, **more: str) -> Server:
    return servers.get(
        {
            "PROVIDERS": "acme",
            "ACME_BASE_URL": provider.url,
            "ACME_MODEL": "acme-1",
            "ACME_API_KEY": "sk-alloc",
            **more,
        }
    )


def test_a_used_up_allocation_goes_straight_to_the_providers(
    servers: ServerPool, provider: FakeProvider
) -> None:
    server = with_provider(servers, provider)
    server.ai.script(account={"allocation": "used_up", "code": 3036})
    provider.answer(Reply(text="The provider answered."))
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        chat = post_chat(http, user("hi"))
    parsed = chat.events
    assert parsed.text() == "The provider answered."
    assert_done(parsed, "acme/acme-1", fallback_from=GLM)
    assert [call["model"] for call in server.ai.calls()] == [GLM]


def test_the_isolate_asks_no_workers_ai_model_until_midnight(servers: ServerPool) -> None:
    # A runner of its own, whose isolate remembers (COOLDOWN_MAX_S set).
    server = servers.get({"COOLDOWN_MAX_S": "3600", "FALLBACK_CHAIN": "glm,llama"})
    server.ai.script(account={"allocation": "used_up", "code": 3036})
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        first = post_chat(http, user("hi"))
        assert_until_midnight(first.response)
        assert [call["model"] for call in server.ai.calls()] == [GLM]
        # The account's state in the emulator no longer matters: the isolate
        # knows the allocation is used up and asks nothing.
        server.ai.script()
        for model in ("glm", "llama", "kimi"):
            again = post_chat(http, user("hi again", model=model))
            assert_until_midnight(again.response)
    # Each refused reply came after its (absent) call would have been logged:
    # an error call is logged before the binding throws.
    assert [call["model"] for call in server.ai.calls()] == [GLM]


# --- rejectIfBusy -----------------------------------------------------------------


def test_a_busy_model_with_a_later_candidate_hands_over_at_once(
    client: httpx.Client, ai: EmulatorControl
) -> None:
    # GLM at capacity would hold the call in its queue for ten minutes; with
    # rejectIfBusy it fails at once and Llama answers.
    ai.script(
        {"match": {"model": GLM}, "queued_ms": 600_000, "reply": {"content": "too late"}},
        {"match": {"model": LLAMA}, "reply": {"content": "Llama took over."}},
    )
    chat = post_chat(client, user("hi"))
    assert chat.events.text() == "Llama took over."
    calls = ai.wait_for_calls(2)
    assert [call["model"] for call in calls] == [GLM, LLAMA]
    assert calls[0]["options"]["rejectIfBusy"] is True
    assert calls[0]["error"].startswith("3040: ")
    assert "rejectIfBusy" not in calls[1]["options"]


def test_the_last_candidate_waits_in_the_queue(client: httpx.Client, ai: EmulatorControl) -> None:
    ai.script(
        {"match": {"model": LLAMA}, "queued_ms": 50, "reply": {"content": "Queued, then answered."}}
    )
    chat = post_chat(client, user("hi", model="llama"))
    assert chat.events.text() == "Queued, then answered."
    (call,) = ai.wait_for_calls(1)
    assert "rejectIfBusy" not in call["options"]
