"""The long fuzz run: ``tests/kit/fuzz.py``'s bodies against a runner of its
own (the vars, emulator script and fallback provider of ``tests/api/test_fuzz.py``),
100,000 by default. Prints the statuses and every defect (a case is named
by its seed and index: ``cases(seed, 1, index)`` gives its body again) and
exits 1 on any defect, or if the runner died.

    npm run bench:fuzz
    .venv/bin/python bench/fuzz.py --count 20000 --seed 7 --workers 4
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

import httpx  # noqa: E402

from tests.harness import EmulatorControl, config_without_rate_limiter, start_runner  # noqa: E402
from tests.kit.fake_provider import FakeProvider  # noqa: E402
from tests.kit.fuzz import (  # noqa: E402
    SCRIPT,
    STREAM_FAULTS,
    Verdict,
    cases,
    describe,
    send,
    server_vars,
)

# Progress and a liveness check this often (cases).
BATCH = 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000, help="bodies to send")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--workers", type=int, default=4, help="connections at once")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="edgechat-fuzz-") as folder_name:
        folder = Path(folder_name)
        ai = EmulatorControl(folder / "script.json", folder / "calls.jsonl")
        # The emulator's call log is not read here: it would only grow.
        env = {
            "EDGECHAT_AI_SCRIPT": str(ai.script_path),
            "EDGECHAT_AI_LOG": "/dev/null",
            "EDGECHAT_AI_DELAY_MS": "0",
        }
        with FakeProvider(api_key="sk-fuzz") as provider:
            vars_file = folder / "fuzz.vars"
            variables = server_vars(provider.url)
            vars_file.write_text("".join(f"{k}={v}\n" for k, v in variables.items()))
            ai.script(*SCRIPT)
            with start_runner(config_without_rate_limiter(), vars_file=vars_file, env=env) as r:
                print(f"fuzz: {args.count:,} bodies, seed {args.seed}, against {r.base_url}")
                return run(r.base_url, r.process.poll, args)


def run(url: str, exit_code: Callable[[], int | None], args: argparse.Namespace) -> int:
    statuses: collections.Counter[int | None] = collections.Counter()
    # Answered bodies that asked for a hostile model stream (GLM sends one;
    # tests/kit/fuzz.py, STREAM_FAULTS).
    faulty = 0
    defects: list[str] = []
    lock = threading.Lock()
    started = time.monotonic()
    local = threading.local()
    clients: list[httpx.Client] = []

    def one(index: int) -> Verdict:
        # One client per worker thread: its connections are reused.
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(base_url=url, timeout=httpx.Timeout(60.0))
            with lock:
                clients.append(client)
        return send(client, next(cases(args.seed, 1, index)))

    with ThreadPoolExecutor(args.workers) as pool:
        for start in range(0, args.count, BATCH):
            indexes = range(start, min(start + BATCH, args.count))
            for verdict in pool.map(one, indexes):
                with lock:
                    statuses[verdict.status] += 1
                    if verdict.status == 200 and _stream_fault(verdict.case.body):
                        faulty += 1
                    defects += [f"{describe(verdict.case)}: {d}" for d in verdict.defects]
            alive = exit_code() is None
            done = indexes.stop
            rate = done / (time.monotonic() - started)
            print(f"  {done:>7,} sent, {len(defects)} defects, {rate:.0f}/s", flush=True)
            if not alive:
                defects.append(f"the runner died before case {done}")
                break
    seconds = time.monotonic() - started
    for client in clients:
        client.close()
    print(f"statuses: {dict(sorted(statuses.items(), key=str))}")
    print(f"{sum(statuses.values()):,} bodies in {seconds:.0f} s, {len(defects)} defects")
    print(f"{faulty:,} answered bodies asked for a hostile stream ({', '.join(STREAM_FAULTS)})")
    for line in defects[:100]:
        print("DEFECT", line)
    if len(defects) > 100:
        print(f"... and {len(defects) - 100} more")
    return 1 if defects else 0


def _stream_fault(body: bytes) -> bool:
    return any(word.encode() in body for word in STREAM_FAULTS)


if __name__ == "__main__":
    sys.exit(main())
