"""The page as a whole: strict CSP with no violations, no console errors,
languages, phone width, and screenshots for review (artifacts/, not committed)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, Chat
from tests.harness import EmulatorControl
from tests.kit.upstream import openai_chunk, openai_end

SHOWCASE = """Here is a quick comparison of the two families:

| model | strength | context |
|:------|:---------|--------:|
| GLM 4.7 Flash | fast, cheap | 131k |
| Kimi K2.6 | deep reasoning | 262k |

Steps to try it:

1. Pick a model at the top.
2. Ask a question — answers **stream** as they are written.
3. Press `Esc` to stop.

```js
const res = await fetch("/chat", { method: "POST", body });
```

Docs: [Workers AI](https://developers.cloudflare.com/workers-ai/)."""


def _showcase(ai: EmulatorControl) -> None:
    chunks: list[object] = [
        openai_chunk(reasoning="The user wants an overview. I'll add a table."),
    ]
    for piece in SHOWCASE.split(" "):
        chunks.append(openai_chunk(content=piece + " "))
    ai.script(
        {"match": {"contains": "compare"}, "chunks": [*chunks, *openai_end(58, 120)]},
    )


def test_a_full_chat_has_no_console_errors_and_no_csp_violations(
    chat: Chat, ai: EmulatorControl
) -> None:
    csp = httpx.get(chat.url + "/").headers["content-security-policy"]
    assert "'unsafe-inline'" not in csp
    assert "script-src 'self'" in csp
    chat.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat.url)

    _showcase(ai)
    answer = chat.ask("Please compare GLM and Kimi")
    answer.locator("summary").click()
    answer.get_by_role("button", name="Copy", exact=True).click()
    chat.ask("Thanks!")
    chat.button("New chat").click()
    chat.page.get_by_role("button", name="中文").click()
    expect(chat.page.locator("#new-chat")).to_have_text("新对话")
    chat.page.get_by_role("button", name="English").click()
    chat.page.reload()
    expect(chat.answers()).to_have_count(0)

    assert chat.csp_violations() == []
    assert chat.log.console_errors == []
    assert chat.log.page_errors == []
    # Nothing but edgechat itself was contacted.
    assert all(url.startswith(chat.url) for url in chat.log.requests), chat.log.requests


def test_the_ui_follows_a_chinese_browser_and_can_switch(new_chat: Any) -> None:
    chat: Chat = new_chat(locale="zh-CN").open()
    page = chat.page
    expect(page.locator("html")).to_have_attribute("lang", "zh-CN")
    expect(page.get_by_role("button", name="发送")).to_be_visible()
    expect(page.get_by_role("textbox", name="消息")).to_have_attribute(
        "placeholder", "给 edgechat 发消息…"
    )
    page.get_by_role("button", name="English").click()
    expect(page.get_by_role("button", name="Send")).to_be_visible()
    page.reload()
    expect(page.get_by_role("button", name="Send")).to_be_visible()


def test_the_keyboard_reaches_every_control_in_order(chat: Chat) -> None:
    page = chat.page
    seen = []
    for _ in range(16):
        page.keyboard.press("Tab")
        seen.append(page.evaluate("document.activeElement.id"))
    order = ["new-chat", "model", "reasoning", "lang", "input", "send"]
    start = seen.index("new-chat")
    assert [name for name in seen[start:] if name in order][: len(order)] == order, seen


def test_on_a_phone_the_sidebar_opens_from_the_menu_and_nothing_overflows(
    new_chat: Any, ai: EmulatorControl
) -> None:
    chat: Chat = new_chat(viewport={"width": 360, "height": 740}).open()
    page = chat.page
    _showcase(ai)
    chat.ask("Please compare GLM and Kimi")
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    sidebar = page.get_by_role("navigation", name="Conversations")
    new = sidebar.get_by_role("button", name="New chat", exact=True).first
    expect(new).not_to_be_in_viewport()
    menu = page.get_by_role("button", name="Conversations")
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(new).to_be_in_viewport()
    new.click()
    expect(new).not_to_be_in_viewport()
    expect(chat.answers()).to_have_count(0)


CODE_ANSWER = """Two ways to read the stream:

```python
import httpx

def read(url: str) -> int:
    # one event at a time
    with httpx.stream("POST", url, json={"n": 42}) as res:
        return sum(1 for _ in res.iter_lines())
```

```js
const res = await fetch("/chat", { method: "POST", body });
for await (const piece of res.body) console.log(piece.length);
```"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    ("size", "viewport"),
    [("desktop", {"width": 1280, "height": 800}), ("phone", {"width": 360, "height": 740})],
)
def test_screenshots_for_review(
    new_chat: Any, ai: EmulatorControl, scheme: str, size: str, viewport: dict[str, int]
) -> None:
    chat: Chat = new_chat(viewport=viewport, color_scheme=scheme).open()
    page = chat.page
    # No animation, so the pictures are taken of a page at rest.
    page.emulate_media(reduced_motion="reduce")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"page-empty-{scheme}-{size}.png")
    _showcase(ai)
    chat.ask("Please compare GLM and Kimi")
    page.screenshot(path=ARTIFACTS / f"page-chat-{scheme}-{size}.png")
    assert (ARTIFACTS / f"page-chat-{scheme}-{size}.png").stat().st_size > 5_000

    # The new controls: an edited question and a regenerated answer (2/2 on
    # each), copy buttons, highlighted code.
    ai.script({"reply": {"content": CODE_ANSWER}})
    chat.ask("How do I read it?")
    question = page.get_by_role("article", name="You").last
    question.get_by_role("button", name="Edit message").click()
    question.get_by_role("textbox", name="Edit message").fill("How do I read the stream?")
    question.get_by_role("textbox", name="Edit message").press("Enter")
    chat.wait_idle()
    chat.last_answer().get_by_role("button", name="Regenerate").click()
    chat.wait_idle()
    expect(chat.last_answer().get_by_role("group", name="Version 2 of 2")).to_be_visible()
    expect(chat.last_answer().locator(".tok-kw").first).to_be_visible()
    chat.last_answer().scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / f"page-versions-{scheme}-{size}.png")

    page.keyboard.press("Control+k")
    page.get_by_role("combobox", name="Search conversations").fill("stream")
    expect(page.get_by_role("listbox", name="Results").get_by_role("option").first).to_be_visible()
    page.screenshot(path=ARTIFACTS / f"page-search-{scheme}-{size}.png")
    page.keyboard.press("Escape")
    if size == "phone":
        page.get_by_role("button", name="Conversations").click()
        expect(page.get_by_role("button", name="Export as Markdown")).to_be_in_viewport()
        page.screenshot(path=ARTIFACTS / f"page-sidebar-{scheme}-{size}.png")
    assert chat.csp_violations() == []


def test_the_docs_picture_of_the_page(new_chat: Any, ai: EmulatorControl) -> None:
    """The picture at the top of the README and the docs (docs/images/chat-page.png
    is a copy of artifacts/page.png): the page after a real streamed answer."""
    chat: Chat = new_chat(viewport={"width": 1200, "height": 760}).open()
    page = chat.page
    page.emulate_media(reduced_motion="reduce")
    _showcase(ai)
    answer = chat.ask("Please compare GLM and Kimi")
    expect(answer.get_by_role("table")).to_be_visible()
    expect(answer.get_by_role("button", name="Regenerate")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / "page.png")
    assert (ARTIFACTS / "page.png").stat().st_size > 5_000
    assert chat.csp_violations() == []
