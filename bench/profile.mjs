// Where a runner's CPU goes for one kind of answer: starts the Worker in a
// runner with V8's inspector open, asks for the same 2,000-token answer a few
// times to warm up, then profiles N more (the Profiler domain of the
// inspector protocol, over its WebSocket) and prints the functions with the
// most self time per answer, JavaScript and WebAssembly (the Python
// interpreter) alike; with --against, beside the same run on another
// checkout.
//
//   node bench/profile.mjs [--path /v1/chat/completions] [--model MODEL] [--whole]
//                          [--answers 30] [--top 25] [--against CHECKOUT]
import { mkdtempSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { configOf, ROOT, startRunner, stopRunner } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    path: { type: "string", default: "/v1/chat/completions" },
    model: { type: "string", default: "@cf/zai-org/glm-4.7-flash" },
    whole: { type: "boolean", default: false },
    answers: { type: "string", default: "30" },
    tokens: { type: "string", default: "2000" },
    top: { type: "string", default: "25" },
    against: { type: "string" },
  },
});
const TOKEN = "bench-token-0123456789";

function ask(url) {
  const body = JSON.stringify({
    model: values.model,
    messages: [{ role: "user", content: "bench-long please" }],
    max_tokens: 4096,
    ...(values.path.startsWith("/v1/") ? { stream: !values.whole } : {}),
  });
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${values.path}`,
      {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      },
      (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

// Self time per function (name and file), in ms, from a .cpuprofile.
function selfTimes(profile) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const times = new Map();
  const dt = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i += 1) {
    const { callFrame } = byId.get(profile.samples[i]);
    const where = callFrame.url ? basename(callFrame.url) : "";
    const key = `${callFrame.functionName || "(anonymous)"} ${where}`.trim();
    times.set(key, (times.get(key) ?? 0) + (dt[i] ?? 0) / 1000);
  }
  return times;
}

// The inspector's WebSocket, which the runner names on stderr.
async function inspectorOf(runner) {
  for (;;) {
    const url = runner.stderr().match(/Debugger listening on (ws:\/\/\S+)/)?.[1];
    if (url) return url;
    await new Promise((resolve) => runner.child.stderr.once("data", resolve));
  }
}

function connect(url) {
  const socket = new WebSocket(url);
  let id = 0;
  const waiting = new Map();
  socket.addEventListener("message", ({ data }) => {
    const message = JSON.parse(data);
    waiting.get(message.id)?.(message.result);
    waiting.delete(message.id);
  });
  const send = (method, params = {}) =>
    new Promise((resolve) => {
      id += 1;
      waiting.set(id, resolve);
      socket.send(JSON.stringify({ id, method, params }));
    });
  return new Promise((resolve) => socket.addEventListener("open", () => resolve({ send, socket })));
}

// A runner of the checkout at `root`, warmed up, its inspector connected.
async function started(root, folder, label) {
  const words = Array.from({ length: Number(values.tokens) }, (_, i) => (i === 0 ? "word0" : ` word${i}`)).join("");
  const script = join(folder, "script.json");
  writeFileSync(script, JSON.stringify({ rules: [{ match: { contains: "bench-long" }, reply: { content: words } }] }));
  const vars = join(folder, "bench.vars");
  writeFileSync(vars, `API_TOKEN=${TOKEN}\nCACHE_MODE=off\nMAX_OUTPUT_TOKENS=4096\n`);
  const runner = await startRunner(configOf(root, `bench-profile-${label}`), {
    args: ["--vars", vars],
    env: { EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: "0", NODE_OPTIONS: "--inspect=127.0.0.1:0" },
  });
  const inspector = await connect(await inspectorOf(runner));
  for (let i = 0; i < 3; i += 1) await ask(runner.url);
  await inspector.send("Profiler.enable");
  await inspector.send("Profiler.setSamplingInterval", { interval: 200 });
  return { label, runner, inspector };
}

const folder = mkdtempSync(join(tmpdir(), "edgechat-profile-"));
const roots = [["this", ROOT]];
if (values.against) roots.push(["against", values.against]);
const N = Number(values.answers);
const runs = [];
for (const [label, root] of roots) runs.push(await started(root, folder, label));
const results = [];
try {
  for (const { inspector } of runs) await inspector.send("Profiler.start");
  // Alternating blocks of answers, so the machine's noise hits every run alike.
  const BLOCK = 5;
  for (let done = 0; done < N; done += BLOCK) {
    for (const { runner } of runs) for (let i = done; i < Math.min(N, done + BLOCK); i += 1) await ask(runner.url);
  }
  for (const { label, inspector } of runs) {
    const { profile } = await inspector.send("Profiler.stop");
    inspector.socket.close();
    writeFileSync(join(folder, `${label}.cpuprofile`), JSON.stringify(profile));
    const times = selfTimes(profile);
    times.delete("(idle)");
    results.push(times);
  }
} finally {
  await Promise.all(runs.map(({ runner }) => stopRunner(runner.child)));
}
const total = (times) => [...times.values()].reduce((a, b) => a + b, 0);
const top = [...results[0].entries()].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top));
const perAnswer = (ms) => (ms / N).toFixed(2).padStart(8);
console.log(
  `self time per answer (ms), ${values.path} ${values.model} ${values.whole ? "whole" : "stream"}, profiles in ${folder}`,
);
console.log(`${"function".padEnd(60)} ${"this".padStart(8)}${values.against ? "  against".padStart(10) : ""}`);
for (const [key, ms] of top) {
  const other = values.against ? perAnswer(results[1].get(key) ?? 0) : "";
  console.log(`${key.slice(0, 60).padEnd(60)} ${perAnswer(ms)}  ${other}`);
}
console.log(
  `${"(all but idle)".padEnd(60)} ${perAnswer(total(results[0]))}  ${values.against ? perAnswer(total(results[1])) : ""}`,
);
