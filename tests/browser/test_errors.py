"""Errors, limits, the token prompt and cut-off streams are shown in plain words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import (
    GLM,
    LLAMA,
    Chat,
    Relay,
    done,
    error,
    meta,
    next_client_address,
)
from tests.harness import ROOT, EmulatorControl, start_runner
from tests.kit.ratelimit import in_one_window
from tests.kit.upstream import native_chunk, openai_chunk, openai_end


def test_an_error_event_mid_answer_keeps_the_partial_text_and_retry_answers(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "times": 1,
            "chunks": [
                openai_chunk(content="Half of it"),
                {"delay_ms": 50},
                {"error": "3040: Capacity temporarily exceeded"},
            ],
        }
    )
    answer = chat.ask("Explain tides")
    expect(answer.locator(".answer")).to_have_text("Half of it")
    alert = answer.get_by_role("alert")
    # A stream that breaks part way carries no reason: the Worker's retryable
    # upstream_error, whatever the model failed with (tests/api/checks.py,
    # MID_STREAM_FAILURE).
    expect(alert).to_contain_text("The model had a problem answering.")

    alert.get_by_role("button", name="Retry").click()
    chat.wait_idle()
    expect(chat.answers()).to_have_count(1)
    expect(chat.last_answer().locator(".answer")).to_contain_text("Explain tides")
    expect(chat.last_answer().get_by_role("alert")).to_have_count(0)
    calls = ai.wait_for_calls(2)
    assert calls[1]["inputs"]["messages"][-1] == {"role": "user", "content": "Explain tides"}


def test_an_http_error_before_the_stream_is_shown_with_retry(
    chat: Chat, ai: EmulatorControl
) -> None:
    # Both models of the fallback chain are busy once.
    ai.script({"match": {"model": "*"}, "times": 2, "error": "3040: Capacity exceeded"})
    answer = chat.ask("Hello?")
    expect(answer.get_by_role("alert")).to_contain_text("The model is busy right now.")
    expect(answer.get_by_role("alert")).to_contain_text("Try again in")
    answer.get_by_role("button", name="Retry").click()
    chat.wait_idle()
    expect(chat.last_answer().locator(".answer")).to_contain_text("Hello?")


def test_quota_exhausted_shows_a_429_in_plain_words(chat: Chat, ai: EmulatorControl) -> None:
    ai.script({"match": {"model": "*"}, "error": "3036: Daily allocation exceeded"})
    answer = chat.ask("Anything")
    alert = answer.get_by_role("alert")
    expect(alert).to_contain_text("Today's free model quota is used up.")
    # It resets at 00:00 UTC, said in the reader's time (the browser's zone).
    expect(alert).to_contain_text("It resets at")
    expect(alert.get_by_role("button", name="Retry")).to_be_visible()


def test_the_rate_limit_is_shown_with_the_wait(
    chat: Chat, relay: Relay, ai: EmulatorControl
) -> None:
    # Use up this client's requests (20 a minute) from the page's own address,
    # in one window of the limiter, which the page's request then shares.
    in_one_window()
    transport = httpx.HTTPTransport(local_address=relay.client_address)
    with httpx.Client(base_url=relay.url, transport=transport, timeout=30) as client:
        for _ in range(25):
            response = client.post("/chat", json={"messages": [{"role": "user", "content": "x"}]})
            if response.status_code == 429:
                break
        assert response.status_code == 429
    answer = chat.ask("One more")
    alert = answer.get_by_role("alert")
    expect(alert).to_contain_text("Too many requests right now.")
    expect(alert).to_contain_text("Try again in")
    expect(alert.get_by_role("button", name="Retry")).to_be_visible()


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [
        (400, "invalid_request", "The request was not accepted."),
        (413, "payload_too_large", "The conversation is too long. Start a new chat."),
        (500, "internal_error", "edgechat had a problem. Please try again."),
    ],
)
def test_http_errors_are_shown_in_plain_words(
    chat: Chat, status: int, code: str, words: str
) -> None:
    body = json.dumps({"error": {"code": code, "message": "server words"}})
    chat.page.route(
        "**/chat",
        lambda route: route.fulfill(status=status, content_type="application/json", body=body),
    )
    answer = chat.ask("Hi")
    expect(answer.get_by_role("alert")).to_contain_text(words)
    expect(answer.get_by_role("button", name="Retry")).to_be_visible()


def test_a_dropped_connection_mid_answer_is_shown_as_interrupted(
    chat: Chat, relay: Relay, ai: EmulatorControl
) -> None:
    ai.script({"chunks": [openai_chunk(content="Once upon a time"), {"stall": True}]})
    chat.send("Tell a story")
    expect(chat.last_answer().locator(".answer")).to_have_text("Once upon a time")
    relay.drop_connections()
    chat.wait_idle()
    answer = chat.last_answer()
    expect(answer.get_by_role("alert")).to_contain_text("cut off before it finished")
    expect(answer.locator(".answer")).to_have_text("Once upon a time")
    expect(answer.get_by_role("button", name="Retry")).to_be_visible()


@pytest.mark.parametrize(
    ("model", "events"),
    [
        pytest.param(GLM, [openai_chunk(content="Cut"), openai_chunk(content=" short")], id="glm"),
        pytest.param(LLAMA, [native_chunk("Cut"), native_chunk(" short")], id="llama"),
        # The upstream stopped mid-event, and nothing closed the stream.
        pytest.param(
            LLAMA, [native_chunk("Cut short"), 'data: {"response":" and th'], id="mid-line"
        ),
    ],
)
def test_a_stream_that_ends_without_done_is_shown_as_interrupted(
    chat: Chat, model: str, events: list[str]
) -> None:
    chat.serve_chat(meta(model), *events)
    answer = chat.ask("Hi")
    expect(answer.locator(".answer")).to_have_text("Cut short")
    expect(answer.get_by_role("alert")).to_contain_text("cut off before it finished")
    expect(answer.get_by_role("button", name="Retry")).to_be_visible()


def test_done_markers_and_unreadable_model_events_are_not_shown(chat: Chat) -> None:
    chat.serve_chat(
        meta(),
        ": ping\n\n",
        openai_chunk(content=""),  # the opening chunk: an empty delta
        openai_chunk(content="Only"),
        "data: not json at all\n\n",
        'data: {"choices": []}\n\n',
        "data: 42\n\n",
        openai_chunk(content=" this"),
        native_chunk(" shows."),
        *openai_end(),
        # An upstream that stopped mid-line: edgechat's blank line ends it.
        'data: {"response": "half',
        done(),
    )
    answer = chat.ask("Hi")
    expect(answer.locator(".answer")).to_have_text("Only this shows.")
    expect(answer.locator(".stats")).to_contain_text("GLM 4.7 Flash")
    expect(answer.get_by_role("alert")).to_have_count(0)
    expect(answer.locator("details.reasoning")).to_be_hidden()
    assert chat.log.page_errors == []


def test_an_error_event_after_the_models_events_is_shown_with_the_partial_text(
    chat: Chat,
) -> None:
    chat.serve_chat(
        meta(),
        openai_chunk(reasoning="Thinking it over."),
        openai_chunk(content="Half of"),
        'data: {"choices":[{"index":0,"delta":{"content":" it, cut',
        error("model_busy", "The model is busy.", retryable=True),
    )
    answer = chat.ask("Hi")
    expect(answer.locator(".answer")).to_have_text("Half of")
    expect(answer.get_by_role("alert")).to_contain_text("The model is busy right now.")
    expect(answer.get_by_role("button", name="Retry")).to_be_visible()


def test_a_fallback_model_is_named_after_the_answer(chat: Chat, ai: EmulatorControl) -> None:
    ai.script(
        {
            "match": {"model": "@cf/zai-org/glm-4.7-flash"},
            "error": "3040: Capacity temporarily exceeded",
        }
    )
    answer = chat.ask("Who answers?")
    expect(answer.locator(".note")).to_have_text(
        "Answered by Llama 3.1 8B because GLM 4.7 Flash was unavailable."
    )
    expect(answer.locator(".stats")).to_contain_text("Llama 3.1 8B")


# --- with API_TOKEN set -------------------------------------------------------------

TOKEN = "browser-test-token"


@pytest.fixture(scope="module")
def token_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, EmulatorControl]]:
    folder = tmp_path_factory.mktemp("token-site")
    vars_file: Path = folder / "token.vars"
    vars_file.write_text(f"API_TOKEN={TOKEN}\n")
    control = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
    env = {
        "EDGECHAT_AI_SCRIPT": str(control.script_path),
        "EDGECHAT_AI_LOG": str(control.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
    }
    with start_runner(ROOT / "wrangler.toml", vars_file=vars_file, env=env) as runner:
        yield runner.base_url, control


def test_a_401_asks_for_the_token_once_and_keeps_it(
    new_chat: object, token_site: tuple[str, EmulatorControl]
) -> None:
    base_url, control = token_site
    control.reset()
    site = Relay(base_url, next_client_address())
    try:
        chat: Chat = new_chat(url=site.url).open()  # type: ignore[operator]
        page = chat.page
        chat.send("Secret question")
        dialog = page.get_by_role("dialog", name="API token required")
        expect(dialog).to_be_visible()
        expect(chat.last_answer().get_by_role("alert")).to_contain_text("An API token is needed")
        token_box = dialog.get_by_label("API token")
        expect(token_box).to_be_focused()

        # A wrong token is refused and asked for again.
        token_box.fill("wrong")
        dialog.get_by_role("button", name="Save").click()
        expect(dialog).to_contain_text("That token was not accepted.")
        assert control.calls() == []

        token_box.fill(TOKEN)
        dialog.get_by_role("button", name="Save").click()
        expect(dialog).to_be_hidden()
        chat.wait_idle()
        expect(chat.last_answer().locator(".answer")).to_contain_text("Secret question")
        expect(chat.answers()).to_have_count(1)
        assert page.evaluate("localStorage.getItem('edgechat.token')") == TOKEN

        # Kept: after a reload the next question needs no prompt.
        page.reload()
        chat.ask("Second question")
        expect(dialog).to_be_hidden()
        expect(chat.last_answer().locator(".answer")).to_contain_text("Second question")
        assert len(control.wait_for_calls(2)) == 2
    finally:
        site.close()
