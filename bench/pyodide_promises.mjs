// What a JavaScript promise costs Python in Pyodide, the way edgechat's
// forwarded batches meet them (src/edgechat/platform.py, BindingForward):
// a promise a JS call returns (Pyodide makes it a Python future at once,
// awaited or not), one reached as a property (it stays a plain proxy), and
// a `then` made in JavaScript through `[0].map(...)`. Microseconds per
// operation, in one Pyodide in this Node process, least of 5 runs.
//
//   node bench/pyodide_promises.mjs [--n 20000]
import { parseArgs } from "node:util";
import { loadPyodide } from "pyodide";

const { values } = parseArgs({ options: { n: { type: "string", default: "20000" } } });
const pyodide = await loadPyodide();
const report = await pyodide.runPythonAsync(`
import time
from js import Array, Object, Promise, Reflect

N = ${Number(values.n)}
then = Reflect.get(Promise.prototype, "then")
one = Array.of(0)


def least(step):
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(N):
            step()
        best = min(best, time.perf_counter() - started)
    return best / N * 1e6


async def least_async(step):
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(N):
            await step()
        best = min(best, time.perf_counter() - started)
    return best / N * 1e6


def settled():
    resolvers = Promise.withResolvers()
    resolvers.resolve(1)
    return resolvers


async def await_call():
    await Promise.resolve(1)  # a call's promise: a future


async def await_property():
    await settled().promise  # a property's promise: a proxy


async def await_chain():
    # A then made in JavaScript, its promise kept in an array: one proxy.
    await one.map(then.bind(settled().promise, Object))[0]


rows = [
    ("Promise.withResolvers(): an object, no future", least(Promise.withResolvers)),
    ("a call returning a promise, not awaited: a future", least(lambda: Promise.resolve(1))),
    ("[0].map(then.bind(p, f))[0]: a promise, no future", least(lambda: one.map(then.bind(settled().promise, Object))[0])),
    ("await of a call's promise", await least_async(await_call)),
    ("await of a property's promise (with its withResolvers)", await least_async(await_property)),
    ("await of a then made through map (with its withResolvers)", await least_async(await_chain)),
]
"\\n".join(f"{us:8.1f} µs  {name}" for name, us in rows)
`);
console.log(`Pyodide ${pyodide.version}, Node ${process.version}, µs per operation (least of 5 runs of ${values.n}):`);
console.log(report);
