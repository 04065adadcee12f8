"""Starting and stopping ``npm start`` (tools/workerd/dev.mjs) from the command line."""

from __future__ import annotations

import signal
import subprocess
from contextlib import suppress
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROBE_CONFIG
from tests.harness import ROOT, runner_command, start_runner


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_runner_exits_cleanly_on_signal(sig: signal.Signals) -> None:
    with start_runner(PROBE_CONFIG) as runner:
        assert httpx.get(runner.base_url + "/echo", timeout=10).status_code == 200
        runner.process.send_signal(sig)
        assert runner.process.wait(timeout=15) == 0
        # wrangler, esbuild, workerd and its control-message copier went
        # before it: looked at before start_runner kills what is left of the
        # group. (wrangler's wrapper exits before its node's children do:
        # seen on wrangler 4.164.)
        assert group_members(runner.process.pid) == []
    assert "shutting down" in runner.log_text()


def group_members(pgid: int) -> list[str]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                members.append(stat.parent.name)
    return members


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
