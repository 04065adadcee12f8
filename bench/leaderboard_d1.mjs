// The leaderboard's queries on wrangler's local D1 (miniflare's, through
// getPlatformProxy, offline), for bench/leaderboard.py, which fills the
// database and reads what this prints.
//
//   node bench/leaderboard_d1.mjs create <folder>        the database, empty; prints its file
//   node bench/leaderboard_d1.mjs query <folder> <spec>  runs spec.json's batches; prints JSON
//
// A spec is {"runs": N, "batches": [{"name", "statements": [[sql, params], ...]}]}: each batch
// is sent as edgechat sends it (one D1 batch), `runs` times; the result gives each batch's
// wall-clock milliseconds per run, and per statement D1's meta (rows_read, rows_written,
// duration) of the last run, and its row count.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { getPlatformProxy } from "wrangler";

const [command, folder, spec] = process.argv.slice(2);

async function open() {
  const config = join(folder, "wrangler.toml");
  writeFileSync(
    config,
    [
      'name = "edgechat-bench-leaderboard"',
      'compatibility_date = "2026-11-17"',
      "[[d1_databases]]",
      'binding = "DB"',
      'database_name = "bench"',
      'database_id = "00000000-0000-0000-0000-000000000000"',
      "",
    ].join("\n"),
  );
  return getPlatformProxy({ configPath: config, persist: { path: join(folder, "state") } });
}

const proxy = await open();
const db = proxy.env.DB;
try {
  if (command === "create") {
    await db.prepare("SELECT 1").all();
    const where = join(folder, "state", "d1", "miniflare-D1DatabaseObject");
    const file = readdirSync(where).find((name) => name.endsWith(".sqlite") && name !== "metadata.sqlite");
    console.log(JSON.stringify({ file: join(where, file) }));
  } else if (command === "query") {
    const { runs, batches } = JSON.parse(readFileSync(spec, "utf8"));
    const out = [];
    for (const batch of batches) {
      const ms = [];
      let results;
      for (let k = 0; k < runs; k++) {
        const statements = batch.statements.map(([sql, params]) => db.prepare(sql).bind(...params));
        const started = performance.now();
        results = await db.batch(statements);
        ms.push(performance.now() - started);
      }
      out.push({
        name: batch.name,
        ms,
        statements: results.map((r) => ({
          rows: r.results.length,
          rows_read: r.meta.rows_read,
          rows_written: r.meta.rows_written,
          duration: r.meta.duration,
        })),
        rows: batch.keep_rows ? results.map((r) => r.results) : undefined,
      });
    }
    console.log(JSON.stringify(out));
  } else {
    throw new Error(`unknown command ${command}`);
  }
} finally {
  await proxy.dispose();
}
