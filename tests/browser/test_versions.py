"""Edit and resend, regenerate, and the earlier versions of a turn ("2/3" with arrows),
in the history and after a reload; copy a message's Markdown."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat, chat_messages
from tests.harness import EmulatorControl


def versions(article: Any) -> Any:
    """The "n/m" control of a message, between its two arrows."""
    return article.get_by_role("group", name="Version", exact=False)


def test_editing_a_message_continues_from_there_and_keeps_the_earlier_version(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    chat.ask("Tell me about apples")
    chat.ask("And pears?")
    questions = page.get_by_role("article", name="You")
    expect(questions).to_have_count(2)
    expect(versions(questions.first)).to_have_count(0)

    questions.first.get_by_role("button", name="Edit message").click()
    box = questions.first.get_by_role("textbox", name="Edit message")
    expect(box).to_be_focused()
    expect(box).to_have_value("Tell me about apples")
    box.fill("Tell me about plums")
    box.press("Enter")
    chat.wait_idle()

    # The conversation goes on from the edited message: what followed the
    # first version is not on screen, nor in what the model was sent.
    expect(questions).to_have_count(1)
    expect(questions.first.locator(".bubble")).to_have_text("Tell me about plums")
    expect(chat.answers()).to_have_count(1)
    calls = ai.wait_for_calls(3)
    assert chat_messages(calls[2]) == [("user", "Tell me about plums")]
    nav = versions(questions.first)
    expect(nav).to_have_accessible_name("Version 2 of 2")
    expect(nav).to_contain_text("2/2")
    expect(nav.get_by_role("button", name="Next version")).to_be_disabled()

    # The left arrow brings back the first version with everything that followed it.
    nav.get_by_role("button", name="Previous version").click()
    expect(questions).to_have_count(2)
    expect(questions.first.locator(".bubble")).to_have_text("Tell me about apples")
    expect(questions.last.locator(".bubble")).to_have_text("And pears?")
    expect(versions(questions.first)).to_have_accessible_name("Version 1 of 2")
    # The keyboard stays on the control.
    expect(versions(questions.first).get_by_role("button", name="Next version")).to_be_focused()

    # Both versions, and the one shown, survive a reload.
    page.reload()
    expect(questions).to_have_count(2)
    expect(versions(questions.first)).to_have_accessible_name("Version 1 of 2")
    versions(questions.first).get_by_role("button", name="Next version").click()
    expect(questions.first.locator(".bubble")).to_have_text("Tell me about plums")
    expect(questions).to_have_count(1)

    # Going on from the shown version sends its history only.
    chat.ask("And cherries?")
    calls = ai.wait_for_calls(4)
    assert [m[1] for m in chat_messages(calls[3])][::2] == ["Tell me about plums", "And cherries?"]


def test_escape_cancels_an_edit(chat: Chat, ai: EmulatorControl) -> None:
    chat.ask("Keep me")
    question = chat.page.get_by_role("article", name="You")
    question.get_by_role("button", name="Edit message").click()
    box = question.get_by_role("textbox", name="Edit message")
    box.fill("Changed my mind")
    box.press("Escape")
    expect(question.locator(".bubble")).to_have_text("Keep me")
    expect(versions(question)).to_have_count(0)
    expect(chat.composer()).to_be_focused()
    assert len(ai.calls()) == 1


def test_regenerate_asks_past_any_cache_and_keeps_the_earlier_answers(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    ai.script(
        {"match": {"contains": "poem"}, "times": 1, "reply": {"content": "Roses are red."}},
        {"match": {"contains": "poem"}, "times": 1, "reply": {"content": "Violets are blue."}},
        {"match": {"contains": "poem"}, "reply": {"content": "Sugar is sweet."}},
    )
    with page.expect_request("**/chat") as asked:
        chat.ask("Write a poem")
    # An ordinary question may be answered from a cache…
    assert "cache-control" not in asked.value.all_headers()
    answer = chat.last_answer()
    expect(answer.locator(".answer")).to_have_text("Roses are red.")
    expect(versions(answer)).to_have_count(0)

    regenerate = answer.get_by_role("button", name="Regenerate")
    with page.expect_request("**/chat") as again:
        regenerate.click()
    chat.wait_idle()
    # …a regenerated answer never is.
    assert again.value.all_headers()["cache-control"] == "no-cache"
    expect(chat.answers()).to_have_count(1)
    expect(answer.locator(".answer")).to_have_text("Violets are blue.")
    expect(versions(answer)).to_have_accessible_name("Version 2 of 2")

    answer.get_by_role("button", name="Regenerate").click()
    chat.wait_idle()
    expect(answer.locator(".answer")).to_have_text("Sugar is sweet.")
    expect(versions(answer)).to_have_accessible_name("Version 3 of 3")
    calls = ai.wait_for_calls(3)
    assert [chat_messages(c) for c in calls] == [[("user", "Write a poem")]] * 3

    versions(answer).get_by_role("button", name="Previous version").click()
    versions(answer).get_by_role("button", name="Previous version").click()
    expect(answer.locator(".answer")).to_have_text("Roses are red.")
    page.reload()
    expect(chat.last_answer().locator(".answer")).to_have_text("Roses are red.")
    expect(versions(chat.last_answer())).to_have_accessible_name("Version 1 of 3")

    # The next question follows the answer shown.
    chat.ask("Another line")
    assert chat_messages(ai.wait_for_calls(4)[3]) == [
        ("user", "Write a poem"),
        ("assistant", "Roses are red."),
        ("user", "Another line"),
    ]


def test_only_the_last_answer_can_be_regenerated_and_not_while_one_streams(
    chat: Chat, ai: EmulatorControl
) -> None:
    chat.ask("One")
    chat.ask("Two")
    first, last = chat.answers().first, chat.answers().last
    expect(first.get_by_role("button", name="Regenerate")).to_have_count(0)
    expect(last.get_by_role("button", name="Regenerate")).to_be_visible()

    ai.script({"chunks": [{"stall": True}]})
    chat.send("Three")
    expect(chat.button("Stop")).to_be_visible()
    expect(chat.page.get_by_role("button", name="Regenerate")).to_have_count(0)
    expect(chat.page.get_by_role("button", name="Edit message")).to_have_count(0)
    chat.button("Stop").click()
    expect(chat.last_answer().get_by_role("button", name="Regenerate")).to_be_visible()
    expect(chat.page.get_by_role("button", name="Edit message")).to_have_count(3)


MARKDOWN = "Use **bold** and `code`:\n\n```python\nprint('hi')\n```"


def test_copy_puts_a_messages_markdown_on_the_clipboard_with_feedback(
    chat: Chat, ai: EmulatorControl
) -> None:
    chat.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat.url)
    ai.script({"reply": {"content": MARKDOWN}})
    answer = chat.ask("Show me Markdown")
    copy = answer.get_by_role("button", name="Copy message")
    copy.click()
    expect(answer.get_by_role("button", name="Copied")).to_be_visible()
    assert chat.page.evaluate("navigator.clipboard.readText()") == MARKDOWN
    # The feedback goes away again.
    expect(answer.get_by_role("button", name="Copy message")).to_be_visible()

    question = chat.page.get_by_role("article", name="You")
    question.get_by_role("button", name="Copy message").click()
    expect(question.get_by_role("button", name="Copied")).to_be_visible()
    assert chat.page.evaluate("navigator.clipboard.readText()") == "Show me Markdown"

    # Each code block has its own.
    answer.get_by_role("button", name="Copy", exact=True).click()
    expect(answer.locator(".code").get_by_role("button", name="Copied")).to_be_visible()
    assert chat.page.evaluate("navigator.clipboard.readText()") == "print('hi')"


def test_the_new_controls_speak_chinese_and_fit_a_phone(new_chat: Any, ai: EmulatorControl) -> None:
    chat: Chat = new_chat(locale="zh-CN", viewport={"width": 360, "height": 740}).open()
    page = chat.page
    page.get_by_role("textbox", name="消息").fill("你好")
    page.get_by_role("textbox", name="消息").press("Enter")
    expect(page.get_by_role("button", name="发送")).to_be_visible()
    answer = page.get_by_role("article", name="助手").last
    expect(answer).to_have_attribute("aria-busy", "false")
    answer.get_by_role("button", name="重新生成").click()
    expect(answer.get_by_role("group", name="第 2 版，共 2 版")).to_be_visible()  # noqa: RUF001
    expect(answer.get_by_role("button", name="复制消息")).to_be_visible()
    question = page.get_by_role("article", name="你")
    expect(question.get_by_role("button", name="编辑消息")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    # From the keyboard: Enter uses the focused control, which stays in reach,
    # and Tab goes on to the message's other controls.
    answer.get_by_role("button", name="上一版本").focus()
    page.keyboard.press("Enter")
    expect(answer.get_by_role("group", name="第 1 版，共 2 版")).to_be_visible()  # noqa: RUF001
    expect(answer.get_by_role("button", name="下一版本")).to_be_focused()
    page.keyboard.press("Tab")
    expect(answer.get_by_role("button", name="复制消息")).to_be_focused()
    page.keyboard.press("Tab")
    expect(answer.get_by_role("button", name="重新生成")).to_be_focused()
