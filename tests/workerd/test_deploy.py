"""What a deploy carries: the project's own ``wrangler.toml``, which never holds
the flags only local runs add (``npm start`` puts them in a derived config in
a temporary folder; tools/workerd/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.harness import NODE, ROOT

# Experimental compatibility flags: workerd refuses them without
# --experimental, which wrangler passes in local runs and the edge never does.
LOCAL_ONLY_FLAGS = ("python_workers_development", "enable_abortsignal_rpc")


def test_a_dry_run_deploy_carries_no_experimental_flag(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{NODE.parent}:{os.environ['PATH']}"}
    env.pop("CLOUDFLARE_API_TOKEN", None)
    env["WRANGLER_SEND_METRICS"] = "false"
    env["WRANGLER_LOG_PATH"] = str(tmp_path / "logs")

    def run(*cmd: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done

    outdir = tmp_path / "dist"
    dry_run = run(str(NODE.parent / "wrangler"), "deploy", "--dry-run", "--outdir", str(outdir))
    assert "--dry-run: exiting now." in dry_run.stdout
    bundled = [p for p in outdir.rglob("*") if p.is_file()]
    assert any(p.name == "entry.py" for p in bundled)
    # The flags the deploy would upload, as wrangler reads them from the
    # config it deploys.
    read = run(
        str(NODE),
        "--input-type=module",
        "-e",
        "import { unstable_readConfig } from 'wrangler';"
        "const c = unstable_readConfig({ config: 'wrangler.toml' });"
        "console.log(JSON.stringify(c.compatibility_flags));",
    )
    flags = json.loads(read.stdout.strip().splitlines()[-1])
    assert flags == ["python_workers"]
    for flag in LOCAL_ONLY_FLAGS:
        assert flag not in (ROOT / "wrangler.toml").read_text()
        assert flag not in dry_run.stdout + dry_run.stderr
        for path in bundled:
            if path.suffix in (".py", ".toml", ".json", ".js", ".mjs"):
                assert flag not in path.read_text(errors="replace"), path
