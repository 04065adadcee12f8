// The config `npm start` derives for wrangler (tools/workerd/dev.mjs): what
// local runs add, and what they leave as the project wrote it.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterEach, beforeEach, test } from "node:test";
import { fileURLToPath } from "node:url";
import { deriveConfig, formatDotenv, parseDotenv } from "../../tools/workerd/dev.mjs";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../..");
const PROJECT = join(ROOT, "wrangler.toml");
const saved = {};

beforeEach(() => {
  for (const name of ["CLOUDFLARE_API_TOKEN", "CLOUDFLARE_ACCOUNT_ID"]) {
    saved[name] = process.env[name];
    delete process.env[name];
  }
});

afterEach(() => {
  for (const [name, value] of Object.entries(saved)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

test("a Python Worker gets the dev flag, AI the emulator, and every path made absolute", () => {
  const { config, python, usesEmulator } = deriveConfig(PROJECT, {});
  assert.equal(python, true);
  assert.equal(usesEmulator, true);
  assert.deepEqual(config.compatibility_flags, ["python_workers", "python_workers_development", "enable_abortsignal_rpc"]);
  assert.equal(config.ai, undefined);
  assert.deepEqual(config.services, [
    { binding: "AI", service: "edgechat-ai-emulator", entrypoint: "EmulatedAi" },
    { binding: "VECTORS", service: "edgechat-ai-emulator", entrypoint: "EmulatedVectorize" },
  ]);
  assert.equal(config.vectorize, undefined);
  assert.equal(config.main, join(ROOT, "src", "entry.py"));
  assert.equal(config.assets.directory, join(ROOT, "static"));
  assert.equal(config.d1_databases.find((db) => db.binding === "DB").migrations_dir, join(ROOT, "migrations"));
});

test("the config's own vars stay in the config; local ones go to wrangler as secrets", () => {
  const { config } = deriveConfig(PROJECT, {});
  assert.equal(config.vars.MODELS, "auto,glm,kimi,llama");
  const values = { A: "plain", B: "it's", C: "`x` and it's", PRESETS: '[{"name": "a"}]', D: "two\nlines" };
  assert.deepEqual(parseDotenv(formatDotenv({ A: "plain" })), { A: "plain" });
  const text = formatDotenv(values);
  assert.equal(text, "A='plain'\nB=`it's`\nC=\"`x` and it's\"\nPRESETS='[{\"name\": \"a\"}]'\nD='two\nlines'\n");
  assert.throws(() => formatDotenv({ E: "' ` \"" }), /E: a value with/);
});

test("with credentials AI and VECTORS stay the real remote bindings", () => {
  process.env.CLOUDFLARE_API_TOKEN = "token";
  process.env.CLOUDFLARE_ACCOUNT_ID = "account";
  const { config, usesEmulator } = deriveConfig(PROJECT, {});
  assert.deepEqual(config.ai, { binding: "AI", remote: true });
  assert.deepEqual(config.vectorize, [{ binding: "VECTORS", index_name: "edgechat", remote: true }]);
  assert.deepEqual(config.services, []);
  assert.equal(usesEmulator, false);
  assert.deepEqual(config.compatibility_flags, ["python_workers", "python_workers_development"]);
});

test("the clock hook binds DEV_CLOCK, and only then", () => {
  const named = (options) => deriveConfig(PROJECT, options).config.services.map((s) => s.binding);
  assert.deepEqual(named({}), ["AI", "VECTORS"]);
  assert.deepEqual(named({ "clock-hook": true }), ["AI", "VECTORS", "DEV_CLOCK"]);
});

test("a JavaScript Worker keeps its flags", () => {
  const { config, python } = deriveConfig(join(ROOT, "bench", "passthrough-js", "wrangler.toml"), {});
  assert.equal(python, false);
  assert.ok(!config.compatibility_flags?.includes("python_workers_development"));
});

test("the derived config never touches the file it came from", () => {
  const folder = mkdtempSync(join(tmpdir(), "edgechat-derive-"));
  const path = join(folder, "wrangler.toml");
  const text = 'name = "w"\nmain = "src/entry.py"\ncompatibility_date = "2026-11-17"\ncompatibility_flags = ["python_workers"]\n';
  writeFileSync(path, text);
  const { config } = deriveConfig(path, {});
  assert.equal(config.main, join(folder, "src", "entry.py"));
  assert.deepEqual(config.compatibility_flags, ["python_workers", "python_workers_development"]);
});

test("dotenv lines as wrangler reads .dev.vars", () => {
  const text = '# a comment\nexport A=1\nB = "two words"\nC=\'single\'\nD=plain # trailing\n\nnot a line\n';
  assert.deepEqual(parseDotenv(text), { A: "1", B: "two words", C: "single", D: "plain" });
});
