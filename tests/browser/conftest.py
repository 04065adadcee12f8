"""Fixtures of the browser tests: Debian's Chromium driven by Playwright.

Each test gets a fresh browser context and reaches edgechat through a small
TCP relay of its own that connects from its own loopback address
(127.0.200.2, 127.0.200.3, …). The runner keys the rate limit on the TCP peer, so
tests never share a bucket, and each test's page has its own origin (its own
localStorage). The relay can also drop every open connection, which is how a
test cuts a stream off in the middle.

The tests skip only when Chromium is truly absent; under
``CI=true`` that is a failure instead, because CI installs both.
"""

from __future__ import annotations

import ipaddress
import itertools
import json
import os
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.harness import ROOT, EmulatorControl, start_runner
from tests.kit.upstream import usage

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # A fake microphone (a generated tone) granted without a prompt, for dictation.
    "--use-fake-device-for-media-stream",
    "--use-fake-ui-for-media-stream",
]
ARTIFACTS = ROOT / "artifacts"
DESKTOP = {"width": 1280, "height": 800}


def chromium_path() -> str | None:
    candidate = os.environ.get("EDGECHAT_CHROMIUM") or "/usr/bin/chromium"
    if Path(candidate).is_file() and os.access(candidate, os.X_OK):
        return candidate
    return shutil.which("chromium")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true: the browser tests must run; see scripts/setup.sh)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = chromium_path()
    if executable is None:
        _unavailable(
            "Chromium is not installed: run `apt-get install chromium` "
            "(scripts/setup.sh does it as root)"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


# --- the relay --------------------------------------------------------------------

_addresses = itertools.count(2)


def next_client_address() -> str:
    """A loopback address of its own: 127.0.200.2 upward (the API suite counts from 127.0.0.2)."""
    while True:
        address = str(ipaddress.IPv4Address((127 << 24) + 200 * 256 + next(_addresses)))
        if address.split(".")[-1] not in ("0", "255"):
            return address


class Relay:
    """Forwards TCP connections from 127.0.0.1:<port> to edgechat, from one client address."""

    def __init__(self, target: str, client_address: str | None) -> None:
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.client_address = client_address
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            source = (self.client_address, 0) if self.client_address else None
            try:
                upstream = socket.create_connection(self.target, source_address=source)
            except OSError:
                downstream.close()
                continue
            with self.lock:
                self.open.update((downstream, upstream))
            for a, b in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        # Either side closing ends the pair, so a browser that aborts a fetch
        # is seen by the runner as a client that went away.
        self._close(source, sink)

    def _close(self, *sockets: socket.socket) -> None:
        for sock in sockets:
            with self.lock:
                self.open.discard(sock)
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def drop_connections(self) -> None:
        """Cuts every open connection, as a failing network would."""
        with self.lock:
            sockets = list(self.open)
        self._close(*sockets)

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.drop_connections()


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    with suppress(ValueError):
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    return False


@pytest.fixture
def relay(edgechat_url: str) -> Iterator[Relay]:
    site = Relay(edgechat_url, next_client_address() if _is_loopback(edgechat_url) else None)
    yield site
    site.close()


# --- pages --------------------------------------------------------------------------

# Runs before the page's own scripts (CDP injection, not subject to the CSP):
# records CSP violations where the test can read them.
WATCH_CSP = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__csp.push(e.violatedDirective + " " + e.blockedURI);
});
"""


# Reshapes what the page reads of a /chat body (CDP-injected, not subject to
# the CSP), the way a network could deliver it: "byte" makes every read one
# byte, whatever the network coalesced, so the page's reader meets every
# character and every line cut at every byte; "event" hands over one event
# (up to its blank line) each time the test releases one, so a test can look
# at the page between any two events of a stream the server already sent.
# Aborting the request still ends the body at once, as it does for fetch.
SHAPE_CHAT_READS = """(mode) => {
  const gate = (window.__chatGate = {
    permits: 0,
    waiters: [],
    release(n) {
      this.permits += n;
      while (this.permits > 0 && this.waiters.length) {
        this.permits -= 1;
        this.waiters.shift()();
      }
    },
    take() {
      if (this.permits > 0) {
        this.permits -= 1;
        return Promise.resolve();
      }
      return new Promise((resolve) => this.waiters.push(resolve));
    },
  });
  const fetchAll = window.fetch;
  window.fetch = async (input, init) => {
    const response = await fetchAll(input, init);
    const url = new URL(typeof input === "string" ? input : input.url, location.href);
    if (url.pathname !== "/chat" || !response.ok || !response.body) return response;
    const reader = response.body.getReader();
    let buffer = new Uint8Array(0);
    let ended = false;
    const boundary = () => {
      if (mode === "byte") return buffer.length ? 1 : -1;
      for (let i = 1; i < buffer.length; i++) {
        if (buffer[i - 1] === 10 && buffer[i] === 10) return i + 1;
      }
      return -1;
    };
    let controller;
    const body = new ReadableStream({
      start(c) {
        controller = c;
      },
      async pull() {
        let end = boundary();
        while (end < 0 && !ended) {
          const { done, value } = await reader.read();
          if (done) ended = true;
          else {
            const joined = new Uint8Array(buffer.length + value.length);
            joined.set(buffer);
            joined.set(value, buffer.length);
            buffer = joined;
          }
          end = boundary();
        }
        if (end < 0) end = buffer.length; // the unterminated rest
        if (end === 0) return controller.close();
        if (mode === "event") await gate.take();
        controller.enqueue(buffer.slice(0, end));
        buffer = buffer.slice(end);
      },
      cancel: (reason) => reader.cancel(reason),
    });
    init?.signal?.addEventListener("abort", () => {
      try {
        controller.error(init.signal.reason);
      } catch {
        // already closed
      }
    });
    const { status, statusText, headers } = response;
    return new Response(body, { status, statusText, headers });
  };
}"""


@dataclass
class PageLog:
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


@dataclass
class Chat:
    """One browser tab on edgechat, with what the tests need to drive it."""

    page: Any
    url: str
    log: PageLog
    context: Any

    def open(self) -> Chat:
        self.page.goto(self.url + "/")
        self.page.locator("#input").wait_for()
        # Models are loaded once the picker is enabled.
        expect(self.page.locator("#model")).to_be_enabled()
        return self

    def composer(self) -> Any:
        return self.page.get_by_role("textbox", name="Message")

    def model_picker(self) -> Any:
        return self.page.get_by_role("combobox", name="Model")

    def send(self, text: str) -> None:
        self.composer().fill(text)
        self.composer().press("Enter")

    def answers(self) -> Any:
        return self.page.get_by_role("article", name="Assistant")

    def last_answer(self) -> Any:
        return self.answers().last

    def button(self, name: str) -> Any:
        return self.page.get_by_role("button", name=name, exact=True)

    def wait_idle(self, timeout: float = 15_000) -> None:
        """Waits until no answer is streaming (the Send button is back)."""
        expect(self.button("Send")).to_be_visible(timeout=timeout)
        expect(self.last_answer()).to_have_attribute("aria-busy", "false", timeout=timeout)

    def ask(self, text: str) -> Any:
        self.send(text)
        self.wait_idle()
        return self.last_answer()

    def csp_violations(self) -> list[str]:
        return list(self.page.evaluate("window.__csp"))

    def serve_chat(self, *parts: str) -> None:
        """Answers this tab's ``/chat`` requests with this stream body (delivered whole)."""
        body = "".join(parts)
        self.page.route(
            "**/chat",
            lambda route: route.fulfill(
                status=200, content_type="text/event-stream; charset=utf-8", body=body
            ),
        )

    def read_one_byte_at_a_time(self) -> None:
        """From now on, every read the page makes of a ``/chat`` body returns one byte."""
        self.page.evaluate(SHAPE_CHAT_READS, "byte")

    def hold_chat_events(self) -> None:
        """From now on, the page gets each event of a ``/chat`` stream only once
        ``release_events`` lets it through."""
        self.page.evaluate(SHAPE_CHAT_READS, "event")

    def release_events(self, count: int = 1) -> None:
        self.page.evaluate("n => window.__chatGate.release(n)", count)

    def release_all_events(self) -> None:
        self.page.evaluate("window.__chatGate.release(Infinity)")


# --- a runner with moderation --------------------------------------------------------


@dataclass
class Guarded:
    """A runner of its own with ``MODERATION=input,output`` (and no cache, so
    every answer is checked), reached through a relay of this test's own."""

    url: str
    ai: EmulatorControl


@pytest.fixture(scope="session")
def guarded_runner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guarded]:
    if os.environ.get("EDGECHAT_BASE_URL"):
        pytest.skip("EDGECHAT_BASE_URL is set: this test needs a runner with MODERATION")
    folder = tmp_path_factory.mktemp("edgechat-guarded")
    ai = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
    vars_file = folder / "test.vars"
    vars_file.write_text("MODERATION=input,output\nCACHE_MODE=off\n")
    env = {
        "EDGECHAT_AI_SCRIPT": str(ai.script_path),
        "EDGECHAT_AI_LOG": str(ai.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
    }
    with start_runner(ROOT / "wrangler.toml", vars_file=vars_file, env=env) as runner:
        yield Guarded(runner.base_url, ai)


@pytest.fixture
def guarded(guarded_runner: Guarded) -> Iterator[Guarded]:
    """The moderated runner, its emulator reset; ``url`` is a relay of this test's own."""
    guarded_runner.ai.reset()
    site = Relay(guarded_runner.url, next_client_address())
    yield Guarded(site.url, guarded_runner.ai)
    site.close()


@pytest.fixture
def new_chat(browser: Any, relay: Relay) -> Iterator[Any]:
    """Makes tabs on edgechat (each in its own context unless one is passed)."""
    contexts: list[Any] = []

    def make(
        *,
        url: str | None = None,
        viewport: dict[str, int] | None = None,
        color_scheme: str = "light",
        locale: str = "en-US",
        context: Any = None,
    ) -> Chat:
        if context is None:
            context = browser.new_context(
                viewport=viewport or DESKTOP, color_scheme=color_scheme, locale=locale
            )
            context.add_init_script(WATCH_CSP)
            contexts.append(context)
        page = context.new_page()
        log = PageLog()
        page.on("console", lambda m: m.type == "error" and log.console_errors.append(m.text))
        page.on("pageerror", lambda e: log.page_errors.append(str(e)))
        page.on("request", lambda r: log.requests.append(r.url))
        return Chat(page=page, url=url or relay.url, log=log, context=context)

    yield make
    for context in contexts:
        context.close()


@pytest.fixture
def chat(new_chat: Any) -> Chat:
    """A tab with edgechat open, desktop size, light theme, English."""
    made: Chat = new_chat()
    return made.open()


# --- hand-written /chat streams ---------------------------------------------------
# For what the offline runner cannot be made to send. Each body is built as
# edgechat frames it: ``meta``, the model's own events (tests.kit.upstream),
# then one ``done`` or ``error`` after a blank line.

GLM = "@cf/zai-org/glm-4.7-flash"
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"

# The blank line edgechat writes before its closing event, so that an upstream
# that stopped mid-line cannot glue onto it.
CLOSE_EVENT = "\n\n"


def ours(name: str, data: dict[str, Any]) -> str:
    """One of edgechat's own events."""
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


REQUEST_ID = "browser-test"


def meta(model: str = GLM) -> str:
    return ours("meta", {"request_id": REQUEST_ID, "model": model})


def done(model: str = GLM, **extra: Any) -> str:
    counts = usage()
    data = {"request_id": REQUEST_ID, "model": model, "finish_reason": "stop", "usage": counts}
    data["cost_usd"] = 1e-05
    return CLOSE_EVENT + ours("done", {**data, "ttft_ms": 40.0, **extra})


def error(code: str, message: str, *, retryable: bool) -> str:
    data = {"code": code, "message": message, "retryable": retryable, "request_id": REQUEST_ID}
    return CLOSE_EVENT + ours("error", data)


# --- emulator calls -------------------------------------------------------------------


def chat_messages(call: dict[str, Any]) -> list[tuple[str, str]]:
    """The conversation a logged emulator call received, without the server's system prompt."""
    messages = call["inputs"].get("messages", [])
    return [(m["role"], m["content"]) for m in messages if m["role"] != "system"]
