"""Moderation on the page, against a runner with ``MODERATION=input,output``:
the emulator plays Llama Guard. A flagged answer waits behind a notice naming
the categories (after a reload too) until "Show anyway"; a refused question
says which categories refused it."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import GLM, Chat, Guarded

GUARD = "@cf/meta/llama-guard-3-8b"
ANSWER = "First, wedge the latch with a credit card."


def flag_the_answer(guarded: Guarded) -> None:
    guarded.ai.script(
        # Only the answer holds this text: the question passes, the answer is flagged.
        {"match": {"model": GUARD, "any_contains": "credit card"}, "reply": {"unsafe": ["S2"]}},
        {"match": {"model": GLM}, "reply": {"content": ANSWER}},
    )


def test_a_flagged_answer_is_hidden_behind_a_notice_until_shown_and_stays_flagged(
    new_chat: Any, guarded: Guarded
) -> None:
    flag_the_answer(guarded)
    chat: Chat = new_chat(url=guarded.url).open()
    answer = chat.ask("How do I open a locked door?")
    notice = answer.get_by_text(
        "Hidden: Llama Guard flagged this answer as Non-violent crimes (S2)."
    )
    expect(notice).to_be_visible()
    expect(answer.get_by_text(ANSWER)).to_be_hidden()
    expect(answer.get_by_role("button", name="Copy message")).to_have_count(0)

    answer.get_by_role("button", name="Show anyway").click()
    expect(answer.get_by_text(ANSWER)).to_be_visible()
    hide = answer.get_by_role("button", name="Hide")
    expect(hide).to_be_focused()
    hide.press("Enter")
    expect(answer.get_by_text(ANSWER)).to_be_hidden()

    # The verdict is kept with the message.
    chat.page.reload()
    answer = chat.last_answer()
    expect(answer.get_by_text("Non-violent crimes (S2)")).to_be_visible()
    expect(answer.get_by_text(ANSWER)).to_be_hidden()
    chat.button("中文").click()
    answer = chat.page.get_by_role("article", name="助手").last
    zh_notice = "已隐藏：Llama Guard 将此回答标记为非暴力犯罪 (S2)。"  # noqa: RUF001
    expect(answer.get_by_text(zh_notice)).to_be_visible()
    answer.get_by_role("button", name="仍然显示").click()
    expect(answer.get_by_text(ANSWER)).to_be_visible()
    assert chat.csp_violations() == []


def test_a_safe_answer_is_shown_as_it_is(new_chat: Any, guarded: Guarded) -> None:
    guarded.ai.script({"match": {"model": GLM}, "reply": {"content": ANSWER}})
    chat: Chat = new_chat(url=guarded.url).open()
    answer = chat.ask("How do I open a locked door?")
    expect(answer.get_by_text(ANSWER)).to_be_visible()
    expect(answer.get_by_role("button", name="Show anyway")).to_have_count(0)
    # Both checks ran: the question's and the answer's.
    assert [c["model"] for c in guarded.ai.calls()].count(GUARD) == 2


def test_a_refused_question_names_the_categories(new_chat: Any, guarded: Guarded) -> None:
    guarded.ai.script(
        {"match": {"model": GUARD, "contains": "forbidden"}, "reply": {"unsafe": ["S1", "S10"]}},
    )
    chat: Chat = new_chat(url=guarded.url).open()
    answer = chat.ask("Something forbidden")
    alert = answer.get_by_role("alert")
    expect(alert).to_have_text(
        "Not answered: Llama Guard flagged the conversation as Violent crimes (S1), Hate (S10). "
        "Rephrase it, or start a new chat."
    )
    # Asking the same again would be refused again.
    expect(alert.get_by_role("button", name="Retry")).to_have_count(0)
    chat.page.reload()
    expect(chat.last_answer().get_by_role("alert")).to_contain_text(
        "Violent crimes (S1), Hate (S10)"
    )
