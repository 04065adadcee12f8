"""Starting and stopping the runner from the command line."""

from __future__ import annotations

import signal
import subprocess

import httpx
import pytest

from tests.conftest import PROBE_CONFIG
from tests.harness import ROOT, Runner, runner_command, start_runner

MEMORY_HOOK = "/__runner/memory"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_runner_exits_cleanly_on_signal(sig: signal.Signals) -> None:
    with start_runner(PROBE_CONFIG) as runner:
        assert httpx.get(runner.base_url + "/echo", timeout=10).status_code == 200
        runner.process.send_signal(sig)
        assert runner.process.wait(timeout=15) == 0
    assert "shutting down" in runner.log_text()


def test_ready_line_names_the_port_it_listens_on() -> None:
    with start_runner(PROBE_CONFIG) as runner:
        # base_url is parsed from the Ready line; the proof is that the port it
        # names (asked for as 0) is the one answering.
        assert f"Ready on {runner.base_url}\n" in runner.log_text()
        port = int(runner.base_url.rsplit(":", 1)[1])
        assert port > 0
        echoed = httpx.get(f"http://127.0.0.1:{port}/echo", timeout=20).json()
        assert echoed["url"].startswith(f"http://127.0.0.1:{port}/")


def test_bad_arguments_fail_fast_with_a_message() -> None:
    cmd = runner_command(PROBE_CONFIG)
    cmd[cmd.index("--port") + 1] = "not-a-port"
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, timeout=60, check=False)
    assert result.returncode != 0
    assert b"--port must be a port number" in result.stderr


def test_memory_hook_reports_live_memory_after_a_forced_collection(probe: Runner) -> None:
    # Without --memory-hook the path is the Worker's like any other.
    assert httpx.get(probe.base_url + MEMORY_HOOK, timeout=20).status_code == 404
    with start_runner(PROBE_CONFIG, args=("--memory-hook",)) as runner:
        live = httpx.get(runner.base_url + MEMORY_HOOK, timeout=20)
        assert live.status_code == 200
        assert live.headers["content-type"] == "application/json"
        report = live.json()
        assert report["collected"] is False
        collected = httpx.get(runner.base_url + MEMORY_HOOK, params={"gc": "1"}, timeout=20).json()
        assert collected["collected"] is True
        for field in ("rss", "heapUsed", "pythonHeap", "pythonInUse"):
            assert collected[field] > 0, field
        assert collected["pythonObjects"] > 0
        assert collected["waitUntil"] == 0
        assert isinstance(collected["resources"], dict)
        # The forced collection is the runner's own: the Worker never sees V8's gc().
        names = {"names": "gc,fetch"}
        seen = httpx.get(runner.base_url + "/globals", params=names, timeout=20).json()
        assert seen == {"gc": False, "fetch": True}
