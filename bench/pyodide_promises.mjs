// What a JavaScript promise costs Python in Pyodide, the way edgechat's
// forwarded batches meet them (src/edgechat/platform/streams.py, BindingForward):
// the same `then` on a settled promise, made by a call from Python (Pyodide
// makes the promise a call returns a Python future at once, whose callbacks
// run when it settles, awaited or not) or through `[0].map(...)` (the
// promise stays in JavaScript, reached as an array's element), each left to
// settle or awaited. Microseconds per promise, in one Pyodide in this Node
// process, least of 5 runs, the settling included.
//
//   node bench/pyodide_promises.mjs [--n 20000]
import { parseArgs } from "node:util";
import { loadPyodide } from "pyodide";

const { values } = parseArgs({ options: { n: { type: "string", default: "20000" } } });
const pyodide = await loadPyodide();
const report = await pyodide.runPythonAsync(`
import time
from js import Array, Function, Object, Promise, Reflect

N = ${Number(values.n)}
then = Reflect.get(Promise.prototype, "then")
call_then = Function.prototype.call.bind(then)  # then(p, f) as a call: its promise a future
one = Array.of(0)
map_one = one.map.bind(one)


def settled():
    resolvers = Promise.withResolvers()
    resolvers.resolve(1)
    return resolvers.promise


async def least(make, *, wait_each):
    """Microseconds per promise make() gives, settled (and with wait_each,
    awaited) before the clock stops: a future's callbacks run in the event
    loop when its promise settles, awaited or not."""
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        last = None
        for _ in range(N):
            last = make()
            if wait_each:
                await last
        await last  # the loop has run every earlier one's callbacks by now
        best = min(best, time.perf_counter() - started)
    return best / N * 1e6


rows = [
    ("then(p, f) called from Python, left to settle: a future", await least(lambda: call_then(settled(), Object), wait_each=False)),
    ("[0].map(then.bind(p, f))[0], left to settle: no future", await least(lambda: map_one(then.bind(settled(), Object))[0], wait_each=False)),
    ("then(p, f) called from Python, awaited", await least(lambda: call_then(settled(), Object), wait_each=True)),
    ("[0].map(then.bind(p, f))[0], awaited", await least(lambda: map_one(then.bind(settled(), Object))[0], wait_each=True)),
]
"\\n".join(f"{us:8.1f} µs  {name}" for name, us in rows)
`);
console.log(
  `Pyodide ${pyodide.version}, Node ${process.version}, µs per promise, its settling included (least of 5 runs of ${values.n}):`,
);
console.log(report);
