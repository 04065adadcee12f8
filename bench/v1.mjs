// What the OpenAI API costs per answer, side by side in one run: the same
// 2,000-token answer through /chat (relayed natively), through
// /v1/chat/completions streamed from GLM (OpenAI chunks forwarded as bytes in
// batches) and from Llama (native events translated), and whole (non-stream),
// and through /v1/responses streamed from GLM, against the JavaScript
// pass-through (bench/passthrough-js), at zero delay and at 20 ms per token
// (on warm runners; a fresh runner's first answers are shown apart). Every
// Worker runs in a runner of its own, so each one's CPU is its own process's.
//
//   npm run bench:v1 [-- --answers N --tokens N --paced N --delay-ms N --rounds N --against CHECKOUT
//                        --one-at-a-time ROUNDS]
//
// The paced figure is the median of --rounds warm rounds (every case at
// once in each), beside its main thread's part: a runner's CPU also counts
// V8's helper threads (concurrent garbage collection, compilation), which
// move by tens of ms an answer between rounds of the same runner.
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
  median,
  ROOT,
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
    rounds: { type: "string", default: "3" },
  },
});
const ANSWERS = Number(values.answers);
const TOKENS = Number(values.tokens);
const PACED = Number(values.paced);
const DELAY_MS = Number(values["delay-ms"]);
// Rounds of the paced cases one at a time (each case's PACED answers alone
// on the machine, the cases in turn, round after round), besides all at once.
const ONE_AT_A_TIME = Number(values["one-at-a-time"]);
const ROUNDS = Number(values.rounds);
const TOKEN = "bench-token-0123456789";
const GLM = "@cf/zai-org/glm-4.7-flash";
const LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8";

// path, model, stream: what each case asks.
const CASES = {
  "/chat (GLM, relayed natively)": { path: "/chat", model: GLM, stream: true },
  "/v1 stream (GLM, chunks forwarded)": { path: "/v1/chat/completions", model: GLM, stream: true },
  "/v1 stream (Llama, translated)": { path: "/v1/chat/completions", model: LLAMA, stream: true },
  "/v1 whole (GLM, non-stream)": { path: "/v1/chat/completions", model: GLM, stream: false },
  "/v1/responses stream (GLM)": { path: "/v1/responses", model: GLM, stream: true },
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
  const paced = await Promise.all(names.map((name) => start(CASES[name], DELAY_MS)));
  try {
    for (const [i, name] of names.entries()) {
      for (let w = 0; w < 3; w += 1) await ask(fast[i].url, CASES[name]);
    }
    // Zero delay: alternating blocks, so noise hits every case alike.
    const zero = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < 3; round += 1) {
      for (const [i, name] of names.entries()) zero[name].push(await cpuPerAnswer(fast[i], CASES[name], ANSWERS, 1));
    }
    // At a model's pace: every case at once, PACED answers each in parallel,
    // 1 + ROUNDS times. The first round is a fresh runner's first answers,
    // which carry what an isolate does once (its settings, Python's and V8's
    // first runs of each path: hundreds of ms, split among those answers), so
    // it is shown apart; the median of the others is what an answer costs a
    // warm isolate.
    const first = await Promise.all(names.map((name, i) => cpuPerAnswer(paced[i], CASES[name], PACED, PACED)));
    const warm = Object.fromEntries(names.map((name) => [name, []]));
    const warmMain = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < ROUNDS; round += 1) {
      const cpu = await Promise.all(
        names.map((name, i) => cpuPerAnswer(paced[i], CASES[name], PACED, PACED, warmMain[name])),
      );
      for (const [i, name] of names.entries()) warm[name].push(cpu[i]);
    }
    const pacedCpu = names.map((name) => median(warm[name]));
    // One case at a time: no other runner competes for the two cores, so
    // a case's cost is its own and not how it fares in a crowd.
    const alone = Object.fromEntries(names.map((name) => [name, []]));
    for (let round = 0; round < ONE_AT_A_TIME; round += 1) {
      for (const [i, name] of names.entries())
        alone[name].push(await cpuPerAnswer(paced[i], CASES[name], PACED, PACED));
    }
    const js = names.findIndex((name) => CASES[name].js);
    const jsZero = median(zero[names[js]]);
    const jsPaced = pacedCpu[js];
    const jsFirst = first[js];
    const jsMain = median(warmMain[names[js]]);
    console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
    console.log(`CPU per ${TOKENS}-token answer (whole runner process), ratio to the JS pass-through:`);
    console.log(
      `  case                                   zero delay (median of 3 × ${ANSWERS})   ${DELAY_MS} ms/token (${PACED} at once,` +
        ` median of ${ROUNDS})   its main thread   the same, a fresh runner's first   each round`,
    );
    for (const [i, name] of names.entries()) {
      const z = median(zero[name]);
      const p = pacedCpu[i];
      const m = median(warmMain[name]);
      console.log(
        `  ${name.padEnd(38)} ${z.toFixed(1).padStart(7)} ms ${(z / jsZero).toFixed(2).padStart(6)}×` +
          `          ${p.toFixed(1).padStart(7)} ms ${(p / jsPaced).toFixed(2).padStart(6)}×` +
          `          ${m.toFixed(1).padStart(7)} ms ${(m / jsMain).toFixed(2).padStart(6)}×` +
          `       ${first[i].toFixed(1).padStart(7)} ms ${(first[i] / jsFirst).toFixed(2).padStart(6)}×` +
          `       (${warm[name].map((v, r) => `${v.toFixed(0)} ms ${(v / warm[names[js]][r]).toFixed(2)}×`).join(", ")})`,
      );
    }
    if (ONE_AT_A_TIME) {
      const jsAlone = median(alone[names[js]]);
      console.log(
        `${DELAY_MS} ms/token, one case at a time (${PACED} answers at once, median of ${ONE_AT_A_TIME} rounds):`,
      );
      for (const name of names) {
        const a = median(alone[name]);
        const each = alone[name].map((v) => v.toFixed(0)).join(", ");
        console.log(
          `  ${name.padEnd(38)} ${a.toFixed(1).padStart(7)} ms ${(a / jsAlone).toFixed(2).padStart(6)}×   (${each})`,
        );
      }
    }
  } finally {
    await Promise.all([...fast, ...paced].map((runner) => stopRunner(runner.child)));
  }
}

await main();
