// What the stream shapes of edgechat's answers cost in workerd itself: the
// same JavaScript Worker (bench/edge-streams/worker.mjs) served by the
// `workerd` binary npm installs with wrangler, straight from a capnp config
// (no wrangler, no miniflare: nothing else in the process), against one paced
// upstream of SSE chunks in the shape GLM's have on Workers AI. Each shape's
// CPU per answer and its ratio to the pass-through: what /chat's relay and the
// /v1 streams' forward (forward-js: with the drain it had before 2026-12-04)
// cost at the edge beside the pass-through, Python left out.
//
//   node bench/edge_streams.mjs [--answers 4] [--tokens 2000] [--delay-ms 20] [--warm 1] [--rounds 4]
//
// A round asks --answers answers at once of each shape in turn; a shape's
// figure is its mean over --rounds rounds after --warm warm-up rounds, its
// ratio the ratio of means with the 95 % bootstrap interval (bench/lib.mjs,
// `ratioOfMeans`).
import { spawn } from "node:child_process";
import { copyFileSync, mkdtempSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { cpuSeconds, mean, ROOT, ratioOfMeans, sleep } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    answers: { type: "string", default: "4" },
    tokens: { type: "string", default: "2000" },
    "delay-ms": { type: "string", default: "20" },
    warm: { type: "string", default: "1" },
    rounds: { type: "string", default: "4" },
  },
});
const ANSWERS = Number(values.answers);
const TOKENS = Number(values.tokens);
const DELAY_MS = Number(values["delay-ms"]);
const WARM = Number(values.warm);
const ROUNDS = Number(values.rounds);
const SHAPES = ["pass", "relay", "forward", "forward-js"];
const FOLDER = join(ROOT, "bench/edge-streams");

// One GLM chunk as Workers AI streams it: its own id, created and model, a
// delta, the running usage (PLATFORM.md, "Streaming wire formats").
const chunk = (i) =>
  `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1764800000,` +
  `"model":"zai-org/glm-4.7-flash","choices":[{"index":0,"delta":{"content":"${i ? " " : ""}word${i}"},` +
  `"finish_reason":null}],"usage":{"prompt_tokens":12,"completion_tokens":${i + 1},"total_tokens":${i + 13}}}\n\n`;

// The upstream, in this process: one chunk per --delay-ms, each its own HTTP chunk.
function upstream() {
  const server = createServer((_, res) => {
    res.writeHead(200, { "content-type": "text/event-stream" });
    let i = 0;
    const next = () => {
      if (i === TOKENS) {
        res.end(`data: {"response":"","usage":{"prompt_tokens":12,"completion_tokens":${TOKENS}}}\n\ndata: [DONE]\n\n`);
        return;
      }
      res.write(chunk(i));
      i += 1;
      if (DELAY_MS > 0) setTimeout(next, DELAY_MS);
      else setImmediate(next);
    };
    next();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

async function freePort() {
  const probe = createServer();
  await new Promise((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address();
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

// workerd serving the Worker, its outbound fetches allowed to loopback.
async function startWorkerd() {
  const folder = mkdtempSync(join(tmpdir(), "edgechat-edge-streams-"));
  copyFileSync(join(FOLDER, "worker.mjs"), join(folder, "worker.mjs"));
  const port = await freePort();
  writeFileSync(
    join(folder, "config.capnp"),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
    (name = "loopback", network = (allow = ["private"])),
  ],
  sockets = [(name = "http", address = "127.0.0.1:${port}", http = (), service = "main")],
);
const worker :Workerd.Worker = (
  modules = [(name = "worker", esModule = embed "worker.mjs")],
  compatibilityDate = "2026-11-17",
  globalOutbound = "loopback",
);
`,
  );
  const binary = join(ROOT, "node_modules/@cloudflare/workerd-linux-64/bin/workerd");
  const child = spawn(binary, ["serve", join(folder, "config.capnp")], { stdio: ["ignore", "ignore", "pipe"] });
  const url = `http://127.0.0.1:${port}`;
  for (let tries = 0; ; tries += 1) {
    if (child.exitCode !== null) throw new Error(`workerd exited ${child.exitCode}`);
    try {
      await fetch(`${url}/?shape=none`).then((r) => r.arrayBuffer());
      break; // it answers (the bad upstream is its 500): ready
    } catch (error) {
      if (tries > 200) throw error;
      await sleep(50);
    }
  }
  return { child, url };
}

function ask(url, shape, up) {
  return new Promise((resolve, reject) => {
    const req = request(`${url}/?shape=${shape}&up=${encodeURIComponent(up)}`, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (part) => (text += part));
      res.on("end", () => {
        if (res.statusCode !== 200 || !text.includes(`word${TOKENS - 1}"`)) {
          reject(new Error(`${shape}: ${res.statusCode}, ${text.length} chars`));
        } else resolve();
      });
    });
    req.on("error", reject);
    req.end();
  });
}

// CPU ms per answer of `pid` while `count` answers of `shape` run at once.
async function cpuPerAnswer(runtime, shape, up) {
  const before = cpuSeconds(runtime.child.pid);
  await Promise.all(Array.from({ length: ANSWERS }, () => ask(runtime.url, shape, up)));
  return ((cpuSeconds(runtime.child.pid) - before) / ANSWERS) * 1000;
}

async function main() {
  const server = await upstream();
  const up = `http://127.0.0.1:${server.address().port}/`;
  const runtimes = { workerd: await startWorkerd() };
  const names = Object.keys(runtimes);
  // cost[runtime][shape][r]: CPU per answer in counted round r.
  const cost = Object.fromEntries(names.map((name) => [name, Object.fromEntries(SHAPES.map((s) => [s, []]))]));
  try {
    for (let round = 0; round < WARM + ROUNDS; round += 1) {
      for (const shape of SHAPES) {
        const each = await Promise.all(names.map((name) => cpuPerAnswer(runtimes[name], shape, up)));
        if (round >= WARM) for (const [i, name] of names.entries()) cost[name][shape].push(each[i]);
      }
    }
  } finally {
    runtimes.workerd.child.kill("SIGTERM");
    server.close();
  }
  console.log(`machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}`);
  console.log(
    `CPU per ${TOKENS}-token answer at ${DELAY_MS} ms/token, ${ANSWERS} at once, mean of ${ROUNDS} rounds after` +
      ` ${WARM} warm-up; ratio to the pass-through [95 % bootstrap interval over rounds]:`,
  );
  console.log(`  ${"shape".padEnd(10)} ${names.map((name) => name.padEnd(32)).join(" ")}`);
  for (const shape of SHAPES) {
    const cells = names.map((name) => {
      const r = ratioOfMeans([cost[name][shape]], [cost[name].pass]);
      const ms = mean(cost[name][shape]).toFixed(1).padStart(7);
      return `${ms} ms ${r.ratio.toFixed(2)}× [${r.low.toFixed(2)}–${r.high.toFixed(2)}]`.padEnd(32);
    });
    console.log(`  ${shape.padEnd(10)} ${cells.join(" ")}`);
  }
}

await main();
