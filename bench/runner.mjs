// Measures the offline runner: cold boot (with and without the cached
// interpreter snapshot) and /healthz throughput and latency of edgechat's
// Python Worker against the same route in a JavaScript Worker, side by side
// in one run. Usage: npm run bench:runner [-- --requests N --concurrency C]
import { Agent, request } from "node:http";
import { cpus } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { median, percentile, ROOT, startRunner, stopRunner as stop } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "3000" },
    concurrency: { type: "string", default: "8" },
    rounds: { type: "string", default: "3" },
  },
});
const REQUESTS = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);
const ROUNDS = Number(values.rounds);

function get(agent, url) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    request(url, { agent }, (res) => {
      res.resume();
      res.on("end", () =>
        res.statusCode === 200 ? resolve(performance.now() - t0) : reject(new Error(`status ${res.statusCode}`)),
      );
    })
      .on("error", reject)
      .end();
  });
}

async function load(url, requests, concurrency) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const latencies = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < requests) {
        next += 1;
        latencies.push(await get(agent, url));
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  agent.destroy();
  return { rps: requests / seconds, p50: percentile(latencies, 0.5), p95: percentile(latencies, 0.95) };
}

async function main() {
  const pythonConfig = join(ROOT, "wrangler.toml");
  const jsConfig = join(ROOT, "bench/healthz-js/wrangler.toml");

  const boots = { cold: [], snapshot: [], js: [] };
  for (let i = 0; i < ROUNDS; i += 1) {
    for (const [kind, config, extra] of [
      ["cold", pythonConfig, ["--no-snapshot"]],
      ["snapshot", pythonConfig, []],
      ["js", jsConfig, []],
    ]) {
      const runner = await startRunner(config, { args: extra });
      boots[kind].push(runner.bootMs);
      await stop(runner.child);
    }
  }

  const python = await startRunner(pythonConfig);
  const js = await startRunner(jsConfig);
  const results = { python: [], js: [] };
  try {
    // Warm both, then alternate rounds so machine noise hits both alike.
    await load(`${python.url}/healthz`, 200, CONCURRENCY);
    await load(`${js.url}/healthz`, 200, CONCURRENCY);
    for (let i = 0; i < ROUNDS; i += 1) {
      results.python.push(await load(`${python.url}/healthz`, REQUESTS, CONCURRENCY));
      results.js.push(await load(`${js.url}/healthz`, REQUESTS, CONCURRENCY));
    }
  } finally {
    await stop(python.child);
    await stop(js.child);
  }

  const summary = (rows) => ({
    rps: median(rows.map((r) => r.rps)),
    p50: median(rows.map((r) => r.p50)),
    p95: median(rows.map((r) => r.p95)),
  });
  const py = summary(results.python);
  const base = summary(results.js);
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
  console.log(`runner boot to "Ready on" (median of ${ROUNDS}):`);
  console.log(`  Python Worker, cold interpreter:   ${median(boots.cold).toFixed(0)} ms`);
  console.log(`  Python Worker, cached snapshot:    ${median(boots.snapshot).toFixed(0)} ms`);
  console.log(`  JavaScript Worker:                 ${median(boots.js).toFixed(0)} ms`);
  console.log(`GET /healthz, ${REQUESTS} requests × ${ROUNDS} rounds, concurrency ${CONCURRENCY} (medians):`);
  console.log(
    `  Python Worker:      ${py.rps.toFixed(0)} req/s, p50 ${py.p50.toFixed(2)} ms, p95 ${py.p95.toFixed(2)} ms`,
  );
  console.log(
    `  JavaScript Worker:  ${base.rps.toFixed(0)} req/s, p50 ${base.p50.toFixed(2)} ms, p95 ${base.p95.toFixed(2)} ms`,
  );
  console.log(
    `  ratio Python/JS:    throughput ${(py.rps / base.rps).toFixed(2)}×, p50 latency ${(py.p50 / base.p50).toFixed(2)}×`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
