"""A bad setting stops ``npm start`` before it serves, and stops a deploy; a
missing binding is named in the log, never a traceback.

``npm start`` checks the ``[vars]`` the Worker will see (wrangler config,
``.dev.vars``, ``--vars``) with the Worker's own settings parser before
wrangler starts; ``scripts/check-config.sh`` checks wrangler.toml's
``[vars]`` with the same parser before ``wrangler deploy``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROBE_CONFIG
from tests.harness import ROOT, runner_command, start_runner

CHECK_CONFIG = ROOT / "scripts" / "check-config.sh"
SECRET = "tok-s3cret-never-shown"


@dataclass(frozen=True)
class Exited:
    status: int
    stdout: str
    stderr: str


def _child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDGECHAT_")}
    env.pop("CLOUDFLARE_API_TOKEN", None)
    env.pop("CLOUDFLARE_ACCOUNT_ID", None)
    return env


def run_to_exit(cmd: list[str], timeout: float = 90.0) -> Exited:
    """Runs ``cmd`` in its own process group until it exits by itself; whatever
    of the group is left afterwards (or on a timeout) is ended."""
    process = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=_child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    finally:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
    return Exited(process.returncode, stdout.decode(), stderr.decode())


def project_config(folder: Path, vars_toml: Mapping[str, str]) -> Path:
    """edgechat's wrangler.toml in ``folder`` (so a ``.dev.vars`` can sit next
    to it) with its paths made absolute and ``[vars]`` replaced."""
    text = (ROOT / "wrangler.toml").read_text()
    text, mains = re.subn(r'(?m)^main = "(.+)"$', f'main = "{ROOT}/\\1"', text)
    text, dirs = re.subn(r'(?m)^directory = "\./(.+)"$', f'directory = "{ROOT}/\\1"', text)
    text, tables = re.subn(r"(?ms)^\[vars\]\n.*?(?=^\[)", "", text)
    text, migrations = re.subn(
        r'(?m)^migrations_dir = "(.+)"$', f'migrations_dir = "{ROOT}/\\1"', text
    )
    assert (mains, dirs, tables, migrations) == (1, 1, 1, 1), "wrangler.toml changed shape"
    # A JSON string is a TOML basic string: quotes and backslashes escaped alike.
    lines = [f"{name} = {json.dumps(value)}" for name, value in vars_toml.items()]
    config = folder / "wrangler.toml"
    config.write_text(text + "\n[vars]\n" + "\n".join(lines) + "\n")
    return config


def assert_refused(result: Exited, variable: str, rule: str) -> None:
    assert result.status == 2, result.stderr
    assert "Ready on" not in result.stdout + result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "bad configuration" in line]
    assert variable in line
    assert rule in line
    assert SECRET not in result.stdout + result.stderr


# (where the bad value is, variable, value, the rule the message states)
BAD = [
    ("--vars", "MODELS", "glm,foo", "lists an unknown model"),
    ("wrangler.toml", "DEFAULT_MODEL", "foo", "names an unknown model"),
    (".dev.vars", "IDLE_TIMEOUT_S", "soon", "must be a positive number of seconds"),
    ("--vars", "FIRST_TOKEN_TIMEOUT_S", "1e999", "must be a positive number of seconds"),
    ("--vars", "PRESETS", "[not json", "PRESETS must be a JSON array of presets"),
    (
        "--vars",
        "AUTO_ROUTES",
        '{"rules": [{"if": "maths", "use": ["glm"]}]}',
        "AUTO_ROUTES.rules[0].if must be one of images, long, code, reasoning, short",
    ),
]


@pytest.mark.parametrize(("source", "variable", "value", "rule"), BAD)
def test_npm_start_refuses_to_start_with_a_bad_setting(
    tmp_path: Path, source: str, variable: str, value: str, rule: str
) -> None:
    in_toml = {"API_TOKEN": SECRET} | ({variable: value} if source == "wrangler.toml" else {})
    config = project_config(tmp_path, in_toml)
    if source == ".dev.vars":
        (tmp_path / ".dev.vars").write_text(f"{variable}={value}\nAPI_TOKEN={SECRET}\n")
    vars_file = None
    if source == "--vars":
        vars_file = tmp_path / "test.vars"
        vars_file.write_text(f"{variable}={value}\nAPI_TOKEN={SECRET}\n")
    assert_refused(run_to_exit(runner_command(config, vars_file)), variable, rule)


def test_npm_start_starts_with_good_settings_from_every_source(tmp_path: Path) -> None:
    config = project_config(tmp_path, {"MODELS": "glm,llama"})
    (tmp_path / ".dev.vars").write_text(f"API_TOKEN={SECRET}\n")
    vars_file = tmp_path / "test.vars"
    vars_file.write_text("DEFAULT_MODEL=llama\nFALLBACK_CHAIN=llama\n")
    with start_runner(config, vars_file=vars_file) as runner:
        reply = httpx.get(
            runner.base_url + "/api/models",
            headers={"authorization": f"Bearer {SECRET}"},
            timeout=10,
        )
        assert reply.status_code == 200
        assert [(m["alias"], m["default"]) for m in reply.json()] == [
            ("glm", False),
            ("llama", True),
        ]
    assert "bad configuration" not in runner.log_text()


def test_without_an_ai_binding_the_answer_is_a_500_whose_log_names_it(tmp_path: Path) -> None:
    config = project_config(tmp_path, {"API_TOKEN": SECRET})
    text = config.read_text()
    config.write_text(text.replace('[ai]\nbinding = "AI"\nremote = true\n', ""))
    assert "[ai]" not in config.read_text()
    with start_runner(config) as runner:
        # What needs no model still works.
        assert httpx.get(runner.base_url + "/healthz", timeout=10).status_code == 200
        chat = httpx.post(
            runner.base_url + "/chat",
            json={"messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {SECRET}"},
            timeout=20,
        )
        assert chat.status_code == 500
        assert chat.json()["error"]["code"] == "misconfigured"
        assert "AI" not in chat.json()["error"]["message"]
    log = runner.log_text()
    (line,) = [line for line in log.splitlines() if '"error_code":"misconfigured"' in line]
    assert "no AI binding" in line
    assert "Traceback" not in log
    assert "AttributeError" not in log


def test_a_worker_without_edgechat_config_is_not_checked(tmp_path: Path) -> None:
    vars_file = tmp_path / "test.vars"
    vars_file.write_text("MODELS=glm,foo\n")
    with start_runner(PROBE_CONFIG, vars_file=vars_file) as runner:
        assert httpx.get(runner.base_url + "/echo", timeout=10).status_code == 200


def test_a_javascript_worker_still_starts() -> None:
    with start_runner(ROOT / "bench" / "passthrough-js" / "wrangler.toml") as runner:
        assert runner.base_url.startswith("http://127.0.0.1:")


# --- before deploy ----------------------------------------------------------


@pytest.mark.parametrize(("variable", "value", "rule"), [bad[1:] for bad in BAD])
def test_deploy_check_refuses_a_bad_setting(
    tmp_path: Path, variable: str, value: str, rule: str
) -> None:
    config = project_config(tmp_path, {variable: value, "API_TOKEN": SECRET})
    result = run_to_exit(["bash", str(CHECK_CONFIG), "--config", str(config)])
    assert_refused(result, variable, rule)
    assert "[vars]" in result.stderr


def test_deploy_check_passes_the_project_config() -> None:
    result = run_to_exit(["bash", str(CHECK_CONFIG)])
    assert (result.status, result.stderr) == (0, "")


def test_deploy_check_reads_the_environment_deployed(tmp_path: Path) -> None:
    config = project_config(tmp_path, {"MODELS": "glm"})
    with config.open("a") as file:
        file.write('\n[env.staging.vars]\nMODELS = "glm,foo"\n')
    assert run_to_exit(["bash", str(CHECK_CONFIG), "--config", str(config)]).status == 0
    result = run_to_exit(["bash", str(CHECK_CONFIG), "--config", str(config), "--env", "staging"])
    assert_refused(result, "MODELS", "lists an unknown model")
    assert "[env.staging.vars]" in result.stderr
