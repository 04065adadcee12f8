"""Starts edgechat under ``npm start`` (real ``wrangler dev`` on workerd) for
black-box tests, and talks to the Workers AI emulator.

The server is a separate process group (the launcher, wrangler, workerd);
tests only speak HTTP to it and read the emulator's call log, so the same
tests can target any server that serves edgechat (``EDGECHAT_BASE_URL``).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NODE = ROOT / "node_modules" / ".bin" / "node"
RUNNER = ROOT / "tools" / "workerd" / "dev.mjs"
READY = re.compile(rb"^Ready on (http://\S+)$", re.MULTILINE)
CLOCK = re.compile(rb"^Clock control on (http://\S+)$", re.MULTILINE)


@dataclass
class Runner:
    base_url: str
    process: subprocess.Popen[bytes]
    output: list[bytes]
    # With ``--clock-hook``: POST here with ``?advance_ms=N`` moves the Worker's clock.
    clock_url: str | None = None

    def log_text(self) -> str:
        return b"".join(self.output).decode(errors="replace")


def runner_command(
    config: Path, vars_file: Path | None = None, args: tuple[str, ...] = ()
) -> list[str]:
    cmd = [str(NODE), str(RUNNER)]
    cmd += ["--port", "0", "--config", str(config)]
    if vars_file is not None:
        cmd += ["--vars", str(vars_file)]
    return cmd + list(args)


@contextmanager
def start_runner(
    config: Path,
    *,
    vars_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 90.0,
    args: tuple[str, ...] = (),
) -> Iterator[Runner]:
    """Runs `npm start` on a free port until the block ends, then ends its group.
    ``args`` are more command-line options (``--memory-hook``).

    Its models do not cool down (``COOLDOWN_MAX_S=0``) unless the vars file
    says otherwise: the isolate lives for the whole suite, and a model a test
    made answer 3040 would otherwise be skipped by the tests after it."""
    with tempfile.TemporaryDirectory(prefix="edgechat-vars-") as folder:
        text = vars_file.read_text() if vars_file is not None else ""
        if not re.search(r"^COOLDOWN_MAX_S=", text, re.MULTILINE):
            text += "\nCOOLDOWN_MAX_S=0\n"
        merged = Path(folder) / "test.vars"
        merged.write_text(text)
        with _started(config, vars_file=merged, env=env, timeout=timeout, args=args) as runner:
            yield runner


@contextmanager
def _started(
    config: Path,
    *,
    vars_file: Path,
    env: Mapping[str, str] | None,
    timeout: float,
    args: tuple[str, ...] = (),
) -> Iterator[Runner]:
    proc_env = {k: v for k, v in os.environ.items() if not k.startswith("EDGECHAT_")}
    # Tests never talk to the real Workers AI.
    proc_env.pop("CLOUDFLARE_API_TOKEN", None)
    proc_env.pop("CLOUDFLARE_ACCOUNT_ID", None)
    proc_env.update(env or {})
    process = subprocess.Popen(
        runner_command(config, vars_file, args),
        cwd=ROOT,
        env=proc_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    output: list[bytes] = []
    ready = threading.Event()
    found: list[str] = []
    clock: list[str] = []

    def pump() -> None:
        # Keeps reading so the server never blocks on a full pipe.
        assert process.stdout is not None
        for line in iter(process.stdout.readline, b""):
            output.append(line)
            if clock_match := CLOCK.search(line):
                clock.append(clock_match.group(1).decode())
            match = READY.search(line)
            if match and not found:
                found.append(match.group(1).decode())
                ready.set()
        ready.set()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        if not ready.wait(timeout) or not found:
            text = b"".join(output).decode(errors="replace")
            raise RuntimeError(f"runner did not become ready:\n{text}")
        yield Runner(found[0], process, output, clock[0] if clock else None)
    finally:
        _stop(process)
        reader.join(timeout=5)
        assert process.stdout is not None
        process.stdout.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Asks `npm start` to shut down (it stops its own children), then makes sure
    nothing of its process group is left."""
    if process.poll() is None:
        process.terminate()
        with suppress(subprocess.TimeoutExpired):
            process.wait(timeout=10)
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def config_without_rate_limiter() -> Path:
    """wrangler.toml without the rate limiter, for runners whose requests all
    share one key (one bearer token): the fuzz, the black-box suites with a token."""
    text = (ROOT / "wrangler.toml").read_text()
    start = text.index("[[ratelimits]]")
    end = text.index("\n[", start + 1)
    text = (text[:start] + text[end + 1 :]).replace(
        'main = "src/entry.py"', 'main = "../src/entry.py"'
    )
    text = text.replace('directory = "./static"', 'directory = "../static"')
    text = text.replace('migrations_dir = "migrations"', 'migrations_dir = "../migrations"')
    assert "RATE_LIMITER" not in text
    path = ROOT / ".cache" / "test-no-rate-limiter.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


class EmulatorControl:
    """Scripts the Workers AI emulator and reads its call log.

    Under ``npm start`` the emulator reads its script and writes its log
    through files (the launcher's control server does it for the emulator
    Worker); an emulator run alone is driven over HTTP
    (``EDGECHAT_AI_CONTROL_URL``, see tools/emulator/README.md).

    A call an earlier test stopped may be logged after the next test's reset
    (its line is written when the stop reaches the emulator), so ``calls``
    leaves out the calls that started before the last reset.
    """

    def __init__(self, script_path: Path, log_path: Path, control_url: str | None = None) -> None:
        self.script_path = script_path
        self.log_path = log_path
        self.control_url = control_url
        self._since_ms = 0.0

    def reset(self) -> None:
        # The emulator's clock is this machine's wall clock (Date.now in
        # workerd, as of the event that started the call, in whole ms).
        self._since_ms = time.time() * 1000 - 5
        if self.control_url:
            import httpx

            httpx.put(self.control_url + "/__emulator/script", content=b"").raise_for_status()
            httpx.delete(self.control_url + "/__emulator/log").raise_for_status()
            return
        self.script_path.unlink(missing_ok=True)
        self.log_path.write_text("")

    def script(self, *rules: Mapping[str, Any], account: Mapping[str, Any] | None = None) -> None:
        """Sets the emulator's rules; ``account`` plays the account's state
        (``{"allocation": "used_up", "code": 4006}``)."""
        body = json.dumps({"rules": list(rules), **({"account": account} if account else {})})
        if self.control_url:
            import httpx

            httpx.put(self.control_url + "/__emulator/script", content=body).raise_for_status()
            return
        self.script_path.write_text(body)

    def calls(self) -> list[dict[str, Any]]:
        if self.control_url:
            import httpx

            response = httpx.get(self.control_url + "/__emulator/log")
            response.raise_for_status()
            text = response.text
        elif self.log_path.exists():
            text = self.log_path.read_text()
        else:
            return []
        calls = [json.loads(line) for line in text.splitlines() if line]
        return [call for call in calls if call.get("t_start", math.inf) >= self._since_ms]

    def wait_for_call(
        self, matches: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any] | None:
        """The first logged call that ``matches``, once it is logged (a line
        of an earlier test's call may come after a reset: a cancelled call
        is logged when its cancel reaches the emulator)."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((call for call in self.calls() if matches(call)), None)
            if found is not None or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def wait_for_calls(self, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            calls = self.calls()
            if len(calls) >= count or time.monotonic() > deadline:
                return calls
            time.sleep(0.02)


class VectorsLog:
    """The emulated Vectorize index's log (tools/emulator/vectorize.mjs), read
    from the file the launcher writes it to (``EDGECHAT_VECTORS_LOG``).

    One JSON record per call: ``method`` (upsert, insert, query, getByIds,
    deleteByIds), ``t_start`` (the emulator's clock, ms), a query's
    ``namespace``, ``filter``, ``topK``, ``returnMetadata``, ``unindexed``
    (filtered properties without a metadata index: they match nothing) and
    ``matches`` (ids), a mutation's ``count``, ``ids`` and ``mutationId``, a
    refusal's ``error``; and one ``{"event": "applied", "mutationId", "count",
    "stored"}`` record when a mutation shows in queries (the index applies
    mutations ``EDGECHAT_VECTORS_LAG_MS`` after the call, 100 ms by default,
    as the real one does seconds later).

    The index itself lives as long as the runner: ``reset`` starts a new
    log, never an empty index (tests keep apart by their own users).
    """

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self._since_ms = 0.0

    def reset(self) -> None:
        self._since_ms = time.time() * 1000 - 5
        self.log_path.write_text("")

    def records(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def calls(self, method: str | None = None) -> list[dict[str, Any]]:
        """The calls made since the last reset (``method``: of that method only)."""
        return [
            record
            for record in self.records()
            if "event" not in record
            and record.get("t_start", math.inf) >= self._since_ms
            and method in (None, record.get("method"))
        ]

    def queries(self) -> list[dict[str, Any]]:
        return self.calls("query")

    def wait_for_calls(
        self, count: int, method: str | None = None, timeout: float = 10.0
    ) -> list[dict[str, Any]]:
        """At least ``count`` calls (of ``method``) once they are logged, or
        the calls there are at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.calls(method)
            if len(calls) >= count or time.monotonic() > deadline:
                return calls
            time.sleep(0.02)

    def wait_until_applied(self, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Waits until every mutation made since the last reset shows in
        queries (its "applied" record is logged); returns those records.
        Raises ``TimeoutError`` naming the mutations still pending."""
        deadline = time.monotonic() + timeout
        while True:
            records = self.records()
            made = [
                record["mutationId"]
                for record in records
                if "mutationId" in record
                and "event" not in record
                and record.get("t_start", math.inf) >= self._since_ms
            ]
            applied = {
                record["mutationId"]: record
                for record in records
                if record.get("event") == "applied"
            }
            pending = [mutation for mutation in made if mutation not in applied]
            if not pending:
                return [applied[mutation] for mutation in made]
            if time.monotonic() > deadline:
                raise TimeoutError(f"Vectorize mutations not applied: {pending}")
            time.sleep(0.02)


def chat_first_bytes(client: Any, body: dict[str, Any]) -> tuple[float, float]:
    """Milliseconds from sending ``body`` to ``/chat`` to its ``meta`` event
    and to the first model event (the benches' first-byte figures)."""
    start = time.perf_counter()
    meta = token = 0.0
    with client.stream("POST", "/chat", json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if not meta and line == "event: meta":
                meta = time.perf_counter()
            elif meta and not token and line.startswith("data:") and '"choices"' in line:
                token = time.perf_counter()
    return (meta - start) * 1e3, (token - start) * 1e3
