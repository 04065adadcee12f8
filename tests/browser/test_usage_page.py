"""The usage page (/usage): today and the last 30 days from ``/api/usage``,
as uPlot charts and tables, the spend alerts of those days as a table, and
the models' leaderboard from ``/api/leaderboard``, in English and Chinese,
light and dark, under the site's CSP; axe-core finds no WCAG 2.1 A/AA
violation. The chat page never loads the charts' library."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import ARTIFACTS, WATCH_CSP, Chat, Relay, next_client_address
from tests.browser.test_accessibility import axe_violations
from tests.harness import ROOT, EmulatorControl, Runner, start_runner
from tests.kit.conformance import Conformance

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
    alerts = page.get_by_role("table", name="Spend alerts of the last 30 days")
    expect(alerts.get_by_role("cell", name="No spend alerts in these days.")).to_be_visible()
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


# --- the shadow trials, for an admin ---------------------------------------------------------

BOSS = "boss-token-5f1c9a7e3d0b8264"
KIMI = "@cf/moonshotai/kimi-k2.6"
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"


@pytest.fixture(scope="module")
def shadow_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A site trying every answer on Kimi, judged by Llama, ``boss`` its admin."""
    folder = tmp_path_factory.mktemp("shadow-site")
    vars_file: Path = folder / "shadow.vars"
    vars_file.write_text(
        f"API_KEYS=boss:{BOSS}\nADMINS=boss\nSHADOW_MODEL=kimi\nSHADOW_RATE=1\n"
        "SHADOW_DAILY_USD=2\nSHADOW_JUDGE=llama\nCACHE_MODE=off\n"
    )
    control = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
    env = {
        "EDGECHAT_AI_SCRIPT": str(control.script_path),
        "EDGECHAT_AI_LOG": str(control.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
    }
    with start_runner(ROOT / "wrangler.toml", vars_file=vars_file, env=env) as runner:
        control.reset()
        control.script({"match": {"model": LLAMA}, "reply": {"content": "TIE"}})
        headers = {"authorization": f"Bearer {BOSS}"}
        with httpx.Client(base_url=runner.base_url, timeout=30.0, headers=headers) as http:
            chat = {"messages": [{"role": "user", "content": "shadow trial on the page"}]}
            assert http.post("/chat", json=chat).status_code == 200
            deadline = time.monotonic() + 20
            while not (http.get("/api/usage").json()["shadow"] or {}).get("trials"):
                assert time.monotonic() < deadline, "the trial was never kept"
                time.sleep(0.05)
        yield runner.base_url


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_an_admin_sees_the_shadow_trials_and_axe_finds_nothing(
    browser: Any, new_chat: Any, shadow_site: str, scheme: str
) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 900}, color_scheme=scheme)
    context.add_init_script(WATCH_CSP)
    context.add_init_script(f"localStorage.setItem('edgechat.token', '{BOSS}')")
    site = Relay(shadow_site, next_client_address())
    try:
        tab: Chat = new_chat(url=site.url, context=context)
        page = tab.page
        page.goto(site.url + "/usage")
        expect(page.get_by_role("heading", name="Shadow trials", level=2)).to_be_visible()
        expect(page.locator("#shadow-about")).to_contain_text(
            f"100% of the answers are asked again of {KIMI}"
        )
        table = page.get_by_role("table", name="Shadow trials over the last 30 days: medians")
        expect(table.get_by_role("rowheader", name=f"Challenger ({KIMI})")).to_be_visible()
        expect(table.get_by_role("columnheader", name="Time to first token")).to_be_visible()
        expect(page.locator("#shadow-cards")).to_contain_text("Ties1")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"usage-shadow-{scheme}.png"), full_page=True)
        assert axe_violations(tab) == []
        assert tab.csp_violations() == []
        assert tab.log.page_errors == []
    finally:
        context.close()
        site.close()


def test_a_user_who_is_no_admin_sees_no_shadow_trials(new_chat: Any, relay: Relay) -> None:
    answered(relay)
    tab = open_usage(new_chat, relay)
    expect(tab.page.get_by_role("heading", name="Shadow trials")).to_be_hidden()


def test_the_usage_page_lists_the_spend_alerts_as_text(new_chat: Any, relay: Relay) -> None:
    # The server's alerts are tests/api/test_alerts.py's; here the page shows
    # a body the server could send (held to static/openapi.json).
    odd = '<img src=x onerror="document.title=1">'
    alerts = [
        {
            "day": "2026-12-01",
            "kind": "account",
            "user": None,
            "unit": "neurons",
            "threshold": 80,
            "spent": 8100,
            "limit": 10000,
            "state": "failed",
            "attempts": 3,
            "updated_at": "2026-12-01T10:00:00Z",
            "next_attempt_at": "2026-12-01T10:15:00Z",
            "error": "HTTP 500",
        },
        {
            "day": "2026-12-02",
            "kind": "user",
            "user": odd,
            "unit": "usd",
            "threshold": 50,
            "spent": 0.0006,
            "limit": 0.001,
            "state": "sent",
            "attempts": 1,
            "updated_at": "2026-12-02T09:30:00Z",
            "next_attempt_at": None,
            "error": None,
        },
    ]

    def with_alerts(route: Any) -> None:
        body = {**route.fetch().json(), "alerts": alerts}
        assert Conformance().validate("/components/schemas/UsageReport", body) == []
        route.fulfill(json=body)

    tab: Chat = new_chat()
    tab.page.route("**/api/usage?days=30", with_alerts)
    tab.page.goto(tab.url + "/usage")
    table = tab.page.get_by_role("table", name="Spend alerts of the last 30 days")
    expect(table.get_by_role("row")).to_have_count(3)
    account = table.get_by_role("row").nth(1)
    expect(account).to_contain_text("The account (DAILY_NEURON_LIMIT)")
    expect(account).to_contain_text("80%")
    expect(account).to_contain_text("8,100 / 10,000")
    expect(account).to_contain_text("Failed (HTTP 500); next try")
    mine = table.get_by_role("row").nth(2)
    expect(mine).to_contain_text(f"{odd}'s budget in Dollars")
    expect(mine).to_contain_text("$0.000600 / $0.001000")
    expect(mine.get_by_role("cell", name="Sent")).to_be_visible()
    assert table.locator("img").count() == 0
    assert tab.page.title() != "1"
    assert axe_violations(tab) == []
    assert tab.log.page_errors == []


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
