// Shared by the benchmarks: start edgechat (or any Worker) under `npm start`
// on a free port, stop it, read its CPU time and memory from /proc.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

// `npm start` (tools/workerd/dev.mjs) serving `config` on workerd; resolves
// once it is ready with its URL and the pid of the workerd process that runs
// the Workers (where their CPU is spent: the launcher and wrangler only wait).
export function startRunner(config, { args = [], env = {} } = {}) {
  const started = performance.now();
  const child = spawn(
    process.execPath,
    [join(ROOT, "tools/workerd/dev.mjs"), "--port", "0", "--quiet", "--config", config, ...args],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, CLOUDFLARE_API_TOKEN: "", ...env } },
  );
  let stderr = "";
  child.stderr.on("data", (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const match = out.match(/Ready on (http:\/\/\S+)/);
      if (match) {
        const workerd = workerdPid(child.pid);
        resolve({ child, url: match[1], workerd, bootMs: performance.now() - started, stderr: () => stderr });
      }
    });
    child.on("exit", (code) => reject(new Error(`npm start exited ${code}:\n${stderr}`)));
  });
}

// The workerd among `root`'s descendants that runs the Workers (wrangler
// gives it an inspector; its reload proxy runs in another workerd).
export function workerdPid(root) {
  const children = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name) || !existsSync(`/proc/${name}/stat`)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const parent = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(name)]);
    } catch {}
  }
  const queue = [root];
  while (queue.length > 0) {
    const pid = queue.shift();
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      if (argv[0].endsWith("/workerd") && argv.some((a) => a.startsWith("--inspector-addr"))) return pid;
    } catch {}
    queue.push(...(children.get(pid) ?? []));
  }
  throw new Error(`no workerd running Workers under pid ${root}`);
}

export function stopRunner(child) {
  return new Promise((resolve) => {
    child.removeAllListeners("exit");
    if (child.exitCode !== null) return resolve();
    child.on("exit", resolve);
    child.kill("SIGTERM");
  });
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

// CPU seconds (user + system) the process has used so far (or a thread: `pid/task/tid`).
export function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
}

// The same for the process's main thread alone, where the Worker's code (and
// Pyodide's interpreter) runs; the rest is V8's helper threads (concurrent
// garbage collection, compilation), which move from run to run.
export function mainThreadCpuSeconds(pid) {
  return cpuSeconds(`${pid}/task/${pid}`);
}

export function rssMiB(pid) {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(/VmRSS:\s+(\d+)/)[1]) / 1024;
}

export const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;
export const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

export function percentile(xs, p) {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

// The ratio of two cases' mean cost per answer over the same rounds, each
// case measured in one or more runners: `cost[k][r]` is runner k's cost in
// round r (every runner answers as many questions a round). A 95 % interval
// comes from a two-level bootstrap: the rounds resampled with replacement
// (shared by both cases: a round's noise hits both), and each case's runners
// resampled too, since runners of the same code differ by more than rounds
// of one runner do. 4,000 resamples from a fixed seed, so a run's output can
// be checked again from its numbers. The percentile interval: Efron &
// Tibshirani, "An Introduction to the Bootstrap" (1993), chapter 13; the
// resampling of both levels, Davison & Hinkley, "Bootstrap Methods and their
// Application" (1997), section 3.8.
export function ratioOfMeans(cost, base, { resamples = 4000, seed = 1 } = {}) {
  const rounds = base[0].length;
  if (rounds === 0 || ![...cost, ...base].every((runner) => runner.length === rounds))
    throw new Error("ratioOfMeans: every runner needs the same rounds");
  const mean = (runners, ks, rs) => {
    let sum = 0;
    for (const k of ks) for (const r of rs) sum += runners[k][r];
    return sum / (ks.length * rs.length);
  };
  const all = (n) => Array.from({ length: n }, (_, i) => i);
  let state = seed >>> 0;
  const random = () => {
    // mulberry32: a small, well-mixed 32-bit generator, enough to pick rounds.
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  const pick = (n) => Array.from({ length: n }, () => Math.floor(random() * n));
  const draws = Array.from({ length: resamples }, () => {
    const rs = pick(rounds);
    return mean(cost, pick(cost.length), rs) / mean(base, pick(base.length), rs);
  }).sort((a, b) => a - b);
  return {
    ratio: mean(cost, all(cost.length), all(rounds)) / mean(base, all(base.length), all(rounds)),
    low: draws[Math.floor(0.025 * resamples)],
    high: draws[Math.ceil(0.975 * resamples) - 1],
  };
}

// edgechat's config without the bindings the runner proxies to workerd: the
// rate limiter, the KV namespace (the response cache, the usage counts) and
// the D1 database (each answer's spend, for the budgets). In the runner each
// call to them is a round trip through wrangler's local proxy, milliseconds
// of CPU in this process; D1's `prepare` and `bind` are even synchronous
// round trips that block the event loop (miniflare's proxy client answers a
// call that returns no promise with `Atomics.wait`). At the edge they are
// local or I/O. Timing without them shows what is the Worker's own cost; the
// Worker's side of the budget's D1 calls is measured on its own by
const PROXIED = [/\[\[ratelimits\]\][^[]*/, /\[\[kv_namespaces\]\][^[]*/];
const D1_TABLES = /\[\[d1_databases\]\][^[]*/g;
const withoutProxied = (text, withD1 = false) =>
  PROXIED.reduce((rest, table) => rest.replace(table, ""), withD1 ? text : text.replace(D1_TABLES, ""));

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// The wrangler config of a checkout at `root` (this one or another, say the
// commit before a change), without the rate limiter, KV and D1 (each a round
// trip to another workerd process locally), with absolute paths so this
// checkout's `npm start` can serve it; written under .cache/.
export function configOf(root, name) {
  const text = withoutProxied(readFileSync(join(root, "wrangler.toml"), "utf8"))
    .replace('main = "src/entry.py"', `main = "${join(root, "src/entry.py")}"`)
    .replace('directory = "./static"', `directory = "${join(root, "static")}"`);
  mkdirSync(join(ROOT, ".cache"), { recursive: true });
  const path = join(ROOT, ".cache", `${name}-${root.replaceAll("/", "_")}.toml`);
  writeFileSync(path, text);
  return path;
}

const b64url = (bytes) => Buffer.from(bytes).toString("base64url");

// A Cloudflare Access team of one RS256 key, played here: its keys endpoint
// on loopback (`team` is its origin), and a token of it for `bench-aud`.
export async function accessTeam() {
  const algorithm = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256", modulusLength: 2048 };
  const pair = await crypto.subtle.generateKey({ ...algorithm, publicExponent: new Uint8Array([1, 0, 1]) }, true, [
    "sign",
    "verify",
  ]);
  const jwk = { ...(await crypto.subtle.exportKey("jwk", pair.publicKey)), kid: "bench", use: "sig" };
  const keys = JSON.stringify({ keys: [jwk] });
  const server = createServer((_, res) => res.end(keys));
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const team = `http://127.0.0.1:${server.address().port}`;
  const now = Math.floor(Date.now() / 1000);
  const head = b64url(JSON.stringify({ alg: "RS256", kid: "bench", typ: "JWT" }));
  const claims = { aud: ["bench-aud"], email: "ann@example.com", iss: team, iat: now, nbf: now, exp: now + 3600 };
  const signed = `${head}.${b64url(JSON.stringify(claims))}`;
  const signature = await crypto.subtle.sign(algorithm, pair.privateKey, new TextEncoder().encode(signed));
  return { server, team, token: `${signed}.${b64url(new Uint8Array(signature))}` };
}
