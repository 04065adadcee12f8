"""Fixtures of the black-box suite: one client address per test, and runners with other ``[vars]``.

Every test that posts to ``/chat`` connects from its own loopback address
(127.0.0.2, 127.0.0.3, …): workerd sets ``CF-Connecting-IP`` from the TCP
peer and the rate limiter counts per client, so tests never share a bucket.

Every response an edgechat server gives a test is held to the OpenAPI
document (``tests/kit/conformance.py``): a mismatch fails the test that saw
it, naming the operation, the status and the JSON path.

Behaviours that depend on configuration (auth, allowed origins, deadlines,
limits) or on the server's own output (the request log) need a server started
here with a vars file; against an external server (``EDGECHAT_BASE_URL``) they
are skipped, never passed.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import openai
import pytest

from tests.harness import (
    ROOT,
    EmulatorControl,
    Runner,
    VectorsLog,
    config_without_rate_limiter,
    start_runner,
)
from tests.kit import conformance

# Read timeout between two chunks of a response; streams send a ping at least
# every HEARTBEAT_S (15 s by default), so 30 s means "the server is stuck".
TIMEOUT = httpx.Timeout(30.0, connect=10.0)

_addresses = itertools.count(2)


@pytest.fixture(autouse=True)
def _conformance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every response of an edgechat server, checked against the document.
    At httpx's transports, so the suite's clients all pass it: httpx itself,
    httpx-sse, the official OpenAI clients and LangChain's. (The Node
    clients of ``test_openai_node.py`` and the raw sockets of
    ``test_chat_validation.py`` go around it.)"""
    conformance.RECORDER.take()
    conformance.install(monkeypatch)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> object:
    outcome = yield
    seen = conformance.RECORDER.take()
    if seen:
        shown = "\n".join(dict.fromkeys(seen))
        raise AssertionError(f"responses that do not match static/openapi.json:\n{shown}")
    return outcome


def _next_address() -> str:
    """A fresh loopback address, 127.0.0.2 upward (127/8 is all loopback on Linux)."""
    while True:
        n = next(_addresses)
        address = ipaddress.IPv4Address((127 << 24) + n)
        if str(address).split(".")[-1] not in ("0", "255"):
            return str(address)


def _is_loopback(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def external_server() -> str | None:
    return os.environ.get("EDGECHAT_BASE_URL") or None


def skip_if_external(why: str) -> None:
    if external_server():
        pytest.skip(f"EDGECHAT_BASE_URL is set: {why}")


ClientFactory = Callable[..., httpx.Client]


@pytest.fixture
def new_client(edgechat_url: str) -> Iterator[ClientFactory]:
    """Makes clients that each connect from a loopback address of their own."""
    clients: list[httpx.Client] = []

    def make(base_url: str | None = None) -> httpx.Client:
        url = base_url or edgechat_url
        transport = (
            httpx.HTTPTransport(local_address=_next_address()) if _is_loopback(url) else None
        )
        client = httpx.Client(base_url=url, transport=transport, timeout=TIMEOUT)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def token_client(new_client: ClientFactory, server: Server, token: str) -> httpx.Client:
    """A client of ``server`` that sends ``token`` as its bearer token."""
    made = new_client(server.url)
    made.headers.update({"authorization": f"Bearer {token}"})
    return made


@contextmanager
def openai_client(server: Server, token: str) -> Iterator[openai.OpenAI]:
    """The official client on ``server``'s ``/v1``, without retries."""
    with openai.OpenAI(base_url=server.url + "/v1", api_key=token, max_retries=0) as made:
        yield made


@pytest.fixture
def client(new_client: ClientFactory) -> httpx.Client:
    """A client of the default server, with a rate-limit bucket of its own."""
    return new_client()


@dataclass
class Server:
    """A runner started by this suite with its own ``[vars]`` and its own emulator."""

    url: str
    ai: EmulatorControl
    runner: Runner
    # The emulated Vectorize index's log (VECTORS).
    vectors: VectorsLog

    def log_text(self) -> str:
        return self.runner.log_text()


class ServerPool:
    """One runner per distinct vars set, kept for the module that asked for it."""

    def __init__(self, folder_factory: pytest.TempPathFactory) -> None:
        self._folders = folder_factory
        self._stack = ExitStack()
        self._servers: dict[frozenset[tuple[str, object]], Server] = {}

    def get(
        self,
        variables: Mapping[str, str],
        *,
        rate_limited: bool = True,
        args: tuple[str, ...] = (),
    ) -> Server:
        """A runner with these ``[vars]``; ``rate_limited=False`` leaves out
        the rate limiter (for suites whose requests all share one bearer
        token, the limiter's key); ``args``: more runner options
        (``--clock-hook``)."""
        skip_if_external("this test needs a runner with its own [vars] and output")
        key = frozenset([*variables.items(), ("rate_limited", str(rate_limited)), ("args", args)])
        server = self._servers.get(key)
        if server is None:
            server = self._start(variables, rate_limited, args)
            self._servers[key] = server
        server.ai.reset()
        server.vectors.reset()
        return server

    def _start(
        self, variables: Mapping[str, str], rate_limited: bool, args: tuple[str, ...]
    ) -> Server:
        folder = self._folders.mktemp("edgechat-vars")
        ai = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
        vectors = VectorsLog(folder / "vectors.jsonl")
        vars_file: Path | None = None
        if variables:
            vars_file = folder / "test.vars"
            vars_file.write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
        env = {
            "EDGECHAT_AI_SCRIPT": str(ai.script_path),
            "EDGECHAT_AI_LOG": str(ai.log_path),
            "EDGECHAT_AI_DELAY_MS": "0",
            "EDGECHAT_VECTORS_LOG": str(vectors.log_path),
        }
        config = ROOT / "wrangler.toml" if rate_limited else config_without_rate_limiter()
        runner = self._stack.enter_context(
            start_runner(config, vars_file=vars_file, env=env, args=args)
        )
        return Server(conformance.serving(runner.base_url), ai, runner, vectors)

    def close(self) -> None:
        self._stack.close()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerPool]:
    pool = ServerPool(tmp_path_factory)
    yield pool
    pool.close()
