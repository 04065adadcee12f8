// The Worker's `env`, offline: the project's real local bindings from
// wrangler's getPlatformProxy (KV, D1, R2, rate limiter, static assets, [vars],
// .dev.vars secrets), with `AI` served by the Workers AI emulator — or by the
// real Workers AI REST API when Cloudflare credentials are in the environment.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { getPlatformProxy } from "wrangler";
import { systemStream } from "./streams.mjs";

// The Python `workers` SDK decides how to convert arguments and results by a
// binding's JS class name (KvNamespace, Ratelimit, Fetcher, Ai, …). The
// platform proxy's stand-ins have anonymous classes, so each is fronted by a
// forwarding object of the class the edge would hand to Python.
function asBindingClass(className, target, methods) {
  const cls = { [className]: class {} }[className];
  const binding = new cls();
  for (const method of methods) {
    binding[method] = (...args) => target[method](...args);
  }
  return binding;
}

const BINDING_SHAPES = {
  kv_namespaces: ["KvNamespace", ["get", "getWithMetadata", "put", "delete", "list"]],
  ratelimits: ["Ratelimit", ["limit"]],
  d1_databases: ["D1Database", ["prepare", "batch", "exec", "dump"]],
  r2_buckets: ["R2Bucket", ["head", "get", "put", "delete", "list"]],
};

export function parseDotenv(text) {
  const vars = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq < 1) throw new Error(`not a NAME=value line: ${JSON.stringify(raw)}`);
    const name = line
      .slice(0, eq)
      .trim()
      .replace(/^export\s+/, "");
    let value = line.slice(eq + 1).trim();
    const quote = value[0];
    if ((quote === '"' || quote === "'") && value.endsWith(quote) && value.length >= 2) {
      value = value.slice(1, -1);
      if (quote === '"') value = value.replace(/\\n/g, "\n").replace(/\\"/g, '"');
    }
    vars[name] = value;
  }
  return vars;
}

// `env.AI` as workerd hands it over: `run()` resolves a streamed answer to an
// internal byte stream (ai-api.ts returns the fetch body), so BYOB reads,
// `readAtLeast`, a native tee() and the native pipe work on it as at the edge.
// The stream pulls one upstream chunk per read; cancelling it cancels the
// upstream, and an upstream error errors it with the same reason.
export class Ai {
  #inner;
  constructor(inner) {
    this.#inner = inner;
  }
  async run(model, inputs, options) {
    const result = await this.#inner.run(model, inputs, options);
    return result instanceof ReadableStream ? systemStream(result) : result;
  }
  toMarkdown(files) {
    return this.#inner.toMarkdown(files);
  }
}

async function makeAi(log) {
  const { CLOUDFLARE_ACCOUNT_ID: accountId, CLOUDFLARE_API_TOKEN: apiToken } = process.env;
  if (accountId && apiToken) {
    const baseUrl = process.env.EDGECHAT_AI_BASE_URL || undefined;
    log(`AI: real Workers AI via the REST API${baseUrl ? ` at ${baseUrl}` : ""}`);
    const { Ai: RestClient } = await import("../emulator/rest.mjs");
    return new Ai(new RestClient({ accountId, apiToken, baseUrl }));
  }
  log("AI: local Workers AI emulator (set CLOUDFLARE_ACCOUNT_ID and CLOUDFLARE_API_TOKEN for real models)");
  const { createEmulator } = await import("../emulator/node.mjs");
  return new Ai(createEmulator());
}

// The statements of a migration file: `--` comments dropped, split at `;`
// (the project's migrations hold no `;` inside a string).
export function migrationStatements(text) {
  return text
    .split("\n")
    .map((line) => line.replace(/--.*$/, ""))
    .join("\n")
    .split(";")
    .map((statement) => statement.trim())
    .filter(Boolean);
}

// What `wrangler d1 migrations apply` does to a database with a
// `migrations_dir`: every `.sql` file there, in name order, each in one
// batch (one transaction), recorded in wrangler's own `d1_migrations` table.
async function applyMigrations(database, directory, log) {
  const files = readdirSync(directory)
    .filter((name) => name.endsWith(".sql"))
    .sort();
  await database
    .prepare(
      "CREATE TABLE IF NOT EXISTS d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, " +
        "name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL)",
    )
    .run();
  for (const name of files) {
    const done = await database.prepare("SELECT 1 FROM d1_migrations WHERE name = ?").bind(name).first();
    if (done) continue;
    const statements = migrationStatements(readFileSync(join(directory, name), "utf8"));
    await database.batch([
      ...statements.map((sql) => database.prepare(sql)),
      database.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(name),
    ]);
  }
  log(`D1: ${files.length} migration(s) from ${directory}`);
}

export async function createEnv({ config, configPath, varsFile, log }) {
  const proxy = await getPlatformProxy({ configPath, remoteBindings: false, persist: false });
  const env = {};
  for (const [name, value] of Object.entries(proxy.env)) {
    // Plain values ([vars], secrets) pass through as the edge passes them.
    if (typeof value !== "object" || value === null) env[name] = value;
  }
  for (const [kind, [className, methods]] of Object.entries(BINDING_SHAPES)) {
    for (const entry of config[kind] ?? []) {
      const name = entry.binding ?? entry.name;
      env[name] = asBindingClass(className, proxy.env[name], methods);
    }
  }
  for (const entry of config.d1_databases ?? []) {
    if (!entry.migrations_dir) continue;
    const directory = resolve(dirname(configPath), entry.migrations_dir);
    await applyMigrations(proxy.env[entry.binding], directory, log);
  }
  if (config.assets?.binding) {
    const assets = proxy.env[config.assets.binding];
    // The proxy answers with its own Response subclass; Python expects the
    // platform's Response, as the edge returns.
    const fetcher = {
      fetch: async (...args) => {
        const response = await assets.fetch(...args);
        return new Response(response.body, response);
      },
    };
    env[config.assets.binding] = asBindingClass("Fetcher", fetcher, ["fetch"]);
  }
  if (config.ai?.binding) env[config.ai.binding] = await makeAi(log);
  if (varsFile) Object.assign(env, parseDotenv(readFileSync(varsFile, "utf8")));
  return {
    env,
    assets: config.assets?.binding ? proxy.env[config.assets.binding] : null,
    dispose: () => proxy.dispose(),
  };
}
