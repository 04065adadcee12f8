"""Read aloud on the page: an answer is spoken piece by piece (a paragraph
each, the next asked for while one plays) through /api/speech, Markdown read
as prose by the server, and Stop ends it at once: the audio pauses and no
further piece is asked for. The emulator's MeloTTS makes 60 ms of audio a
character, so a long paragraph plays long enough to be stopped."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.browser.test_accessibility import AXE, axe_violations
from tests.harness import EmulatorControl

MELOTTS = "@cf/myshell-ai/melotts"
FIRST = "The **first** paragraph is long enough to be heard for a while. " * 3
ANSWER = f"{FIRST.strip()}\n\n第二段是中文。\n\nThe third paragraph, never read."


# The page's one <audio>: playing, and past its first sample.
PLAYING = (
    "() => { const a = document.getElementById('speaker'); return !a.paused && a.currentTime > 0; }"
)


def playing(chat: Chat) -> bool:
    return bool(chat.page.evaluate(PLAYING))


def test_an_answer_is_read_aloud_in_pieces_and_stopped(chat: Chat, ai: EmulatorControl) -> None:
    ai.script({"match": {"model": "@cf/zai-org/glm-4.7-flash"}, "reply": {"content": ANSWER}})
    answer = chat.ask("Tell me three things")
    read = answer.get_by_role("button", name="Read aloud")
    read.click()
    stop = answer.get_by_role("button", name="Stop reading")
    expect(stop).to_have_attribute("aria-pressed", "true")
    chat.page.wait_for_function(PLAYING)
    # The first piece plays while the second is made.
    first, second = ai.wait_for_calls(3)[1:3]
    assert first["inputs"] == {
        "prompt": FIRST.replace("**", "").strip(),
        "lang": "en",
    }
    assert second["inputs"] == {"prompt": "第二段是中文。", "lang": "zh"}
    stop.click()
    expect(answer.get_by_role("button", name="Read aloud")).to_have_attribute(
        "aria-pressed", "false"
    )
    assert not playing(chat)
    # Nothing more is asked for: a later question's call comes after the two pieces only.
    ai.script({"reply": {"content": "ok"}})
    chat.ask("Next")
    models = [c["model"] for c in ai.calls()]
    assert models.count(MELOTTS) == 2
    assert models[-1] != MELOTTS


def test_read_aloud_passes_axe_in_light_and_dark(new_chat: Any, ai: EmulatorControl) -> None:
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    for scheme in ("light", "dark"):
        chat: Chat = new_chat(color_scheme=scheme).open()
        answer = chat.ask("Hello")
        answer.get_by_role("button", name="Read aloud").click()
        expect(answer.get_by_role("button", name="Stop reading")).to_be_visible()
        assert axe_violations(chat) == []
        answer.get_by_role("button", name="Stop reading").click()
        expect(answer.get_by_role("button", name="Read aloud")).to_be_visible()
