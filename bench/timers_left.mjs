// What a burst leaves behind, checkouts side by side: 300 clients at once
// (bench/burst.mjs's faults without the stall, so no answer lasts a whole
// idle deadline), then 5 s later and collected, the Python objects the
// interpreter tracks and the timers still pending (Node's `Timeout`
// handles, from the runner's dev-only memory hook).
//
//   node bench/timers_left.mjs CHECKOUT [CHECKOUT ...]
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FAULT_RULES, faultBurst } from "./burst.mjs";
import { configOf, liveMemory, sleep, startRunner, stopRunner } from "./lib.mjs";

const TOKEN = "bench-timers-token";
const KINDS = ["ok", "ok", "busy", "cut", "slow", "pause"];
const folder = mkdtempSync(join(tmpdir(), "edgechat-timers-"));
const script = join(folder, "burst.json");
writeFileSync(script, JSON.stringify({ rules: FAULT_RULES }));
const vars = join(folder, "burst.vars");
writeFileSync(vars, `API_TOKEN=${TOKEN}\nCOOLDOWN_MAX_S=0\nCACHE_MODE=off\n`);
const roots = process.argv.slice(2);
const runners = await Promise.all(
  roots.map((root, i) =>
    startRunner(configOf(root, `bench-timers-${i}`), {
      env: { EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: "5" },
      args: ["--memory-hook", "--vars", vars],
    }),
  ),
);
try {
  for (const [i, runner] of runners.entries()) {
    const before = await liveMemory(runner.url, { gc: true });
    const { counts, seconds } = await faultBurst(runner.url, { count: 300, token: TOKEN, kinds: KINDS });
    await sleep(5000);
    const after = await liveMemory(runner.url, { gc: true });
    console.log(
      `${roots[i]}: ${JSON.stringify(counts)} in ${seconds.toFixed(1)} s; 5 s later, collected: ` +
        `${after.pythonObjects - before.pythonObjects} more Python objects, ${after.resources.Timeout ?? 0} timers`,
    );
  }
} finally {
  await Promise.all(runners.map((runner) => stopRunner(runner.child)));
}
