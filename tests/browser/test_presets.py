"""Starting from a preset: the page offers the operator's presets while a
conversation is empty, a chosen one sets the model and shows its greeting,
and every question of that conversation names it (its prompt stays on the
server). Against a runner of its own whose ``[vars]`` hold two presets."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Chat, Relay, chat_messages, next_client_address
from tests.browser.test_accessibility import AXE, axe_violations
from tests.harness import ROOT, EmulatorControl, start_runner
from tests.kit.presets import two_presets

PROMPT = "You are the translator preset, marker-B8."
PRESETS = two_presets(PROMPT)
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"


@pytest.fixture(scope="module")
def preset_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Any]]:
    if os.environ.get("EDGECHAT_BASE_URL"):
        pytest.skip("EDGECHAT_BASE_URL is set: this test needs a runner with PRESETS")
    folder = tmp_path_factory.mktemp("edgechat-presets")
    ai = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
    (folder / "test.vars").write_text(f"PRESETS={json.dumps(PRESETS)}\nCACHE_MODE=off\n")
    env = {
        "EDGECHAT_AI_SCRIPT": str(ai.script_path),
        "EDGECHAT_AI_LOG": str(ai.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
    }
    with start_runner(ROOT / "wrangler.toml", vars_file=folder / "test.vars", env=env) as runner:
        yield runner.base_url, ai


@pytest.fixture
def site(preset_runner: tuple[str, EmulatorControl]) -> Iterator[tuple[str, EmulatorControl]]:
    url, ai = preset_runner
    ai.reset()
    relay = Relay(url, next_client_address())
    yield relay.url, ai
    relay.close()


def presets(chat: Chat) -> Any:
    return chat.page.get_by_role("list", name="Start from a preset")


def test_a_preset_sets_the_model_and_greets_and_each_question_names_it(
    new_chat: Any, site: tuple[str, EmulatorControl]
) -> None:
    url, ai = site
    chat: Chat = new_chat(url=url).open()
    translator = presets(chat).get_by_role("button", name="Translator")
    expect(translator).to_have_attribute("aria-pressed", "false")
    translator.click()
    expect(translator).to_have_attribute("aria-pressed", "true")
    expect(chat.page.get_by_text("What shall I translate?")).to_be_visible()
    expect(chat.model_picker()).to_have_value("llama")
    chat.ask("Bonjour")
    chat.ask("Merci")
    # The list goes once the conversation has begun; a note says which preset it follows.
    expect(presets(chat)).to_be_hidden()
    expect(chat.page.get_by_text("Preset: Translator")).to_be_visible()
    first, second = ai.wait_for_calls(2)
    for call in (first, second):
        assert call["model"] == LLAMA
        assert call["inputs"]["messages"][0] == {"role": "system", "content": PROMPT}
        assert call["inputs"]["temperature"] == 0.2
    assert chat_messages(second)[-1] == ("user", "Merci")
    assert "marker-B8" not in chat.page.content()
    # A new chat offers the presets again, none chosen.
    chat.button("New chat").click()
    expect(presets(chat).get_by_role("button", name="Translator")).to_have_attribute(
        "aria-pressed", "false"
    )
    chat.ask("Plain question")
    assert ai.wait_for_calls(3)[2]["inputs"]["messages"][0]["content"] != PROMPT


def test_the_presets_speak_chinese_and_pass_axe_in_light_and_dark(
    new_chat: Any, site: tuple[str, EmulatorControl]
) -> None:
    url, _ = site
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    for scheme in ("light", "dark"):
        chat: Chat = new_chat(url=url, color_scheme=scheme).open()
        chat.page.get_by_role("button", name="Brief").click()
        assert axe_violations(chat) == []
        chat.page.get_by_role("button", name="中文").click()
        expect(chat.page.get_by_role("list", name="从预设开始")).to_be_visible()
        chat.page.get_by_role("button", name="翻译").click()
        expect(chat.page.get_by_text("要翻译什么。")).to_be_visible()
        chat.page.screenshot(path=str(ROOT / "artifacts" / f"presets-{scheme}.png"))
        assert axe_violations(chat) == []
