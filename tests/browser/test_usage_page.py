"""The usage page (/usage): today and the last 30 days from ``/api/usage``,
as uPlot charts and tables, and the models' leaderboard from
``/api/leaderboard``, in English and Chinese, light and dark, under the
site's CSP; axe-core finds no WCAG 2.1 A/AA violation. The chat page never
loads the charts' library."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import WATCH_CSP, Chat, Relay, next_client_address
from tests.browser.test_accessibility import axe_violations
from tests.harness import ROOT, Runner, start_runner

GLM = "@cf/zai-org/glm-4.7-flash"


def answered(relay: Relay) -> None:
    """One answer on the site, routed by auto, counted (the count is written
    after the reply)."""
    question = {"role": "user", "content": f"usage page {time.time()}"}
    body = {"messages": [question], "model": "auto"}
    with httpx.Client(base_url=relay.url, timeout=30.0) as http:
        before = http.get("/api/usage").json()["total"]["requests"]
        with http.stream("POST", "/chat", json=body) as reply:
            assert reply.status_code == 200
            reply.read()
        deadline = time.monotonic() + 15
        while http.get("/api/usage").json()["total"]["requests"] <= before:
            assert time.monotonic() < deadline, "the answer was never counted"
            time.sleep(0.05)


def open_usage(new_chat: Any, relay: Relay, **options: Any) -> Chat:
    tab: Chat = new_chat(**options)
    tab.page.goto(tab.url + "/usage")
    # The tables are filled once /api/usage has answered.
    expect(tab.page.get_by_role("table", name="Today, per user and model")).to_be_visible()
    return tab


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_usage_page_shows_today_and_30_days_and_axe_finds_nothing(
    new_chat: Any, relay: Relay, scheme: str
) -> None:
    answered(relay)
    tab = open_usage(new_chat, relay, color_scheme=scheme)
    page = tab.page
    expect(page.get_by_role("heading", name="Usage", level=1)).to_be_visible()
    expect(page.get_by_role("status")).to_contain_text("Your own usage (anonymous).")
    today = page.get_by_role("table", name="Today, per user and model")
    expect(today.get_by_role("cell", name=GLM)).to_be_visible()
    month = page.get_by_role("table", name="The last 30 days, per user and model")
    expect(month.get_by_role("cell", name="anonymous").first).to_be_visible()
    # Three charts drawn by uPlot, each named by its caption.
    for name in (
        "Neurons a day, and the free allocation",
        "Dollars a day, per user",
        "Requests a day, per model",
    ):
        chart = page.get_by_role("img", name=name)
        expect(chart.locator("canvas")).to_have_count(1)
    meter = page.get_by_role("meter", name="Neurons against the daily free allocation")
    assert meter.get_attribute("max") == "10000"
    assert float(meter.get_attribute("value") or "0") > 0
    expect(page.get_by_role("link", name="Back to the chat")).to_have_attribute("href", "/")
    # A short question: auto chose the default model, so it saved nothing.
    savings = page.get_by_role("region", name="auto's savings, the last 30 days")
    expect(savings).to_contain_text("answers routed by auto cost $")
    expect(savings).to_contain_text("Saved: $0.0000.")
    assert axe_violations(tab) == []
    assert tab.csp_violations() == []
    assert tab.log.page_errors == []
    assert any(url.endswith("/vendor/uplot/uPlot.js") for url in tab.log.requests)


def test_the_usage_page_speaks_chinese(new_chat: Any, relay: Relay) -> None:
    answered(relay)
    tab = open_usage(new_chat, relay)
    tab.page.get_by_role("button", name="中文").click()
    page = tab.page
    expect(page.get_by_role("heading", name="用量", level=1)).to_be_visible()
    expect(page.get_by_role("table", name="今天，按用户和模型")).to_be_visible()  # noqa: RUF001
    expect(page.get_by_role("img", name="每个模型每天的请求数")).to_be_visible()
    assert page.evaluate("document.documentElement.lang") == "zh-CN"
    assert axe_violations(tab) == []
    # The choice is the chat page's too, and stays on a reload.
    page.reload()
    expect(page.get_by_role("heading", name="用量", level=1)).to_be_visible()
    page.get_by_role("button", name="English").click()
    expect(page.get_by_role("heading", name="Usage", level=1)).to_be_visible()


def test_the_chat_page_links_to_the_usage_page(chat: Chat) -> None:
    page = chat.page
    link = page.get_by_role("link", name="Usage and spending")
    expect(link).to_be_visible()
    link.click()
    expect(page.get_by_role("heading", name="Usage", level=1)).to_be_visible()
    assert page.url.endswith("/usage")


def test_the_chat_page_never_loads_the_usage_page_s_files(chat: Chat) -> None:
    chat.page.wait_for_load_state("networkidle")
    assert not [url for url in chat.log.requests if "uplot" in url.lower() or "usage" in url]


# --- the leaderboard ----------------------------------------------------------------

TOKEN = "ann-usage-token-58c2e1a09d7f3b46"
BEARER = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    folder = tmp_path_factory.mktemp("usage-board")
    vars_file: Path = folder / "board.vars"
    vars_file.write_text(f"API_KEYS=ann:{TOKEN}\nADMINS=ann\n")
    with start_runner(
        ROOT / "wrangler.toml", vars_file=vars_file, env={"EDGECHAT_AI_DELAY_MS": "0"}
    ) as runner:
        yield runner


def voted(site: str, blind: bool, choice: int | str) -> None:
    """A comparison of GLM and Kimi, both answered, and its vote."""
    with httpx.Client(base_url=site, headers=BEARER, timeout=30.0) as http:
        made = http.post("/api/comparisons", json={"models": ["glm", "kimi"], "blind": blind})
        cid = made.json()["id"]
        question = {"messages": [{"role": "user", "content": "Which?"}]}
        for slot in (0, 1):
            params = {"comparison": cid, "slot": slot}
            with http.stream("POST", "/chat", json=question, params=params) as reply:
                reply.read()
        deadline = time.monotonic() + 15
        while (
            http.post("/api/feedback", json={"comparison": cid, "choice": choice}).status_code
            != 201
        ):
            assert time.monotonic() < deadline, "the vote was never taken"
            time.sleep(0.05)


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_leaderboard_is_a_table_per_model_and_axe_finds_nothing(
    browser: Any, new_chat: Any, keyed: Runner, scheme: str
) -> None:
    site = keyed.base_url
    if scheme == "light":
        voted(site, blind=False, choice=0)
        voted(site, blind=True, choice="tie")
    relay = Relay(site, next_client_address())
    context = browser.new_context(color_scheme=scheme)
    try:
        context.add_init_script(WATCH_CSP)
        context.add_init_script(f"localStorage.setItem('edgechat.token', {TOKEN!r})")
        tab: Chat = new_chat(url=relay.url, context=context)
        page = tab.page
        page.goto(relay.url + "/usage")
        board = page.get_by_role("table", name="The leaderboard, the last 30 days")
        expect(board).to_be_visible()
        glm = board.get_by_role("row", name="GLM 4.7 Flash", exact=False)
        expect(glm.get_by_role("rowheader")).to_have_text("GLM 4.7 Flash")
        # The open vote: GLM won once; the blind one tied, both at the mean.
        expect(glm).to_contain_text("1 (1 / 0 / 0 / 0)")
        expect(glm).to_contain_text("1000 (")
        expect(page.get_by_text("Everyone's votes and ratings.")).to_be_visible()
        expect(page.get_by_text("Ratings: Bradley", exact=False)).to_be_visible()
        # An admin may name one user: their board alone.
        page.get_by_label("User (empty: everyone)").fill("key:nobody")
        page.get_by_role("button", name="Show").click()
        expect(
            board.get_by_role("cell", name="No comparison or rating in these days.")
        ).to_be_visible()
        expect(page.get_by_text("The votes and ratings of key:nobody.")).to_be_visible()
        assert axe_violations(tab) == []
        assert tab.csp_violations() == []
        assert tab.log.page_errors == []
    finally:
        context.close()
        relay.close()
