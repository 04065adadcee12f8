"""``auto`` in the page: the picker offers it, and an answer it routed says
which model answered and why, in its stats line, after a reload too."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.harness import EmulatorControl


def test_an_auto_answer_shows_the_model_it_chose_and_why(chat: Chat, ai: EmulatorControl) -> None:
    picker = chat.model_picker()
    expect(picker.locator("option[value=auto]")).to_have_text("Auto · chosen per question")
    picker.select_option("auto")
    answer = chat.ask("What is the capital of France?")
    stats = answer.locator(".stats")
    expect(stats).to_contain_text("auto → GLM 4.7 Flash: short question")
    (call,) = ai.wait_for_calls(1)
    assert call["model"] == "@cf/zai-org/glm-4.7-flash"

    chat.page.reload()
    expect(chat.last_answer().locator(".stats")).to_contain_text(
        "auto → GLM 4.7 Flash: short question"
    )
