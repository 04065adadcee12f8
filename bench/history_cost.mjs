// What conversations on the server cost. (1) /chat's first byte, CPU and
// wall, for the same Worker loaded twice in this process, as one named key's
// user: without the DB binding (history off) and with it (history on), one
// request of each in turn. /chat never touches DB, so the difference is the
// binding's presence alone. (2) A sync of 200 conversations through the
// Worker with the runner's real local D1 (migrations applied): the first
// push as the page makes it (POST /api/conversations, batches of 50) beside
// the same push as 200 PUTs (another user, so both find as many rows), then
// a new device's full pull (GET ?since=0&bodies=1 in pages of 50), its time
// and its bytes. No HTTP: the Worker's own figures.
//
//   node bench/history_cost.mjs [--requests N] [--rounds N] [--conversations N] [--turns N]
import { cpus } from "node:os";
import { parseArgs } from "node:util";
import { unstable_readConfig } from "wrangler";
import { createEnv } from "../tools/runner/bindings.mjs";
import { firstByteCost, loadInProcess } from "./in_process.mjs";
import { configWithoutRateLimiter, median, percentile } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "200" },
    rounds: { type: "string", default: "3" },
    conversations: { type: "string", default: "200" },
    turns: { type: "string", default: "5" },
  },
});
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);
const CONVERSATIONS = Number(values.conversations);
const TURNS = Number(values.turns);
const quiet = () => {};
const TOKEN = "bench-history-token-0123456789";
const AUTH = { authorization: `Bearer ${TOKEN}` };
const OTHER_TOKEN = "bench-history-other-0123456789";
const BATCH = 50; // the page's batches (max_batch_conversations)

function chatRequest() {
  const body = JSON.stringify({ messages: [{ role: "user", content: "short please" }], max_tokens: 64 });
  return new Request("http://127.0.0.1/chat", {
    method: "POST",
    headers: { "content-type": "application/json", "cf-connecting-ip": "127.0.0.9", ...AUTH },
    body,
  });
}

// A conversation as the page sends it: TURNS questions and answers of
// typical length (a 120-character question, a 900-character answer).
function conversation(k) {
  const nodes = [];
  for (let t = 0; t < TURNS; t += 1) {
    nodes.push({
      parent: nodes.length ? nodes.length - 1 : null,
      role: "user",
      content: `Question ${t} of ${k}: ${"q".repeat(100)}`,
    });
    nodes.push({
      parent: nodes.length - 1,
      role: "assistant",
      content: `Answer ${t}: ${"a ".repeat(445)}`,
      status: "done",
      stats: {
        model: "@cf/zai-org/glm-4.7-flash",
        ttft_ms: 300,
        usage: { prompt_tokens: 40, completion_tokens: 220, total_tokens: 260 },
      },
    });
  }
  return { id: `bench-${k}`, title: `Conversation ${k}`, updated: 1764547200000 + k, nodes };
}

async function putEach(worker) {
  let sent = 0;
  const started = performance.now();
  for (let k = 0; k < CONVERSATIONS; k += 1) {
    const body = JSON.stringify(conversation(k));
    sent += Buffer.byteLength(body);
    const response = await worker.fetch(
      new Request(`http://127.0.0.1/api/conversations/bench-${k}`, {
        method: "PUT",
        headers: {
          "content-type": "application/json",
          "if-none-match": "*",
          authorization: `Bearer ${OTHER_TOKEN}`,
        },
        body,
      }),
    );
    if (response.status !== 201) throw new Error(`PUT ${k}: ${response.status} ${await response.text()}`);
    await response.arrayBuffer();
  }
  return { sent, ms: performance.now() - started, requests: CONVERSATIONS };
}

async function sync(worker) {
  let sent = 0;
  let requests = 0;
  const pushStarted = performance.now();
  for (let first = 0; first < CONVERSATIONS; first += BATCH) {
    const put = [];
    for (let k = first; k < Math.min(CONVERSATIONS, first + BATCH); k += 1)
      put.push({ conversation: conversation(k), if_none_match: "*" });
    const body = JSON.stringify({ put });
    sent += Buffer.byteLength(body);
    requests += 1;
    const response = await worker.fetch(
      new Request("http://127.0.0.1/api/conversations", {
        method: "POST",
        headers: { "content-type": "application/json", ...AUTH },
        body,
      }),
    );
    const text = await response.text();
    if (response.status !== 200 || JSON.parse(text).results.some((r) => r.status !== 201))
      throw new Error(`batch at ${first}: ${response.status} ${text.slice(0, 300)}`);
  }
  const push = performance.now() - pushStarted;
  let received = 0;
  let pages = 0;
  let count = 0;
  let before = null;
  const pullStarted = performance.now();
  do {
    const query = new URLSearchParams({ since: "0", bodies: "1", limit: "50" });
    if (before !== null) query.set("before", String(before));
    const response = await worker.fetch(new Request(`http://127.0.0.1/api/conversations?${query}`, { headers: AUTH }));
    const text = await response.text();
    received += Buffer.byteLength(text);
    pages += 1;
    const page = JSON.parse(text);
    count += page.conversations.length;
    before = page.next;
  } while (before !== null);
  const pull = performance.now() - pullStarted;
  return { sent, requests, push, received, pages, count, pull };
}

async function main() {
  const configPath = configWithoutRateLimiter({ withD1: true });
  const config = unstable_readConfig({ config: configPath });
  process.env.EDGECHAT_AI_DELAY_MS = "2";
  const bindings = await createEnv({ config, configPath, log: quiet });
  const keyed = { ...bindings.env, API_KEYS: `bench:${TOKEN},other:${OTHER_TOKEN}` };
  const off = { ...keyed };
  delete off.DB;
  const sides = [
    ["history off (no DB)", await loadInProcess(off, config)],
    ["history on (DB bound)", await loadInProcess(keyed, config)],
  ];
  for (const [, worker] of sides) worker.pyodide.setStdout({ batched: quiet });
  for (const [, worker] of sides) for (let i = 0; i < 50; i += 1) await firstByteCost(worker, chatRequest());
  const cpu = sides.map(() => []);
  const wall = sides.map(() => []);
  for (let i = 0; i < ROUNDS * REQUESTS; i += 1) {
    for (const [index, [, worker]] of sides.entries()) {
      const one = await firstByteCost(worker, chatRequest());
      cpu[index].push(one.cpu);
      wall[index].push(one.wall);
    }
  }
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}; ${ROUNDS} × ${REQUESTS} requests a side`,
  );
  console.log("/chat to its first byte, in-process, no HTTP (ms):");
  for (const [index, [name]] of sides.entries()) {
    const line = `CPU p50 ${median(cpu[index]).toFixed(3)}, p95 ${percentile(cpu[index], 0.95).toFixed(3)}; wall p50 ${median(wall[index]).toFixed(3)}, p95 ${percentile(wall[index], 0.95).toFixed(3)}`;
    console.log(`  ${name.padEnd(24)} ${line}`);
  }
  console.log(
    `  on - off: CPU p50 ${(median(cpu[1]) - median(cpu[0])).toFixed(3)} ms, wall p50 ${(median(wall[1]) - median(wall[0])).toFixed(3)} ms; ratio CPU ${(median(cpu[1]) / median(cpu[0])).toFixed(3)}`,
  );
  const s = await sync(sides[1][1]);
  const each = await putEach(sides[1][1]);
  const kb = (n) => (n / 1024).toFixed(1);
  console.log(
    `sync of ${CONVERSATIONS} conversations (${TURNS * 2} messages each), real local D1 through wrangler's proxy:`,
  );
  console.log(
    `  first push, batches of ${BATCH}: ${s.requests} requests, ${kb(s.sent)} KiB sent, ${s.push.toFixed(0)} ms (${(s.push / CONVERSATIONS).toFixed(1)} ms a conversation)`,
  );
  console.log(
    `  the same as a PUT each:  ${each.requests} requests, ${kb(each.sent)} KiB sent, ${each.ms.toFixed(0)} ms (${(each.ms / CONVERSATIONS).toFixed(1)} ms a conversation); batches ${(each.ms / s.push).toFixed(1)}× faster`,
  );
  console.log(
    `  a new device's pull: ${s.pages} pages, ${s.count} conversations, ${kb(s.received)} KiB received, ${s.pull.toFixed(0)} ms`,
  );
  await bindings.dispose();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
