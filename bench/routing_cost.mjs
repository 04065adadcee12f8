// bench/routing_cost.py in Pyodide (the interpreter Python Workers run), in
// this Node process: the package's source mounted read-only, the same
// script, the same table.
//
//   node bench/routing_cost.mjs [--rounds N]
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { loadPyodide } from "pyodide";

const { values } = parseArgs({ options: { rounds: { type: "string", default: "15" } } });
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const pyodide = await loadPyodide();
pyodide.FS.mkdirTree("/repo");
pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root }, "/repo");
await pyodide.runPythonAsync(`
import sys
sys.path[:0] = ["/repo/src", "/repo/bench"]
import routing_cost
routing_cost.run(${Number(values.rounds)})
`);
