"""The model picker and the conversations kept in localStorage."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import expect

from tests.browser.conftest import Chat, chat_messages
from tests.harness import EmulatorControl


def test_the_model_picker_lists_the_catalog_and_the_chosen_model_answers(
    chat: Chat, ai: EmulatorControl
) -> None:
    catalog = httpx.get(chat.url + "/api/models").json()
    picker = chat.model_picker()
    options = picker.locator("option")
    expect(options).to_have_count(len(catalog))
    for option, model in zip(options.all(), catalog, strict=True):
        assert option.get_attribute("value") == model["alias"]
        label = option.inner_text()
        assert label.startswith(model["label"])
        if model["alias"] == "auto":
            assert label == "Auto · chosen per question"
            continue
        # Models the Workers Free plan cannot use are marked.
        assert ("paid plan" in label) == (not model["free_plan"])
    default = next(m for m in catalog if m["default"])
    expect(picker).to_have_value(default["alias"])

    kimi = next(m for m in catalog if m["alias"] == "kimi")
    picker.select_option("kimi")
    chat.ask("Which model are you?")
    calls = ai.wait_for_calls(1)
    assert calls[0]["model"] == kimi["id"]
    expect(chat.last_answer().locator(".stats")).to_contain_text(kimi["label"])

    # The choice persists.
    chat.page.reload()
    expect(chat.model_picker()).to_have_value("kimi")
    chat.ask("And now?")
    assert ai.wait_for_calls(2)[1]["model"] == kimi["id"]


def test_history_survives_a_reload_and_each_conversation_sends_its_own_history(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    first = chat.ask("Tell me about apples")
    apples_answer = first.locator(".answer").inner_text()
    assert "apples" in apples_answer

    chat.button("New chat").click()
    expect(page.get_by_role("article")).to_have_count(0)
    chat.ask("Tell me about pears")
    sidebar = page.get_by_role("navigation", name="Conversations")
    expect(sidebar.get_by_role("button", name="Tell me about apples", exact=True)).to_be_visible()
    expect(sidebar.get_by_role("button", name="Tell me about pears", exact=True)).to_have_attribute(
        "aria-current", "true"
    )

    page.reload()
    # The last conversation is shown again, and both are listed.
    expect(page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "Tell me about pears"
    )
    listed = sidebar.get_by_role("button", name=re.compile("^Tell me about"))
    expect(listed).to_have_count(2)

    sidebar.get_by_role("button", name="Tell me about apples", exact=True).click()
    expect(page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "Tell me about apples"
    )
    expect(chat.last_answer().locator(".answer")).to_have_text(apples_answer)
    chat.ask("And their colours?")

    calls = ai.wait_for_calls(3)
    assert chat_messages(calls[1]) == [("user", "Tell me about pears")]
    assert chat_messages(calls[2]) == [
        ("user", "Tell me about apples"),
        ("assistant", apples_answer),
        ("user", "And their colours?"),
    ]


def test_conversations_can_be_renamed_and_deleted(chat: Chat, ai: EmulatorControl) -> None:
    page = chat.page
    sidebar = page.get_by_role("navigation", name="Conversations")
    chat.ask("Plan a trip to Kyoto")
    chat.button("New chat").click()
    chat.ask("Recipe for dumplings")

    sidebar.get_by_role("button", name="Rename: Plan a trip to Kyoto").click()
    name = sidebar.get_by_role("textbox", name="New name")
    expect(name).to_be_focused()
    name.fill("Kyoto 2027")
    name.press("Enter")
    expect(sidebar.get_by_role("button", name="Kyoto 2027", exact=True)).to_be_visible()

    sidebar.get_by_role("button", name="Delete: Recipe for dumplings").click()
    expect(sidebar.get_by_role("button", name="Recipe for dumplings", exact=True)).to_have_count(0)
    # The remaining conversation is shown.
    expect(page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "Plan a trip to Kyoto"
    )

    page.reload()
    expect(sidebar.get_by_role("button", name="Kyoto 2027", exact=True)).to_be_visible()
    expect(sidebar.get_by_role("button", name="Recipe for dumplings", exact=True)).to_have_count(0)
    assert len(ai.calls()) == 2
