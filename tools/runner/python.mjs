// Hosts the Python Worker in Pyodide the way workerd does: the Worker's files
// at /session/metadata, vendored packages at /session/metadata/python_modules
// (both ahead of site-packages), the two runtime-provided modules the
// `workers` SDK imports, and one `Default(ctx, env)` per request.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { loadPyodide, version as pyodideVersion } from "pyodide";
import { ExecutionContext, PendingWork } from "./context.mjs";
// Installs IdentityTransformStream and workerd's stream semantics on
// globalThis before the Worker is imported (Pyodide's `js` is globalThis).
import "./streams.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const WORKER_ROOT = "/session/metadata";
// Imported while building the snapshot so every boot starts with them warm.
// biome-ignore format: a packed list reads better than one name a line
const WARM_MODULES = [
  "asyncio", "json", "codecs", "http.client", "email.message", "inspect",
  "functools", "dataclasses", "enum", "typing", "collections.abc", "hmac",
  "secrets", "time", "uuid", "logging", "datetime", "contextlib", "urllib.parse",
];

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    if (name === "__pycache__" || name.startsWith(".")) continue;
    const full = join(dir, name);
    if (statSync(full).isDirectory()) out.push(...walk(full));
    else out.push(full);
  }
  return out;
}

function copyTree(pyodide, hostDir, fsDir) {
  for (const file of walk(hostDir)) {
    const target = join(fsDir, relative(hostDir, file));
    pyodide.FS.mkdirTree(dirname(target));
    pyodide.FS.writeFile(target, readFileSync(file));
  }
}

// A booted interpreter restored from a memory snapshot starts in a fraction of
// a cold boot; the snapshot is keyed by the Pyodide version and this file.
async function bootInterpreter({ cacheDir, log }) {
  const io = { stdout: (line) => console.log(line), stderr: (line) => console.error(line) };
  const key = createHash("sha256")
    .update(pyodideVersion)
    .update(readFileSync(fileURLToPath(import.meta.url)))
    .digest("hex")
    .slice(0, 16);
  const snapshotPath = cacheDir && join(cacheDir, `pyodide-${pyodideVersion}-${key}.snapshot`);
  if (snapshotPath && existsSync(snapshotPath)) {
    try {
      const bytes = new Uint8Array(readFileSync(snapshotPath));
      return await loadPyodide({ ...io, _loadSnapshot: bytes });
    } catch (err) {
      log(`snapshot ${snapshotPath} unusable (${err.message}); booting cold`);
    }
  }
  const pyodide = await loadPyodide({ ...io, _makeSnapshot: Boolean(snapshotPath) });
  pyodide.runPython(WARM_MODULES.map((m) => `import ${m}`).join("\n"));
  if (!snapshotPath) return pyodide;
  let snapshot;
  try {
    snapshot = pyodide.makeMemorySnapshot();
    mkdirSync(cacheDir, { recursive: true });
    // Written aside and renamed: runners started together never read half a file.
    const partial = `${snapshotPath}.${process.pid}.tmp`;
    writeFileSync(partial, snapshot);
    renameSync(partial, snapshotPath);
  } catch (err) {
    log(`could not write a memory snapshot (${err.message})`);
  }
  // The interpreter that made the snapshot is not the one to run the Worker:
  // with `_makeSnapshot`, Pyodide's `js` module is `globalThis` behind a
  // Proxy that records each access path (pyodide.asm.mjs, `jsglobals`), and
  // Node's getters read through it (`crypto`) refuse the Proxy as `this`
  // (ERR_INVALID_THIS at the Worker's `from js import crypto`). The Worker runs on an
  // interpreter restored from the snapshot, as on every later start.
  if (snapshot === undefined) return await loadPyodide(io);
  return await loadPyodide({ ...io, _loadSnapshot: snapshot });
}

function compatFlagsModule(flags) {
  const module = {};
  for (const flag of flags) module[flag] = true;
  // Flags the SDK reads by attribute; absent means off.
  for (const flag of ["python_workflows_implicit_dependencies", "python_request_headers_preserve_commas"]) {
    module[flag] ??= false;
  }
  return module;
}

class WorkerEntrypoint {
  constructor(ctx, env) {
    this.ctx = ctx;
    this.env = env;
  }
}
class DurableObject extends WorkerEntrypoint {}
class WorkflowEntrypoint extends WorkerEntrypoint {}

// emscripten's dlmalloc `mallinfo(&info)`: `uordblks` (the 8th int) is
// what is allocated now, `arena` what was taken from the WebAssembly memory.
function pythonMemory(pyodide) {
  const module = pyodide._module;
  const heap = module.HEAP8.length;
  if (typeof module._mallinfo !== "function") return { heap, inUse: null };
  return module.withStackSave(() => {
    const info = module.stackAlloc(10 * 4);
    module._mallinfo(info);
    const fields = new Uint32Array(module.HEAP8.buffer, info, 10);
    return { heap, inUse: fields[7] };
  });
}

// `env` may be a promise: the interpreter boots while the bindings start.
export async function loadWorker({ projectDir, mainPath, compatibilityFlags, env: envReady, cacheDir, log }) {
  const started = performance.now();
  const pyodide = await bootInterpreter({ cacheDir, log });
  const booted = performance.now();
  const env = await envReady;

  const pending = new PendingWork(log);
  const sourceDir = dirname(mainPath);
  copyTree(pyodide, sourceDir, WORKER_ROOT);
  const vendored = join(projectDir, "python_modules");
  if (existsSync(vendored)) copyTree(pyodide, vendored, join(WORKER_ROOT, "python_modules"));

  pyodide.registerJsModule("_cloudflare_compat_flags", compatFlagsModule(compatibilityFlags));
  pyodide.registerJsModule("_pyodide_entrypoint_helper", {
    cloudflareWorkersModule: {
      env,
      waitUntil: (promise) => pending.add(promise),
      WorkerEntrypoint,
      DurableObject,
      WorkflowEntrypoint,
    },
    cloudflareSocketsModule: {},
    doAnImport: (name) =>
      name.startsWith("python_modules/") ? import(pathToFileURL(join(projectDir, name)).href) : import(name),
    patchWaitUntil: (ctx) => {
      if (!(ctx instanceof ExecutionContext)) {
        const original = ctx.waitUntil.bind(ctx);
        ctx.waitUntil = (promise) => original(Promise.resolve(promise));
      }
    },
    *patch_env_helper(overrides) {
      const saved = {};
      for (const [k, v] of Object.entries(overrides)) {
        saved[k] = env[k];
        env[k] = v;
      }
      try {
        yield;
      } finally {
        Object.assign(env, saved);
      }
    },
  });

  pyodide.runPython(
    `import sys\nsys.path[:0] = [${JSON.stringify(WORKER_ROOT)}, ${JSON.stringify(join(WORKER_ROOT, "python_modules"))}]`,
  );
  const moduleName = relative(sourceDir, mainPath).replace(/\.py$/, "").replaceAll("/", ".");
  const host = pyodide.toPy({ __name__: "edgechat_runner_host" });
  pyodide.runPython(readFileSync(join(HERE, "host.py"), "utf8"), { globals: host });
  const handler = host.get("make_handler")(moduleName);
  const scheduledHandler = host.get("make_scheduled")(moduleName) ?? null;
  const gc = pyodide.pyimport("gc");
  const gcCollect = gc.collect;
  const gcObjectCount = () => {
    const objects = gc.get_objects();
    try {
      return objects.length;
    } finally {
      objects.destroy();
    }
  };
  const settingsProblem = host.get("settings_problem");
  const loaded = performance.now();
  log(
    `python worker ${moduleName} ready: interpreter ${(booted - started).toFixed(0)} ms, ` +
      `worker import ${(loaded - booted).toFixed(0)} ms (after bindings)`,
  );

  return {
    pyodide,
    pending,
    // The interpreter's memory: the size of its WebAssembly memory (which
    // only grows) and what its C allocator has handed out of it now.
    memory: () => pythonMemory(pyodide),
    // Python's cycle collector, at once (it otherwise runs by allocation
    // counts, so a burst's cycles, and the JS objects their proxies hold,
    // may wait for the next requests).
    collect: () => gcCollect(),
    // Objects Python's collector tracks (containers: a leak of requests'
    // sessions, frames or proxies shows here).
    objects: () => gcObjectCount(),
    // The Worker's own settings parser on the `[vars]` it will see: its
    // message for the first bad value, or null (also for a Worker without
    // edgechat's config).
    settingsProblem: () => settingsProblem(env) ?? null,
    // Runs Default(ctx, env).fetch(request) and returns the JS Response.
    async fetch(request) {
      const ctx = new ExecutionContext(pending);
      return await handler(request, env, ctx);
    },
    // Runs Default(ctx, env).scheduled(controller, env, ctx), then waits for
    // the waitUntil work pending (its own among it), as the runtime holds a
    // scheduled event open until that settles; null when the Worker has no
    // scheduled handler.
    scheduled:
      scheduledHandler &&
      (async (controller) => {
        const ctx = new ExecutionContext(pending);
        await scheduledHandler(controller, env, ctx);
        await pending.drain();
      }),
  };
}
