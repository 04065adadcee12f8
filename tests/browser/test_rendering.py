"""Answers render as safe Markdown; hostile text runs nothing; CJK arrives whole."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import CLOSE_EVENT, Chat, done, meta
from tests.harness import EmulatorControl
from tests.kit.upstream import native_chunk, openai_chunk, openai_end

XSS_ANSWER = """Here are some tricks:

<img src=x onerror="window.__pwned = 'img'">

<script>window.__pwned = 'script'</script>

[click me](javascript:window.__pwned='link')

[also me](  JaVaScRiPt:window.__pwned='link2' )

<a href="javascript:window.__pwned='anchor'">raw anchor</a>

<svg onload="window.__pwned='svg'"></svg>

![tracker](https://tracker.example/pixel.png)

[a real link](https://example.com/docs) and **bold <b>not html</b>**
"""


def test_hostile_answers_and_messages_render_as_text_and_run_nothing(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    ai.script({"reply": {"content": XSS_ANSWER}})
    chat.ask("<img src=y onerror=\"window.__pwned='user'\"> show me tricks")
    answer = chat.last_answer().locator(".answer")

    # The markup is shown as text…
    expect(answer).to_contain_text("""<img src=x onerror="window.__pwned = 'img'">""")
    expect(answer).to_contain_text("<script>window.__pwned = 'script'</script>")
    expect(page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "<img src=y onerror=\"window.__pwned='user'\"> show me tricks"
    )
    # …and builds no element and runs nothing, also after a moment.
    page.wait_for_timeout(300)
    assert page.evaluate("window.__pwned") is None
    messages = page.locator("#messages")
    for tag in ("img", "script", "svg", "iframe", "b"):
        expect(messages.locator(tag)).to_have_count(0)
    # javascript: links are not links.
    expect(answer.get_by_text("click me")).to_be_visible()
    links = answer.get_by_role("link")
    hrefs = [link.get_attribute("href") or "" for link in links.all()]
    assert hrefs == ["https://tracker.example/pixel.png", "https://example.com/docs"]
    for link in links.all():
        assert link.get_attribute("rel") == "noopener noreferrer"
    # Images are never fetched: the picture is a link the reader may open.
    expect(answer.get_by_role("link", name="🖼 tracker")).to_be_visible()
    assert not [url for url in chat.log.requests if "example" in url]
    answer.get_by_text("click me").click()
    answer.get_by_text("raw anchor").click()
    assert page.evaluate("window.__pwned") is None
    assert chat.log.page_errors == []


MARKDOWN_ANSWER = """### Fruit facts

Apples and pears are *pomes*; see [Wikipedia](https://en.wikipedia.org/wiki/Pome).

- apples
- pears
  - nashi
- quinces

1. wash
2. cut

```python
def share(fruit):
    return fruit.split("|")
```

Use `share()` sparingly.

| fruit | colour | price |
|:------|:------:|------:|
| apple | red | 1.20 |
| pear | `green` | 0.90 |

> Eat well.
"""


def test_markdown_renders_lists_code_with_a_copy_button_links_and_tables(
    chat: Chat, ai: EmulatorControl
) -> None:
    chat.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=chat.url)
    ai.script({"reply": {"content": MARKDOWN_ANSWER}})
    answer = chat.ask("Fruit?").locator(".answer")

    expect(answer.get_by_role("heading", name="Fruit facts")).to_be_visible()
    expect(answer.locator("em")).to_have_text("pomes")
    bullets = answer.get_by_role("list").first
    expect(bullets.locator(":scope > li")).to_have_count(3)
    expect(bullets.get_by_role("list").get_by_role("listitem")).to_have_text(["nashi"])
    expect(answer.locator("ol > li")).to_have_text(["wash", "cut"])

    link = answer.get_by_role("link", name="Wikipedia")
    expect(link).to_have_attribute("href", "https://en.wikipedia.org/wiki/Pome")
    expect(link).to_have_attribute("rel", "noopener noreferrer")
    expect(link).to_have_attribute("target", "_blank")

    code = answer.locator("pre code")
    source = 'def share(fruit):\n    return fruit.split("|")'
    expect(code).to_have_text(source)
    expect(answer.locator("p code")).to_have_text("share()")
    answer.get_by_role("button", name="Copy").click()
    expect(answer.get_by_role("button", name="Copied")).to_be_visible()
    assert chat.page.evaluate("navigator.clipboard.readText()") == source

    table = answer.get_by_role("table")
    expect(table.get_by_role("columnheader")).to_have_text(["fruit", "colour", "price"])
    expect(table.get_by_role("row")).to_have_count(3)
    cells = ["apple", "red", "1.20", "pear", "green", "0.90"]
    expect(table.get_by_role("cell")).to_have_text(cells)
    expect(table.get_by_role("cell", name="1.20")).to_have_class("al-right")
    expect(answer.locator("blockquote")).to_have_text("Eat well.")


@pytest.mark.parametrize(
    ("alias", "reasoning"),
    [pytest.param("glm", "先想一想……", id="glm"), pytest.param("llama", None, id="llama")],
)
def test_chinese_split_inside_multibyte_characters_renders_correctly(
    chat: Chat, ai: EmulatorControl, alias: str, reasoning: str | None
) -> None:
    # Full-width punctuation on purpose: three bytes each in UTF-8. The
    # emulator cuts the model's byte stream after every byte, and the page
    # reads what edgechat relays one byte at a time.
    text = "你好，世界！边缘计算让模型离用户更近。😀 Emoji and 中文 mixed."  # noqa: RUF001
    ai.script({"reply": {"content": text, "reasoning": reasoning, "split_bytes": 1}})
    chat.model_picker().select_option(alias)
    chat.read_one_byte_at_a_time()
    answer = chat.ask("用中文回答")
    expect(answer.locator(".answer")).to_have_text(text)
    if reasoning is not None:
        answer.locator("summary").click()
        expect(answer.locator(".reasoning-body")).to_have_text(reasoning)
    expect(answer.get_by_role("alert")).to_have_count(0)
    assert "\ufffd" not in answer.inner_text()


def test_the_page_reader_reassembles_events_and_characters_cut_at_every_byte(
    chat: Chat,
) -> None:
    """The page's SSE reader and its reading of the model's events, against a
    body delivered one byte per read: CRLF and CR line ends, comments, both
    upstream shapes, [DONE], an upstream cut mid-line, an unfinished last event."""
    body = (
        'event: meta\r\ndata: {"request_id":"r1","model":"m"}\r\n\r\n'
        ": ping\n\n"
        + openai_chunk(reasoning="想一想")
        + openai_chunk(content="你好").replace("\n", "\r\n")
        + native_chunk("🙂 world").replace("\n", "\r")
        + "".join(openai_end())
        + 'data: {"response":"cut mid-li'
        + CLOSE_EVENT
        + 'event: done\ndata: {"model":"m"}\n\n'
        + 'data: {"response":"unfinished"}\n'
    )
    result = chat.page.evaluate(
        """async (text) => {
          const { modelDelta, readEvents } = await import("/js/sse.js");
          const bytes = new TextEncoder().encode(text);
          let i = 0;
          const body = new ReadableStream({
            pull(controller) {
              if (i < bytes.length) controller.enqueue(bytes.slice(i, ++i));
              else controller.close();
            },
          });
          const events = [];
          await readEvents(body, (name, data) =>
            events.push(name === "message" ? [name, modelDelta(data)] : [name, data]),
          );
          return events;
        }""",
        body,
    )
    nothing = {"reasoning": "", "content": ""}
    assert result == [
        ["meta", {"request_id": "r1", "model": "m"}],
        ["message", {"reasoning": "想一想", "content": ""}],
        ["message", {"reasoning": "", "content": "你好"}],
        ["message", {"reasoning": "", "content": "🙂 world"}],
        ["message", nothing],  # the choice that finishes, with the usage
        ["message", nothing],  # the binding's {"response": "", "usage": …}
        ["done", {"model": "m"}],
    ]


# One block per language of issue 12, with what each must colour as a keyword.
CODE_BLOCKS = [
    ("python", "Python", "def area(r):\n    return 3.14 * r ** 2  # pi", "def"),
    ("js", "JavaScript", "const n = 42; // answer", "const"),
    ("ts", "TypeScript", "interface User { name: string }", "interface"),
    ("json", "JSON", '{"ok": true, "n": 1}', None),
    ("bash", "Bash", 'for f in *.txt; do echo "$f"; done', "for"),
    ("html", "HTML", '<a href="/x">link</a>', None),
    ("css", "CSS", "@media print { .a { color: red; } }", "@media"),
    ("sql", "SQL", "SELECT id FROM users WHERE n > 1;", "SELECT"),
    ("go", "Go", "func main() { var x int = 1 }", "func"),
    ("rust", "Rust", "fn main() { let v = 1; }", "fn"),
    ("java", "Java", "public class A { }", "public"),
    ("c", "C", "int main(void) { return 0; }", "return"),
    ("cpp", "C++", "auto p = nullptr; // c++", "auto"),
]


def test_code_is_highlighted_by_language_with_its_name_in_light_and_dark(
    new_chat: Any, ai: EmulatorControl
) -> None:
    source = "\n\n".join(f"```{fence}\n{code}\n```" for fence, _, code, _ in CODE_BLOCKS)
    colours = {}
    for scheme in ("light", "dark"):
        chat: Chat = new_chat(color_scheme=scheme).open()
        ai.script({"reply": {"content": source}})
        answer = chat.ask("Code in every language").locator(".answer")
        blocks = answer.locator(".code")
        expect(blocks).to_have_count(len(CODE_BLOCKS))
        expect(blocks.locator(".code-lang")).to_have_text([name for _, name, _, _ in CODE_BLOCKS])
        for k, (_, _, code, keyword) in enumerate(CODE_BLOCKS):
            block = blocks.nth(k)
            expect(block.locator("pre code")).to_have_text(code)
            expect(block.locator("[class^=tok-]").first).to_be_visible()
            if keyword:
                expect(block.locator(".tok-kw").first).to_have_text(keyword)
        expect(blocks.nth(0).locator(".tok-com")).to_have_text("# pi")
        expect(blocks.nth(0).locator(".tok-num").first).to_have_text("3.14")
        expect(blocks.nth(3).locator(".tok-lit")).to_have_text("true")
        expect(blocks.nth(5).locator(".tok-tag").first).to_have_text("<a")
        expect(blocks.nth(1).locator(".tok-com")).to_have_text("// answer")
        colours[scheme] = answer.evaluate(
            """a => Object.fromEntries(["kw", "str", "com", "num"].map((k) => [k,
                getComputedStyle(a.querySelector(".tok-" + k)).color]).concat([["text",
                getComputedStyle(a.querySelector("pre code")).color]]))"""
        )
        assert chat.csp_violations() == []
    for scheme in ("light", "dark"):
        # Each kind has its own colour, none the plain text's.
        kinds = [colours[scheme][k] for k in ("kw", "str", "com", "num")]
        assert len(set(kinds)) == 4, colours
        assert colours[scheme]["text"] not in kinds
    assert colours["light"]["kw"] != colours["dark"]["kw"]


def test_a_long_answer_renders_incrementally_keeping_the_closed_blocks(chat: Chat) -> None:
    """Closed blocks are rendered once: their elements stay the same while
    the answer goes on (the old page rebuilt the whole answer per frame)."""
    words = [
        "## Heading\n\n",
        "First",
        " paragraph.\n\n",
        "Second paragraph\n",
        "goes",
        " on.\n\n",
        "Third.",
    ]
    events = [openai_chunk(content=word) for word in words]
    chat.serve_chat(meta(), *events, *openai_end(), done())
    chat.hold_chat_events()
    chat.send("Long answer")
    answer = chat.last_answer().locator(".answer")
    # A block is closed once a whole line follows its blank line.
    chat.release_events(1 + 4)  # meta, up to "Second paragraph\n"
    expect(answer.locator("p").last).to_have_text("Second paragraph")
    answer.locator("h4").evaluate("h => { h.dataset.seen = 'yes'; }")
    answer.locator("p").first.evaluate("p => { p.dataset.seen = 'yes'; }")
    answer.locator("p").last.evaluate("p => { p.dataset.seen = 'yes'; }")
    chat.release_all_events()
    chat.wait_idle()
    expect(answer.locator("p")).to_have_text(
        ["First paragraph.", "Second paragraphgoes on.", "Third."]  # <br> has no text
    )
    expect(answer.locator("h4")).to_have_attribute("data-seen", "yes")
    expect(answer.locator("p").first).to_have_attribute("data-seen", "yes")
    # The open block was rendered again as it grew.
    expect(answer.locator("p").nth(1)).not_to_have_attribute("data-seen", "yes")
