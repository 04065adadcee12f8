// What /chat costs, measured side by side in one run: edgechat's Python
// Worker against a JavaScript Worker that passes the same upstream stream
// straight through (bench/passthrough-js), both on the runner with the Workers
// AI emulator, at zero delay and at 20 ms per token.
//
//   npm run bench:chat [-- --answers N --tokens N --paced N --concurrent N
//                          --burst N --settle S]
//
// Prints: time to the first byte and to the first token over the pass-through's
// first byte (the upstream's first chunk), with and without the rate
// limiter's local proxy; CPU per long answer for each Worker and their ratio,
// at zero delay and at 20 ms per token; the longest answer whose added CPU
// stays under the Free plan's 10 ms; 100 concurrent streams (all complete?
// live memory before, right after and once settled, after each wave); a
// burst of 500 streams with faults and vanishing clients, and the memory it
// leaves (bench/burst.mjs); and the Worker's import time in Pyodide.
//
// Memory comes from the runner's dev-only hook (`--memory-hook`): the JS heap
// in use, what Python's allocator has handed out, RSS, and the timers still
// pending. "Settled" is after `--settle` seconds and a forced collection
// (Python's, then V8's): what is still held, not garbage waiting for a
// collection an idle process may not run.
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { FAULT_RULES, faultBurst } from "./burst.mjs";
import {
  configWithoutRateLimiter,
  cpuSeconds,
  liveMemory,
  median,
  percentile,
  ROOT,
  rssMiB,
  sleep,
  startRunner,
  stopRunner,
} from "./lib.mjs";

const { values } = parseArgs({
  options: {
    answers: { type: "string", default: "20" },
    tokens: { type: "string", default: "2000" },
    latency: { type: "string", default: "200" },
    concurrent: { type: "string", default: "100" },
    waves: { type: "string", default: "3" },
    paced: { type: "string", default: "10" },
    "paced-tokens": { type: "string", default: "2000" },
    "delay-ms": { type: "string", default: "20" },
    burst: { type: "string", default: "500" },
    settle: { type: "string", default: "5" },
  },
});
const ANSWERS = Number(values.answers);
const TOKENS = Number(values.tokens);
const LATENCY_SAMPLES = Number(values.latency);
const CONCURRENT = Number(values.concurrent);
const WAVES = Number(values.waves);
const PACED = Number(values.paced);
const PACED_TOKENS = Number(values["paced-tokens"]);
const DELAY_MS = Number(values["delay-ms"]);
const BURST = Number(values.burst);
const SETTLE_MS = Number(values.settle) * 1000;
// The fault burst's runner keeps the Worker's default deadlines; the longest,
// the first-token one, bounds how long anything of an answer may wait.
const BURST_TOKEN = "bench-burst-token";
const BURST_DEADLINE_MS = 60_000; // FIRST_TOKEN_TIMEOUT_S
const FREE_PLAN_CPU_MS = 10;
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
          // The first answer text, in either Worker's stream (both relay the
          // model's own chunks).
          if (firstToken === null && /"(content|reasoning_content|response)":"[^"]/.test(text)) firstToken = now;
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

// CPU milliseconds the runner process spends per answer, over `count`
// answers run `parallel` at a time (paced answers are mostly waiting, so
// several at once keep the run short without changing the work per answer).
async function cpuPerAnswer(runner, prompt, { count = ANSWERS, parallel = 1 } = {}) {
  const before = cpuSeconds(runner.child.pid);
  for (let done = 0; done < count; done += parallel) {
    const batch = Array.from({ length: Math.min(parallel, count - done) }, () => chat(runner.url, "/chat", prompt));
    for (const answer of await Promise.all(batch)) {
      if (answer.status !== 200 || !/event: done\n|"usage"/.test(answer.text)) {
        throw new Error(`answered ${answer.status}: ${answer.text.slice(0, 200)}`);
      }
    }
  }
  return ((cpuSeconds(runner.child.pid) - before) / count) * 1000;
}

async function main() {
  const folder = mkdtempSync(join(tmpdir(), "edgechat-bench-"));
  const script = join(folder, "script.json");
  writeFileSync(
    script,
    JSON.stringify({
      rules: [
        { match: { contains: "bench-long" }, reply: { content: longReply(TOKENS) } },
        { match: { contains: "bench-paced" }, reply: { content: longReply(PACED_TOKENS) } },
        { match: { contains: "bench-short" }, reply: { content: longReply(50) } },
      ],
    }),
  );
  const env = { EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: "0" };
  const burstScript = join(folder, "burst.json");
  writeFileSync(burstScript, JSON.stringify({ rules: FAULT_RULES }));
  const burstVars = join(folder, "burst.vars");
  const burstLines = { API_TOKEN: BURST_TOKEN, COOLDOWN_MAX_S: 0 };
  writeFileSync(
    burstVars,
    Object.entries(burstLines)
      .map(([k, v]) => `${k}=${v}\n`)
      .join(""),
  );
  const pacedEnv = { ...env, EDGECHAT_AI_DELAY_MS: String(DELAY_MS) };
  const jsConfig = join(ROOT, "bench/passthrough-js/wrangler.toml");
  const python = await startRunner(join(ROOT, "wrangler.toml"), { env, args: ["--memory-hook"] });
  // Without the rate limiter: /v1 needs the token, and the limiter keys on it.
  const faulty = await startRunner(configWithoutRateLimiter(), {
    env: { EDGECHAT_AI_SCRIPT: burstScript, EDGECHAT_AI_DELAY_MS: "5" },
    args: ["--memory-hook", "--vars", burstVars],
  });
  const unlimited = await startRunner(configWithoutRateLimiter(), { env });
  const js = await startRunner(jsConfig, { env });
  const pythonPaced = await startRunner(configWithoutRateLimiter(), { env: pacedEnv });
  const jsPaced = await startRunner(jsConfig, { env: pacedEnv });
  const importLine = python.stderr().match(/worker import (\d+) ms/);

  try {
    // Warm both: first requests compile code paths in V8 and Python.
    for (let i = 0; i < 5; i += 1) {
      for (const runner of [python, unlimited, js, pythonPaced, jsPaced]) {
        await chat(runner.url, "/chat", "bench-short warm up");
      }
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

    // CPU per long answer, alternating blocks; the same for short answers,
    // whose cost is mostly the fixed cost per request.
    const cpu = { python: [], js: [], pythonShort: [], jsShort: [] };
    for (let round = 0; round < 3; round += 1) {
      cpu.python.push(await cpuPerAnswer(unlimited, "bench-long please"));
      cpu.js.push(await cpuPerAnswer(js, "bench-long please"));
      cpu.pythonShort.push(await cpuPerAnswer(unlimited, "bench-short please", { count: 4 * ANSWERS }));
      cpu.jsShort.push(await cpuPerAnswer(js, "bench-short please", { count: 4 * ANSWERS }));
    }

    // At a model's pace: every chunk arrives on a turn of the event loop of
    // its own. Both Workers at once, so noise hits both alike.
    const [pacedPython, pacedJs] = await Promise.all([
      cpuPerAnswer(pythonPaced, "bench-paced please", { count: PACED, parallel: PACED }),
      cpuPerAnswer(jsPaced, "bench-paced please", { count: PACED, parallel: PACED }),
    ]);

    // Concurrency and memory: waves of simultaneous streams on the Python Worker.
    const waves = [];
    for (let wave = 0; wave < WAVES; wave += 1) {
      const before = await liveMemory(python.url, { gc: true });
      let peak = before.rss;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(python.child.pid))), 20);
      const t0 = performance.now();
      const results = await Promise.all(
        Array.from({ length: CONCURRENT }, () =>
          chat(python.url, "/chat", "bench-long concurrent", { maxTokens: 4096 }),
        ),
      );
      const seconds = (performance.now() - t0) / 1000;
      clearInterval(sampler);
      const complete = results.filter((r) => r.status === 200 && /event: done\n/.test(r.text)).length;
      const after = await liveMemory(python.url);
      await sleep(SETTLE_MS);
      const settled = await liveMemory(python.url, { gc: true });
      waves.push({ complete, seconds, before, peak: Math.max(peak, after.rss), after, settled });
    }

    // The fault burst: memory before it, right after it, after the settle
    // time (with and without a collection), and once every deadline of the
    // burst's answers has passed.
    for (let i = 0; i < 10; i += 1) await faultBurst(faulty.url, { count: 3, token: BURST_TOKEN, seed: 100 + i });
    const burstRows = [["baseline, collected", await liveMemory(faulty.url, { gc: true })]];
    const burst = await faultBurst(faulty.url, { count: BURST, token: BURST_TOKEN });
    burstRows.push(["right after", await liveMemory(faulty.url)]);
    await sleep(SETTLE_MS);
    burstRows.push([`after ${SETTLE_MS / 1000} s`, await liveMemory(faulty.url)]);
    burstRows.push([`after ${SETTLE_MS / 1000} s, collected`, await liveMemory(faulty.url, { gc: true })]);
    await sleep(Math.max(0, BURST_DEADLINE_MS + 5000 - SETTLE_MS));
    const late = Math.max(SETTLE_MS, BURST_DEADLINE_MS + 5000) / 1000;
    burstRows.push([`after ${late} s, collected`, await liveMemory(faulty.url, { gc: true })]);

    const pct = (xs, p) => percentile(xs, p).toFixed(2);
    const added = (xs, p) => (percentile(xs, p) - percentile(base, p)).toFixed(2);
    const cpuPy = median(cpu.python);
    const cpuJs = median(cpu.js);
    const shortPy = median(cpu.pythonShort);
    const shortJs = median(cpu.jsShort);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
    console.log(`short answers, ${LATENCY_SAMPLES} each, alternating (ms from request sent):`);
    console.log(
      `  JS pass-through, first byte (= upstream's first chunk): p50 ${pct(base, 0.5)}, p95 ${pct(base, 0.95)}`,
    );
    console.log(
      `  Python, first byte (meta event):   p50 ${pct(py.firstByte, 0.5)}, p95 ${pct(py.firstByte, 0.95)}` +
        `  → added p50 ${added(py.firstByte, 0.5)}, p95 ${added(py.firstByte, 0.95)}`,
    );
    console.log(
      `  Python, first token event:         p50 ${pct(py.firstToken, 0.5)}, p95 ${pct(py.firstToken, 0.95)}` +
        `  → added p50 ${added(py.firstToken, 0.5)}, p95 ${added(py.firstToken, 0.95)}`,
    );
    console.log(`  Python without the rate limiter's proxy round trip:`);
    console.log(
      `    first byte (meta event):         p50 ${pct(pyUnlimited.firstByte, 0.5)}, p95 ${pct(pyUnlimited.firstByte, 0.95)}` +
        `  → added p50 ${added(pyUnlimited.firstByte, 0.5)}, p95 ${added(pyUnlimited.firstByte, 0.95)}`,
    );
    console.log(
      `    first token event:               p50 ${pct(pyUnlimited.firstToken, 0.5)}, p95 ${pct(pyUnlimited.firstToken, 0.95)}` +
        `  → added p50 ${added(pyUnlimited.firstToken, 0.5)}, p95 ${added(pyUnlimited.firstToken, 0.95)}`,
    );
    console.log(`CPU per answer (whole runner process: emulator + Worker + HTTP; rate limiter unbound):`);
    console.log(
      `  zero delay, ${TOKENS} tokens (median of 3 × ${ANSWERS}): Python ${cpuPy.toFixed(1)} ms, ` +
        `JS pass-through ${cpuJs.toFixed(1)} ms, ratio ${(cpuPy / cpuJs).toFixed(2)}× (added ${(cpuPy - cpuJs).toFixed(1)} ms)`,
    );
    console.log(
      `  zero delay, 50 tokens (median of 3 × ${4 * ANSWERS}): Python ${shortPy.toFixed(1)} ms, ` +
        `JS pass-through ${shortJs.toFixed(1)} ms, ratio ${(shortPy / shortJs).toFixed(2)}× (added ${(shortPy - shortJs).toFixed(1)} ms)`,
    );
    console.log(
      `  ${DELAY_MS} ms per token, ${PACED_TOKENS} tokens (${PACED} answers at once): Python ${pacedPython.toFixed(1)} ms, ` +
        `JS pass-through ${pacedJs.toFixed(1)} ms, ratio ${(pacedPython / pacedJs).toFixed(2)}× (added ${(pacedPython - pacedJs).toFixed(1)} ms)`,
    );
    // Added CPU as a line through the short and the long answer at zero
    // delay: a fixed cost per request plus a cost per token.
    const perToken = (cpuPy - cpuJs - (shortPy - shortJs)) / (TOKENS - 50);
    const fixed = shortPy - shortJs - 50 * perToken;
    console.log(
      `  added by Python ≈ ${fixed.toFixed(2)} ms per request + ${(perToken * 1000).toFixed(2)} µs per token`,
    );
    if (perToken > 0) {
      console.log(
        `  → longest answer under ${FREE_PLAN_CPU_MS} ms added: ${Math.floor((FREE_PLAN_CPU_MS - fixed) / perToken)} tokens`,
      );
    } else {
      // The runner's relay reads the copied stream in 4 KiB pieces while the
      // pass-through's body goes out one chunk per write: per token, Python
      // costs no more than the pass-through here. bench/request_cost.mjs
      // gives the cost per look instead, which is what a long answer adds.
      console.log(
        "  → no cost per token measurable beside the pass-through (see npm run bench:cost for the cost per look)",
      );
    }
    console.log(`${CONCURRENT} concurrent ${TOKENS}-token streams on the Python Worker:`);
    const mib = (x) => (x === null ? "n/a" : x.toFixed(1));
    const timers = (m) => m.resources.Timeout ?? 0;
    console.log(`  memory (MiB): before the wave, collected → right after → after ${SETTLE_MS / 1000} s, collected`);
    for (const [i, w] of waves.entries()) {
      console.log(
        `  wave ${i + 1}: ${w.complete}/${CONCURRENT} complete with done in ${w.seconds.toFixed(1)} s;` +
          ` RSS ${w.before.rss.toFixed(0)} → peak ${w.peak.toFixed(0)} → ${w.after.rss.toFixed(0)} → ${w.settled.rss.toFixed(0)}`,
      );
      console.log(
        `          JS heap ${mib(w.before.heapUsed)} → ${mib(w.after.heapUsed)} → ${mib(w.settled.heapUsed)};` +
          ` Python in use ${mib(w.before.pythonInUse)} → ${mib(w.after.pythonInUse)} → ${mib(w.settled.pythonInUse)}` +
          ` (its heap ${mib(w.settled.pythonHeap)}); timers pending ${timers(w.before)} → ${timers(w.after)} → ${timers(w.settled)}`,
      );
    }
    const endings = Object.entries(burst.counts)
      .sort()
      .map(([ending, n]) => `${n} × ${ending}`)
      .join(", ");
    console.log(
      `fault burst: ${BURST} streams at once through /chat and /v1 (faults: 3040 before the first byte,` +
        ` an error or a stall mid-stream, slow starts, pauses; a fifth of the clients vanish), in ${burst.seconds.toFixed(1)} s:`,
    );
    console.log(`  endings: ${endings}`);
    console.log("  default deadlines (60 s to the first token, 30 s idle); memory in MiB:");
    console.log("                                JS heap  Python in use  Python objects   RSS  timers pending");
    for (const [label, m] of burstRows) {
      console.log(
        `  ${label.padEnd(28)}${mib(m.heapUsed).padStart(9)}${mib(m.pythonInUse).padStart(15)}` +
          `${String(m.pythonObjects ?? "n/a").padStart(16)}${m.rss.toFixed(0).padStart(6)}${String(timers(m)).padStart(16)}`,
      );
    }
    console.log(`Worker import in Pyodide (runner log): ${importLine ? `${importLine[1]} ms` : "not reported"}`);
  } finally {
    await stopRunner(python.child);
    await stopRunner(unlimited.child);
    await stopRunner(js.child);
    await stopRunner(pythonPaced.child);
    await stopRunner(jsPaced.child);
    await stopRunner(faulty.child);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
