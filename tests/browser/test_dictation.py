"""Dictation on the page: the microphone button records from Chromium's fake
microphone (MediaRecorder), /api/transcribe sends the recording to the
emulator's Whisper, whose transcript is derived from the bytes it got, and
the text lands in the composer to edit or send; a refusal is named and the
question stays as typed."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.browser.test_accessibility import AXE, axe_violations
from tests.harness import EmulatorControl

WHISPER = "@cf/openai/whisper-large-v3-turbo"
TRANSCRIPT = re.compile(
    r"Emulated transcript of (\d+) bytes of (\w+) audio, sha-256 ([0-9a-f]{8})\."
)


def dictate(chat: Chat) -> None:
    chat.button("Dictate").click()
    stop = chat.button("Stop dictation")
    expect(stop).to_have_attribute("aria-pressed", "true")
    stop.click()


def test_a_dictated_question_lands_in_the_composer_and_is_sent(
    chat: Chat, ai: EmulatorControl
) -> None:
    chat.composer().fill("Typed first:")
    dictate(chat)
    expect(chat.composer()).to_have_value(re.compile(r"^Typed first: Emulated transcript of "))
    expect(chat.button("Dictate")).to_have_attribute("aria-pressed", "false")
    (call,) = ai.wait_for_calls(1)
    assert call["model"] == WHISPER
    audio = base64.b64decode(call["inputs"]["audio"])
    found = TRANSCRIPT.search(chat.composer().input_value())
    assert found is not None
    # The transcript is the emulator's reading of exactly the bytes the page recorded.
    assert int(found.group(1)) == len(audio)
    assert found.group(2) == "webm"
    assert found.group(3) == hashlib.sha256(audio).hexdigest()[:8]
    chat.composer().press("Enter")
    chat.wait_idle()
    sent = json.dumps(ai.wait_for_calls(2)[1]["inputs"]["messages"])
    assert "Typed first: Emulated transcript of" in sent


def test_a_failed_transcription_leaves_the_question_as_typed(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script({"match": {"model": WHISPER}, "error": "3040: out of capacity"})
    chat.composer().fill("My own words")
    dictate(chat)
    expect(chat.page.get_by_role("alert")).to_contain_text("Not transcribed:")
    expect(chat.composer()).to_have_value("My own words")


def test_the_microphone_button_passes_axe_in_light_and_dark(
    new_chat: Any, ai: EmulatorControl
) -> None:
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    for scheme in ("light", "dark"):
        chat: Chat = new_chat(color_scheme=scheme).open()
        chat.button("Dictate").click()
        expect(chat.button("Stop dictation")).to_have_attribute("aria-pressed", "true")
        assert axe_violations(chat) == []
        chat.button("Stop dictation").click()
        expect(chat.composer()).to_have_value(TRANSCRIPT)
