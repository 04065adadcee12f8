// Time to /chat's first byte, side by side with another checkout of edgechat
// (say, the commit before a change): both Workers under `npm start` on
// workerd, without the rate limiter and KV, the emulator at zero delay, short
// answers alternating between them; and each workerd's CPU per request (the
// Worker's and the emulator's, alike for both).
//
//   git worktree add /tmp/before <commit>   # with node_modules, .venv and
//   node bench/first_byte_at.mjs /tmp/before   # python_modules linked in
//
// `--identity` compares this checkout with itself: with Cloudflare Access
// (tokens signed here, keys served from a loopback keys endpoint), a
// per-user budget and the USAGE_DB database, against no identity settings and
// no database. `--budget` leaves Access out (the budget's read alone).
import { readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { accessTeam, configOf, cpuSeconds, median, percentile, ROOT, startRunner, stopRunner } from "./lib.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    samples: { type: "string", default: "300" },
    identity: { type: "boolean", default: false },
    budget: { type: "boolean", default: false },
  },
});
const SELF = values.identity || values.budget;
const OTHER = SELF ? ROOT : positionals[0];
if (!OTHER) throw new Error("usage: node bench/first_byte_at.mjs <other checkout> | --identity | --budget");

function firstByte(url, headers = {}) {
  const body = JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: 64 });
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let first = null;
    const req = request(
      `${url}/chat`,
      {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), ...headers },
      },
      (res) => {
        res.on("data", () => {
          first ??= performance.now() - t0;
        });
        res.on("end", () => resolve(first));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

// This checkout's config without the D1 database: no budget, nothing counted.
function withoutDatabase(path) {
  const text = readFileSync(path, "utf8").replace(/\[\[d1_databases\]\][^[]*/, "");
  writeFileSync(path, text);
  return path;
}

const env = { EDGECHAT_AI_DELAY_MS: "0" };
const team = values.identity ? await accessTeam() : null;
let hereArgs = [];
let headers = {};
if (SELF) {
  const lines = ["USER_DAILY_USD=1000"];
  if (team) lines.push(`ACCESS_TEAM_DOMAIN=${team.team}`, "ACCESS_AUD=bench-aud");
  const vars = join(ROOT, ".cache", "bench-identity.vars");
  writeFileSync(vars, `${lines.join("\n")}\n`);
  hereArgs = ["--vars", vars];
  headers = team ? { "cf-access-jwt-assertion": team.token } : {};
}
const otherConfig = configOf(OTHER, "first-byte");
const other = await startRunner(SELF ? withoutDatabase(otherConfig) : otherConfig, { env });
const here = await startRunner(configOf(ROOT, "first-byte-here"), { env, args: hereArgs });
try {
  for (let i = 0; i < 20; i += 1) {
    await firstByte(other.url);
    await firstByte(here.url, headers);
  }
  const a = [];
  const b = [];
  const cpu = { other: -cpuSeconds(other.workerd), here: -cpuSeconds(here.workerd) };
  for (let i = 0; i < Number(values.samples); i += 1) {
    a.push(await firstByte(other.url));
    b.push(await firstByte(here.url, headers));
  }
  cpu.other += cpuSeconds(other.workerd);
  cpu.here += cpuSeconds(here.workerd);
  const perRequest = (seconds) => ((seconds * 1000) / Number(values.samples)).toFixed(2);
  const show = (xs, seconds) =>
    `p50 ${median(xs).toFixed(2)} ms, p95 ${percentile(xs, 0.95).toFixed(2)} ms; workerd CPU ${perRequest(seconds)} ms a request`;
  const label = values.identity ? "with Access + a budget" : values.budget ? "with a budget" : "this checkout";
  console.log(`first byte of /chat, ${values.samples} each, alternating:`);
  console.log(`  ${SELF ? "without identity or budget" : OTHER}: ${show(a, cpu.other)}`);
  console.log(`  ${label}: ${show(b, cpu.here)}`);
} finally {
  await stopRunner(other.child);
  await stopRunner(here.child);
  team?.server.close();
}
