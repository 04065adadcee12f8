"""Documents on the page: attached with the + button, described by the server
before they can be sent (a chip with the name, size and tokens), sent with the
question as file parts and shown on it; a refused file is named with the
server's rule and the question stays as typed. The emulator converts each
file from its bytes, so the model's input proves what arrived."""

from __future__ import annotations

import json
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.browser.test_accessibility import AXE, axe_violations
from tests.harness import ROOT, EmulatorControl
from tests.kit.documents import DOCX, PDF, XLSX, docx, pdf, xlsx

FILES = [
    ("report.pdf", PDF, pdf(["Revenue grew twelve percent"]), "Revenue grew twelve percent"),
    ("notes.docx", DOCX, docx("Ship on Friday"), "Ship on Friday"),
    ("stock.xlsx", XLSX, xlsx([["fruit", "count"], ["pear", "7"]]), "| pear | 7 |"),
    ("list.csv", "text/csv", b"city,people\nOslo,700000\n", "| Oslo | 700000 |"),
    ("memo.txt", "text/plain", "备忘录 memo text".encode(), "备忘录 memo text"),
]


def attach(chat: Chat, *files: tuple[str, str, bytes]) -> None:
    with chat.page.expect_file_chooser() as chooser:
        chat.button("Attach images or documents").click()
    chooser.value.set_files(
        files=[{"name": name, "mimeType": kind, "buffer": data} for name, kind, data in files]
    )


def tray(chat: Chat) -> Any:
    return chat.page.get_by_role("list", name="Attach images or documents")


def test_each_document_type_is_attached_described_and_asked_about(
    chat: Chat, ai: EmulatorControl
) -> None:
    for name, kind, data, text in FILES:
        ai.reset()
        attach(chat, (name, kind, data))
        chip = tray(chat).get_by_role("listitem").filter(has_text=name)
        expect(chip).to_contain_text("tokens")
        chat.ask(f"What is in {name}?")
        calls = [c for c in ai.wait_for_calls(3) if c["model"] != "toMarkdown"]
        sent = calls[-1]["inputs"]["messages"][-1]["content"]
        assert f'<document name="{name}">' in sent, name
        assert text in sent, name
        question = chat.page.get_by_role("article", name="You").last
        expect(question.get_by_role("list", name="Attached documents")).to_contain_text(name)
        expect(tray(chat).get_by_role("listitem")).to_have_count(0)
    # Earlier documents go again with the conversation, within MAX_DOCUMENTS
    # (2): the oldest turns are left out, not refused.
    last = json.dumps([c for c in ai.calls() if c["model"] != "toMarkdown"][-1]["inputs"])
    assert '<document name=\\"list.csv\\">' in last
    assert '<document name=\\"memo.txt\\">' in last
    assert "report.pdf" not in last


def test_a_refused_file_is_named_and_the_question_stays(chat: Chat, ai: EmulatorControl) -> None:
    chat.composer().fill("Keep this question")
    attach(chat, ("fake.pdf", PDF, b"this is no PDF"))
    expect(chat.page.get_by_role("alert")).to_contain_text(
        "fake.pdf was not attached: file is not a PDF: its bytes say otherwise."
    )
    expect(chat.composer()).to_have_value("Keep this question")
    expect(tray(chat).get_by_role("listitem")).to_have_count(0)
    assert [c for c in ai.calls() if c["model"] != "toMarkdown"] == []


def test_a_document_can_be_removed_before_sending(chat: Chat, ai: EmulatorControl) -> None:
    attach(chat, ("memo.txt", "text/plain", b"first memo"))
    expect(tray(chat).get_by_role("listitem")).to_have_count(1)
    chat.button("Remove memo.txt").click()
    expect(tray(chat).get_by_role("listitem")).to_have_count(0)
    chat.ask("No document now")
    (call,) = ai.wait_for_calls(1)
    assert call["inputs"]["messages"][-1]["content"] == "No document now"


def test_document_chips_pass_axe_in_light_and_dark(new_chat: Any) -> None:
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    for scheme in ("light", "dark"):
        chat: Chat = new_chat(color_scheme=scheme).open()
        attach(chat, ("notes.docx", DOCX, docx("Ship on Friday")))
        expect(tray(chat).get_by_role("listitem")).to_contain_text("tokens")
        assert axe_violations(chat) == []
        chat.ask("Summarise")
        expect(chat.page.get_by_role("list", name="Attached documents")).to_be_visible()
        chat.page.screenshot(path=str(ROOT / "artifacts" / f"documents-{scheme}.png"))
        assert axe_violations(chat) == []
