"""Knowledge bases in the page: a signed-in user opens "Knowledge", makes a
base, adds a document and watches it become ready, chooses the base for the
conversation, and asks a question whose answer cites a passage: ``[1]`` is a
link that opens the passage under the answer. The sources are kept with the
answer: after a reload ``[1]`` still opens its passage, the server's copy
holds them, another device of the user shows them, so does an export
imported into another browser, and a share link's page links ``[1]`` to its
passage. axe finds
no violation with the dialog open, nor with the sources on screen."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, WATCH_CSP, Chat, Relay, next_client_address
from tests.browser.test_accessibility import AXE, axe_violations
from tests.browser.test_transfer import choose_file, download, sidebar
from tests.harness import ROOT, EmulatorControl, Runner, VectorsLog, start_runner

TOKEN = "ann-browser-token-5e1c9a7b3d"
QUESTION = "What is the secret ingredient of grandmother's soup?"
MANUAL = (
    "\n\n".join(
        f"Section {k}. The boiler of model {k} holds between 1.{k % 9} and 2 bar when cold."
        for k in range(12)
    )
    + "\n\nThe secret ingredient of grandmother's soup is smoked cardamom."
)


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Runner, EmulatorControl, VectorsLog]]:
    folder: Path = tmp_path_factory.mktemp("knowledge-site")
    vars_file = folder / "knowledge.vars"
    vars_file.write_text(f"API_KEYS=ann:{TOKEN}\n")
    ai = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
    vectors = VectorsLog(folder / "vectors.jsonl")
    env = {
        "EDGECHAT_AI_DELAY_MS": "0",
        "EDGECHAT_AI_SCRIPT": str(ai.script_path),
        "EDGECHAT_AI_LOG": str(ai.log_path),
        "EDGECHAT_VECTORS_LOG": str(vectors.log_path),
    }
    with start_runner(ROOT / "wrangler.toml", vars_file=vars_file, env=env) as runner:
        yield runner, ai, vectors


@pytest.fixture
def signed_in(browser: Any, new_chat: Any, served: tuple[Runner, Any, Any]) -> Iterator[Chat]:
    relay = Relay(served[0].base_url, next_client_address())
    context = browser.new_context()
    context.add_init_script(WATCH_CSP)
    context.add_init_script(f"localStorage.setItem('edgechat.token', {TOKEN!r})")
    chat: Chat = new_chat(url=relay.url, context=context)
    yield chat.open()
    relay.close()


def test_a_document_added_to_a_base_gets_a_question_a_cited_answer(
    signed_in: Chat,
    served: tuple[Runner, EmulatorControl, VectorsLog],
    browser: Any,
    new_chat: Any,
) -> None:
    _, ai, vectors = served
    page = signed_in.page
    page.get_by_role("button", name="Knowledge", exact=True).click()
    dialog = page.get_by_role("dialog", name="Knowledge")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_text("No knowledge base yet.")).to_be_visible()
    dialog.get_by_label("New base's name").fill("Manuals")
    dialog.get_by_role("button", name="Make a base").click()
    expect(dialog.get_by_text("Manuals", exact=True)).to_be_visible()
    dialog.locator("input[type=file]").set_input_files(
        files=[{"name": "manual.md", "mimeType": "text/markdown", "buffer": MANUAL.encode()}]
    )
    expect(dialog.get_by_text("manual.md: ready", exact=False)).to_be_visible(timeout=20_000)
    vectors.wait_until_applied()
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    assert axe_violations(signed_in) == []
    dialog.get_by_role("button", name="Use in this conversation").click()
    expect(dialog.get_by_role("button", name="In use")).to_have_attribute("aria-pressed", "true")
    dialog.get_by_role("button", name="Close").click()
    expect(page.locator("#knowledge-note")).to_contain_text("Manuals")

    ai.script(
        {"match": {"contains": "secret ingredient"}, "reply": {"content": "Smoked cardamom [1]."}}
    )
    answer = signed_in.ask(QUESTION)
    expect(answer).to_contain_text("Smoked cardamom")
    cite = answer.get_by_role("link", name="[1]")
    expect(cite).to_be_visible()
    cite.click()
    passage = answer.locator("details.source").first
    expect(passage).to_have_attribute("open", "")
    expect(passage).to_contain_text("manual.md")
    expect(passage).to_contain_text("cardamom")
    assert axe_violations(signed_in) == []
    assert signed_in.csp_violations() == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "knowledge.png"))

    # The sources are kept with the answer: after a reload (knowledge.js not
    # loaded), [1] still opens its passage.
    page.reload()
    page.locator("#input").wait_for()
    again = signed_in.last_answer()
    reopened = again.get_by_role("link", name="[1]")
    expect(reopened).to_be_visible(timeout=15_000)
    passage = again.locator("details.source").first
    expect(passage).not_to_have_attribute("open", "")
    reopened.click()
    expect(passage).to_have_attribute("open", "")
    expect(passage).to_contain_text("cardamom")
    assert signed_in.log.page_errors == []

    # The server's copy holds them (sync), and a share link's page links [1].
    site = served[0].base_url
    bearer = {"authorization": f"Bearer {TOKEN}"}
    kept = _kept_sources(site, bearer)
    assert [(s["n"], s["name"]) for s in kept["sources"]][:1] == [(1, "manual.md")]
    link = httpx.post(site + "/api/shares", json={"conversation": kept["id"]}, headers=bearer)
    assert link.status_code == 201, link.text
    shared = page.context.new_page()
    shared.goto(site + link.json()["url"])
    shared.get_by_role("link", name="[1]").click()
    expect(shared.locator("li:target")).to_contain_text("cardamom")
    shared.close()

    # Another device of the same user gets them with the conversation.
    phone = _signed_in_tab(browser, new_chat, site)
    conversations = phone.page.get_by_role("navigation", name="Conversations")
    conversations.get_by_role("button", name=QUESTION, exact=True).click(timeout=15_000)
    there = phone.last_answer()
    there.get_by_role("link", name="[1]").click()
    expect(there.locator("details.source").first).to_have_attribute("open", "")
    expect(there.locator("details.source").first).to_contain_text("cardamom")

    # An export imported into a browser with no identity shows them too.
    _, exported = download(signed_in, "Export as JSON")
    stranger: Chat = new_chat(url=site, context=browser.new_context()).open()
    choose_file(stranger, "knowledge.json", exported.encode())
    expect(sidebar(stranger).get_by_role("status")).to_have_text("Imported 1 conversation.")
    sidebar(stranger).get_by_role("button", name=QUESTION, exact=True).click()
    imported = stranger.last_answer()
    imported.get_by_role("link", name="[1]").click()
    expect(imported.locator("details.source").first).to_have_attribute("open", "")
    expect(imported.locator("details.source").first).to_contain_text("cardamom")

    # A new conversation asks no base until one is chosen for it.
    page.get_by_role("button", name="New chat").click()
    expect(page.locator("#knowledge-note")).to_be_hidden()


def _signed_in_tab(browser: Any, new_chat: Any, site: str) -> Chat:
    context = browser.new_context()
    context.add_init_script(f"localStorage.setItem('edgechat.token', {TOKEN!r})")
    chat: Chat = new_chat(url=site, context=context)
    return chat.open()


def _kept_sources(site: str, headers: dict[str, str], timeout: float = 20.0) -> dict[str, Any]:
    """The id of the server's conversation whose answer keeps sources, and them."""
    deadline = time.monotonic() + timeout
    while True:
        listed = httpx.get(site + "/api/conversations", params={"bodies": 1}, headers=headers)
        for item in listed.json()["conversations"]:
            for node in item["conversation"]["nodes"]:
                if node.get("stats", {}).get("sources"):
                    return {"id": item["id"], "sources": node["stats"]["sources"]}
        assert time.monotonic() < deadline, "the answer's sources never reached the server"
        time.sleep(0.05)
