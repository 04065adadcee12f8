"""Answers as the models write them (issue 20): math by KaTeX, Mermaid
diagrams drawn in a sandboxed frame (and a broken one showing its source and
why), code highlighted by highlight.js with its language named or detected,
task lists; the libraries load only when an answer needs them, the page's CSP
stays strict, and axe finds nothing in light or dark."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, Chat
from tests.browser.test_accessibility import axe_violations
from tests.harness import EmulatorControl
from tests.kit.upstream import openai_chunk, openai_end

# A hang guard for what the page does after an answer ends (fetching KaTeX or
# Mermaid, drawing in the frame's process): a loaded machine takes seconds.
LATER = 30_000

RICH_ANSWER = r"""### Energy and a loop

Einstein wrote $E = mc^2$; the area under $y = x$ is

$$
\int_0^1 x\,dx = \frac12
$$

and GLM also writes \(a^2 + b^2 = c^2\) and

\[
\sum_{k=1}^{n} k = \frac{n(n+1)}{2}
\]

A coffee costs $5 and a cake $10, which is no formula.

```mermaid
flowchart LR
  Ask[Ask a question] --> Stream[Stream the answer]
  Stream --> Read[Read it]
```

```mermaid
flowchart LR
  A -->
```

```
def tokens(stream):
    for chunk in stream:
        yield chunk.decode("utf-8")
```

```haskell
main :: IO ()
main = putStrLn "hello"
```

- [x] render math
- [ ] draw diagrams

| step | cost |
|:-----|-----:|
| parse | 0.1 ms |

Done.
"""


def ask_rich(chat: Chat, ai: EmulatorControl, text: str = RICH_ANSWER) -> Any:
    """Streams `text` word by word (the page renders it as it comes) and waits for the end."""
    words = text.split(" ")
    chunks = [openai_chunk(content=(" " if k else "") + word) for k, word in enumerate(words)]
    ai.script({"chunks": [*chunks, *openai_end(20, 200)]})
    return chat.ask("Show me everything").locator(".answer")


def test_math_diagrams_and_code_render_with_the_csp_strict(chat: Chat, ai: EmulatorControl) -> None:
    answer = ask_rich(chat, ai)
    page = chat.page

    # Math: KaTeX for each of the four delimiters; $5 … $10 stays money.
    maths = answer.locator(".math")
    expect(maths).to_have_count(5)
    expect(answer.locator(".math[data-typeset=ok]")).to_have_count(5, timeout=LATER)
    expect(answer.locator(".math .katex")).to_have_count(5)
    expect(answer.locator(".math-display .katex-display")).to_have_count(2)
    expect(answer.locator("annotation").first).to_have_text("E = mc^2")
    expect(answer.locator("annotation").nth(2)).to_contain_text(r"\int_0^1 x\,dx = \frac12")
    expect(
        answer.get_by_text("A coffee costs $5 and a cake $10, which is no formula.")
    ).to_be_visible()

    # The diagram: an image of Mermaid's SVG, its source one click away.
    diagrams = answer.locator(".code.diagram")
    expect(diagrams).to_have_count(2)
    good = diagrams.first
    expect(good).to_have_attribute("data-drawn", "ok", timeout=LATER)
    image = good.get_by_role("img")
    expect(image).to_be_visible()
    assert image.get_attribute("src").startswith("data:image/svg+xml")
    assert image.evaluate("i => i.naturalWidth") > 50
    expect(good.locator("pre")).to_be_hidden()
    good.get_by_role("button", name="Source").click()
    expect(good.locator("pre code")).to_contain_text("Ask[Ask a question] --> Stream")
    expect(image).to_be_hidden()
    good.get_by_role("button", name="Diagram").click()
    expect(image).to_be_visible()

    # The broken one: its source and a short reason.
    broken = diagrams.nth(1)
    expect(broken).to_have_attribute("data-drawn", "error", timeout=LATER)
    expect(broken.locator("pre code")).to_have_text("flowchart LR\n  A -->")
    expect(broken.locator("pre")).to_be_visible()
    expect(broken.locator(".diagram-error")).to_contain_text("The diagram could not be drawn:")
    expect(broken.get_by_role("img")).to_have_count(0)

    # Code: a fence without a language is detected; one not bundled is loaded.
    blocks = answer.locator(".code:not(.diagram)")
    expect(blocks).to_have_count(2)
    expect(blocks.first.locator("code")).to_have_attribute("data-detected", "python", timeout=LATER)
    expect(blocks.first.locator(".code-lang")).to_have_text("Python")
    expect(blocks.first.locator(".tok-kw").first).to_have_text("def")
    expect(blocks.nth(1).locator(".code-lang")).to_have_text("Haskell", timeout=LATER)
    expect(blocks.nth(1).locator(".tok-str")).to_have_text('"hello"')

    # Task list and table.
    expect(answer.get_by_role("img", name="done")).to_have_text("☑")
    expect(answer.get_by_role("img", name="to do")).to_have_text("☐")
    expect(answer.get_by_role("cell", name="0.1 ms")).to_have_class("al-right")

    # Nothing outside edgechat, no CSP violation (page or frame), no error.
    assert chat.csp_violations() == []
    frame = page.frame_locator("iframe.diagram-frame")
    assert frame.locator("body").evaluate("b => (window.__csp || []).length") == 0
    assert chat.log.page_errors == []
    assert all(url.startswith(chat.url) or url.startswith("data:") for url in chat.log.requests)
    ARTIFACTS.mkdir(exist_ok=True)
    answer.screenshot(path=ARTIFACTS / "page-rich-answer-light.png")


def test_the_libraries_load_only_when_an_answer_needs_them(chat: Chat, ai: EmulatorControl) -> None:
    ai.script({"reply": {"content": "Plain words, **bold**, and `code`."}})
    chat.ask("Hello")
    loaded = " ".join(chat.log.requests)
    assert "/vendor/markdown-it.js" in loaded  # after the first paint
    for library in ("katex", "mermaid", "diagram.html", "/vendor/highlight/haskell"):
        assert library not in loaded, library
    answer = ask_rich(chat, ai)
    # Each library's work done is the event that its request was made: the
    # math typeset, the first diagram drawn, the Haskell block highlighted.
    expect(answer.locator(".math[data-typeset=ok]")).to_have_count(5, timeout=LATER)
    expect(answer.locator(".code.diagram").first).to_have_attribute(
        "data-drawn", "ok", timeout=LATER
    )
    haskell = answer.locator(".code:not(.diagram)").nth(1)
    expect(haskell.locator(".tok-str")).to_have_text('"hello"', timeout=LATER)
    loaded = " ".join(chat.log.requests)
    for library in (
        "katex/katex.js",
        "katex/katex.css",
        "mermaid.min.js",
        "/vendor/highlight/haskell.js",
    ):
        assert library in loaded, library


def test_copying_rendered_math_copies_its_latex(chat: Chat, ai: EmulatorControl) -> None:
    chat.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat.url)
    ai.script({"reply": {"content": "So $E = mc^2$ holds."}})
    answer = chat.ask("Energy?").locator(".answer")
    expect(answer.locator(".math[data-typeset=ok]")).to_have_count(1, timeout=LATER)
    answer.locator("p").evaluate(
        """p => { const r = document.createRange(); r.selectNodeContents(p);
                  const s = getSelection(); s.removeAllRanges(); s.addRange(r); }"""
    )
    chat.page.keyboard.press("Control+c")
    assert chat.page.evaluate("navigator.clipboard.readText()") == "So $E = mc^2$ holds."


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_violation_in_an_answer_with_math_diagrams_and_code(
    new_chat: Any, ai: EmulatorControl, scheme: str
) -> None:
    chat: Chat = new_chat(color_scheme=scheme).open()
    answer = ask_rich(chat, ai)
    expect(answer.locator(".math[data-typeset=ok]")).to_have_count(5, timeout=LATER)
    expect(answer.locator(".code.diagram").first).to_have_attribute(
        "data-drawn", "ok", timeout=LATER
    )
    expect(answer.locator(".code.diagram").nth(1)).to_have_attribute(
        "data-drawn", "error", timeout=LATER
    )
    expect(answer.locator("code[data-detected]")).to_have_count(1, timeout=LATER)
    # The named language loaded on demand is highlighted too: axe checks its colours' contrast.
    haskell = answer.locator(".code:not(.diagram)").nth(1)
    expect(haskell.locator(".code-lang")).to_have_text("Haskell", timeout=LATER)
    expect(haskell.locator(".tok-str")).to_have_text('"hello"')
    ARTIFACTS.mkdir(exist_ok=True)
    chat.page.screenshot(path=ARTIFACTS / f"page-rich-{scheme}.png", full_page=True)
    assert axe_violations(chat) == []
    assert chat.csp_violations() == []
