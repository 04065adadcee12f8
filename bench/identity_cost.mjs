// What identity and the budget add before /chat's first byte: the CPU of
// this process (Python and the JavaScript it calls) from the request to the
// first byte of the answer, for the same Worker loaded four times in this
// process (as the runner loads it), one with no identity settings and no database,
// the others behind Cloudflare Access (a token signed here, the team's key
// served from a loopback keys endpoint), with a daily budget, and both. No HTTP to the
// Worker: the figures are the Worker's own.
//
//   node bench/identity_cost.mjs [--requests N] [--rounds N] [--against CHECKOUT]
//
// With --against, the four sides are loaded a second time from another
// checkout (say, the commit before a change), all eight in turn in one run.
//
// The budget's database is an in-process stand-in of D1's binding (prepare,
// bind, batch; it answers at once with no rows): at the edge D1 is I/O, not
// the Worker's CPU, and in the runner it is a round trip through wrangler's
// proxy that costs this process far more than the Worker does. What is
// measured is the Worker's side of it: the statements, the conversions, the
// check beside the model call and its verdict.
import { cpus } from "node:os";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { unstable_readConfig } from "wrangler";
import { createEnv } from "../tools/runner/bindings.mjs";
import { firstByteCost, loadInProcess } from "./in_process.mjs";
import { accessTeam, configWithoutRateLimiter, median, percentile, ROOT } from "./lib.mjs";

const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "200" },
    rounds: { type: "string", default: "5" },
    against: { type: "string" },
  },
});
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);
const quiet = () => {};
// D1's binding, answering at once: every statement returns no rows.
class D1Database {
  prepare() {
    const statement = { bind: () => statement };
    return statement;
  }
  async batch(statements) {
    return statements.map(() => ({ results: [] }));
  }
}

function chatRequest(headers) {
  const body = JSON.stringify({ messages: [{ role: "user", content: "short please" }], max_tokens: 64 });
  return new Request("http://127.0.0.1/chat", {
    method: "POST",
    headers: { "content-type": "application/json", "cf-connecting-ip": "127.0.0.9", ...headers },
    body,
  });
}

async function main() {
  const configPath = configWithoutRateLimiter();
  const config = unstable_readConfig({ config: configPath });
  // Tokens 2 ms apart: the first byte goes out before the answer ends, so
  // what follows the answer (counting its cost) is not in the measure.
  process.env.EDGECHAT_AI_DELAY_MS = "2";
  const bindings = await createEnv({ config, configPath, log: quiet });
  const team = await accessTeam();
  const plain = { ...bindings.env };
  delete plain.USAGE_DB;
  const access = { ACCESS_TEAM_DOMAIN: team.team, ACCESS_AUD: "bench-aud" };
  const budget = { USER_DAILY_USD: "1000", USAGE_DB: new D1Database() };
  const token = { "cf-access-jwt-assertion": team.token };
  const sides = [];
  for (const [root, suffix] of [
    [ROOT, ""],
    ...(values.against ? [[values.against, `, ${basename(values.against)}`]] : []),
  ]) {
    sides.push(
      [`no identity, no budget${suffix}`, await loadInProcess(plain, config, root), {}],
      [`Access${suffix}`, await loadInProcess({ ...plain, ...access }, config, root), token],
      [`a daily budget${suffix}`, await loadInProcess({ ...plain, ...budget }, config, root), {}],
      [
        `Access + a daily budget${suffix}`,
        await loadInProcess({ ...plain, ...access, ...budget }, config, root),
        token,
      ],
    );
  }
  for (const [, worker] of sides) worker.pyodide.setStdout({ batched: quiet });
  for (const [, worker, headers] of sides)
    for (let i = 0; i < 50; i += 1) await firstByteCost(worker, chatRequest(headers));
  const cpu = sides.map(() => []);
  const wall = sides.map(() => []);
  // One request of each side in turn, so a burst of noise from elsewhere on
  // the machine hits all sides alike.
  for (let i = 0; i < ROUNDS * REQUESTS; i += 1) {
    for (const [index, [, worker, headers]] of sides.entries()) {
      const one = await firstByteCost(worker, chatRequest(headers));
      cpu[index].push(one.cpu);
      wall[index].push(one.wall);
    }
  }
  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}; ${ROUNDS} × ${REQUESTS} requests a side`,
  );
  console.log("/chat to its first byte, in-process, no HTTP (ms):");
  for (const [index, [name]] of sides.entries()) {
    const line = `CPU p50 ${median(cpu[index]).toFixed(3)}, p95 ${percentile(cpu[index], 0.95).toFixed(3)}; wall p50 ${median(wall[index]).toFixed(3)}`;
    console.log(`  ${name.padEnd(36)} ${line}`);
  }
  // Each side against the plain side of its own checkout.
  for (const [index, [name]] of sides.entries()) {
    const plainIndex = index - (index % 4);
    if (index === plainIndex) continue;
    console.log(`  added CPU p50, ${name}: ${(median(cpu[index]) - median(cpu[plainIndex])).toFixed(3)} ms`);
  }
  team.server.close();
  await bindings.dispose();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
