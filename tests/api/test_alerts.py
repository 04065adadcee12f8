"""Spend alerts over HTTP: a webhook on loopback (``ALERT_WEBHOOK``)
gets exactly one post per threshold (``ALERT_AT``), per subject, per UTC
day, from the answer that crossed it or from the cron run, retried when it
fails; ``GET /api/usage`` shows them; a webhook that is not https stops the
Worker at start.

The webhook is a small ``http.server`` in a thread of this module: it
records every post and can answer the next ones with 500. Each test's
answers belong to a user of its own, so their alerts are told apart by
``user``; a test waits for the posts it expects (bounded), never for a
guessed time.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.checks import assert_error, post_chat, user
from tests.api.conftest import Server, ServerPool
from tests.api.test_retention import advance, run_scheduled
from tests.harness import runner_command
from tests.kit.conformance import Conformance
from tests.workerd.test_config_check import SECRET, assert_refused, project_config, run_to_exit

ANN = "ann-token-5d0e9c2b7a41f386"
BO = "bo-token-a8c61f0e4b2d9735"
CY = "cy-token-3e7b9d51c0a2f846"
KEYS = f"ann:{ANN},bo:{BO},cy:{CY}"
BUDGET_USD = 0.001
# static/openapi.json's description of what a hook is posted.
PAYLOAD = "/webhooks/spendAlert/post/requestBody/content/application~1json/schema"
WAIT_S = 20.0


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    status: int  # what the hook answered


class Webhook:
    """A webhook on 127.0.0.1: records every POST; ``fail_next(n)`` answers
    the next ``n`` with 500, the others 204."""

    def __init__(self) -> None:
        self.posts: list[Post] = []
        self._failures = 0
        self._lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = json.loads(self.rfile.read(length))
                with hook._lock:
                    failing = hook._failures > 0
                    hook._failures -= failing
                    status = 500 if failing else 204
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    hook.posts.append(Post(self.path, headers, body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        # The path is the hook's secret, as in a Slack or Discord webhook URL.
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook/s3cret-path"

    def fail_next(self, count: int) -> None:
        with self._lock:
            self._failures = count

    def of(self, match: Callable[[dict[str, Any]], bool]) -> list[Post]:
        with self._lock:
            return [post for post in self.posts if match(post.body)]

    def wait_for(self, match: Callable[[dict[str, Any]], bool], delivered: int) -> list[Post]:
        """The posts ``match`` picks, once ``delivered`` of them got a 2xx."""
        deadline = time.monotonic() + WAIT_S
        while True:
            found = self.of(match)
            if sum(post.status < 300 for post in found) >= delivered:
                return found
            assert time.monotonic() < deadline, f"{len(found)} posts: {found}"
            time.sleep(0.02)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture
def server(servers: ServerPool, webhook: Webhook) -> Server:
    return servers.get(
        {"API_KEYS": KEYS, "USER_DAILY_USD": str(BUDGET_USD), "ALERT_WEBHOOK": webhook.url},
        rate_limited=False,
        args=("--clock-hook",),
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def auth(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def costing(server: Server, completion_tokens: int) -> None:
    """The next answers cost ``completion_tokens`` of GLM's output: $0.40 per million."""
    usage = {"prompt_tokens": 0, "completion_tokens": completion_tokens}
    usage["total_tokens"] = completion_tokens
    server.ai.script({"reply": {"content": "Counted.", "usage": usage}})


def answer(http: httpx.Client, token: str, prompt: str = "hi") -> None:
    assert post_chat(http, user(prompt), headers=auth(token)).events.text() == "Counted."


def of_user(name: str) -> Callable[[dict[str, Any]], bool]:
    return lambda body: body.get("user") == f"key:{name}"


def thresholds(posts: list[Post]) -> list[int]:
    return [post.body["threshold"] for post in posts if post.status < 300]


def alerts_shown(
    http: httpx.Client, token: str, ready: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """``/api/usage``'s alerts once ``ready`` holds for them (they are
    written after the post)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        reply = http.get("/api/usage", params={"days": 2}, headers=auth(token))
        assert reply.status_code == 200, reply.text
        alerts: list[dict[str, Any]] = reply.json()["alerts"]
        if ready(alerts):
            return alerts
        assert time.monotonic() < deadline, alerts
        time.sleep(0.05)


def test_each_threshold_is_posted_once_per_day(
    http: httpx.Client, server: Server, webhook: Webhook
) -> None:
    spec = Conformance()
    costing(server, 1_500)  # $0.0006: 60%
    answer(http, ANN, "my private question about zebras")
    assert thresholds(webhook.wait_for(of_user("ann"), 1)) == [50]
    costing(server, 250)  # 70%: past 50% again, nothing new
    answer(http, ANN)
    costing(server, 500)  # 90%
    answer(http, ANN)
    assert thresholds(webhook.wait_for(of_user("ann"), 2)) == [50, 80]
    answer(http, ANN)  # 110%
    posts = webhook.wait_for(of_user("ann"), 3)
    assert thresholds(posts) == [50, 80, 100]
    # Past the budget the user is refused, and the cron run finds every
    # threshold already sent.
    assert_error(http.post("/chat", json=user("more"), headers=auth(ANN)), 429, "budget_exhausted")
    ran = run_scheduled(server)
    assert ran["alerts"] == {"claimed": 0, "retried": 0, "alerts": []}
    assert thresholds(webhook.of(of_user("ann"))) == [50, 80, 100]

    last = posts[-1]
    assert spec.validate(PAYLOAD, last.body) == []
    assert last.headers["content-type"] == "application/json"
    assert last.body["kind"] == "user"
    assert last.body["unit"] == "usd"
    assert last.body["limit"] == BUDGET_USD
    assert last.body["spent"] == pytest.approx(0.0011)
    assert last.body["resets_at"].endswith("T00:00:00Z")
    assert last.body["text"].startswith("edgechat: key:ann reached 100% of their daily budget")
    for post in posts:
        raw = json.dumps(post.body)
        assert ANN not in raw
        assert "zebras" not in raw
        assert "Counted." not in raw

    shown = alerts_shown(http, ANN, lambda alerts: len(alerts) == 3)
    assert [(a["threshold"], a["state"], a["attempts"]) for a in shown] == [
        (50, "sent", 1),
        (80, "sent", 1),
        (100, "sent", 1),
    ]
    # Another user sees none of Ann's.
    assert alerts_shown(http, BO, lambda alerts: True) == []
    assert "s3cret-path" not in server.log_text()


def test_a_failing_hook_is_tried_again(
    http: httpx.Client, server: Server, webhook: Webhook
) -> None:
    webhook.fail_next(1)
    costing(server, 1_500)  # 60%
    answer(http, BO)
    posts = webhook.wait_for(of_user("bo"), 1)
    assert [(post.body["threshold"], post.status) for post in posts] == [(50, 500), (50, 204)]
    assert posts[0].body == posts[1].body
    shown = alerts_shown(http, BO, lambda alerts: bool(alerts) and alerts[0]["state"] == "sent")
    assert [(a["threshold"], a["attempts"], a["error"]) for a in shown] == [(50, 2, None)]


def test_an_alert_the_hook_refused_is_sent_again_by_a_later_cron_run(
    http: httpx.Client, server: Server, webhook: Webhook
) -> None:
    webhook.fail_next(3)  # the answer's whole round
    costing(server, 1_500)
    answer(http, CY)
    (failed,) = alerts_shown(
        http, CY, lambda alerts: bool(alerts) and alerts[0]["state"] == "failed"
    )
    assert (failed["attempts"], failed["error"]) == (3, "HTTP 500")
    assert failed["next_attempt_at"] is not None
    assert thresholds(webhook.of(of_user("cy"))) == []
    # Not due yet.
    assert run_scheduled(server)["alerts"]["retried"] == 0
    advance(server, 16 * 60 * 1000)
    ran = run_scheduled(server)
    assert ran["alerts"]["retried"] == 1
    assert thresholds(webhook.wait_for(of_user("cy"), 1)) == [50]
    (sent,) = alerts_shown(http, CY, lambda alerts: alerts[0]["state"] == "sent")
    assert (sent["attempts"], sent["next_attempt_at"], sent["error"]) == (4, None, None)


def test_the_account_s_daily_neuron_limit_alerts(servers: ServerPool, webhook: Webhook) -> None:
    server = servers.get({"DAILY_NEURON_LIMIT": "2000", "ALERT_WEBHOOK": webhook.url})

    def account(body: dict[str, Any]) -> bool:
        return body.get("kind") == "account"

    # 24,000 output tokens of GLM: $0.0096, about 873 Neurons.
    costing(server, 24_000)
    with httpx.Client(base_url=server.url, timeout=30.0) as http:
        assert post_chat(http, user("hi")).events.text() == "Counted."  # 44%
        assert post_chat(http, user("hi")).events.text() == "Counted."  # 87%
        # Crossed by one answer: posted at once, in no set order.
        assert sorted(thresholds(webhook.wait_for(account, 2))) == [50, 80]
        assert post_chat(http, user("hi")).events.text() == "Counted."  # 131%
        posts = webhook.wait_for(account, 3)
        assert sorted(thresholds(posts)) == [50, 80, 100]
        assert [post.body["user"] for post in posts] == [None] * 3
        assert posts[-1].body["unit"] == "neurons"
        assert posts[-1].body["limit"] == 2000
        assert (
            posts[-1]
            .body["text"]
            .startswith("edgechat: the account reached 100% of DAILY_NEURON_LIMIT")
        )
        assert_error(http.post("/chat", json=user("more")), 429, "quota_exhausted")
        assert run_scheduled(server)["alerts"]["claimed"] == 0
        assert sorted(thresholds(webhook.of(account))) == [50, 80, 100]
        # The anonymous user is no admin here, yet sees only their own budget's alerts.
        shown = http.get("/api/usage").json()["alerts"]
        assert shown == []


@pytest.mark.parametrize(
    ("variable", "value", "rule"),
    [
        ("ALERT_WEBHOOK", "http://hooks.example.com/s3cret-path", "must be an https:// URL"),
        ("ALERT_AT", "80,50", "must list its percents in ascending order, each once"),
    ],
)
def test_a_bad_alert_setting_stops_the_worker_at_start(
    tmp_path: Path, variable: str, value: str, rule: str
) -> None:
    config = project_config(tmp_path, {"API_TOKEN": SECRET})
    vars_file = tmp_path / "test.vars"
    vars_file.write_text(f"{variable}={value}\nAPI_TOKEN={SECRET}\n")
    result = run_to_exit(runner_command(config, vars_file))
    assert_refused(result, variable, rule)
    assert "s3cret-path" not in result.stdout + result.stderr
