// edgechat's offline runner: serves the Python Worker on 127.0.0.1 with the
// interpreter the edge uses (Pyodide), the project's real local bindings and
// the Workers AI emulator. Usage (see tools/runner/README.md):
//   npm start -- [--port N] [--host H] [--config FILE] [--vars FILE]
import { writeSync } from "node:fs";
import { createServer } from "node:http";
import { join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { unstable_readConfig } from "wrangler";
import { createEnv } from "./bindings.mjs";
import { ExecutionContext, PendingWork } from "./context.mjs";
import { loadWorker } from "./python.mjs";
import "./streams.mjs";

// V8's garbage collector as workerd sets it up: no incremental marking, so a
// major collection marks in one pause on the isolate's thread, as at the edge,
// where Node would mark incrementally and concurrently on helper threads
// (workerd `src/workerd/jsg/setup.c++`, `V8System::init`: "Since Worker heaps
// are generally relatively small ... incremental marking is probably not a win
// anyway"). V8 reads the flag each time it would start marking, so setting it
// here, before the Worker is loaded, covers every collection that matters.
setFlagsFromString("--noincremental-marking");

// Synchronous, so the last lines before an exit are not lost.
const log = (message) => writeSync(2, `[runner] ${message}\n`);

function parseCommandLine(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string", default: process.env.PORT ?? "8787" },
      host: { type: "string", default: "127.0.0.1" },
      config: { type: "string", default: "wrangler.toml" },
      vars: { type: "string" },
      "no-snapshot": { type: "boolean", default: false },
      quiet: { type: "boolean", default: false },
      "memory-every": { type: "string" },
      "memory-hook": { type: "boolean", default: false },
      "test-scheduled": { type: "boolean", default: false },
      "clock-hook": { type: "boolean", default: false },
    },
    strict: true,
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be a port number, got ${JSON.stringify(values.port)}`);
  }
  return { ...values, port };
}

// `run_worker_first`: true, or route patterns where `*` matches anything and a
// leading `!` excludes (exclusions win).
function workerFirstMatcher(setting) {
  if (setting === true) return () => true;
  if (!Array.isArray(setting) || setting.length === 0) return () => false;
  const compile = (pattern) => new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, "\\$&").replaceAll("*", ".*")}$`);
  const include = setting.filter((p) => !p.startsWith("!")).map(compile);
  const exclude = setting.filter((p) => p.startsWith("!")).map((p) => compile(p.slice(1)));
  return (path) => include.some((re) => re.test(path)) && !exclude.some((re) => re.test(path));
}

function toWebRequest(req, signal) {
  const headers = new Headers();
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    const name = req.rawHeaders[i];
    // Set by the edge from the TCP peer; a client cannot choose it.
    if (name.toLowerCase() === "cf-connecting-ip") continue;
    headers.append(name, req.rawHeaders[i + 1]);
  }
  headers.set("cf-connecting-ip", req.socket.remoteAddress?.replace(/^::ffff:/, "") ?? "");
  const url = `http://${req.headers.host ?? "127.0.0.1"}${req.url}`;
  const hasBody = req.method !== "GET" && req.method !== "HEAD";
  return new Request(url, {
    method: req.method,
    headers,
    body: hasBody ? Readable.toWeb(req) : undefined,
    duplex: hasBody ? "half" : undefined,
    signal,
  });
}

// Sends a web Response to the client chunk by chunk as it is produced: the
// headers go out at once and nothing is buffered.
async function sendResponse(req, res, response) {
  const headers = [];
  for (const [name, value] of response.headers) {
    if (name === "set-cookie") continue;
    headers.push([name, value]);
  }
  for (const cookie of response.headers.getSetCookie()) headers.push(["set-cookie", cookie]);
  res.writeHead(response.status, response.statusText || undefined, headers.flat());
  res.flushHeaders();
  if (!response.body || req.method === "HEAD") {
    await response.body?.cancel();
    res.end();
    return;
  }
  const reader = response.body.getReader();
  // workerd cancels the body with DISCONNECTED "pump canceled", which the
  // Worker sees as this error (internal.c++ pumpTo, jsg/util.c++).
  const stop = () => reader.cancel(new Error("Network connection lost.")).catch(() => {});
  res.on("close", stop);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (res.destroyed) return;
      if (!res.write(value)) {
        await new Promise((resolveDrain) => {
          res.once("drain", resolveDrain);
          res.once("close", resolveDrain);
        });
      }
    }
    res.end();
  } finally {
    res.off("close", stop);
  }
}

function plainError(res, status, text) {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { "content-type": "text/plain; charset=utf-8" });
  res.end(text);
}

// A JavaScript module Worker (`export default { fetch }`): used to compare the
// Python Worker with the same route in JavaScript, in the same runner.
async function loadJavaScriptWorker(mainPath, env) {
  const module = await import(pathToFileURL(mainPath).href);
  const pending = new PendingWork(log);
  return {
    pending,
    fetch: async (request) => module.default.fetch(request, env, new ExecutionContext(pending)),
  };
}

// The dev-only memory hook (`--memory-hook`): `GET /__runner/memory` answers
// the live memory as JSON, `?gc=1` after a forced collection. Benchmarks use
// it; it exists only in the runner, never in the Worker or at the edge.
const MEMORY_HOOK = "/__runner/memory";
const MIB = 1048576;
let forceGc = null;

// V8's `gc()`, from a context of its own: `node --expose-gc` would put it on
// globalThis, which is the Worker's `js` module too.
function enableForcedGc() {
  setFlagsFromString("--expose-gc");
  forceGc = runInNewContext("gc");
  setFlagsFromString("--no-expose-gc");
}

const nextTask = () => new Promise((resolveTask) => setTimeout(resolveTask, 0));

// Live memory, in MiB: RSS (which keeps pages the allocators freed), the JS
// heap in use, and the interpreter's memory (`python heap`, which only grows)
// and what its allocator has handed out (`python in use`).
function liveMemory(worker) {
  const { rss, heapUsed, external, arrayBuffers } = process.memoryUsage();
  const python = worker.memory?.() ?? { heap: 0, inUse: null };
  return {
    rss: rss / MIB,
    heapUsed: heapUsed / MIB,
    external: external / MIB,
    arrayBuffers: arrayBuffers / MIB,
    pythonHeap: python.heap / MIB,
    pythonInUse: python.inUse === null ? null : python.inUse / MIB,
  };
}

// Collects what can be collected: Python's cycles, then V8's whole heap.
// Each side's finalizers release the other's proxies (a collected PyProxy
// frees its Python object, which may drop a JsProxy), so a few rounds, with
// a task between them for the finalization callbacks.
async function collectGarbage(worker) {
  for (let round = 0; round < 3; round += 1) {
    worker.collect?.();
    forceGc?.();
    await nextTask();
  }
}

async function answerMemoryHook(req, res, worker) {
  const collect = new URL(req.url, "http://x").searchParams.get("gc") === "1";
  if (collect) await collectGarbage(worker);
  const body = JSON.stringify({
    ...liveMemory(worker),
    collected: collect && forceGc !== null,
    pythonObjects: worker.objects?.() ?? null,
    waitUntil: worker.pending.live.size,
    resources: process.getActiveResourcesInfo().reduce((counts, kind) => {
      counts[kind] = (counts[kind] ?? 0) + 1;
      return counts;
    }, {}),
  });
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

// `--test-scheduled`, as `wrangler dev --test-scheduled` serves a Python
// Worker (developers.cloudflare.com/workers/runtime-apis/handlers/scheduled/):
// `/cdn-cgi/handler/scheduled?cron=<pattern>` runs the Worker's scheduled
// handler with that cron (the config's first by default) at the clock's now.
const SCHEDULED_HOOK = "/cdn-cgi/handler/scheduled";

async function answerScheduledHook(req, res, worker, crons) {
  const cron = new URL(req.url, "http://x").searchParams.get("cron") ?? crons[0] ?? "* * * * *";
  if (!worker.scheduled) {
    plainError(res, 404, "The Worker has no scheduled handler.\n");
    return;
  }
  await worker.scheduled({ cron, scheduledTime: Date.now(), type: "scheduled", noRetry() {} });
  res.writeHead(200, { "content-type": "text/plain; charset=utf-8" });
  res.end("Ran scheduled event\n");
}

// The dev-only clock hook (`--clock-hook`): `POST /__runner/clock?advance_ms=N`
// moves the Worker's wall clock (Date.now, which Python's time.time reads in
// Pyodide) N ms ahead, for tests of what expires; it answers the new now.
// Timers and performance.now are untouched.
const CLOCK_HOOK = "/__runner/clock";

function answerClockHook(req, res) {
  const advance = Number(new URL(req.url, "http://x").searchParams.get("advance_ms"));
  if (req.method !== "POST" || !Number.isSafeInteger(advance) || advance < 0) {
    plainError(res, 400, "POST /__runner/clock?advance_ms=<whole ms, at least 0>\n");
    return;
  }
  clockOffset += advance;
  const body = JSON.stringify({ now: Date.now(), offset_ms: clockOffset });
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

let clockOffset = 0;

function enableClockHook() {
  const realNow = Date.now;
  Date.now = () => realNow() + clockOffset;
}

// Waits for `work`, but no longer than `ms`; a failure counts as done.
const within = (ms, work) => Promise.race([work.catch(() => {}), new Promise((r) => setTimeout(r, ms))]);

async function main() {
  const options = parseCommandLine(process.argv.slice(2));
  const configPath = resolve(options.config);
  const config = unstable_readConfig({ config: configPath });
  if (!config.main) throw new Error(`${configPath}: no main module`);

  const bindings = createEnv({ config, configPath, varsFile: options.vars, log });
  const env = bindings.then((b) => b.env);
  const worker = config.main.endsWith(".py")
    ? await loadWorker({
        projectDir: process.cwd(),
        mainPath: config.main,
        compatibilityFlags: config.compatibility_flags ?? [],
        env,
        cacheDir: options["no-snapshot"] ? null : join(process.cwd(), ".cache"),
        log,
      })
    : await loadJavaScriptWorker(config.main, await env);
  const { assets, dispose } = await bindings;
  // A bad setting stops the runner here, before `Ready on`, instead of
  // turning every request into a 500 whose reason is only in the log.
  const problem = worker.settingsProblem?.();
  if (problem) {
    const sources = [`${options.config} [vars]`, ".dev.vars", ...(options.vars ? [options.vars] : [])];
    log(`bad configuration (${sources.join(", ")}): ${problem}`);
    await within(3000, dispose());
    process.exit(2);
  }
  const workerFirst = workerFirstMatcher(config.assets?.run_worker_first);
  if (options["memory-hook"]) enableForcedGc();
  if (options["clock-hook"]) enableClockHook();
  const crons = config.triggers?.crons ?? [];

  const server = createServer(async (req, res) => {
    const started = performance.now();
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort(new Error("client disconnected"));
    });
    let via = "worker";
    try {
      const path = new URL(req.url, "http://x").pathname;
      if (options["memory-hook"] && path === MEMORY_HOOK) {
        via = "hook";
        await answerMemoryHook(req, res, worker);
        return;
      }
      if (options["test-scheduled"] && path === SCHEDULED_HOOK) {
        via = "scheduled";
        await answerScheduledHook(req, res, worker, crons);
        return;
      }
      if (options["clock-hook"] && path === CLOCK_HOOK) {
        via = "hook";
        answerClockHook(req, res);
        return;
      }
      if (assets && (req.method === "GET" || req.method === "HEAD") && !workerFirst(path)) {
        // A sandboxed frame's requests say "Origin: null"; the edge serves
        // static files whatever the Origin, but the local proxy refuses any
        // Origin that is not a local host name, so it is not passed on.
        const asset = await assets.fetch(`http://${req.headers.host ?? "127.0.0.1"}${req.url}`, {
          method: req.method,
          headers: Object.fromEntries(
            Object.entries(req.headers).filter(([k, v]) => typeof v === "string" && !(k === "origin" && v === "null")),
          ),
        });
        if (asset.status !== 404) {
          via = "assets";
          await sendResponse(req, res, asset);
          return;
        }
        await asset.body?.cancel();
      }
      const response = await worker.fetch(toWebRequest(req, abort.signal));
      await sendResponse(req, res, response);
    } catch (err) {
      log(`${req.method} ${req.url} failed:\n${err?.stack ?? err}`);
      plainError(res, 500, "Internal Server Error\n");
    } finally {
      if (!options.quiet) {
        log(`${req.method} ${req.url} ${res.statusCode} ${via} ${(performance.now() - started).toFixed(1)} ms`);
      }
    }
  });

  await new Promise((resolveListen, rejectListen) => {
    server.once("error", rejectListen);
    server.listen(options.port, options.host, resolveListen);
  });
  let stopping = false;
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: shutting down`);
    server.close();
    server.closeAllConnections();
    await within(2000, worker.pending.drain());
    await within(3000, dispose());
    process.exit(0);
  };
  // wrangler's platform proxy installs exit hooks that end the process at
  // once with 128+signal; ours closes the server and the proxy, then exits 0.
  for (const signal of ["SIGINT", "SIGTERM"]) {
    process.removeAllListeners(signal);
    process.on(signal, () => stop(signal));
  }

  if (options["memory-every"]) {
    // Live memory, for benchmarks: RSS alone keeps freed pages and says
    // little about leaks; the JS heap in use and the interpreter's heap do.
    const seconds = Number(options["memory-every"]);
    setInterval(() => {
      const m = liveMemory(worker);
      const inUse = m.pythonInUse === null ? "" : ` (${m.pythonInUse.toFixed(1)} in use)`;
      log(
        `memory: rss ${m.rss.toFixed(1)} MiB, js heap used ${m.heapUsed.toFixed(1)} MiB, ` +
          `python heap ${m.pythonHeap.toFixed(1)} MiB${inUse}`,
      );
    }, seconds * 1000).unref();
  }
  const { port } = server.address();
  console.log(`Ready on http://${options.host}:${port}`);
}

main().catch((err) => {
  log(err?.message ?? String(err));
  process.exit(1);
});
