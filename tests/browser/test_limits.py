"""The page takes the server's limits from GET /api/limits: one source of
truth, no copies in the page."""

from __future__ import annotations

import json
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import Chat, chat_messages
from tests.harness import EmulatorControl


def test_the_input_takes_its_length_from_the_servers_limits(chat: Chat) -> None:
    limits = httpx.get(chat.url + "/api/limits").json()
    expect(chat.composer()).to_have_attribute("maxlength", str(limits["max_message_chars"]))
    assert "/api/limits" in " ".join(chat.log.requests)


def test_a_long_conversation_sends_what_the_servers_limits_allow(
    new_chat: Any, ai: EmulatorControl
) -> None:
    chat: Chat = new_chat()
    real = httpx.get(chat.url + "/api/limits").json()
    # The same server with smaller limits, as a deployment's [vars] could set them.
    small = {**real, "max_messages": 3, "max_message_chars": 40}
    ai.script({"reply": {"content": "Short answer."}})
    chat.page.route(
        "**/api/limits",
        lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(small)
        ),
    )
    chat.open()
    expect(chat.composer()).to_have_attribute("maxlength", "40")
    chat.ask("one")
    chat.ask("two")
    chat.ask("three")
    calls = ai.wait_for_calls(3)
    # The newest three messages: the oldest turns are left out, not refused.
    sent = chat_messages(calls[2])
    assert sent == [("user", "two"), ("assistant", "Short answer."), ("user", "three")]
    # The composer cannot take more than the limit.
    chat.composer().fill("")
    chat.composer().press_sequentially("x" * 45)
    expect(chat.composer()).to_have_value("x" * 40)


def test_an_older_answer_over_the_message_limit_is_left_out(
    new_chat: Any, ai: EmulatorControl
) -> None:
    chat: Chat = new_chat()
    real = httpx.get(chat.url + "/api/limits").json()
    small = {**real, "max_message_chars": 40}
    chat.page.route(
        "**/api/limits",
        lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(small)
        ),
    )
    chat.open()
    ai.script({"reply": {"content": "A long answer, longer than forty characters in all."}})
    chat.ask("first")
    chat.ask("second")
    # The server would refuse the long answer: the request starts after it.
    second = ai.wait_for_call(lambda call: chat_messages(call)[-1:] == [("user", "second")])
    assert second is not None
    assert chat_messages(second) == [("user", "second")]
    expect(chat.last_answer().get_by_role("alert")).to_have_count(0)
