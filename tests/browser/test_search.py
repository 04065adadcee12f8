"""Search across conversations from the keyboard (Ctrl/⌘+K): titles and
message text, matches highlighted, arrows choose, Enter opens."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.harness import EmulatorControl


def three_conversations(chat: Chat, ai: EmulatorControl) -> None:
    ai.script(
        {"match": {"contains": "Kyoto"}, "reply": {"content": "Kyoto is lovely in April."}},
        {
            "match": {"contains": "dumplings"},
            "reply": {"content": "Fold them; boil for 6 minutes."},
        },
    )
    chat.ask("Plan a trip to Kyoto")
    chat.button("New chat").click()
    chat.ask("Recipe for dumplings")
    chat.button("New chat").click()
    chat.ask("Something else")


@pytest.mark.parametrize("shortcut", ["Control+k", "Meta+k"])
def test_ctrl_or_cmd_k_searches_titles_and_messages_and_enter_opens(
    chat: Chat, ai: EmulatorControl, shortcut: str
) -> None:
    page = chat.page
    three_conversations(chat, ai)
    chat.composer().focus()
    page.keyboard.press(shortcut)
    dialog = page.get_by_role("dialog", name="Search conversations")
    box = dialog.get_by_role("combobox", name="Search conversations")
    expect(box).to_be_focused()

    box.fill("boil")
    results = dialog.get_by_role("option")
    expect(results).to_have_count(1)
    expect(dialog.get_by_role("status")).to_have_text("1 result")
    expect(results.first).to_contain_text("Recipe for dumplings")
    expect(results.first.locator("mark")).to_have_text(["boil"])
    expect(results.first).to_have_attribute("aria-selected", "true")

    page.keyboard.press("Enter")
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "Recipe for dumplings"
    )
    current = page.get_by_role("navigation", name="Conversations").locator("[aria-current=true]")
    expect(current).to_have_text("Recipe for dumplings")
    expect(chat.composer()).to_be_focused()


def test_results_are_highlighted_and_chosen_with_the_arrows(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    three_conversations(chat, ai)
    page.get_by_role("button", name="Search").click()
    dialog = page.get_by_role("dialog", name="Search conversations")
    box = dialog.get_by_role("combobox")
    box.fill("KYOTO")
    results = dialog.get_by_role("option")
    # The title first, then the messages: the question and the answer.
    expect(results).to_have_count(3)
    expect(dialog.get_by_role("status")).to_have_text("3 results")
    for k in range(3):
        expect(results.nth(k).locator("mark")).to_have_text(["Kyoto"])
    expect(results.nth(2)).to_contain_text("lovely in April")
    expect(box).to_have_attribute("aria-activedescendant", "result-0")
    box.press("ArrowDown")
    expect(results.nth(1)).to_have_attribute("aria-selected", "true")
    expect(results.nth(0)).to_have_attribute("aria-selected", "false")
    expect(box).to_have_attribute("aria-activedescendant", "result-1")
    box.press("ArrowUp")
    box.press("ArrowUp")  # wraps around to the last
    expect(results.nth(2)).to_have_attribute("aria-selected", "true")
    box.press("Enter")
    expect(page.get_by_role("article", name="Assistant")).to_contain_text("lovely in April")

    # Nothing found says so; Escape closes and leaves the chat as it was.
    page.keyboard.press("Control+k")
    box.fill("pineapple")
    expect(results).to_have_count(0)
    expect(dialog.get_by_role("status")).to_have_text("No conversation matches.")
    box.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("article", name="Assistant")).to_contain_text("lovely in April")


def test_search_finds_an_earlier_version_and_shows_it(chat: Chat, ai: EmulatorControl) -> None:
    page = chat.page
    chat.ask("Tell me about apples")
    question = page.get_by_role("article", name="You")
    question.get_by_role("button", name="Edit message").click()
    box = question.get_by_role("textbox", name="Edit message")
    box.fill("Tell me about plums")
    box.press("Enter")
    chat.wait_idle()
    expect(question.locator(".bubble")).to_have_text("Tell me about plums")

    page.keyboard.press("Control+k")
    page.get_by_role("combobox", name="Search conversations").fill("apples")
    # The title (the first question) and the earlier version of the message.
    earlier = page.locator(".result-text", has_text=re.compile("^Tell me about apples$"))
    page.get_by_role("listbox", name="Results").get_by_role("option").filter(has=earlier).click()
    expect(question.locator(".bubble")).to_have_text("Tell me about apples")
    expect(question.get_by_role("group", name="Version 1 of 2")).to_be_visible()


def test_search_speaks_chinese_and_finds_chinese(new_chat: Any, ai: EmulatorControl) -> None:
    chat: Chat = new_chat(locale="zh-CN").open()
    page = chat.page
    ai.script({"reply": {"content": "饺子需要面粉和水。"}})
    page.get_by_role("textbox", name="消息").fill("怎么包饺子")
    page.get_by_role("textbox", name="消息").press("Enter")
    expect(page.get_by_role("article", name="助手")).to_have_attribute("aria-busy", "false")
    page.keyboard.press("Control+k")
    dialog = page.get_by_role("dialog", name="搜索对话")
    dialog.get_by_role("combobox", name="搜索对话").fill("面粉")
    expect(dialog.get_by_role("status")).to_have_text("1 条结果")
    expect(dialog.get_by_role("option").locator("mark")).to_have_text(["面粉"])
    dialog.get_by_role("button", name="关闭").click()
    expect(dialog).to_be_hidden()
