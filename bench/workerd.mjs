// edgechat's figures from the real runtime (issue 37, item 6): the Python
// Worker (the project's wrangler.toml, or another checkout's with
// --python-config) and a JavaScript pass-through of the model's stream
// (bench/passthrough-js: /chat, and /v1/chat/completions behind the bearer
// token), BOTH in workerd under `wrangler dev` with the Workers AI emulator,
// in the same run and side by side, so the noisy machine hits both alike.
// Every comparison is a ratio or a difference, never a timed assertion.
//
//   npm run bench:workerd [-- --answers 4 --warm 1 --rounds 3 --delay-ms 20 --tokens 2000
//                            --fast-answers 4 --fast-rounds 3 --latency 40 --burst 40 --settle 5
//                            --cold 2 --no-snapshots --trace --python-config FILE]
//
// How each Worker is started. `npm start` (tools/workerd/dev.mjs) derives a
// runnable config from a wrangler.toml (for a Python Worker the experimental
// `python_workers_development` flag; `AI` bound to the emulator, a second
// config in the same workerd; the vars as .dev.vars) and runs `wrangler dev`
// on the pinned workerd. The cold starts marked "npm start" are that
// launcher itself. Everything else runs the config `npm start` derived
// (copied from its temporary folder while it runs, with copies of the
// Worker's and the emulator's sources, so edits to this checkout during a
// run do not restart workerd) with the same `wrangler dev` arguments,
// through a wrapper of tools/workerd/workerd.sh that adds the workerd flags
// the launcher cannot pass: the Python snapshot flags and, with --trace,
// `--async-trace`. Requests go to workerd's own entry socket, as `npm start`
// serves them (workerd.sh's EDGECHAT_ENTRY_ADDR), not through wrangler's
// reload proxy, which runs in a workerd of its own. "workerd" below is the
// process that runs the Workers (given `--inspector-addr`), found by pid
// among the launcher's descendants in /proc. Every launch gets a dev
// registry of its own (WRANGLER_REGISTRY_PATH): in the shared one, any other
// `wrangler dev` of edgechat coming or going restarts workerd. A figure that
// spans a restart is refused.
//
// What the CPU figures include. workerd runs the emulator and miniflare's
// own Workers (entry, assets) in the same process as the Worker under test.
// - "whole workerd CPU": utime + stime of that process (/proc/<pid>/stat, 10
//   ms ticks): the Worker, the emulator generating and streaming the answer
//   (the same work for both Workers: it is most of the figure), miniflare's
//   Workers, HTTP, native stream pumping, V8's helper threads. "its main
//   thread": the same for the thread every isolate runs on. The issue's
//   targets are read on the whole process, as the runner's figures were.
// - With --trace, "Worker isolate's lock": the time the Worker's own isolate
//   held its lock, from workerd's `--async-trace` file (each `turn` event
//   names its request context, each `ctx` event the context's Worker; a
//   turn's time under the lock is `end - locked`): the Worker's JavaScript or
//   Python and the C++ run for it under its lock; not the emulator, not
//   miniflare's isolates (shown apart), not what runs outside any lock (HTTP,
//   native pipes). It is wall time, so a turn the OS preempts counts whole
//   (the run prints all isolates' lock time over the main thread's CPU as a
//   check), and the trace's own writing inside turns is in it: tracing adds
//   to the whole process's CPU too (10-20 % in one pair of runs), so read
//   the whole-process ratios in a run without --trace.
//   No per-isolate CPU time was found offline: in workerd's source (snapshot
//   of 2026-08; not checked on the pinned binary) tail events' `cpuTime` is
//   0 ("0 /* cpu time */" in server.c++), `wrangler dev` logs each request's
//   wall time only, and `--perfetto-trace` was not examined.
// The Python Worker's config, for parts 2–5: the project's, without the rate
// limiter (20 requests a minute would refuse the answers) and without what
// miniflare runs in the same process for bindings the edge serves elsewhere
// (Workers Logs' collector for `observability`, KV, D1), as the runner's
// /chat and /v1 benchmarks left them out; API_TOKEN, CACHE_MODE=off and
// MAX_OUTPUT_TOKENS=4096 from a vars file. The cold starts run the project's
// config whole.
//
// The parts, in order:
// 1. Cold start, one launch at a time, --cold times each: Python and the JS
//    pass-through by `npm start`, then the same Python config run directly
//    without snapshot flags, with `--python-save-snapshot` (workerd writes
//    snapshot.bin into `--python-snapshot-dir`) and with
//    `--python-load-snapshot snapshot.bin` (the file the save run just
//    wrote). For each: from the launch to "Ready on", to the first answer's
//    first byte and to its end (a 16-token /chat answer, no pacing); from the
//    workerd process's start (/proc) to that first byte; workerd's CPU by
//    the end of the first answer; its RSS.
// 2. CPU per --tokens answer at zero delay: one Python and one JS workerd,
//    --fast-answers answers one after another, the Workers and the surfaces
//    taking turns, --fast-rounds rounds.
// 3. First byte added: 16-token answers from both in turn, --latency each per
//    surface, from the same two workerd: time to the response's first byte
//    and to the first answer text. Python's /chat first byte is its `meta`
//    event; the pass-through's is the model's first chunk.
// 4. CPU per --tokens answer at --delay-ms per token (a model's pace): four
//    workerd at once (Python /chat, Python /v1, JS /chat, JS /v1), --answers
//    answers at once in each, --warm rounds not counted, then --rounds
//    rounds. Ratios of means with a 95 % bootstrap interval over rounds
//    (bench/lib.mjs, `ratioOfMeans`), and each round's ratio.
// 5. Memory after a burst: --burst answers at once into the /chat workerd of
//    part 4, both at once: the process's RSS before, its peak (sampled every
//    100 ms), right after, and after --settle seconds. RSS is the whole
//    process (every isolate in it, the emulator's too, and what allocators
//    keep after freeing); Python's workerd minus the pass-through's, with the
//    same emulator and miniflare Workers in each, is what the Python isolate
//    adds.
import { spawn } from "node:child_process";
import {
  closeSync,
  cpSync,
  existsSync,
  fstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createServer, request } from "node:http";
import { cpus, loadavg, tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import {
  cpuSeconds,
  mainThreadCpuSeconds,
  mean,
  median,
  percentile,
  ROOT,
  ratioOfMeans,
  rssMiB,
  sleep,
} from "./lib.mjs";

const { values } = parseArgs({
  options: {
    answers: { type: "string", default: "4" },
    warm: { type: "string", default: "1" },
    rounds: { type: "string", default: "3" },
    "delay-ms": { type: "string", default: "20" },
    tokens: { type: "string", default: "2000" },
    "fast-answers": { type: "string", default: "4" },
    "fast-rounds": { type: "string", default: "3" },
    latency: { type: "string", default: "40" },
    burst: { type: "string", default: "40" },
    settle: { type: "string", default: "5" },
    cold: { type: "string", default: "2" },
    "no-snapshots": { type: "boolean", default: false },
    "python-config": { type: "string" },
    trace: { type: "boolean", default: false },
  },
});
const ANSWERS = Number(values.answers);
const WARM = Number(values.warm);
const ROUNDS = Number(values.rounds);
const DELAY_MS = Number(values["delay-ms"]);
const TOKENS = Number(values.tokens);
const FAST_ANSWERS = Number(values["fast-answers"]);
const FAST_ROUNDS = Number(values["fast-rounds"]);
const LATENCY = Number(values.latency);
const BURST = Number(values.burst);
const SETTLE_MS = Number(values.settle) * 1000;
const COLD = Number(values.cold);
const SNAPSHOTS = !values["no-snapshots"];

const TARGETS = { "/chat": 1.1, "/v1": 1.2 };
const COLD_TARGET_S = 1.5;
const TOKEN = "bench-token-0123456789";
const GLM = "@cf/zai-org/glm-4.7-flash";
const SHORT_TOKENS = 16;
const BIN = join(ROOT, "node_modules", ".bin");
const WORKERD_SH = join(ROOT, "tools", "workerd", "workerd.sh");
// Another checkout's config (say `git archive HEAD` unpacked in /tmp) measures
// that checkout's Worker with this one's tools.
const PYTHON_CONFIG = values["python-config"] ? resolve(values["python-config"]) : join(ROOT, "wrangler.toml");
const JS_CONFIG = join(ROOT, "bench", "passthrough-js", "wrangler.toml");
const PATHS = { "/chat": "/chat", "/v1": "/v1/chat/completions" };
const SURFACES = Object.keys(PATHS);
const LAUNCH_TIMEOUT_MS = 180_000;
const ANSWER_TIMEOUT_MS = 300_000; // of silence on the connection
const EMULATOR = "edgechat-ai-emulator";
const TRACE = values.trace;

const say = (message) => process.stderr.write(`[bench:workerd] ${message}\n`);

// --- processes, found in /proc ---------------------------------------------------

function children() {
  const byParent = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (!byParent.has(ppid)) byParent.set(ppid, []);
      byParent.get(ppid).push(Number(name));
    } catch {} // gone meanwhile
  }
  return byParent;
}

function descendants(pid) {
  const byParent = children();
  const found = [];
  const queue = [pid];
  while (queue.length > 0) {
    for (const child of byParent.get(queue.shift()) ?? []) {
      found.push(child);
      queue.push(child);
    }
  }
  return found;
}

function commandLine(pid) {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  } catch {
    return [];
  }
}

// The workerd that runs the Workers: wrangler gives it the inspector (its
// proxy's workerd has none).
function workerdOf(pid) {
  return descendants(pid).find((p) => {
    const args = commandLine(p);
    return args[0]?.endsWith("/workerd") && args.some((a) => a.startsWith("--inspector-addr"));
  });
}

// When the process started, in ms since boot (/proc/<pid>/stat `starttime`,
// in 10 ms ticks; /proc/uptime gives now on the same clock).
function startedAtMs(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]) * 10;
}

const uptimeMs = () => Number(readFileSync("/proc/uptime", "utf8").split(" ")[0]) * 1000;

// --- workerd's async trace: time under each isolate's lock ---------------------------

// Reads the `--async-trace` file as it grows. `ctx` events name each request
// context's Worker; `turn` events give a context's turn: queued at `start`,
// the isolate's lock taken at `locked`, released at `end` (nanoseconds).
class LockTime {
  constructor(path) {
    this.path = path;
    this.offset = 0;
    this.rest = "";
    this.workerOf = new Map();
    this.totals = new Map(); // Worker name -> ms under its lock
  }

  read() {
    if (!this.path || !existsSync(this.path)) return this.totals;
    const fd = openSync(this.path, "r");
    try {
      const size = fstatSync(fd).size;
      if (size < this.offset) throw new Error(`${this.path} shrank: was it written twice?`);
      const buffer = Buffer.alloc(size - this.offset);
      readSync(fd, buffer, 0, buffer.length, this.offset);
      this.offset = size;
      const lines = (this.rest + buffer.toString("utf8")).split("\n");
      this.rest = lines.pop();
      for (const line of lines) this.#take(line);
    } finally {
      closeSync(fd);
    }
    return this.totals;
  }

  #take(line) {
    if (!line.includes('"e":"ctx"') && !line.includes('"e":"turn"')) return;
    const event = JSON.parse(line);
    if (event.e === "ctx") this.workerOf.set(event.ctx, event.worker);
    else {
      const worker = this.workerOf.get(event.ctx) ?? "(unknown context)";
      this.totals.set(worker, (this.totals.get(worker) ?? 0) + (event.end - event.locked) / 1e6);
    }
  }

  // Each Worker's ms under its lock since `before` (a copy of `totals`).
  since(before) {
    const now = this.read();
    return new Map([...now].map(([worker, ms]) => [worker, ms - (before.get(worker) ?? 0)]));
  }

  mark() {
    return new Map(this.read());
  }
}

// --- launching ----------------------------------------------------------------------

// The emulator's script (EDGECHAT_AI_SCRIPT) for the directly run configs, as
// the launcher's control server serves it.
function startControl(scriptPath) {
  const server = createServer((req, res) => {
    if (req.method === "GET" && req.url === "/ai/script") {
      const text = readFileSync(scriptPath, "utf8");
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
      return;
    }
    res.writeHead(404).end();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

function waitForReady(child, label, started) {
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8");
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (text) => {
    stderr += text;
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${label}: no "Ready on" in ${LAUNCH_TIMEOUT_MS / 1000} s:\n${(stdout + stderr).slice(-3000)}`));
    }, LAUNCH_TIMEOUT_MS);
    child.stdout.on("data", (text) => {
      stdout += text;
      const match = /Ready on (http:\/\/[\d.]+:\d+)/.exec(stdout);
      if (match) {
        clearTimeout(timer);
        resolve({ url: match[1], readyMs: performance.now() - started, log: () => stdout + stderr });
      }
    });
    child.on("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${label}: exited (${signal ?? code}) before it was ready:\n${(stdout + stderr).slice(-3000)}`));
    });
  });
}

const launched = new Set();

// wrangler dev registers its Workers by name in a registry every `wrangler
// dev` on the machine shares, and restarts workerd when a Worker its
// bindings name (here the emulator) comes or goes there: other runs of
// edgechat (tests, `npm start`) would restart these mid-measurement. Each
// launch gets a registry of its own.
let registries = 0;
function privateRegistry() {
  registries += 1;
  const path = join(benchFolder, `registry-${registries}`);
  mkdirSync(path, { recursive: true });
  return path;
}
let benchFolder = tmpdir();

// `npm start`: tools/workerd/dev.mjs on a Worker's config.
async function npmStart(label, config, { vars, env = {} }) {
  const started = performance.now();
  const child = spawn(
    join(BIN, "node"),
    [join(ROOT, "tools", "workerd", "dev.mjs"), "--port", "0", "--config", config, "--vars", vars, "--quiet"],
    {
      cwd: ROOT,
      env: {
        ...process.env,
        PATH: `${BIN}:${process.env.PATH}`,
        CLOUDFLARE_API_TOKEN: "",
        WRANGLER_REGISTRY_PATH: privateRegistry(),
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  const proc = { label, child, started };
  launched.add(proc);
  Object.assign(proc, await waitForReady(child, label, started));
  proc.workerd = workerdOf(child.pid);
  if (!proc.workerd) throw new Error(`${label}: no workerd with an inspector among the launcher's processes`);
  return proc;
}

// The config `npm start` derived for `proc` (from its wrangler's `-c`
// arguments), copied into `folder` with its local state.
function copyDerived(proc, folder) {
  const wrangler = descendants(proc.child.pid)
    .map(commandLine)
    .find((args) => args.some((a) => a.endsWith("wrangler-dist/cli.js")) && args.includes("dev"));
  if (!wrangler) throw new Error(`${proc.label}: wrangler's process not found`);
  const configs = wrangler.flatMap((a, i) => (wrangler[i - 1] === "-c" ? [a] : []));
  const persist = wrangler[wrangler.indexOf("--persist-to") + 1];
  mkdirSync(folder, { recursive: true });
  const derived = JSON.parse(readFileSync(configs[0], "utf8"));
  const emulator = configs[1] ? JSON.parse(readFileSync(configs[1], "utf8")) : null;
  cpSync(persist, join(folder, "state"), { recursive: true });
  // The sources too: wrangler restarts workerd when a file it watches
  // changes, and others edit this checkout while the benchmark runs.
  const pin = (path, name) => {
    cpSync(dirname(path), join(folder, name), { recursive: true });
    return join(folder, name, basename(path));
  };
  derived.main = pin(derived.main, "worker");
  if (derived.assets?.directory) {
    cpSync(derived.assets.directory, join(folder, "assets"), { recursive: true });
    derived.assets.directory = join(folder, "assets");
  }
  if (emulator) emulator.main = pin(emulator.main, "emulator");
  // The vars (--vars), if the launcher hands them to wrangler as .dev.vars.
  const devVars = join(dirname(configs[0]), ".dev.vars");
  return { derived, emulator, folder, devVars: existsSync(devVars) ? readFileSync(devVars, "utf8") : null };
}

// A wrapper of tools/workerd/workerd.sh that adds BENCH_WORKERD_FLAGS to the
// workerd that runs the Workers (given --debug-port), not to wrangler's proxy.
function writeWrapper(folder) {
  const path = join(folder, "workerd-bench.sh");
  writeFileSync(
    path,
    `#!/usr/bin/env bash
set -euo pipefail
if [[ "\${1:-}" == serve && " $* " == *" --debug-port"* ]]; then
  shift
  # shellcheck disable=SC2086
  exec "${WORKERD_SH}" serve \${BENCH_WORKERD_FLAGS:-} "$@"
fi
exec "${WORKERD_SH}" "$@"
`,
    { mode: 0o755 },
  );
  return path;
}

// `wrangler dev` on a copied derived config, as `npm start` runs it, with
// extra workerd flags; the emulator paced at `delayMs` and scripted.
let runCount = 0;
async function runDirect(label, copied, { delayMs, flags = [], control, wrapper, edit = (c) => c }) {
  runCount += 1;
  const folder = join(copied.folder, `run-${runCount}`);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, "wrangler.json"), JSON.stringify(edit(structuredClone(copied.derived)), null, 2));
  if (copied.devVars !== null) writeFileSync(join(folder, ".dev.vars"), copied.devVars, { mode: 0o600 });
  const args = ["dev", "-c", join(folder, "wrangler.json")];
  if (copied.emulator) {
    const emulator = structuredClone(copied.emulator);
    emulator.vars = {
      ...emulator.vars,
      EDGECHAT_AI_DELAY_MS: String(delayMs),
      EDGECHAT_AI_CONTROL_URL: control,
      EDGECHAT_AI_SCRIPTED: "1",
      EDGECHAT_AI_LOGGED: "",
    };
    // A folder of its own, away from the Worker's .dev.vars.
    mkdirSync(join(folder, "emulator"));
    writeFileSync(join(folder, "emulator", "wrangler.json"), JSON.stringify(emulator, null, 2));
    args.push("-c", join(folder, "emulator", "wrangler.json"));
  }
  if (copied.derived.main.endsWith(".py")) {
    cpSync(join(ROOT, "python_modules"), join(folder, "python_modules"), { recursive: true, dereference: true });
  }
  cpSync(join(copied.folder, "state"), join(folder, "state"), { recursive: true });
  args.push(
    "--port",
    "0",
    "--ip",
    "127.0.0.1",
    "--inspector-port",
    "0",
    "--persist-to",
    join(folder, "state"),
    "--show-interactive-dev-session=false",
    "--live-reload=false",
  );
  // As `npm start` runs it: clients talk to workerd's own entry (workerd.sh
  // listens on EDGECHAT_ENTRY_ADDR and reports the port it got), not to
  // wrangler's proxy; the snapshot is only what `flags` ask for.
  const events = join(folder, "workerd-events.jsonl");
  const env = {
    ...process.env,
    PATH: `${BIN}:${process.env.PATH}`,
    MINIFLARE_WORKERD_PATH: wrapper,
    BENCH_WORKERD_FLAGS: flags.join(" "),
    EDGECHAT_PYODIDE_BUNDLE_DIR: join(ROOT, ".cache", "pyodide-bundle"),
    EDGECHAT_ENTRY_ADDR: "127.0.0.1:0",
    EDGECHAT_WORKERD_EVENTS: events,
    WRANGLER_SEND_METRICS: "false",
    WRANGLER_LOG_PATH: join(folder, "logs"),
    WRANGLER_REGISTRY_PATH: privateRegistry(),
  };
  for (const name of ["CLOUDFLARE_API_TOKEN", "CLOUDFLARE_ACCOUNT_ID", "EDGECHAT_PYTHON_SNAPSHOT_PLAN"])
    delete env[name];
  const started = performance.now();
  const child = spawn(join(BIN, "wrangler"), args, {
    cwd: folder,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const proc = { label, child, started, folder };
  launched.add(proc);
  Object.assign(proc, await waitForReady(child, label, started));
  proc.workerd = workerdOf(child.pid);
  if (!proc.workerd) throw new Error(`${label}: no workerd with an inspector among wrangler's processes`);
  // The control message goes through a `tee` (workerd.sh): it can come a
  // moment after wrangler's "Ready on".
  let port = entryPort(events);
  for (let tries = 0; port === null && tries < 100; tries += 1) {
    await sleep(50);
    port = entryPort(events);
  }
  if (port === null) throw new Error(`${label}: workerd reported no entry socket in ${events}`);
  proc.url = `http://127.0.0.1:${port}`;
  return proc;
}

// The port workerd's entry socket got, from its control messages
// ({"event":"listen","socket":"entry","port":N}, one JSON a line).
function entryPort(events) {
  if (!existsSync(events)) return null;
  let port = null;
  for (const line of readFileSync(events, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line);
    if (message.event === "listen" && message.socket === "entry") port = message.port;
  }
  return port;
}

// What workerd was told about the Python snapshot, from its command line.
function snapshotAction(pid) {
  const args = commandLine(pid);
  if (args.includes("--python-load-snapshot")) return "restored a snapshot";
  if (args.includes("--python-save-snapshot")) return "saved a snapshot";
  return "no snapshot";
}

// wrangler starts workerd again when a file it watches changes; a figure
// that spans a restart is not one process's, so the run stops there.
class Restarted extends Error {}

function checkSame(...procs) {
  for (const proc of procs) {
    const now = workerdOf(proc.child.pid);
    if (now !== proc.workerd) {
      throw new Restarted(
        `${proc.label}: workerd ${proc.workerd} was replaced by ${now ?? "nothing"} (wrangler restarts it when a file it watches changes)`,
      );
    }
  }
}

async function stop(proc) {
  launched.delete(proc);
  const pids = [proc.child.pid, ...descendants(proc.child.pid)].map((pid) => [pid, commandLine(pid).join(" ")]);
  if (proc.child.exitCode === null) {
    const exited = new Promise((resolve) => proc.child.once("exit", resolve));
    try {
      process.kill(-proc.child.pid, "SIGTERM");
    } catch {}
    await Promise.race([exited, sleep(10_000)]);
  }
  // What outlived its group (the launcher runs wrangler in a group of its
  // own), if it is still the process it was.
  for (const [pid, command] of pids) {
    if (commandLine(pid).join(" ") !== command) continue;
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
}

async function stopAll() {
  await Promise.all([...launched].map(stop));
}

// --- asking -------------------------------------------------------------------------

// One answer; it counts only if it is whole: its last word arrived and the
// stream ended as the surface ends one (`event: done` or `data: [DONE]`), with
// no error event.
function ask(url, surface, question, maxTokens, words) {
  const path = PATHS[surface];
  const body = JSON.stringify({
    model: GLM,
    messages: [{ role: "user", content: question }],
    max_tokens: maxTokens,
    ...(surface === "/v1" ? { stream: true } : {}),
  });
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let firstByte = null;
    let firstText = null;
    let firstByteUptime = null;
    let text = "";
    const req = request(
      `${url}${path}`,
      {
        method: "POST",
        agent: false,
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          authorization: `Bearer ${TOKEN}`,
        },
      },
      (res) => {
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          if (firstByte === null) {
            firstByte = performance.now();
            firstByteUptime = uptimeMs();
          }
          text += chunk;
          if (firstText === null && /"(content|reasoning_content|response)":"[^"]/.test(text)) {
            firstText = performance.now();
          }
        });
        res.on("end", () => {
          const end = performance.now();
          const complete =
            /event: done\n|data: \[DONE\]/.test(text) &&
            text.includes(`word${words - 1}"`) &&
            !/^data: \{"error"/m.test(text);
          if (res.statusCode !== 200 || !complete) {
            reject(new Error(`${surface}: ${res.statusCode}, ${text.length} chars, ending: ${text.slice(-300)}`));
            return;
          }
          resolve({
            firstByteMs: firstByte - t0,
            firstTextMs: firstText === null ? null : firstText - t0,
            endMs: end - t0,
            firstByteAt: firstByte,
            firstByteUptime,
            chars: text.length,
          });
        });
      },
    );
    // A workerd that goes away mid-answer closes the response without an
    // end; and no answer may hang the run.
    req.on("close", () => reject(new Error(`${surface}: the connection closed before the answer ended`)));
    req.setTimeout(ANSWER_TIMEOUT_MS, () => req.destroy(new Error(`${surface}: no answer in ${ANSWER_TIMEOUT_MS} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

const askLong = (proc, surface) => ask(proc.url, surface, "bench-long please", 4096, TOKENS);
const askShort = (proc, surface) => ask(proc.url, surface, "bench-short please", 4096, SHORT_TOKENS);

// The Worker's own isolate among a trace's Workers.
const workerName = (proc) => `core:user:${proc.workerName}`;

// `count` answers from `proc` (`parallel` at a time): whole-workerd CPU ms and
// ms under each isolate's lock, per answer.
async function costPerAnswer(proc, surface, count, parallel) {
  const cpuBefore = cpuSeconds(proc.workerd);
  const mainBefore = mainThreadCpuSeconds(proc.workerd);
  const lockBefore = proc.trace.mark();
  for (let done = 0; done < count; done += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - done) }, () => askLong(proc, surface)));
  }
  // Work a request leaves to waitUntil (the Python Worker's usage record)
  // ends after its last byte: give it a moment, and the trace its writes.
  await sleep(300);
  checkSame(proc);
  const cpu = ((cpuSeconds(proc.workerd) - cpuBefore) / count) * 1000;
  const main = ((mainThreadCpuSeconds(proc.workerd) - mainBefore) / count) * 1000;
  const lock = proc.trace.since(lockBefore);
  const isolate = (lock.get(workerName(proc)) ?? 0) / count;
  const emulator = (lock.get(`core:user:${EMULATOR}`) ?? 0) / count;
  let all = 0;
  for (const ms of lock.values()) all += ms;
  return { cpu, main, isolate, emulator, others: all / count - isolate - emulator, all: all / count };
}

// --- the parts ---------------------------------------------------------------------

function firstAnswer(proc, surface = "/chat") {
  return ask(proc.url, surface, "bench-short cold", SHORT_TOKENS, SHORT_TOKENS).then((answer) => {
    return {
      readyS: proc.readyMs / 1000,
      firstByteS: (answer.firstByteAt - proc.started) / 1000,
      endS: (answer.firstByteAt - answer.firstByteMs + answer.endMs - proc.started) / 1000,
      workerdToFirstByteS: (answer.firstByteUptime - startedAtMs(proc.workerd)) / 1000,
      readyToFirstByteS: answer.firstByteMs / 1000,
      cpuS: cpuSeconds(proc.workerd),
      rss: rssMiB(proc.workerd),
    };
  });
}

async function coldStarts(folder, { vars, script, control, wrapper }) {
  const env = { EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: "0" };
  const rows = new Map();
  const add = (name, result) => {
    if (!rows.has(name)) rows.set(name, []);
    rows.get(name).push(result);
  };
  let python = null;
  let js = null;
  const failures = [];
  for (let i = 0; i < COLD; i += 1) {
    say(`cold start ${i + 1}/${COLD}`);
    for (const [name, config] of [
      ["Python, npm start", PYTHON_CONFIG],
      ["JS pass-through, npm start", JS_CONFIG],
    ]) {
      const proc = await npmStart(name, config, { vars, env });
      try {
        const result = await firstAnswer(proc);
        add(config === PYTHON_CONFIG ? `${name} (${snapshotAction(proc.workerd)})` : name, result);
        if (config === PYTHON_CONFIG && !python) python = copyDerived(proc, join(folder, "python"));
        if (config === JS_CONFIG && !js) js = copyDerived(proc, join(folder, "js"));
      } finally {
        await stop(proc);
      }
    }
    const variants = [["Python, run directly, no snapshot", []]];
    const snapshotDir = join(folder, `snapshots-${i}`);
    if (SNAPSHOTS) {
      mkdirSync(snapshotDir, { recursive: true });
      variants.push(
        [
          "Python, run directly, --python-save-snapshot",
          ["--python-save-snapshot", "--python-snapshot-dir", snapshotDir],
        ],
        [
          "Python, run directly, --python-load-snapshot",
          ["--python-load-snapshot", "snapshot.bin", "--python-snapshot-dir", snapshotDir],
        ],
      );
    }
    for (const [name, flags] of variants) {
      let proc = null;
      try {
        proc = await runDirect(name, python, { delayMs: 0, flags, control, wrapper });
        const result = await firstAnswer(proc);
        const asked = flags.includes("--python-load-snapshot")
          ? "restored a snapshot"
          : flags.includes("--python-save-snapshot")
            ? "saved a snapshot"
            : "no snapshot";
        if (snapshotAction(proc.workerd) !== asked) {
          throw new Error(`workerd's command line says "${snapshotAction(proc.workerd)}", not "${asked}"`);
        }
        if (flags.includes("--python-save-snapshot")) {
          const file = join(snapshotDir, "snapshot.bin");
          result.snapshotMiB = existsSync(file) ? statSync(file).size / 2 ** 20 : null;
          if (result.snapshotMiB === null) failures.push(`${name}: no snapshot.bin in ${snapshotDir}`);
        }
        add(name, result);
      } catch (error) {
        failures.push(`${name}: ${error.message.split("\n").slice(0, 12).join("\n")}`);
      } finally {
        if (proc) await stop(proc);
      }
    }
  }
  return { rows, python, js, failures };
}

// --- main -------------------------------------------------------------------------------

function longReply(tokens) {
  return Array.from({ length: tokens }, (_, i) => (i === 0 ? "word0" : ` word${i}`)).join("");
}

const ms = (v) => `${v.toFixed(1)} ms`;
const interval = (r) => `${r.ratio.toFixed(2)}× [${r.low.toFixed(2)}–${r.high.toFixed(2)}]`;
const verdict = (r, target) =>
  r.high <= target ? "met" : r.low > target ? "not met" : "not resolved by this run (the interval spans it)";

async function main() {
  const folder = mkdtempSync(join(tmpdir(), "edgechat-bench-workerd-"));
  benchFolder = folder;
  const script = join(folder, "script.json");
  writeFileSync(
    script,
    JSON.stringify({
      rules: [
        { match: { contains: "bench-long" }, reply: { content: longReply(TOKENS) } },
        { match: { contains: "bench-short" }, reply: { content: longReply(SHORT_TOKENS) } },
      ],
    }),
  );
  const vars = join(folder, "bench.vars");
  writeFileSync(vars, `API_TOKEN=${TOKEN}\nCACHE_MODE=off\nMAX_OUTPUT_TOKENS=4096\n`);
  const control = await startControl(script);
  const controlUrl = `http://127.0.0.1:${control.address().port}`;
  const wrapper = writeWrapper(folder);
  const load = [loadavg()[0]];
  const began = performance.now();
  try {
    // 1. Cold starts, one launch at a time.
    const cold = await coldStarts(folder, { vars, script, control: controlUrl, wrapper });
    load.push(loadavg()[0]);

    // The processes of parts 2–5, each with its trace.
    // Without the rate limiter (it would refuse the answers), and without
    // what miniflare runs in the same process for bindings the edge serves
    // elsewhere: Workers Logs' collector (observability), KV and D1 (as
    // bench:chat and bench:v1 leave them out on the runner).
    const localOnly = ["ratelimits", "observability", "kv_namespaces", "d1_databases"];
    const start = (label, kind, delayMs) => {
      const trace = TRACE ? join(folder, `trace-${label.replaceAll(/\W+/g, "-")}.jsonl`) : null;
      const copied = kind === "python" ? cold.python : cold.js;
      return runDirect(label, copied, {
        delayMs,
        flags: TRACE ? ["--async-trace", trace] : [],
        control: controlUrl,
        wrapper,
        edit: (config) => {
          for (const key of localOnly) delete config[key];
          return config;
        },
      }).then((proc) => Object.assign(proc, { trace: new LockTime(trace), workerName: copied.derived.name }));
    };
    say(`starting six workerd${TRACE ? ", traced" : ""}`);
    const [fastPy, fastJs, pacedPyChat, pacedPyV1, pacedJsChat, pacedJsV1] = await Promise.all([
      start("python-0ms", "python", 0),
      start("js-0ms", "js", 0),
      start("python-chat", "python", DELAY_MS),
      start("python-v1", "python", DELAY_MS),
      start("js-chat", "js", DELAY_MS),
      start("js-v1", "js", DELAY_MS),
    ]);
    const paced = {
      "/chat": { python: pacedPyChat, js: pacedJsChat },
      "/v1": { python: pacedPyV1, js: pacedJsV1 },
    };
    // A surface whose answers fail (in either Worker) is measured no further
    // and reported with its first failure; its figures so far are dropped.
    const broken = new Map();
    const live = () => SURFACES.filter((surface) => !broken.has(surface));
    const guarded = async (surface, kind, work) => {
      try {
        return await work();
      } catch (error) {
        if (error instanceof Restarted) throw error;
        if (!broken.has(surface)) broken.set(surface, `${kind}: ${error.message.split("\n")[0].slice(0, 500)}`);
        return null;
      }
    };
    const perSurface = () => Object.fromEntries(SURFACES.map((surface) => [surface, { python: [], js: [] }]));

    // First requests of each path in each isolate (V8's and Python's first runs).
    for (const [kind, proc] of [
      ["python", fastPy],
      ["js", fastJs],
    ]) {
      for (const surface of SURFACES) {
        await guarded(surface, kind, async () => {
          for (let i = 0; i < 3; i += 1) await askShort(proc, surface);
          await askLong(proc, surface);
        });
      }
    }
    for (const surface of SURFACES) {
      for (const [kind, proc] of Object.entries(paced[surface])) {
        await guarded(surface, kind, async () => {
          for (let i = 0; i < 3; i += 1) await askShort(proc, surface);
        });
      }
    }

    // 2. Zero delay: the Workers and surfaces take turns, one answer at a time.
    say("zero delay");
    const fast = perSurface();
    for (let round = 0; round < FAST_ROUNDS; round += 1) {
      for (const surface of live()) {
        for (const kind of round % 2 === 0 ? ["python", "js"] : ["js", "python"]) {
          const proc = kind === "python" ? fastPy : fastJs;
          const cost = await guarded(surface, kind, () => costPerAnswer(proc, surface, FAST_ANSWERS, 1));
          if (cost) fast[surface][kind].push(cost);
        }
      }
    }

    // 3. First byte, short answers, in turn.
    say("first byte");
    const latency = perSurface();
    for (let i = 0; i < LATENCY; i += 1) {
      for (const surface of live()) {
        for (const kind of i % 2 === 0 ? ["python", "js"] : ["js", "python"]) {
          const answer = await guarded(surface, kind, () => askShort(kind === "python" ? fastPy : fastJs, surface));
          if (answer) latency[surface][kind].push(answer);
        }
      }
    }

    checkSame(fastPy, fastJs);

    // 4. A model's pace: the four processes at once, round after round.
    say(`${DELAY_MS} ms per token: ${WARM} warm-up and ${ROUNDS} rounds of ${ANSWERS} answers at once`);
    const pacedCost = perSurface();
    for (let round = 0; round < WARM + ROUNDS; round += 1) {
      const results = await Promise.all(
        live().flatMap((surface) =>
          ["python", "js"].map(async (kind) => [
            surface,
            kind,
            await guarded(surface, kind, () => costPerAnswer(paced[surface][kind], surface, ANSWERS, ANSWERS)),
          ]),
        ),
      );
      if (round < WARM) continue;
      for (const [surface, kind, cost] of results) if (cost) pacedCost[surface][kind].push(cost);
    }
    load.push(loadavg()[0]);

    // 5. A burst into the /chat processes, both at once.
    say(`a burst of ${BURST} answers at once`);
    const burst = {};
    await sleep(SETTLE_MS);
    const procs = { python: pacedPyChat, js: pacedJsChat };
    for (const [kind, proc] of Object.entries(procs)) burst[kind] = { before: rssMiB(proc.workerd), peak: 0 };
    const sampler = setInterval(() => {
      try {
        for (const [kind, proc] of Object.entries(procs)) {
          burst[kind].peak = Math.max(burst[kind].peak, rssMiB(proc.workerd));
        }
      } catch {} // a workerd gone: checkSame below says so
    }, 100);
    const t0 = performance.now();
    const settled = await Promise.all(
      Object.entries(procs).map(([kind, proc]) =>
        Promise.allSettled(Array.from({ length: BURST }, () => askLong(proc, "/chat"))).then((all) => [kind, all]),
      ),
    );
    clearInterval(sampler);
    checkSame(...Object.values(procs));
    for (const [kind, all] of settled) {
      burst[kind].complete = all.filter((r) => r.status === "fulfilled").length;
      burst[kind].seconds = (performance.now() - t0) / 1000;
      burst[kind].after = rssMiB(procs[kind].workerd);
    }
    await sleep(SETTLE_MS);
    checkSame(...Object.values(procs));
    for (const [kind, proc] of Object.entries(procs)) burst[kind].settled = rssMiB(proc.workerd);
    load.push(loadavg()[0]);

    report({ cold, fast, latency, pacedCost, burst, broken, load, seconds: (performance.now() - began) / 1000 });
  } finally {
    await stopAll();
    control.close();
    rmSync(folder, { recursive: true, force: true });
  }
}

function report({ cold, fast, latency, pacedCost, burst, broken, load, seconds }) {
  const workerd = JSON.parse(
    readFileSync(join(ROOT, "node_modules/@cloudflare/workerd-linux-64/package.json"), "utf8"),
  ).version;
  const pyodide = JSON.parse(readFileSync(join(ROOT, "node_modules/pyodide/package.json"), "utf8")).version;
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}; workerd ${workerd},` +
      ` Pyodide ${pyodide}; load average (1 min) ${load.map((l) => l.toFixed(1)).join(" → ")}; ${seconds.toFixed(0)} s`,
  );
  console.log(`Python Worker: ${PYTHON_CONFIG}; JS pass-through: ${JS_CONFIG}`);

  console.log(
    `\n1. Cold start (${COLD} launches each, one at a time; first answer: ${SHORT_TOKENS} tokens, no pacing):`,
  );
  console.log(
    `  ${"launch".padEnd(48)}   →Ready →1st byte →answer end | workerd start→1st byte | workerd CPU by then | RSS`,
  );
  const s = (v) => `${v.toFixed(2)} s`.padStart(8);
  for (const [name, results] of cold.rows) {
    for (const r of results) {
      console.log(
        `  ${name.padEnd(48)} ${s(r.readyS)} ${s(r.firstByteS)} ${s(r.endS)}   | ${s(r.workerdToFirstByteS)}` +
          `               | ${s(r.cpuS)}            | ${r.rss.toFixed(0)} MiB` +
          (r.snapshotMiB ? ` (snapshot.bin ${r.snapshotMiB.toFixed(1)} MiB)` : ""),
      );
    }
  }
  // Medians per kind of launch, and the Python ones over the pass-through's
  // (`npm start`: the same launcher, the same emulator and miniflare Workers).
  const medianOf = (name, key) => median(cold.rows.get(name).map((r) => r[key]));
  const js = "JS pass-through, npm start";
  console.log(
    `  medians; Python over the JS pass-through's ${medianOf(js, "workerdToFirstByteS").toFixed(2)} s` +
      ` (workerd start → first byte) and ${medianOf(js, "cpuS").toFixed(2)} s (workerd CPU); target ≤ ${COLD_TARGET_S} s` +
      " to the first answer, read on workerd start → first byte:",
  );
  for (const name of cold.rows.keys()) {
    if (name === js) continue;
    const v = medianOf(name, "workerdToFirstByteS");
    const cpu = medianOf(name, "cpuS");
    console.log(
      `    ${name.padEnd(48)} ${v.toFixed(2)} s (+${(v - medianOf(js, "workerdToFirstByteS")).toFixed(2)}),` +
        ` CPU ${cpu.toFixed(2)} s (+${(cpu - medianOf(js, "cpuS")).toFixed(2)}): ${v <= COLD_TARGET_S ? "met" : "not met"}`,
    );
  }
  for (const failure of cold.failures) console.log(`  FAILED: ${failure}`);

  const table = (title, data, targets) => {
    console.log(`\n${title}`);
    for (const surface of SURFACES) {
      if (broken.has(surface)) {
        console.log(`  ${surface.padEnd(6)} not measured: an answer failed (${broken.get(surface)})`);
        continue;
      }
      const { python, js } = data[surface];
      const m = (xs, key) => mean(xs.map((x) => x[key]));
      const ratio = (key) => ratioOfMeans([python.map((x) => x[key])], [js.map((x) => x[key])]);
      const each = (key) => python.map((p, r) => (p[key] / js[r][key]).toFixed(2)).join(", ");
      const pair = (key) => `Python ${ms(m(python, key))}, JS ${ms(m(js, key))}`;
      const whole = ratio("cpu");
      console.log(
        `  ${surface.padEnd(6)} whole workerd CPU   ${pair("cpu")}: ${interval(whole)}, Python adds ${ms(m(python, "cpu") - m(js, "cpu"))}` +
          ` (each round: ${each("cpu")})`,
      );
      console.log(`         its main thread   ${pair("main")}: ${interval(ratio("main"))}`);
      if (TRACE) {
        console.log(
          `         Worker isolate's lock ${pair("isolate")} (Python adds ${ms(m(python, "isolate") - m(js, "isolate"))});` +
            ` the emulator's ${pair("emulator")}; miniflare's isolates ${pair("others")}`,
        );
        console.log(
          `         all isolates' lock time / main-thread CPU: Python ${(m(python, "all") / m(python, "main")).toFixed(2)},` +
            ` JS ${(m(js, "all") / m(js, "main")).toFixed(2)} (over 1: turns the OS preempted count whole)`,
        );
      }
      if (targets) {
        console.log(
          `         target ≤ ${targets[surface]}× the pass-through's CPU: whole workerd ${verdict(whole, targets[surface])}`,
        );
      }
    }
  };
  table(
    `2. CPU per ${TOKENS}-token answer, zero delay (${FAST_ROUNDS} rounds × ${FAST_ANSWERS} answers one at a time, taking turns):`,
    fast,
  );

  console.log(
    `\n3. First byte, ${SHORT_TOKENS}-token answers at zero delay, ${LATENCY} each, in turn (ms from the request):`,
  );
  for (const surface of SURFACES) {
    if (broken.has(surface)) {
      console.log(`  ${surface.padEnd(6)} not measured: an answer failed (${broken.get(surface)})`);
      continue;
    }
    const { python, js } = latency[surface];
    const p = (xs, key, q) =>
      percentile(
        xs.map((x) => x[key]),
        q,
      );
    console.log(
      `  ${surface.padEnd(6)} first byte p50 / p95: Python ${p(python, "firstByteMs", 0.5).toFixed(2)} / ${p(python, "firstByteMs", 0.95).toFixed(2)},` +
        ` JS ${p(js, "firstByteMs", 0.5).toFixed(2)} / ${p(js, "firstByteMs", 0.95).toFixed(2)}` +
        ` → added ${(p(python, "firstByteMs", 0.5) - p(js, "firstByteMs", 0.5)).toFixed(2)} / ${(p(python, "firstByteMs", 0.95) - p(js, "firstByteMs", 0.95)).toFixed(2)};` +
        ` first answer text p50: Python ${p(python, "firstTextMs", 0.5).toFixed(2)}, JS ${p(js, "firstTextMs", 0.5).toFixed(2)}` +
        ` → added ${(p(python, "firstTextMs", 0.5) - p(js, "firstTextMs", 0.5)).toFixed(2)}`,
    );
  }

  table(
    `4. CPU per ${TOKENS}-token answer at ${DELAY_MS} ms per token (${ANSWERS} at once in each of four workerd at once;` +
      ` mean of ${ROUNDS} rounds after ${WARM} warm-up):`,
    pacedCost,
    TARGETS,
  );

  console.log(
    `\n5. A burst of ${BURST} ${TOKENS}-token /chat answers at once at ${DELAY_MS} ms per token, into both /chat workerd at once:`,
  );
  for (const [kind, b] of Object.entries(burst)) {
    console.log(
      `  ${(kind === "python" ? "Python" : "JS pass-through").padEnd(16)} ${b.complete}/${BURST} complete in ${b.seconds.toFixed(1)} s;` +
        ` workerd RSS ${b.before.toFixed(0)} MiB before → peak ${b.peak.toFixed(0)} → ${b.after.toFixed(0)} right after` +
        ` → ${b.settled.toFixed(0)} after ${SETTLE_MS / 1000} s`,
    );
  }
  const over = (key) => `${(burst.python[key] - burst.js[key]).toFixed(0)} MiB`;
  console.log(
    `  Python's workerd over the pass-through's (the same emulator and miniflare Workers in each): before` +
      ` ${over("before")}, peak ${over("peak")}, after ${SETTLE_MS / 1000} s ${over("settled")}`,
  );
}

// Interrupted: stop what it started and remove its folder, as `main` does.
const interrupted = (status) => () =>
  stopAll().then(() => {
    if (benchFolder !== tmpdir()) rmSync(benchFolder, { recursive: true, force: true });
    process.exit(status);
  });
process.on("SIGINT", interrupted(130));
process.on("SIGTERM", interrupted(143));
main().catch(async (error) => {
  console.error(error);
  await stopAll();
  process.exit(1);
});
