// Time to /chat's first byte, side by side with another checkout of edgechat
// (say, the commit before a change): both Workers on runners without the
// rate limiter and KV (proxied in the runner), the emulator at zero delay,
// short answers alternating between them.
//
//   git worktree add /tmp/before <commit>   # with node_modules, .venv and
//   node bench/first_byte_at.mjs /tmp/before   # python_modules linked in
import { request } from "node:http";
import { parseArgs } from "node:util";
import { configOf, median, percentile, ROOT, startRunner, stopRunner } from "./lib.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { samples: { type: "string", default: "300" } },
});
const OTHER = positionals[0];
if (!OTHER) throw new Error("usage: node bench/first_byte_at.mjs <other checkout>");

function firstByte(url) {
  const body = JSON.stringify({ messages: [{ role: "user", content: "hello" }], max_tokens: 64 });
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    let first = null;
    const req = request(
      `${url}/chat`,
      { method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
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

const env = { EDGECHAT_AI_DELAY_MS: "0" };
const other = await startRunner(configOf(OTHER, "first-byte"), { env });
const here = await startRunner(configOf(ROOT, "first-byte"), { env });
try {
  for (let i = 0; i < 20; i += 1) {
    await firstByte(other.url);
    await firstByte(here.url);
  }
  const a = [];
  const b = [];
  for (let i = 0; i < Number(values.samples); i += 1) {
    a.push(await firstByte(other.url));
    b.push(await firstByte(here.url));
  }
  const show = (xs) => `p50 ${median(xs).toFixed(2)} ms, p95 ${percentile(xs, 0.95).toFixed(2)} ms`;
  console.log(`first byte of /chat, ${values.samples} each, alternating:`);
  console.log(`  ${OTHER}: ${show(a)}`);
  console.log(`  this checkout: ${show(b)}`);
} finally {
  await stopRunner(other.child);
  await stopRunner(here.child);
}
