"""``auto`` over HTTP: each default rule's choice in ``meta``, ``done``, the
``X-Edgechat-Route`` header and the model the emulator was asked; the day's
budget holding the choice to cheaper models; ``/v1`` taking part; the
refusals when no model fits; the savings in ``/api/usage``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, KIMI, assert_error, post_chat, user
from tests.api.conftest import Server, ServerPool
from tests.kit.images import data_url, png

ANN = "ann-token-0c6e1f93b7d4a528"
BOSS = "boss-token-f83a2c6d01e9b475"
EVERY = "auto,glm,glm-5.3-flash,glm-5.3,kimi,kimi-code,llama"
KIMI_CODE = "@cf/moonshotai/kimi-k2.7-code"
GLM_53 = "@cf/zai-org/glm-5.3"
GLM_53_FLASH = "@cf/zai-org/glm-5.3-flash"
# A long question of plain words (no rule's words in it): over the rules'
# long_tokens of 300 set below, about 500 tokens by the estimate.
PLAIN = "The harbour town grew around its fish market, and its people kept boats. "
LONG = PLAIN * 28
MEDIUM = PLAIN * 5  # over short_chars, under long_tokens


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def server(servers: ServerPool) -> Server:
    return servers.get(
        {
            "API_KEYS": f"ann:{ANN},boss:{BOSS}",
            "ADMINS": "boss",
            "MODELS": EVERY,
            "CACHE_MODE": "off",
            "AUTO_ROUTES": '{"long_tokens": 300}',
        },
        rate_limited=False,
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0, headers=auth(ANN)) as client:
        yield client


FREE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def routed(http: httpx.Client, server: Server, body: dict[str, Any]) -> tuple[str, str]:
    """Asks ``auto``; checks the route is the same in meta, done, the header
    and the model the emulator was asked; returns (model id, reason). The
    answer costs nothing (its usage is scripted to 0 tokens)."""
    server.ai.reset()
    server.ai.script({"reply": {"content": "Routed.", "usage": FREE}})
    chat = post_chat(http, {**body, "model": "auto"})
    assert chat.response.status_code == 200, chat.body
    meta, done = chat.events.meta, chat.events.final
    assert done.name == "done", chat.body
    route = meta["route"]
    assert done.data["route"] == route
    assert chat.response.headers["x-edgechat-route"] == f"{route['model']}; {route['reason']}"
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == meta["model"] == done.data["model"]
    return meta["model"], route["reason"]


@pytest.mark.parametrize(
    ("question", "model", "reason"),
    [
        ("What is the capital of France?", GLM, "short question"),
        (MEDIUM, GLM, "general question"),
        (LONG, GLM_53_FLASH, "long conversation"),
        ("Why does this fail?\n```python\nprint(1/0)\n```", KIMI_CODE, "code"),
        ("Prove that the square root of two is irrational.", GLM_53, "reasoning"),
    ],
)
def test_each_rule_chooses_its_model(
    http: httpx.Client, server: Server, question: str, model: str, reason: str
) -> None:
    assert routed(http, server, user(question)) == (model, reason)


def test_images_go_to_a_model_that_sees(http: httpx.Client, server: Server) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": data_url(png(8, 8), "image/png")}},
    ]
    body = {"messages": [{"role": "user", "content": content}]}
    assert routed(http, server, body) == (KIMI, "images")


def test_asking_to_think_routes_as_reasoning(http: httpx.Client, server: Server) -> None:
    assert routed(http, server, user("Hello there", reasoning=True)) == (GLM_53, "reasoning")


def test_v1_takes_auto_and_names_the_chosen_model(http: httpx.Client, server: Server) -> None:
    server.ai.reset()
    reply = http.post(
        "/v1/chat/completions",
        json={"model": "auto", "messages": [{"role": "user", "content": "def f(): pass"}]},
    )
    assert reply.status_code == 200, reply.text
    assert reply.json()["model"] == KIMI_CODE
    assert reply.headers["x-edgechat-route"] == "kimi-code; code"
    assert [call["model"] for call in server.ai.wait_for_calls(1)] == [KIMI_CODE]
    listed = http.get("/v1/models").json()["data"]
    assert listed[0]["id"] == "auto"


def test_the_catalog_lists_auto_with_what_it_may_choose(http: httpx.Client) -> None:
    models = http.get("/api/models").json()
    auto = models[0]
    assert auto["alias"] == auto["id"] == "auto"
    assert auto["price_in_per_m"] is None
    assert auto["price_out_per_m"] is None
    assert auto["vision"] is True
    assert auto["context_window"] == max(m["context_window"] for m in models[1:])


def auto_usage(http: httpx.Client, more_than: int) -> dict[str, Any]:
    """``/api/usage``'s auto summary once it counts more than ``more_than``
    answers (KV writes land after the reply), bounded."""
    deadline = time.monotonic() + 15
    while True:
        auto: dict[str, Any] = http.get("/api/usage").json()["auto"]
        if auto["requests"] > more_than:
            return auto
        assert time.monotonic() < deadline, f"the answer was not counted: {auto}"
        time.sleep(0.05)


@pytest.fixture
def boss(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0, headers=auth(BOSS)) as client:
        yield client


def test_savings_are_counted_against_the_default_model(server: Server, boss: httpx.Client) -> None:
    before = boss.get("/api/usage").json()["auto"]
    usage = {"prompt_tokens": 1000, "completion_tokens": 1000, "total_tokens": 2000}
    server.ai.script({"reply": {"content": "Counted.", "usage": usage}})
    chat = post_chat(boss, user(f"Write a python function, {time.time()}", model="auto"))
    assert chat.events.final.data["model"] == KIMI_CODE
    after = auto_usage(boss, before["requests"])
    spent = (1000 * 0.95 + 1000 * 4.00) / 1e6  # Kimi K2.7 Code's list prices
    baseline = (1000 * 0.06 + 1000 * 0.40) / 1e6  # GLM 4.7 Flash's: DEFAULT_MODEL
    assert after["requests"] == before["requests"] + 1
    assert after["cost_usd"] - before["cost_usd"] == pytest.approx(spent)
    assert after["baseline_usd"] - before["baseline_usd"] == pytest.approx(baseline)
    assert after["saved_usd"] == pytest.approx(after["baseline_usd"] - after["cost_usd"])
    # A named model is not auto's: it adds nothing here.
    post_chat(boss, user(f"named {time.time()}", model="kimi"))
    chat = post_chat(boss, user(f"Hi {time.time()}", model="auto"))  # glm: saves nothing
    last = auto_usage(boss, after["requests"])
    assert last["requests"] == after["requests"] + 1
    assert last["saved_usd"] == pytest.approx(after["saved_usd"])


# --- the day's budget --------------------------------------------------------------


@pytest.fixture(scope="module")
def budgeted(servers: ServerPool) -> Server:
    return servers.get(
        {"API_KEYS": f"ann:{ANN}", "MODELS": EVERY, "USER_DAILY_USD": "0.001"},
        rate_limited=False,
    )


def spend(http: httpx.Client, server: Server, usd_at_least: float) -> None:
    """One GLM answer whose scripted usage costs ``usd_at_least`` or a little
    more, then waits until ``/api/me`` counts it (written after the reply)."""
    before = http.get("/api/me").json()["budget"]["usd"]
    tokens = int(usd_at_least / 0.40 * 1e6) + 1  # GLM's output price
    usage = {"prompt_tokens": 0, "completion_tokens": tokens, "total_tokens": tokens}
    server.ai.script({"reply": {"content": "Paid.", "usage": usage}})
    assert post_chat(http, user(f"spend {time.time()}", model="glm")).events.final.name == "done"
    server.ai.reset()
    deadline = time.monotonic() + 15
    while http.get("/api/me").json()["budget"]["usd"] <= before:
        assert time.monotonic() < deadline, "the answer's spend was not counted"
        time.sleep(0.05)


def test_past_each_budget_tier_auto_holds_to_cheaper_models(budgeted: Server) -> None:
    with httpx.Client(base_url=budgeted.url, timeout=30.0, headers=auth(ANN)) as http:
        tiers(http, budgeted)


def tiers(http: httpx.Client, budgeted: Server) -> None:
    code = user("def f(): pass\nWhat does this do, and could it be faster or clearer?")
    assert routed(http, budgeted, code) == (KIMI_CODE, "code")
    spend(http, budgeted, 0.00055)  # 55 % of USER_DAILY_USD
    assert routed(http, budgeted, code) == (GLM, "code; 50% of budget spent")
    spend(http, budgeted, 0.0003)  # 85 %
    assert routed(http, budgeted, code) == (GLM, "code; 80% of budget spent")


# --- nothing fits ------------------------------------------------------------------


@pytest.fixture(scope="module")
def small(servers: ServerPool) -> Server:
    return servers.get(
        {
            "MODELS": "auto,llama",
            "DEFAULT_MODEL": "auto",
            "FALLBACK_CHAIN": "llama",
            "MAX_BODY_BYTES": "300000",
            "MAX_MESSAGE_CHARS": "200000",
            "MAX_TOTAL_CHARS": "200000",
        }
    )


def test_auto_with_no_model_that_sees_is_a_400_saying_why(small: Server, new_client: Any) -> None:
    content = [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": data_url(png(8, 8), "image/png")}},
    ]
    reply = new_client(small.url).post(
        "/chat", json={"messages": [{"role": "user", "content": content}]}
    )
    assert_error(reply, 400, "invalid_request")
    assert "none of this deployment's models takes images" in reply.json()["error"]["message"]
    assert small.ai.calls() == []


def test_auto_with_no_model_that_has_room_is_a_413_saying_why(
    small: Server, new_client: Any
) -> None:
    reply = new_client(small.url).post("/chat", json=user(PLAIN * 2000))  # ~37,500 tokens
    assert_error(reply, 413, "payload_too_large")
    assert "auto found no model with room" in reply.json()["error"]["message"]
    assert small.ai.calls() == []
