// The leaderboard's assembly in Pyodide (the interpreter Python Workers
// run), in this Node process: what GET /api/leaderboard does with D1's rows
// (the speed samples' JSON parsed, their medians, the Bradley-Terry fits),
// for three models with full samples, blind and open, beside CPython's
// figure that bench/leaderboard.py prints. The package's source is mounted
// read-only.
//
//   node bench/leaderboard_cpu.mjs [--rounds N]
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPyodide } from "pyodide";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "30" } } });
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const pyodide = await loadPyodide();
pyodide.FS.mkdirTree("/repo");
pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root }, "/repo");
await pyodide.runPythonAsync(`
import sys, json, random, statistics, time
sys.path[:0] = ["/repo/src"]
from edgechat.core.models import CATALOG
from edgechat.feedback import leaderboard

draw = random.Random(39)
models = [m.id for m in CATALOG][:3]
votes = [
    {"blind": b, "model": m, "votes": 100, "wins": 50, "losses": 40, "ties": 5, "both_bad": 5}
    for b in (0, 1) for m in models
]
pairs = [
    {"blind": b, "a": a, "b": c, "a_wins": 30, "b_wins": 20, "ties": 5}
    for b in (0, 1) for a in models for c in models if a < c
]
counts = [
    {"model": m, "answers": 1000, "failed": 10, "priced": 990, "cost_usd": 1.5, "up": 10, "down": 3}
    for m in models
]
n = leaderboard.SAMPLE
def sample(m):
    if m.id not in models:
        return [{"ttft_ms": "[]", "tokens_per_s": "[]"}]
    ttft = json.dumps([round(draw.lognormvariate(6, 0.35), 1) for _ in range(n)])
    pace = json.dumps([round(draw.lognormvariate(4, 0.2), 2) for _ in range(n)])
    return [{"ttft_ms": ttft, "tokens_per_s": pace}]
results = [votes, pairs, counts, *(sample(m) for m in CATALOG)]
def timed():
    started = time.perf_counter()
    leaderboard.from_results(results)
    return (time.perf_counter() - started) * 1000
first = timed()
# V8 tiers Pyodide's WebAssembly up as it runs: an isolate that has served
# a few boards runs them at the later figure.
early = [timed() for _ in range(${Number(values.rounds)})]
late = [timed() for _ in range(${Number(values.rounds)})]
print(f"the board's assembly in Pyodide, 3 models, samples of {n}: first {first:.2f} ms; "
      f"the next ${Number(values.rounds)}: median {statistics.median(early):.2f} ms; "
      f"the ${Number(values.rounds)} after: median {statistics.median(late):.2f} ms, max {max(late):.2f} ms")
`);
