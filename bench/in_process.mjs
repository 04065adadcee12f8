// The Worker loaded in this process as the runner loads it (no HTTP to it),
// for the benches that measure the Worker's own CPU: identity_cost.mjs,
// history_cost.mjs, request_cost.mjs.
import { join } from "node:path";
import { loadWorker } from "../tools/runner/python.mjs";
import { ROOT } from "./lib.mjs";

const quiet = () => {};

// The Worker of the checkout at `root` over `env`.
export function loadInProcess(env, config, root = ROOT) {
  return loadWorker({
    projectDir: root,
    mainPath: join(root, "src/entry.py"),
    compatibilityFlags: config.compatibility_flags ?? [],
    env,
    cacheDir: join(ROOT, ".cache"),
    log: quiet,
  });
}

// One request: this process's CPU (Python and the JavaScript it calls) and
// the wall time to the first byte of the answer; the rest of the answer is
// read, and the Worker's work after it drained, outside the measure.
export async function firstByteCost(worker, request) {
  const started = performance.now();
  const before = process.cpuUsage();
  const response = await worker.fetch(request);
  const reader = response.body.getReader();
  await reader.read();
  const used = process.cpuUsage(before);
  const wall = performance.now() - started;
  while (!(await reader.read()).done) {
    // the rest of the answer, outside the measure
  }
  await worker.pending.drain();
  return { cpu: (used.user + used.system) / 1000, wall };
}
