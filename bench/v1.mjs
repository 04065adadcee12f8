// What the OpenAI API costs per answer, side by side in one run: the same
// 2,000-token answer through /chat (relayed natively), through
// /v1/chat/completions streamed from GLM (OpenAI chunks forwarded as bytes in
// batches) and from Llama (native events translated), and whole (non-stream),
// and through /v1/responses streamed from GLM, against the JavaScript
// pass-through (bench/passthrough-js), at zero delay and at 20 ms per token
// (on warm runners; a fresh runner's first answers are shown apart). Every
// Worker runs in a runner of its own, so each one's CPU is its own process's.
//
//   npm run bench:v1 [-- --answers N --tokens N --paced N --delay-ms N --warm N --rounds N
//                        --runners K --target X --against CHECKOUT --one-at-a-time ROUNDS]
//
// The paced figure: every case at once in --runners runners of its own (2
// unless told: runners of the same code differ by more than one runner's
// rounds do), --paced answers each, round after round. The first --warm
// rounds (a fresh runner's first answers, then the ones V8 and Python still
// tune up) are not counted, then --rounds rounds are. A case's figure is its
// mean CPU per answer over its runners and those rounds, its ratio the ratio
// of means to the pass-through's in the same rounds, with a 95 % bootstrap
// interval over rounds and runners (bench/lib.mjs, `ratioOfMeans`), beside
// the same for the main thread alone (a runner's CPU also counts V8's helper
// threads: compilation, sweeping, parallel marking). The streams the OpenAI
// API's target is about (--target, 1.3×) are then said to be within it (the whole
// interval at or under it), above it (the whole interval over it), or not
// resolved by this run (the interval spans it: more rounds narrow it).
//
// With --against, each edgechat case is run a second time on another
// checkout (say, the commit before a change) in the same run.
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import {
  configOf,
  configWithoutRateLimiter,
  cpuSeconds,
  mainThreadCpuSeconds,
  mean,
  median,
  ROOT,
  ratioOfMeans,
  startRunner,
  stopRunner,
} from "./lib.mjs";

const { values } = parseArgs({
  options: {
    answers: { type: "string", default: "10" },
    tokens: { type: "string", default: "2000" },
    paced: { type: "string", default: "5" },
    "delay-ms": { type: "string", default: "20" },
    against: { type: "string" },
    "one-at-a-time": { type: "string", default: "0" },
    warm: { type: "string", default: "2" },
    rounds: { type: "string", default: "8" },
    runners: { type: "string", default: "2" },
    target: { type: "string", default: "1.3" },
  },
});
const ANSWERS = Number(values.answers);
const TOKENS = Number(values.tokens);
const PACED = Number(values.paced);
const DELAY_MS = Number(values["delay-ms"]);
// Rounds of the paced cases one at a time (each case's PACED answers alone
// on the machine, the cases in turn, round after round), besides all at once.
const ONE_AT_A_TIME = Number(values["one-at-a-time"]);
const WARM = Number(values.warm);
const ROUNDS = Number(values.rounds);
const RUNNERS = Number(values.runners);
const TARGET = Number(values.target);
const TOKEN = "bench-token-0123456789";
const GLM = "@cf/zai-org/glm-4.7-flash";
const LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8";

// path, model, stream: what each case asks.
const CASES = {
  "/chat (GLM, relayed natively)": { path: "/chat", model: GLM, stream: true },
  "/v1 stream (GLM, chunks forwarded)": { path: "/v1/chat/completions", model: GLM, stream: true, target: true },
  "/v1 stream (Llama, translated)": { path: "/v1/chat/completions", model: LLAMA, stream: true },
  "/v1 whole (GLM, non-stream)": { path: "/v1/chat/completions", model: GLM, stream: false },
  "/v1/responses stream (GLM)": { path: "/v1/responses", model: GLM, stream: true, target: true },
  "JS pass-through (GLM)": { path: "/chat", model: GLM, stream: true, js: true },
};

if (values.against) {
  for (const [name, which] of Object.entries(CASES)) {
    if (!which.js)
      CASES[`${name.split(" (")[0]} ${name.includes("Llama") ? "Llama" : "GLM"}, before`] = {
        ...which,
        root: values.against,
      };
  }
}

function ask(url, { path, model, stream }) {
  const question = "bench-long please";
  const body = JSON.stringify(
    path === "/v1/responses"
      ? { model, input: question, max_output_tokens: 4096, stream }
      : {
          model,
          messages: [{ role: "user", content: question }],
          max_tokens: 4096,
          ...(path.startsWith("/v1/") ? { stream } : {}),
        },
  );
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
          authorization: `Bearer ${TOKEN}`,
        },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (chunk) => (text += chunk));
        res.on("end", () => {
          const complete =
            /event: done\n|data: \[DONE\]|"finish_reason":"stop"|"usage"|event: response\.completed/.test(text);
          if (res.statusCode !== 200 || !complete) reject(new Error(`${res.statusCode}: ${text.slice(0, 200)}`));
          else resolve(text.length);
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

// CPU ms per answer of the runner process; `main` gets its main thread's.
async function cpuPerAnswer(runner, which, count, parallel, main = []) {
  const { pid } = runner.child;
  const before = cpuSeconds(pid);
  const mainBefore = mainThreadCpuSeconds(pid);
  for (let done = 0; done < count; done += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - done) }, () => ask(runner.url, which)));
  }
  main.push(((mainThreadCpuSeconds(pid) - mainBefore) / count) * 1000);
  return ((cpuSeconds(pid) - before) / count) * 1000;
}

async function main() {
  const folder = mkdtempSync(join(tmpdir(), "edgechat-bench-v1-"));
  const script = join(folder, "script.json");
  const words = Array.from({ length: TOKENS }, (_, i) => (i === 0 ? "word0" : ` word${i}`)).join("");
  writeFileSync(script, JSON.stringify({ rules: [{ match: { contains: "bench-long" }, reply: { content: words } }] }));
  const vars = join(folder, "bench.vars");
  writeFileSync(vars, `API_TOKEN=${TOKEN}\nCACHE_MODE=off\nMAX_OUTPUT_TOKENS=4096\n`);
  const jsConfig = join(ROOT, "bench/passthrough-js/wrangler.toml");
  const config = configWithoutRateLimiter();
  const other = values.against ? configOf(values.against, "bench-v1") : null;
  const start = (which, delay) =>
    startRunner(which.js ? jsConfig : which.root ? other : config, {
      args: which.js ? [] : ["--vars", vars],
      env: { EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: String(delay) },
    });
  const names = Object.keys(CASES);
  const fast = await Promise.all(names.map((name) => start(CASES[name], 0)));
  // paced[i][k]: case i's runner k.
  const started = await Promise.all(
    names.flatMap((name) => Array.from({ length: RUNNERS }, () => start(CASES[name], DELAY_MS))),
  );
  const paced = names.map((_, i) => started.slice(i * RUNNERS, (i + 1) * RUNNERS));
  try {
    for (const [i, name] of names.entries()) {
      for (let w = 0; w < 3; w += 1) await ask(fast[i].url, CASES[name]);
    }
    // Zero delay: alternating blocks, so noise hits every case alike.
    const zero = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < 3; round += 1) {
      for (const [i, name] of names.entries()) zero[name].push(await cpuPerAnswer(fast[i], CASES[name], ANSWERS, 1));
    }
    // At a model's pace, WARM + ROUNDS rounds; a round is every runner of
    // every case at once, PACED answers each, and gives each case's CPU per
    // answer in each of its runners. The first round is a fresh runner's first
    // answers, which carry what an isolate does once (its settings, Python's
    // and V8's first runs of each path: hundreds of ms, split among those
    // answers); it and the other warm rounds are shown apart and not counted.
    const round = (mainThread = null) =>
      Promise.all(
        names.map((name, i) =>
          Promise.all(
            paced[i].map((runner, k) =>
              cpuPerAnswer(runner, CASES[name], PACED, PACED, mainThread ? mainThread[name][k] : []),
            ),
          ),
        ),
      );
    const warmUp = [];
    for (let r = 0; r < WARM; r += 1) warmUp.push((await round()).map(mean));
    // whole[name][k][r]: the case's runner k in counted round r; mainThread the same.
    const perRunner = () => Object.fromEntries(names.map((name) => [name, paced[0].map(() => [])]));
    const whole = perRunner();
    const mainThread = perRunner();
    for (let r = 0; r < ROUNDS; r += 1) {
      const cpu = await round(mainThread);
      for (const [i, name] of names.entries()) for (const [k, v] of cpu[i].entries()) whole[name][k].push(v);
    }
    // One case at a time: no other runner competes for the two cores, so
    // a case's cost is its own and not how it fares in a crowd.
    const alone = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < ONE_AT_A_TIME; round += 1) {
      for (const [i, name] of names.entries())
        alone[name].push(await cpuPerAnswer(paced[i][0], CASES[name], PACED, PACED));
    }
    const js = names.find((name) => CASES[name].js);
    const ms = (v) => `${v.toFixed(1).padStart(7)} ms`;
    const times = (v) => `${v.toFixed(2)}×`;
    const interval = (r) => `${times(r.ratio).padStart(6)} [${r.low.toFixed(2)}–${r.high.toFixed(2)}]`;
    const jsZero = median(zero[js]);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
    console.log(`CPU per ${TOKENS}-token answer (whole runner process), ratio to the JS pass-through:`);
    console.log(`zero delay, median of 3 blocks of ${ANSWERS} answers:`);
    for (const name of names) {
      const z = median(zero[name]);
      console.log(`  ${name.padEnd(38)} ${ms(z)} ${times(z / jsZero).padStart(6)}`);
    }
    console.log(
      `${DELAY_MS} ms/token, ${PACED} answers at once in each of a case's ${RUNNERS} runners, mean of ${ROUNDS}` +
        ` rounds after ${WARM} warm-up (ratio of means [95 % bootstrap interval over rounds and runners]):`,
    );
    console.log(
      `  ${"case".padEnd(38)} ${"whole process".padEnd(30)} ${"main thread".padEnd(30)} each runner's mean; each round's ratio`,
    );
    // A round's mean over a case's runners.
    const byRound = (runners) => runners[0].map((_, r) => mean(runners.map((runner) => runner[r])));
    const jsRounds = byRound(whole[js]);
    const verdicts = [];
    for (const name of names) {
      const w = ratioOfMeans(whole[name], whole[js]);
      const m = ratioOfMeans(mainThread[name], mainThread[js]);
      const rounds = byRound(whole[name]).map((v, r) => (v / jsRounds[r]).toFixed(2));
      const runners = whole[name].map((runner) => mean(runner).toFixed(0));
      console.log(
        `  ${name.padEnd(38)} ${ms(mean(byRound(whole[name])))} ${interval(w).padEnd(19)}` +
          ` ${ms(mean(byRound(mainThread[name])))} ${interval(m).padEnd(19)} ${runners.join(", ")} ms; ${rounds.join(", ")}`,
      );
      if (CASES[name].target) verdicts.push([name, w, m]);
    }
    for (const [i, round] of warmUp.entries()) {
      const each = names.map((name, c) => `${name} ${times(round[c] / round[names.indexOf(js)])}`);
      console.log(`  warm-up round ${i + 1}${i === 0 ? " (a fresh runner's first answers)" : ""}: ${each.join(", ")}`);
    }
    const said = (r) =>
      r.high <= TARGET ? "within it" : r.low > TARGET ? "above it" : "not resolved by this run (the interval spans it)";
    console.log(`target: ≤ ${TARGET}× the pass-through's CPU at ${DELAY_MS} ms/token`);
    for (const [name, w, m] of verdicts) {
      console.log(
        `  ${name.padEnd(38)} whole process ${interval(w)}: ${said(w)}; main thread ${interval(m)}: ${said(m)}`,
      );
    }
    if (ONE_AT_A_TIME) {
      const jsAlone = median(alone[js]);
      console.log(
        `${DELAY_MS} ms/token, one case at a time (${PACED} answers at once, median of ${ONE_AT_A_TIME} rounds):`,
      );
      for (const name of names) {
        const a = median(alone[name]);
        const each = alone[name].map((v) => v.toFixed(0)).join(", ");
        console.log(`  ${name.padEnd(38)} ${ms(a)} ${times(a / jsAlone).padStart(6)}   (${each})`);
      }
    }
  } finally {
    await Promise.all([...fast, ...paced.flat()].map((runner) => stopRunner(runner.child)));
  }
}

await main();
