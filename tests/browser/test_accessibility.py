"""A real checker: axe-core (pinned from npm, a test-only dependency injected
from node_modules, never served) finds no WCAG 2.1 A/AA violation with a
conversation on screen, in light and dark, on a desktop and a phone, nor in
the search, nor with images and a flagged answer on screen."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, Chat, Guarded
from tests.browser.test_images import KIMI, WIDE, attach, previews
from tests.browser.test_moderation import GUARD
from tests.harness import ROOT, EmulatorControl
from tests.kit.upstream import openai_chunk, openai_end

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]

ANSWER = """Here is a comparison, with [a link](https://example.com/docs):

| model | strength |
|:------|:---------|
| GLM | fast |

```python
def area(r: float) -> float:
    return 3.14 * r ** 2  # pi r squared
```

> A quote, and `inline code`.
"""
FLAGGED = "First, wedge the latch with a credit card."


def axe_violations(chat: Chat) -> list[str]:
    """Runs axe-core in the page (through DevTools, so the page's CSP stays as it is)."""
    chat.page.evaluate(AXE.read_text(encoding="utf-8") + "\n;0")
    result = chat.page.evaluate(
        "tags => axe.run(document, { runOnly: { type: 'tag', values: tags } })", TAGS
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — "
        + "; ".join(" ".join(node["target"]) for node in v["nodes"][:5])
        for v in result["violations"]
    ]


def conversation(chat: Chat, ai: EmulatorControl) -> None:
    chunks = [openai_chunk(reasoning="Compare, then show code."), openai_chunk(content=ANSWER)]
    ai.script({"chunks": [*chunks, *openai_end(20, 60)]})
    chat.ask("Compare the models")
    # A second version of the answer, so the version control is on screen.
    chat.last_answer().get_by_role("button", name="Regenerate").click()
    chat.wait_idle()
    expect(chat.last_answer().get_by_role("group", name="Version 2 of 2")).to_be_visible()
    chat.ask("Thanks")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 800}, {"width": 360, "height": 740}],
    ids=["desktop", "phone"],
)
def test_axe_finds_no_wcag_aa_violation_with_a_conversation_on_screen(
    new_chat: Any, ai: EmulatorControl, scheme: str, viewport: dict[str, int]
) -> None:
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    chat: Chat = new_chat(color_scheme=scheme, viewport=viewport).open()
    conversation(chat, ai)
    assert axe_violations(chat) == []
    assert chat.csp_violations() == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_the_search_and_an_import_message(
    new_chat: Any, ai: EmulatorControl, scheme: str
) -> None:
    chat: Chat = new_chat(color_scheme=scheme).open()
    conversation(chat, ai)
    sidebar = chat.page.get_by_role("navigation", name="Conversations")
    with chat.page.expect_file_chooser() as chooser:
        sidebar.get_by_role("button", name="Import chats (JSON)…").click()
    chooser.value.set_files(
        files=[{"name": "x.json", "mimeType": "application/json", "buffer": b"{"}]
    )
    expect(sidebar.get_by_role("status")).to_contain_text("Not imported")
    chat.page.keyboard.press("Control+k")
    chat.page.get_by_role("combobox", name="Search conversations").fill("models")
    results = chat.page.get_by_role("listbox", name="Results")
    expect(results.get_by_role("option").first.locator("mark")).to_be_visible()
    assert axe_violations(chat) == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    ("size", "viewport"),
    [("desktop", {"width": 1280, "height": 800}), ("phone", {"width": 360, "height": 740})],
)
def test_axe_finds_no_violation_with_images_a_flagged_answer_and_a_warning(
    new_chat: Any, guarded: Guarded, scheme: str, size: str, viewport: dict[str, int]
) -> None:
    """A question's thumbnail, a flagged answer's notice, the composer's
    previews and the warning that the model cannot see them; screenshots of
    each for review (artifacts/)."""
    guarded.ai.script(
        {
            "match": {"model": GUARD, "any_contains": "credit card"},
            "reply": {"unsafe": ["S2", "S7"]},
        },
        {"match": {"model": KIMI, "contains": "locked door"}, "reply": {"content": FLAGGED}},
    )
    chat: Chat = new_chat(url=guarded.url, color_scheme=scheme, viewport=viewport).open()
    page = chat.page
    page.emulate_media(reduced_motion="reduce")
    chat.model_picker().select_option("kimi")
    attach(chat, ("wide.png", WIDE))
    chat.ask("What is in it?")
    chat.ask("How do I open a locked door?")
    expect(chat.last_answer().get_by_role("button", name="Show anyway")).to_be_visible()
    chat.model_picker().select_option("glm")
    attach(chat, ("wide.png", WIDE))
    expect(page.get_by_role("button", name="Switch to Kimi K2.6")).to_be_visible()
    expect(previews(chat).first).to_have_js_property("complete", True)
    expect(page.get_by_role("article", name="You").first.get_by_role("img")).to_have_js_property(
        "complete", True
    )
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=ARTIFACTS / f"page-images-{scheme}-{size}.png")
    assert axe_violations(chat) == []
    chat.last_answer().get_by_role("button", name="Show anyway").click()
    chat.last_answer().scroll_into_view_if_needed()
    page.screenshot(path=ARTIFACTS / f"page-flagged-{scheme}-{size}.png")
    assert axe_violations(chat) == []
    assert chat.csp_violations() == []
