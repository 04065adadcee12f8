"""Page code loaded at its first use (static/js/on-demand.js): the empty page
fetches none of dictation, read aloud, search, export and import; a click made
while such a module is still on its way is carried out once it arrives; a
module that failed to arrive is asked for again on the next use."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.harness import EmulatorControl

ON_DEMAND = (
    "dictation.js",
    "speech.js",
    "search-dialog.js",
    "search.js",
    "import-export.js",
    "transfer.js",
)


def hold(chat: Chat, module: str) -> list[Any]:
    """From now on, requests for /js/`module` wait in the returned list until continued."""
    held: list[Any] = []
    chat.page.route(f"**/js/{module}", lambda route: held.append(route))
    return held


def until_requested(chat: Chat, held: list[Any], timeout_s: float = 15.0) -> Any:
    """The first held request, once the page has asked for it. Each round trip to
    the page lets Playwright hand the routed request to `held`."""
    deadline = time.monotonic() + timeout_s
    while not held:
        assert time.monotonic() < deadline, "the page never asked for the module"
        chat.page.evaluate("0")
    return held[0]


def requested(chat: Chat, module: str) -> bool:
    return any(url.endswith(f"/js/{module}") for url in chat.log.requests)


def test_the_empty_page_fetches_none_of_the_features_it_does_not_show(chat: Chat) -> None:
    expect(chat.page.locator("#empty")).to_be_visible()
    chat.page.evaluate("new Promise(requestAnimationFrame)")
    for module in ON_DEMAND:
        assert not requested(chat, module), module
    assert requested(chat, "on-demand.js")


def test_an_export_clicked_before_its_code_arrived_is_carried_out(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script({"reply": {"content": "Kept."}})
    chat.ask("Keep this")
    held = hold(chat, "import-export.js")
    sidebar = chat.page.get_by_role("navigation", name="Conversations")
    sidebar.get_by_role("button", name="Export as Markdown").click()
    route = until_requested(chat, held)
    # The click was taken while the module was on its way; it goes on once it is here.
    with chat.page.expect_download() as info:
        route.continue_()
    text = Path(info.value.path()).read_text(encoding="utf-8")
    assert text == "# Keep this\n\n## You\n\nKeep this\n\n## Assistant\n\nKept.\n"
    assert chat.log.page_errors == []


def test_ctrl_k_before_the_search_arrived_opens_it_and_typing_then_searches(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script({"reply": {"content": "Kyoto is lovely in April."}})
    chat.ask("Plan a trip to Kyoto")
    held = hold(chat, "search-dialog.js")
    chat.composer().focus()
    chat.page.keyboard.press("Control+k")
    route = until_requested(chat, held)
    dialog = chat.page.get_by_role("dialog", name="Search conversations")
    expect(dialog).to_be_hidden()
    route.continue_()
    box = dialog.get_by_role("combobox", name="Search conversations")
    expect(box).to_be_focused()
    box.fill("April")
    expect(dialog.get_by_role("option")).to_have_count(1)
    expect(dialog.get_by_role("status")).to_have_text("1 result")
    assert chat.csp_violations() == []


def test_a_module_that_failed_to_arrive_is_asked_for_again(chat: Chat, ai: EmulatorControl) -> None:
    page = chat.page
    failed: list[Any] = []

    def fail_once(route: Any) -> None:
        if failed:
            route.continue_()
        else:
            failed.append(route.request.url)
            route.abort()

    page.route("**/js/search-dialog.js", fail_once)
    search = chat.button("Search Ctrl K")
    with page.expect_event("pageerror") as error:
        search.click()
    assert "search-dialog.js" in str(error.value)
    dialog = page.get_by_role("dialog", name="Search conversations")
    expect(dialog).to_be_hidden()
    search.click()
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("combobox", name="Search conversations")).to_be_focused()
