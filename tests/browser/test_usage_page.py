"""The usage page (/usage): today and the last 30 days from ``/api/usage``,
as uPlot charts and tables, and the spend alerts of those days as a table,
in English and Chinese, light and dark, under
the site's CSP; axe-core finds no WCAG 2.1 A/AA violation. The chat page
never loads the charts' library."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Chat, Relay
from tests.browser.test_accessibility import axe_violations
from tests.kit.conformance import Conformance

GLM = "@cf/zai-org/glm-4.7-flash"


def answered(relay: Relay) -> None:
    """One answer on the site, counted (the count is written after the reply)."""
    body = {"messages": [{"role": "user", "content": f"usage page {time.time()}"}]}
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
