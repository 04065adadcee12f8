// `npm start`: edgechat (or any Worker) under real `wrangler dev`, on the
// pinned workerd, offline. See tools/workerd/README.md.
//
//   npm start -- [--port N] [--host H] [--config FILE] [--vars FILE]
//                [--clock-hook] [--no-snapshot] [--quiet]
//
// What it adds to `wrangler dev -c FILE`, all of it for local runs only:
// - workerd finds the Pyodide bundle built from the pinned npm `pyodide`
//   (build_pyodide_bundle.py) through the wrapper workerd.sh;
// - a Python Worker gets the experimental `python_workers_development` flag
//   in a derived config in a temporary folder (the project's wrangler.toml
//   never holds it, so a deploy never carries it);
// - `AI` is bound to the Workers AI emulator (tools/emulator), a second
//   config in the same wrangler process so the binding, and its AbortSignal,
//   stay in-process; with CLOUDFLARE_API_TOKEN and CLOUDFLARE_ACCOUNT_ID set
//   it stays the real remote binding;
// - each Vectorize index (`[[vectorize]]`) is bound to the emulator's
//   EmulatedVectorize likewise, and stays the real one with credentials;
// - the emulator's script and call logs are files (EDGECHAT_AI_SCRIPT,
//   EDGECHAT_AI_LOG, EDGECHAT_VECTORS_LOG), served to it by a small control
//   server on loopback, since workerd has no filesystem;
// - every run starts with empty local KV, D1 and R2 in a temporary folder,
//   with D1 migrations applied (copied from a migrated template kept in
//   .cache/, so a start costs a copy, not a `wrangler d1 migrations apply`);
// - `[vars]`, then `.dev.vars`, then `--vars FILE` (later wins), checked by
//   the Worker's own settings parser before wrangler starts.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  watch,
  writeFileSync,
} from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { experimental_readRawConfig } from "wrangler";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = join(ROOT, "node_modules", ".bin");
const PYTHON = join(ROOT, ".venv", "bin", "python");
const EMULATOR_MAIN = join(ROOT, "tools", "emulator", "worker.mjs");
const EMULATOR_NAME = "edgechat-ai-emulator";
const BUNDLE_DIR = join(ROOT, ".cache", "pyodide-bundle");
const DEV_FLAG = "python_workers_development";
const SNAPSHOTS = join(ROOT, ".cache", "python-snapshots");
const KEPT_SNAPSHOTS = 4;

const say = (message) => process.stderr.write(`[dev] ${message}\n`);

function parseCommandLine(argv) {
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: "string", default: process.env.PORT ?? "8787" },
      host: { type: "string", default: "127.0.0.1" },
      config: { type: "string", default: "wrangler.toml" },
      vars: { type: "string" },
      "test-scheduled": { type: "boolean", default: false },
      "clock-hook": { type: "boolean", default: false },
      "no-snapshot": { type: "boolean", default: false },
      quiet: { type: "boolean", default: false },
    },
    strict: true,
  });
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    throw new Error(`--port must be a port number, got ${JSON.stringify(values.port)}`);
  }
  return { ...values, port };
}

// KEY=value lines as wrangler reads .dev.vars: `#` comments, optional
// quotes, `export ` prefixes.
export function parseDotenv(text) {
  const vars = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const match = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (!match) continue;
    let value = match[2];
    const quote = value[0];
    if ((quote === '"' || quote === "'") && value.endsWith(quote) && value.length >= 2) {
      value = value.slice(1, -1);
      if (quote === '"') value = value.replaceAll("\\n", "\n");
    } else {
      value = value.replace(/\s+#.*$/, "");
    }
    vars[match[1]] = value;
  }
  return vars;
}

const hasCredentials = () => Boolean(process.env.CLOUDFLARE_API_TOKEN && process.env.CLOUDFLARE_ACCOUNT_ID);

// The user's config, as wrangler reads the file, made runnable from another
// folder (every path absolute) with the local-only changes above.
export function deriveConfig(configPath, options) {
  const { rawConfig } = experimental_readRawConfig({ config: configPath });
  const here = dirname(configPath);
  const config = structuredClone(rawConfig);
  if (!config.main) throw new Error(`${configPath}: no main module`);
  config.main = resolve(here, config.main);
  const python = config.main.endsWith(".py");
  if (config.assets?.directory) config.assets.directory = resolve(here, config.assets.directory);
  for (const db of config.d1_databases ?? []) {
    if (db.migrations_dir) db.migrations_dir = resolve(here, db.migrations_dir);
  }
  if (python) config.compatibility_flags = [...new Set([...(config.compatibility_flags ?? []), DEV_FLAG])];
  const services = [...(config.services ?? [])];
  if (config.ai && !hasCredentials()) {
    services.push({ binding: config.ai.binding, service: EMULATOR_NAME, entrypoint: "EmulatedAi" });
    delete config.ai;
    // The real binding takes `signal` natively; over the emulator's RPC an
    // AbortSignal crosses only with this (experimental) flag.
    config.compatibility_flags = [...new Set([...(config.compatibility_flags ?? []), "enable_abortsignal_rpc"])];
  }
  // Vectorize has no local simulation either: each index is bound to the
  // emulator's EmulatedVectorize (tools/emulator/vectorize.mjs) unless the
  // run has credentials, when it stays the real remote index.
  if (config.vectorize?.length && !hasCredentials()) {
    for (const index of config.vectorize) {
      services.push({ binding: index.binding, service: EMULATOR_NAME, entrypoint: "EmulatedVectorize" });
    }
    delete config.vectorize;
  }
  // Moving the clock is a control workerd does not have; see README.md.
  if (options["clock-hook"]) services.push({ binding: "DEV_CLOCK", service: EMULATOR_NAME, entrypoint: "DevClock" });
  config.services = services;
  delete config.env;
  return { config, python, usesEmulator: services.some((s) => s.service === EMULATOR_NAME) };
}

function emulatorConfig(control) {
  return {
    name: EMULATOR_NAME,
    main: EMULATOR_MAIN,
    compatibility_date: "2026-11-17",
    compatibility_flags: ["enable_abortsignal_rpc"],
    vars: {
      EDGECHAT_AI_DELAY_MS: process.env.EDGECHAT_AI_DELAY_MS ?? "20",
      EDGECHAT_AI_CONTROL_URL: control,
      EDGECHAT_AI_SCRIPTED: process.env.EDGECHAT_AI_SCRIPT ? "1" : "",
      EDGECHAT_AI_LOGGED: process.env.EDGECHAT_AI_LOG ? "1" : "",
      EDGECHAT_VECTORS_LAG_MS: process.env.EDGECHAT_VECTORS_LAG_MS ?? "",
      EDGECHAT_VECTORS_LOGGED: process.env.EDGECHAT_VECTORS_LOG ? "1" : "",
    },
  };
}

// KEY=value lines wrangler reads back as these values (dotenv's rules:
// single or backtick quotes keep a value as it is, newlines included).
export function formatDotenv(values) {
  return Object.entries(values)
    .map(([name, value]) => {
      const quote = ["'", "`"].find((q) => !value.includes(q)) ?? (value.includes('"') ? null : '"');
      if (quote === null || (quote === '"' && /[\r\n]/.test(value))) {
        throw new Error(`${name}: a value with ', \` and " in it cannot be handed to wrangler`);
      }
      return `${name}=${quote}${value}${quote}\n`;
    })
    .join("");
}

// --- the control server: what workerd cannot read or keep by itself ----------

function startControl() {
  let clockOffset = 0;
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    const reply = (status, body, type = "application/json") => {
      res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
      res.end(body);
    };
    const route = `${req.method} ${url.pathname}`;
    if (route === "GET /ai/script") {
      const path = process.env.EDGECHAT_AI_SCRIPT;
      let text = "";
      try {
        if (path) text = readFileSync(path, "utf8");
      } catch (err) {
        if (err.code !== "ENOENT") return reply(500, `cannot read EDGECHAT_AI_SCRIPT=${path}: ${err.message}`);
      }
      return reply(200, text);
    }
    if (route === "POST /ai/log" || route === "POST /vectors/log") {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const path = route === "POST /ai/log" ? process.env.EDGECHAT_AI_LOG : process.env.EDGECHAT_VECTORS_LOG;
        if (path) {
          mkdirSync(dirname(path), { recursive: true });
          appendFileSync(path, `${Buffer.concat(chunks).toString("utf8").trimEnd()}\n`);
        }
        reply(200, "{}");
      });
      return;
    }
    if (route === "GET /clock") return reply(200, JSON.stringify({ offset_ms: clockOffset }));
    if (route === "POST /clock") {
      const advance = Number(url.searchParams.get("advance_ms"));
      if (!Number.isSafeInteger(advance) || advance < 0) {
        return reply(400, "POST /clock?advance_ms=<whole ms, at least 0>\n", "text/plain");
      }
      clockOffset += advance;
      return reply(200, JSON.stringify({ now: Date.now() + clockOffset, offset_ms: clockOffset }));
    }
    reply(404, "not a control route\n", "text/plain");
  });
  return new Promise((resolveListen) => {
    server.listen(0, "127.0.0.1", () => resolveListen(server));
  });
}

// --- setup steps, each cheap when its inputs are unchanged ---------------------

function run(command, args, env = process.env) {
  const result = spawnSync(command, args, { cwd: ROOT, env, encoding: "utf8" });
  if (result.status !== 0) {
    throw new Error(`${basename(command)} ${args.join(" ")} failed:\n${result.stderr || result.stdout}`);
  }
  return result.stdout;
}

function buildBundle() {
  const workerd = join(ROOT, "node_modules", "@cloudflare", "workerd-linux-64", "bin", "workerd");
  const result = spawnSync(
    PYTHON,
    [
      join(ROOT, "tools", "workerd", "build_pyodide_bundle.py"),
      "--workerd",
      workerd,
      "--pyodide",
      join(ROOT, "node_modules", "pyodide"),
      "--out",
      BUNDLE_DIR,
    ],
    { encoding: "utf8" },
  );
  if (result.status !== 0) throw new Error((result.stderr || result.stdout).trim());
}

// The Worker's own settings parser on the merged [vars], before wrangler
// starts: a bad value stops here with the message naming the variable.
function checkSettings(derivedPath, main, sources) {
  // Only a Worker built on edgechat's settings (its main beside edgechat/).
  if (!existsSync(join(dirname(main), "edgechat", "config", "settings.py")) || !existsSync(PYTHON)) return;
  const args = [join(ROOT, "scripts", "check_config.py"), "--config", derivedPath, "--sources", sources.join(", ")];
  const result = spawnSync(PYTHON, args, {
    env: { ...process.env, PYTHONPATH: join(ROOT, "src") },
    encoding: "utf8",
  });
  if (result.status === 2) {
    process.stderr.write(result.stderr);
    process.exit(2);
  }
  if (result.status !== 0) throw new Error(result.stderr || result.stdout);
}

// Local D1 with its migrations applied: made once per set of migrations into
// .cache/d1-template/<digest>, then copied for each run.
function migratedState(derived, derivedPath, wranglerEnv) {
  const withMigrations = (derived.d1_databases ?? []).filter((db) => db.migrations_dir);
  const hash = createHash("sha256");
  for (const db of withMigrations) {
    hash.update(`${db.binding} ${db.database_name} ${db.database_id ?? ""}\n`);
    for (const name of readdirSync(db.migrations_dir).sort()) {
      if (name.endsWith(".sql")) hash.update(name).update(readFileSync(join(db.migrations_dir, name)));
    }
  }
  if (withMigrations.length === 0) return null;
  const template = join(ROOT, ".cache", "d1-template", hash.digest("hex").slice(0, 16));
  if (existsSync(template)) return template;
  const building = `${template}.${process.pid}`;
  for (const db of withMigrations) {
    run(
      join(BIN, "wrangler"),
      ["d1", "migrations", "apply", db.database_name, "--local", "--persist-to", building, "-c", derivedPath],
      wranglerEnv,
    );
  }
  mkdirSync(dirname(template), { recursive: true });
  try {
    renameSync(building, template);
  } catch {
    rmSync(building, { recursive: true, force: true }); // another start made it first
  }
  return template;
}

// The port workerd's entry socket listens on, from the control messages
// workerd.sh copied (the last one: a reload starts workerd again).
function entryPort(events) {
  let port = null;
  if (!existsSync(events)) return port;
  for (const line of readFileSync(events, "utf8").split("\n")) {
    if (!line.startsWith("{")) continue;
    const message = JSON.parse(line);
    if (message.event === "listen" && message.socket === "entry") port = message.port;
  }
  return port;
}

// Writes a config `deriveConfig` made into `folder`, where wrangler finds
// python_modules/ beside it (a link to the project's, or the Worker's own).
function writeDerived(folder, configPath, config) {
  mkdirSync(folder, { recursive: true });
  const modules = [join(dirname(configPath), "python_modules"), join(ROOT, "python_modules")].find(existsSync);
  if (config.main.endsWith(".py") && modules) symlinkSync(modules, join(folder, "python_modules"));
  const path = join(folder, "wrangler.json");
  writeFileSync(path, JSON.stringify(config, null, 2));
  return path;
}

// wrangler's output, line by line.
function eachLine(stream, onLine) {
  let rest = "";
  stream.setEncoding("utf8");
  stream.on("data", (text) => {
    const lines = (rest + text).split("\n");
    rest = lines.pop();
    for (const line of lines) onLine(line);
  });
}

// A Python Worker's memory snapshot: its interpreter booted and its modules
// imported, as the edge snapshots a Worker at deploy. workerd saves it on the
// first start of a given Worker (--python-save-snapshot, as a side effect of
// serving) and restores it on later ones instead of booting Pyodide again
// (about 3 s of every start on this kind of machine; bench/workerd.mjs). It
// is kept in .cache/python-snapshots/ under a digest of everything it holds:
// the bundle, the flags, the Worker's files and python_modules/.
export function snapshotKey(config) {
  const hash = createHash("sha256");
  hash.update(readFileSync(join(BUNDLE_DIR, "stamp.json")));
  hash.update(JSON.stringify([config.compatibility_date, [...(config.compatibility_flags ?? [])].sort()]));
  const walk = (folder) => {
    for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
      const path = join(folder, entry.name);
      if (entry.isDirectory()) {
        if (entry.name !== "__pycache__") walk(path);
      } else if (entry.isFile()) {
        hash.update(`${path}\n`).update(readFileSync(path));
      }
    }
  };
  walk(dirname(config.main));
  const modules = join(ROOT, "python_modules");
  if (existsSync(modules)) walk(modules);
  return hash.digest("hex").slice(0, 24);
}

// What workerd.sh does about the snapshot at each workerd start, in a file
// it reads then ("load <file>", "save <folder>", or nothing): wrangler starts
// workerd again when the Worker's files change, and a snapshot of the old
// files must not be restored then.
function planSnapshot(work, config) {
  const control = join(work, "python-snapshot");
  const saved = join(work, "snapshot");
  const cached = join(SNAPSHOTS, `${snapshotKey(config)}.bin`);
  mkdirSync(saved, { recursive: true });
  writeFileSync(control, existsSync(cached) ? `load ${cached}` : `save ${saved}`);
  const stale = () => writeFileSync(control, "");
  const watcher = watch(dirname(config.main), { recursive: true }, stale);
  return {
    control,
    // Once workerd listens, the isolate was made and its snapshot written.
    keep() {
      const written = join(saved, "snapshot.bin");
      if (!existsSync(written)) return;
      mkdirSync(SNAPSHOTS, { recursive: true });
      renameSync(written, cached);
      const old = readdirSync(SNAPSHOTS)
        .map((name) => ({ path: join(SNAPSHOTS, name), at: statSync(join(SNAPSHOTS, name)).mtimeMs }))
        .sort((a, b) => b.at - a.at)
        .slice(KEPT_SNAPSHOTS);
      for (const { path } of old) rmSync(path, { force: true });
    },
    close: () => watcher.close(),
  };
}

// The processes below this one (wrangler's wrapper, its node, esbuild,
// workerd and its control-message copier), read from /proc. wrangler's
// wrapper exits as soon as its node does (wrangler/bin/wrangler.js), while
// that node's own children may still be running, or keep running as orphans.
function descendants(root = process.pid) {
  const children = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    const [state, ppid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (state === "Z") continue;
    children.set(Number(ppid), [...(children.get(Number(ppid)) ?? []), Number(name)]);
  }
  const found = [];
  const walk = (pid) => {
    for (const child of children.get(pid) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(root);
  return found;
}

// Whether a process runs (a zombie has ended: only its parent's wait is missing).
function running(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

// --- main -----------------------------------------------------------------------

async function main() {
  const options = parseCommandLine(process.argv.slice(2));
  const configPath = resolve(options.config);
  const work = mkdtempSync(join(tmpdir(), "edgechat-dev-"));
  let wrangler = null;
  let control = null;
  let snapshot = null;
  let stopping = false;
  const cleanup = (started = descendants()) => {
    for (const pid of started.filter(running)) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // ended meanwhile
      }
    }
    control?.close();
    snapshot?.close();
    rmSync(work, { recursive: true, force: true });
  };
  // wrangler shares this process group, so whoever ends the group ends
  // workerd too; a signal to this process alone stops wrangler first.
  // The exit waits until every process wrangler started has ended, not only
  // its wrapper, which ends first (at most 5 s; what still runs then is killed).
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    say(`${signal}: shutting down`);
    const started = descendants();
    const deadline = Date.now() + 5000;
    if (wrangler && wrangler.exitCode === null && wrangler.signalCode === null) wrangler.kill("SIGTERM");
    while (started.some(running) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    cleanup(started);
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => stop(signal));
  process.on("exit", () => cleanup());

  control = await startControl();
  const controlUrl = `http://127.0.0.1:${control.address().port}`;

  const vars = {};
  const sources = [`${options.config} [vars]`];
  const dotDevVars = join(dirname(configPath), ".dev.vars");
  if (existsSync(dotDevVars)) {
    Object.assign(vars, parseDotenv(readFileSync(dotDevVars, "utf8")));
    sources.push(".dev.vars");
  }
  if (options.vars) {
    Object.assign(vars, parseDotenv(readFileSync(resolve(options.vars), "utf8")));
    sources.push(options.vars);
  }

  const { config, python, usesEmulator } = deriveConfig(configPath, options);
  if (python) buildBundle();
  const derivedPath = writeDerived(work, configPath, config);
  // What .dev.vars and --vars give go to wrangler as its .dev.vars beside the
  // derived config: it treats them as secrets, never printing their values.
  writeFileSync(join(work, ".dev.vars"), formatDotenv(vars), { mode: 0o600 });
  const checked = join(work, "settings.json");
  writeFileSync(checked, JSON.stringify({ vars: { ...(config.vars ?? {}), ...vars } }), { mode: 0o600 });
  checkSettings(checked, config.main, sources);

  const wranglerEnv = {
    ...process.env,
    PATH: `${BIN}:${process.env.PATH}`,
    MINIFLARE_WORKERD_PATH: join(ROOT, "tools", "workerd", "workerd.sh"),
    EDGECHAT_PYODIDE_BUNDLE_DIR: BUNDLE_DIR,
    WRANGLER_SEND_METRICS: "false",
    // Outside every folder wrangler watches, or each log line reloads it.
    WRANGLER_LOG_PATH: join(work, "logs"),
    // A dev registry of this run's own: every `wrangler dev` on the machine
    // shares the default one and reloads when another run's Workers come
    // and go there (several runs at once, as the tests start them, restarted
    // each other). This run's bindings are all in-process anyway.
    WRANGLER_REGISTRY_PATH: join(work, "registry"),
  };
  if (!hasCredentials()) {
    delete wranglerEnv.CLOUDFLARE_API_TOKEN;
    delete wranglerEnv.CLOUDFLARE_ACCOUNT_ID;
  }

  snapshot = python && !options["no-snapshot"] ? planSnapshot(work, config) : null;
  if (snapshot) wranglerEnv.EDGECHAT_PYTHON_SNAPSHOT_PLAN = snapshot.control;

  const persist = join(work, "state");
  const template = migratedState(config, derivedPath, wranglerEnv);
  if (template) cpSync(template, persist, { recursive: true });

  const args = ["dev", "-c", derivedPath];
  if (usesEmulator) {
    // A folder of its own: wrangler would hand it the .dev.vars beside it.
    mkdirSync(join(work, "emulator"));
    const emulatorPath = join(work, "emulator", "wrangler.json");
    writeFileSync(emulatorPath, JSON.stringify(emulatorConfig(controlUrl), null, 2));
    args.push("-c", emulatorPath);
  }
  // wrangler's reload proxy takes a port of its own; the port asked for is
  // workerd's (workerd.sh): the proxy would hide a client that goes away.
  const events = join(work, "workerd-events.jsonl");
  wranglerEnv.EDGECHAT_ENTRY_ADDR = `${options.host}:${options.port}`;
  wranglerEnv.EDGECHAT_WORKERD_EVENTS = events;
  args.push(
    "--port",
    "0",
    "--ip",
    options.host,
    "--inspector-port",
    "0",
    "--persist-to",
    persist,
    "--show-interactive-dev-session=false",
    "--live-reload=false",
  );
  if (options["test-scheduled"]) args.push("--test-scheduled");

  wrangler = spawn(join(BIN, "wrangler"), args, {
    cwd: work,
    env: wranglerEnv,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let ready = false;
  const onLine = (line, stream) => {
    if (!ready && /Ready on https?:\/\//.test(line)) {
      const port = entryPort(events);
      if (port === null) throw new Error(`workerd reported no entry socket in ${events}`);
      ready = true;
      snapshot?.keep();
      if (options["clock-hook"]) console.log(`Clock control on ${controlUrl}/clock`);
      console.log(`Ready on http://${options.host}:${port}`);
      return;
    }
    if (options.quiet && !/error|\{/i.test(line)) return;
    // Noise of an offline machine: the placeholder for `request.cf`.
    if (/Request\.cf|workers\.cloudflare\.com|GetAddrInfoReqWrap/.test(line)) return;
    stream.write(`${line}\n`);
  };
  eachLine(wrangler.stdout, (line) => onLine(line, process.stdout));
  eachLine(wrangler.stderr, (line) => onLine(line, process.stderr));
  wrangler.on("exit", (code, signal) => {
    if (stopping) return;
    if (!ready) say(`wrangler dev stopped before it was ready (${signal ?? `exit ${code}`})`);
    process.exit(code ?? 1);
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    say(err?.message ?? String(err));
    process.exit(1);
  });
}
