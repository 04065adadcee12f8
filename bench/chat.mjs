// What /chat costs, measured side by side in one run: edgechat's Python
// Worker against a JavaScript Worker that passes the same upstream stream
// straight through (bench/passthrough-js), both on the runner with the Workers
// AI emulator at zero delay.
//
//   npm run bench:chat [-- --answers N --tokens N --concurrent N]
//
// Prints: time to the first byte and to the first token over the pass-through's
// first byte (the upstream's first chunk), CPU per long answer for each and
// their ratio, 100 concurrent streams (all complete? memory before/after), and
// the Worker's import time in Pyodide.
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { cpuSeconds, median, percentile, ROOT, rssMiB, startRunner, stopRunner } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    answers: { type: "string", default: "20" },
    tokens: { type: "string", default: "2000" },
    latency: { type: "string", default: "60" },
    concurrent: { type: "string", default: "100" },
    waves: { type: "string", default: "3" },
  },
});
const ANSWERS = Number(values.answers);
const TOKENS = Number(values.tokens);
const LATENCY_SAMPLES = Number(values.latency);
const CONCURRENT = Number(values.concurrent);
const WAVES = Number(values.waves);
const MODEL = "@cf/zai-org/glm-4.7-flash";

// Each request comes from its own loopback address so that the rate limiter
// (keyed by client IP) never steps in: the benchmark measures the work, not 429s.
let nextAddress = 0;
function localAddress() {
  nextAddress += 1;
  return `127.1.${Math.floor(nextAddress / 250) % 250}.${(nextAddress % 250) + 2}`;
}

// POSTs one chat and times its first byte, its first token and its end.
function chat(baseUrl, path, content, { maxTokens = 4096 } = {}) {
  const body = JSON.stringify({ messages: [{ role: "user", content }], model: MODEL, max_tokens: maxTokens });
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let firstByte = null;
    let firstToken = null;
    let text = "";
    const req = request(
      `${baseUrl}${path}`,
      {
        method: "POST",
        localAddress: localAddress(),
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (res) => {
        res.setEncoding("utf8");
        res.on("data", (chunk) => {
          const now = performance.now();
          firstByte ??= now;
          text += chunk;
          if (firstToken === null && /event: token|"content":"[^"]/.test(text)) firstToken = now;
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode,
            firstByteMs: firstByte - t0,
            firstTokenMs: firstToken === null ? null : firstToken - t0,
            totalMs: performance.now() - t0,
            text,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

function longReply(tokens) {
  const words = [];
  for (let i = 0; i < tokens; i += 1) words.push(i === 0 ? "word0" : ` word${i}`);
  return words.join("");
}

async function cpuPerAnswer(runner, path) {
  const before = cpuSeconds(runner.child.pid);
  for (let i = 0; i < ANSWERS; i += 1) {
    const answer = await chat(runner.url, path, "bench-long please");
    if (answer.status !== 200) throw new Error(`${path} answered ${answer.status}: ${answer.text.slice(0, 200)}`);
  }
  return ((cpuSeconds(runner.child.pid) - before) / ANSWERS) * 1000;
}

// edgechat's config without its rate limiter. In the runner the limiter is a
// round trip to workerd through wrangler's local proxy (several ms); at the
// edge it is a local counter. Timing both shows what is the Worker's own cost.
function configWithoutRateLimiter() {
  const text = readFileSync(join(ROOT, "wrangler.toml"), "utf8")
    .replace(/\[\[ratelimits\]\][^[]*/, "")
    .replace('main = "src/entry.py"', 'main = "../src/entry.py"')
    .replace('directory = "./static"', 'directory = "../static"');
  if (text.includes("RATE_LIMITER")) throw new Error("could not remove the rate limiter from wrangler.toml");
  mkdirSync(join(ROOT, ".cache"), { recursive: true });
  const path = join(ROOT, ".cache", "bench-no-rate-limiter.toml");
  writeFileSync(path, text);
  return path;
}

async function main() {
  const folder = mkdtempSync(join(tmpdir(), "edgechat-bench-"));
  const script = join(folder, "script.json");
  writeFileSync(
    script,
    JSON.stringify({ rules: [{ match: { contains: "bench-long" }, reply: { content: longReply(TOKENS) } }] }),
  );
  const env = { EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: "0" };
  const python = await startRunner(join(ROOT, "wrangler.toml"), { env, args: ["--memory-every", "0.5"] });
  const unlimited = await startRunner(configWithoutRateLimiter(), { env });
  const js = await startRunner(join(ROOT, "bench/passthrough-js/wrangler.toml"), { env });
  const importLine = python.stderr().match(/worker import (\d+) ms/);

  try {
    // Warm both: first requests compile code paths in V8 and Python.
    for (let i = 0; i < 5; i += 1) {
      await chat(python.url, "/chat", "warm up");
      await chat(js.url, "/chat", "warm up");
    }

    // Latency of a short answer, alternating so noise hits both alike.
    const py = { firstByte: [], firstToken: [] };
    const pyUnlimited = { firstByte: [], firstToken: [] };
    const base = [];
    for (let i = 0; i < LATENCY_SAMPLES; i += 1) {
      const a = await chat(python.url, "/chat", "hello", { maxTokens: 64 });
      const u = await chat(unlimited.url, "/chat", "hello", { maxTokens: 64 });
      const b = await chat(js.url, "/chat", "hello", { maxTokens: 64 });
      py.firstByte.push(a.firstByteMs);
      py.firstToken.push(a.firstTokenMs);
      pyUnlimited.firstByte.push(u.firstByteMs);
      pyUnlimited.firstToken.push(u.firstTokenMs);
      base.push(b.firstByteMs);
    }

    // CPU per long answer, alternating blocks.
    const cpu = { python: [], js: [] };
    for (let round = 0; round < 3; round += 1) {
      cpu.python.push(await cpuPerAnswer(python, "/chat"));
      cpu.js.push(await cpuPerAnswer(js, "/chat"));
    }

    // Concurrency and memory: waves of simultaneous streams on the Python Worker.
    const waves = [];
    for (let wave = 0; wave < WAVES; wave += 1) {
      const rssBefore = rssMiB(python.child.pid);
      let peak = rssBefore;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(python.child.pid))), 20);
      const t0 = performance.now();
      const results = await Promise.all(
        Array.from({ length: CONCURRENT }, () => chat(python.url, "/chat", "bench-long concurrent", { maxTokens: 4096 })),
      );
      clearInterval(sampler);
      const complete = results.filter((r) => r.status === 200 && /event: done\n/.test(r.text)).length;
      await new Promise((r) => setTimeout(r, 600)); // one more memory line after the wave
      const reports = python.stderr().match(/memory: .*/g) ?? [];
      waves.push({
        complete,
        seconds: (performance.now() - t0) / 1000,
        rssBefore,
        peak,
        rssAfter: rssMiB(python.child.pid),
        live: reports.at(-1) ?? "memory: not reported",
      });
    }

    const pct = (xs, p) => percentile(xs, p).toFixed(2);
    const added = (xs, p) => (percentile(xs, p) - percentile(base, p)).toFixed(2);
    const cpuPy = median(cpu.python);
    const cpuJs = median(cpu.js);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
    console.log(`short answers, ${LATENCY_SAMPLES} each, alternating (ms from request sent):`);
    console.log(`  JS pass-through, first byte (= upstream's first chunk): p50 ${pct(base, 0.5)}, p95 ${pct(base, 0.95)}`);
    console.log(`  Python, first byte (meta event):   p50 ${pct(py.firstByte, 0.5)}, p95 ${pct(py.firstByte, 0.95)}` +
      `  → added p50 ${added(py.firstByte, 0.5)}, p95 ${added(py.firstByte, 0.95)}`);
    console.log(`  Python, first token event:         p50 ${pct(py.firstToken, 0.5)}, p95 ${pct(py.firstToken, 0.95)}` +
      `  → added p50 ${added(py.firstToken, 0.5)}, p95 ${added(py.firstToken, 0.95)}`);
    console.log(`  Python without the rate limiter's proxy round trip:`);
    console.log(`    first byte (meta event):         p50 ${pct(pyUnlimited.firstByte, 0.5)}, p95 ${pct(pyUnlimited.firstByte, 0.95)}` +
      `  → added p50 ${added(pyUnlimited.firstByte, 0.5)}, p95 ${added(pyUnlimited.firstByte, 0.95)}`);
    console.log(`    first token event:               p50 ${pct(pyUnlimited.firstToken, 0.5)}, p95 ${pct(pyUnlimited.firstToken, 0.95)}` +
      `  → added p50 ${added(pyUnlimited.firstToken, 0.5)}, p95 ${added(pyUnlimited.firstToken, 0.95)}`);
    console.log(`CPU per ${TOKENS}-token answer (whole runner process: emulator + Worker + HTTP; median of 3 × ${ANSWERS}):`);
    console.log(`  Python Worker ${cpuPy.toFixed(1)} ms, JS pass-through ${cpuJs.toFixed(1)} ms, ratio ${(cpuPy / cpuJs).toFixed(2)}×` +
      ` (added by Python: ${(cpuPy - cpuJs).toFixed(1)} ms)`);
    console.log(`${CONCURRENT} concurrent ${TOKENS}-token streams on the Python Worker:`);
    for (const [i, w] of waves.entries()) {
      console.log(`  wave ${i + 1}: ${w.complete}/${CONCURRENT} complete with done in ${w.seconds.toFixed(1)} s;` +
        ` RSS ${w.rssBefore.toFixed(0)} → peak ${w.peak.toFixed(0)} → ${w.rssAfter.toFixed(0)} MiB`);
      console.log(`          after it, ${w.live.replace("memory: ", "")}`);
    }
    console.log(`Worker import in Pyodide (runner log): ${importLine ? `${importLine[1]} ms` : "not reported"}`);
  } finally {
    await stopRunner(python.child);
    await stopRunner(unlimited.child);
    await stopRunner(js.child);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
