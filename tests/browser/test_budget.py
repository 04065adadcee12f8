"""The daily limits on the page: a spent budget and a used-up allocation say
so in plain words, with the reset (00:00 UTC) in the reader's own time."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import WATCH_CSP, Chat, Relay, next_client_address
from tests.harness import ROOT, EmulatorControl, start_runner

COSTLY = {"prompt_tokens": 10_000, "completion_tokens": 1_000, "total_tokens": 11_000}


@pytest.fixture(scope="module")
def budget_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, EmulatorControl]]:
    folder = tmp_path_factory.mktemp("budget-site")
    vars_file: Path = folder / "budget.vars"
    vars_file.write_text("USER_DAILY_USD=0.0005\n")
    control = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
    env = {
        "EDGECHAT_AI_SCRIPT": str(control.script_path),
        "EDGECHAT_AI_LOG": str(control.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
    }
    with start_runner(ROOT / "wrangler.toml", vars_file=vars_file, env=env) as runner:
        yield runner.base_url, control


def in_shanghai(browser: Any, new_chat: Any, url: str) -> Chat:
    # 00:00 UTC is 08:00 in Shanghai (no daylight saving time).
    context = browser.new_context(locale="en-US", timezone_id="Asia/Shanghai")
    context.add_init_script(WATCH_CSP)
    chat: Chat = new_chat(url=url, context=context)
    return chat.open()


def test_a_spent_budget_names_its_reset_in_local_time(
    browser: Any, new_chat: Any, budget_site: tuple[str, EmulatorControl]
) -> None:
    base_url, control = budget_site
    control.reset()
    control.script({"reply": {"content": "A costly answer.", "usage": COSTLY}})
    site = Relay(base_url, next_client_address())
    try:
        chat = in_shanghai(browser, new_chat, site.url)
        first = chat.ask("First question")
        expect(first.locator(".answer")).to_have_text("A costly answer.")
        # The spend is counted after the reply: wait until it is in.
        deadline = time.monotonic() + 15
        while httpx.get(base_url + "/api/me").json()["budget"]["usd"] == 0:
            assert time.monotonic() < deadline, "the answer was never counted"
            time.sleep(0.05)
        refused = chat.ask("Second question")
        alert = refused.get_by_role("alert")
        expect(alert).to_contain_text("Your daily budget is used up.")
        expect(alert).to_contain_text("It resets at 08:00 AM your time.")
        assert chat.csp_violations() == []
        chat.context.close()
    finally:
        site.close()
