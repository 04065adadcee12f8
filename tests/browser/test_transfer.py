"""Export a conversation as Markdown or JSON, all of them as JSON; import
JSON into another browser; a broken or hostile file is refused with a
message and changes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.harness import EmulatorControl

STORE = "edgechat.conversations.v2"


def sidebar(chat: Chat) -> Any:
    return chat.page.get_by_role("navigation", name="Conversations")


def download(chat: Chat, name: str) -> tuple[str, str]:
    """Clicks the export button `name`; returns the file's suggested name and text."""
    with chat.page.expect_download() as info:
        sidebar(chat).get_by_role("button", name=name).click()
    path = info.value.path()
    return info.value.suggested_filename, Path(path).read_text(encoding="utf-8")


def choose_file(chat: Chat, name: str, data: bytes) -> None:
    with chat.page.expect_file_chooser() as chooser:
        sidebar(chat).get_by_role("button", name="Import chats (JSON)…").click()
    chooser.value.set_files(files=[{"name": name, "mimeType": "application/json", "buffer": data}])


def two_conversations(chat: Chat, ai: EmulatorControl) -> None:
    ai.script(
        {"match": {"contains": "poem"}, "times": 1, "reply": {"content": "Roses are red."}},
        {"match": {"contains": "poem"}, "reply": {"content": "```python\nprint('violets')\n```"}},
    )
    chat.ask("Write a poem")
    chat.last_answer().get_by_role("button", name="Regenerate").click()
    chat.wait_idle()
    chat.button("New chat").click()
    chat.ask("你好，世界")  # noqa: RUF001


def test_export_markdown_json_and_all_then_import_into_another_browser(
    chat: Chat, new_chat: Any, ai: EmulatorControl
) -> None:
    two_conversations(chat, ai)
    # The chat on screen is the Chinese one.
    name, markdown = download(chat, "Export as Markdown")
    assert name.startswith("edgechat-你好-世界-")
    assert name.endswith(".md")
    assert markdown.startswith("# 你好，世界\n\n## You\n\n你好，世界\n\n## Assistant\n\n")  # noqa: RUF001

    sidebar(chat).get_by_role("button", name="Write a poem", exact=True).click()
    name, markdown = download(chat, "Export as Markdown")
    # The thread on screen: the regenerated answer, its code as written.
    assert markdown == (
        "# Write a poem\n\n## You\n\nWrite a poem\n\n## Assistant\n\n"
        "```python\nprint('violets')\n```\n"
    )
    name, text = download(chat, "Export as JSON")
    assert name.endswith(".json")
    one = json.loads(text)
    assert one["format"] == "edgechat"
    assert [c["title"] for c in one["conversations"]] == ["Write a poem"]
    answers = one["conversations"][0]["next"][0]["next"]
    assert [a["content"] for a in answers] == ["Roses are red.", "```python\nprint('violets')\n```"]

    _, everything = download(chat, "Export all chats (JSON)")
    assert {c["title"] for c in json.loads(everything)["conversations"]} == {
        "Write a poem",
        "你好，世界",  # noqa: RUF001
    }

    # Another browser, with its own storage.
    other: Chat = new_chat().open()
    expect(sidebar(other).get_by_role("listitem")).to_have_count(0)
    choose_file(other, "export.json", everything.encode())
    expect(sidebar(other).get_by_role("status")).to_have_text("Imported 2 conversations.")
    expect(sidebar(other).get_by_role("listitem")).to_have_count(2)
    sidebar(other).get_by_role("button", name="Write a poem", exact=True).click()
    answer = other.last_answer()
    expect(answer.locator("pre code")).to_have_text("print('violets')")
    expect(answer.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    answer.get_by_role("button", name="Previous version").click()
    expect(answer.locator(".answer")).to_have_text("Roses are red.")
    other.page.reload()
    expect(sidebar(other).get_by_role("listitem")).to_have_count(2)
    assert chat.csp_violations() == []
    assert other.csp_violations() == []
    assert chat.log.page_errors == other.log.page_errors == []


def _export(chat: Chat, ai: EmulatorControl) -> dict[str, Any]:
    chat.ask("Keep this")
    return json.loads(download(chat, "Export all chats (JSON)")[1])


def _with(change: Any) -> Any:
    def make(data: dict[str, Any]) -> bytes:
        change(data)
        return json.dumps(data).encode()

    return make


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


HOSTILE = [
    pytest.param(
        lambda data: b"{not json", "Not imported: the file is not valid JSON.", id="not-json"
    ),
    pytest.param(
        lambda data: json.dumps({"conversations": data["conversations"]}).encode(),
        "Not imported: this is not an edgechat export.",
        id="not-an-export",
    ),
    pytest.param(
        _with(lambda d: d["conversations"][0]["next"][0].update(role="system")),
        "Not imported: unexpected or invalid data at $.conversations[0].next[0].role.",
        id="system-role",
    ),
    pytest.param(
        lambda data: (
            json.dumps(data)
            .replace('"role": "user"', '"__proto__": {"admin": true}, "role": "user"', 1)
            .encode()
        ),
        "Not imported: unexpected or invalid data at $.conversations[0].next[0].__proto__.",
        id="proto",
    ),
    pytest.param(
        _with(lambda d: d["conversations"].append({**d["conversations"][0], "script": "<img>"})),
        "Not imported: unexpected or invalid data at $.conversations[1].script.",
        id="unknown-key-in-a-later-conversation",
    ),
    pytest.param(
        # A message is at level 3 (versions are no level), its "x" at 4: level 33 is 29 [0]s down.
        _with(lambda d: d["conversations"][0]["next"][0].update(x=_nested(40))),
        "Not imported: the data nests more than 32 levels deep at "
        f"$.conversations[0].next[0].x{'[0]' * 29}.",
        id="nested-too-deep",
    ),
    pytest.param(
        lambda data: b" " * (5 * 1024 * 1024 + 1),
        "Not imported: the file is larger than 5 MB.",
        id="too-large",
    ),
]


@pytest.mark.parametrize(("make", "message"), HOSTILE)
def test_a_broken_or_hostile_file_is_refused_and_changes_nothing(
    chat: Chat, ai: EmulatorControl, make: Any, message: str
) -> None:
    data = _export(chat, ai)
    before = chat.page.evaluate(f"localStorage.getItem({STORE!r})")
    choose_file(chat, "hostile.json", make(data))
    expect(sidebar(chat).get_by_role("status")).to_have_text(message)
    assert chat.page.evaluate(f"localStorage.getItem({STORE!r})") == before
    expect(sidebar(chat).get_by_role("listitem")).to_have_count(1)
    assert chat.page.evaluate("({}).admin") is None
    chat.page.reload()
    expect(sidebar(chat).get_by_role("listitem")).to_have_count(1)
    assert chat.log.page_errors == []


def test_an_import_nests_no_deeper_than_the_servers_limits_say(
    new_chat: Any, ai: EmulatorControl
) -> None:
    chat: Chat = new_chat()
    real = httpx.get(chat.url + "/api/limits").json()
    # A deployment that says 4: an export's stats.usage is at level 5.
    limits = {**real, "max_json_depth": 4}
    chat.page.route(
        "**/api/limits",
        lambda route: route.fulfill(
            status=200, content_type="application/json", body=json.dumps(limits)
        ),
    )
    chat.open()
    data = _export(chat, ai)
    before = chat.page.evaluate(f"localStorage.getItem({STORE!r})")
    choose_file(chat, "export.json", json.dumps(data).encode())
    expect(sidebar(chat).get_by_role("status")).to_have_text(
        "Not imported: the data nests more than 4 levels deep at "
        "$.conversations[0].next[0].next[0].stats.usage."
    )
    assert chat.page.evaluate(f"localStorage.getItem({STORE!r})") == before
    expect(sidebar(chat).get_by_role("listitem")).to_have_count(1)
