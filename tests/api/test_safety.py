"""Moderation with Llama Guard 3 and the fallback to the providers' own APIs,
over HTTP: the emulator plays Llama Guard, ``tests.kit.fake_provider`` plays
an OpenAI-compatible provider on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.api.checks import (
    GLM,
    LLAMA,
    assert_done,
    assert_error,
    last_user_text,
    log_record,
    post_chat,
    user,
)
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.harness import EmulatorControl
from tests.kit.fake_provider import Fail, FakeProvider, Redirect, Reply, Stall

GUARD = "@cf/meta/llama-guard-3-8b"
KEY = "sk-fake-provider-key-5f2c9e"
TOKEN = "test-token-safety"


def calls_of(server: Server, model: str) -> list[dict[str, Any]]:
    return [call for call in server.ai.calls() if call["model"] == model]


# --- moderation ------------------------------------------------------------------


@pytest.fixture
def guarded(servers: ServerPool) -> Server:
    return servers.get(
        {"MODERATION": "input,output", "API_TOKEN": TOKEN, "CACHE_MODE": "off"},
        rate_limited=False,
    )


def test_unsafe_input_is_refused_and_the_model_call_aborted(
    guarded: Server, new_client: ClientFactory
) -> None:
    guarded.ai.script(
        {"match": {"model": GUARD, "contains": "forbidden"}, "reply": {"unsafe": ["S1", "S10"]}},
        # The main model is slow to start, so the verdict comes first.
        {"match": {"model": GLM, "contains": "forbidden"}, "delay_ms": 2000, "reply": {}},
    )
    http = new_client(guarded.url)
    chat = post_chat(
        http, user("something forbidden"), headers={"authorization": f"Bearer {TOKEN}"}
    )
    assert_error(chat.response, 400, "content_refused")
    assert chat.response.json()["error"]["categories"] == ["S1", "S10"]
    record = log_record(guarded, request_id=chat.response.headers["x-request-id"])
    assert record["moderation"] == "unsafe:S1,S10"
    # The model is asked beside the check; on workerd the verdict may come
    # back before the model's call has even begun. A call that began was
    # stopped (it is logged once the stop reaches the emulator).
    main = guarded.ai.wait_for_call(lambda call: call["model"] == GLM, timeout=3)
    assert main is None or main["aborted"] is True
    assert len(calls_of(guarded, GLM)) <= 1
    (check,) = calls_of(guarded, GUARD)
    assert check["inputs"]["response_format"] == {"type": "json_object"}
    assert check["inputs"]["messages"] == [{"role": "user", "content": "something forbidden"}]


def test_unsafe_input_on_v1_is_an_openai_error(guarded: Server) -> None:
    guarded.ai.script(
        {"match": {"model": GUARD, "contains": "forbidden"}, "reply": {"unsafe": ["S9"]}},
    )
    with (
        openai.OpenAI(base_url=guarded.url + "/v1", api_key=TOKEN, max_retries=0) as client,
        pytest.raises(openai.BadRequestError) as refused,
    ):
        client.chat.completions.create(
            model="glm", messages=[{"role": "user", "content": "forbidden things"}]
        )
    assert refused.value.code == "content_refused"
    assert refused.value.body["categories"] == ["S9"]  # type: ignore[index]


def test_safe_input_waits_only_for_the_verdict(guarded: Server, new_client: ClientFactory) -> None:
    # Llama Guard takes 600 ms; the model starts at once. The model's call
    # starts before the verdict (they run side by side), and its first token
    # is released once the verdict is in.
    guarded.ai.script({"match": {"model": GUARD}, "delay_ms": 600, "reply": {}})
    http = new_client(guarded.url)
    chat = post_chat(
        http, user("a harmless question"), headers={"authorization": f"Bearer {TOKEN}"}
    )
    done = assert_done(chat.events, GLM, extra=("moderation",))
    checks = guarded.ai.wait_for_calls(3)
    (main,) = [call for call in checks if call["model"] == GLM]
    input_check, output_check = sorted(calls_of(guarded, GUARD), key=lambda c: c["t_start"])
    assert main["t_start"] < input_check["t_end"], "the model waited for the check"
    assert done["ttft_ms"] >= 600
    assert done["moderation"] == {"safe": True, "categories": []}
    assert output_check["inputs"]["messages"][-1]["role"] == "assistant"
    assert output_check["inputs"]["messages"][-1]["content"] == chat.events.text()


def test_a_flagged_answer_is_named_in_done(guarded: Server, new_client: ClientFactory) -> None:
    guarded.ai.script(
        {"match": {"model": GLM, "contains": "recipe"}, "reply": {"content": "Step one: mix."}},
        {"match": {"model": GUARD, "any_contains": "Step one"}, "reply": {"unsafe": ["S2"]}},
    )
    http = new_client(guarded.url)
    chat = post_chat(http, user("a recipe please"), headers={"authorization": f"Bearer {TOKEN}"})
    done = assert_done(chat.events, GLM, extra=("moderation",))
    assert done["moderation"] == {"safe": False, "categories": ["S2"]}
    assert chat.events.text() == "Step one: mix."  # streamed: it cannot be recalled
    record = log_record(guarded, request_id=chat.response.headers["x-request-id"])
    assert record["answer_moderation"] == "unsafe:S2"


@pytest.mark.parametrize(("fail", "status"), [("open", 200), ("closed", 503)])
def test_a_failed_check_follows_moderation_fail(
    servers: ServerPool, new_client: ClientFactory, fail: str, status: int
) -> None:
    server = servers.get({"MODERATION": "input", "MODERATION_FAIL": fail})
    server.ai.script({"match": {"model": GUARD}, "error": "3040: Capacity temporarily exceeded"})
    chat = post_chat(new_client(server.url), user("hello there"))
    assert chat.response.status_code == status
    if fail == "closed":
        assert_error(chat.response, 503, "moderation_unavailable")
        # The model is asked beside the check; on workerd the check's failure
        # may come back before the model's call has even begun. A call that
        # began was stopped (it is logged once the stop reaches the emulator).
        main = server.ai.wait_for_call(lambda call: call["model"] == GLM, timeout=3)
        assert main is None or main["aborted"] is True
        assert len(calls_of(server, GLM)) <= 1
    else:
        assert_done(chat.events, GLM)
    record = log_record(server, request_id=chat.response.headers["x-request-id"])
    assert "3040" in record["moderation_error"]


# --- providers --------------------------------------------------------------------


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    with FakeProvider(api_key=KEY) as fake:
        yield fake


@pytest.fixture
def second() -> Iterator[FakeProvider]:
    with FakeProvider(api_key="sk-second-0c3a") as fake:
        yield fake


def with_providers(servers: ServerPool, *fakes: FakeProvider, keys: tuple[str, ...]) -> Server:
    names = ["acme", "backup"][: len(fakes)]
    variables = {"PROVIDERS": ",".join(names), "ACME_PRICE_IN": "0.5", "ACME_PRICE_OUT": "1.5"}
    for name, fake, key in zip(names, fakes, keys, strict=True):
        prefix = name.upper()
        variables |= {
            f"{prefix}_BASE_URL": fake.url,
            f"{prefix}_MODEL": f"{name}-chat-1",
            f"{prefix}_API_KEY": key,
        }
    return servers.get(variables)


@pytest.mark.parametrize(
    "error",
    [
        "3040: Capacity temporarily exceeded",
        "3036: You have used up your daily free allocation",
        "5035: This model requires the Workers Paid plan",
    ],
)
def test_when_workers_ai_cannot_answer_the_provider_does(
    servers: ServerPool, new_client: ClientFactory, provider: FakeProvider, error: str
) -> None:
    server = with_providers(servers, provider, keys=(KEY,))
    server.ai.script({"match": {"contains": "edge down"}, "error": error})
    provider.answer(
        Reply(text="Answered by the provider.", usage={"prompt_tokens": 7, "completion_tokens": 4})
    )
    chat = post_chat(new_client(server.url), user("is the edge down?"))
    done = assert_done(chat.events, "acme/acme-chat-1", fallback_from=GLM)
    assert chat.events.text() == "Answered by the provider."
    assert done["usage"]["completion_tokens"] == 4
    assert done["cost_usd"] == pytest.approx((7 * 0.5 + 4 * 1.5) / 1e6)
    sent = provider.wait_for_request(1)
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body["model"] == "acme-chat-1"
    assert sent.body["stream"] is True
    assert sent.body["messages"][-1] == {"role": "user", "content": "is the edge down?"}
    # The Workers AI chain was tried first: GLM, then Llama; but an account
    # out of its daily allocation takes every Workers AI model out at once.
    asked = [call["model"] for call in server.ai.calls()]
    assert asked[:2] == ([GLM] if error.startswith("3036") else [GLM, LLAMA])
    record = log_record(server, request_id=chat.response.headers["x-request-id"])
    assert record["model"] == "acme/acme-chat-1"
    # The key is only ever in Authorization.
    assert KEY not in chat.body.decode()
    assert KEY not in server.log_text()


def test_a_failing_provider_passes_to_the_next_then_one_error(
    servers: ServerPool, new_client: ClientFactory, provider: FakeProvider, second: FakeProvider
) -> None:
    server = with_providers(servers, provider, second, keys=(KEY, "sk-second-0c3a"))
    server.ai.script(
        {"match": {"contains": "all down"}, "error": "3040: Capacity temporarily exceeded"}
    )
    http = new_client(server.url)
    provider.answer(Fail(503))
    second.answer(Reply(text="The second one."))
    chat = post_chat(http, user("all down, next"))
    assert_done(chat.events, "backup/backup-chat-1", fallback_from=GLM)
    assert chat.events.text() == "The second one."
    provider.answer(Fail(500))
    second.answer(Fail(429, headers={"retry-after": "7"}))
    failed = post_chat(http, user("all down, still"))
    assert_error(failed.response, 502, "provider_error")
    assert KEY not in failed.body.decode()
    assert KEY not in server.log_text()


def test_a_provider_redirect_is_not_followed_and_the_key_stays_home(
    servers: ServerPool, new_client: ClientFactory, provider: FakeProvider, second: FakeProvider
) -> None:
    # A server of our own that would answer anything it is sent, and records
    # every request and its headers: following a redirect shows up here.
    with FakeProvider() as elsewhere:
        server = with_providers(servers, provider, second, keys=(KEY, "sk-second-0c3a"))
        server.ai.script(
            {"match": {"contains": "moved"}, "error": "3040: Capacity temporarily exceeded"}
        )
        http = new_client(server.url)
        # The first provider moved to another origin (POST kept: 307): not
        # followed, so that provider failed and the next one answers.
        provider.answer(Redirect(f"{elsewhere.url}/chat/completions", status=307))
        second.answer(Reply(text="The second one."))
        chat = post_chat(http, user("moved, next"))
        assert_done(chat.events, "backup/backup-chat-1", fallback_from=GLM)
        assert chat.events.text() == "The second one."
        # Then both redirect, the second within its own origin (a follower
        # would send it the key again): every provider failed, one error.
        provider.answer(Redirect(f"{elsewhere.url}/chat/completions", status=308))
        second.answer(Redirect("/v1/moved/chat/completions", status=302))
        failed = post_chat(http, user("moved, all of them"))
        assert_error(failed.response, 502, "provider_error")
        assert elsewhere.requests == [], "a redirect was followed"
        assert [sent.path for sent in provider.requests] == ["/v1/chat/completions"] * 2
        assert [sent.path for sent in second.requests] == ["/v1/chat/completions"] * 2
        record = log_record(server, request_id=failed.response.headers["x-request-id"])
        assert record["error_code"] == "provider_error"
        for body in (chat.body.decode(), failed.body.decode()):
            assert KEY not in body
            assert elsewhere.url not in body  # generic outward
        assert KEY not in server.log_text()


def test_a_provider_that_stalls_is_aborted_by_the_first_token_deadline(
    servers: ServerPool, new_client: ClientFactory, provider: FakeProvider
) -> None:
    server = servers.get(
        {
            "PROVIDERS": "acme",
            "ACME_BASE_URL": provider.url,
            "ACME_MODEL": "acme-chat-1",
            "ACME_API_KEY": KEY,
            "FIRST_TOKEN_TIMEOUT_S": "2",
        }
    )
    server.ai.script(
        {"match": {"contains": "stall"}, "error": "3040: Capacity temporarily exceeded"}
    )
    provider.answer(Stall())  # not even the headers
    chat = post_chat(new_client(server.url), user("stall please"))
    assert_error(chat.response, 504, "deadline_exceeded")
    # The call was aborted: the provider saw its client go.
    assert provider.wait_for_end(1) == "client_gone"


def test_a_provider_without_its_key_is_skipped(
    servers: ServerPool, new_client: ClientFactory, provider: FakeProvider
) -> None:
    server = servers.get({"PROVIDERS": "acme", "ACME_BASE_URL": provider.url, "ACME_MODEL": "m"})
    server.ai.script(
        {"match": {"contains": "nokey"}, "error": "3040: Capacity temporarily exceeded"}
    )
    chat = post_chat(new_client(server.url), user("nokey here"))
    assert_error(chat.response, 503, "model_busy")
    assert provider.requests == []


def test_a_busy_model_is_skipped_while_it_cools_down(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    # Runners under test do not cool models down unless told to (tests/harness.py).
    server = servers.get({"FALLBACK_CHAIN": "glm,llama", "COOLDOWN_MAX_S": "600"})
    server.ai.script(
        {
            "match": {"model": GLM, "contains": "cool"},
            "times": 1,
            "error": "3040: Capacity temporarily exceeded",
        }
    )
    http = new_client(server.url)
    first = post_chat(http, user("cool down one"))
    assert_done(first.events, LLAMA, fallback_from=GLM)
    second = post_chat(http, user("cool down two"))
    # GLM said it was busy (Retry-After 10 s): Llama answers at once.
    assert_done(second.events, LLAMA, fallback_from=GLM)
    models = [call["model"] for call in server.ai.calls() if "cool down" in last_user_text(call)]
    assert models == [GLM, LLAMA, LLAMA]


def test_without_moderation_done_has_no_verdict(client: httpx.Client, ai: EmulatorControl) -> None:
    # The default server has no moderation and no providers: nothing changes.
    chat = post_chat(client, user("plain"))
    done = assert_done(chat.events, GLM)
    assert "moderation" not in done
    assert [call["model"] for call in ai.calls()] == [GLM]
