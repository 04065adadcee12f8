"""What a shadow trial costs in CPU after the reply, on CPython: one
``/chat`` answer of about 1,000 tokens through ``app.handle`` with the
platform faked (SQLite as D1, a scripted AI binding that answers at once),
with every answer sampled (``SHADOW_RATE=1``: the challenger and the judge
read whole, the reservation and the settlement, the trial's row) beside the
same answer without trials, alternating, in one process.

    .venv/bin/python bench/shadow_cost.py [--rounds N]

Process CPU per request (``time.process_time``), the wait-until work
included; Pyodide in workerd is slower, so read the ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from edgechat.core.http import Incoming
from edgechat.web import app
from tests.unit.fakes import (
    FakeAi,
    FakeDb,
    FakeKv,
    FakePlatform,
    FakeSink,
    model,
    native_stream,
    openai_stream,
    usage,
)

KEY = "bench-token-0123456789ab"
BASE = {"API_KEYS": f"bench:{KEY}", "CACHE_MODE": "off", "USAGE_COUNTING": "off"}
TRIALS = {"SHADOW_MODEL": "kimi", "SHADOW_RATE": "1", "SHADOW_DAILY_USD": "1000"}
# About 1,000 tokens of answer, in 250 chunks.
WORDS = tuple(("content", "word " * 4) for _ in range(250))


def binding() -> FakeAi:
    glm, kimi, llama = (model(name) for name in ("glm", "kimi", "llama"))
    return FakeAi(
        {
            glm.id: openai_stream(*WORDS, usage=usage(200, 1_000)),
            kimi.id: openai_stream(*WORDS, usage=usage(200, 1_000)),
            llama.id: native_stream("A", usage=usage(2_400, 1)),
        }
    )


def one(vars: dict[str, str], db: FakeDb, settings: app.SettingsOnce) -> float:
    where = FakePlatform(vars=vars, ai=binding(), db=db, kv=FakeKv())
    where.body = json.dumps({"messages": [{"role": "user", "content": "Tell me more."}]}).encode()
    headers = {"content-type": "application/json", "authorization": f"Bearer {KEY}"}

    async def go() -> None:
        asked = Incoming("POST", "/chat", "https://c.example", headers)
        reply = await app.handle(asked, where, settings)
        assert reply.status == 200
        assert reply.stream is not None
        await reply.stream(FakeSink())
        await where.settle()

    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):  # the request's log lines
        asyncio.run(go())
    return (time.process_time() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=200)
    rounds = parser.parse_args().rounds
    runs = {"without trials": {**BASE}, "every answer tried": {**BASE, **TRIALS}}
    dbs = {name: FakeDb() for name in runs}
    settings = {name: app.SettingsOnce() for name in runs}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for n in range(rounds + 10):
        for name in runs if n % 2 else reversed(list(runs)):
            spent = one(runs[name], dbs[name], settings[name])
            if n >= 10:  # the first rounds warm the process
                times[name].append(spent)
    print(f"CPU ms per /chat answer, median of {rounds} (CPython {sys.version.split()[0]})")
    base = statistics.median(times["without trials"])
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {median:.2f} ms | {median / base:.1f}x |")


if __name__ == "__main__":
    main()
