// The Node host: EDGECHAT_AI_SCRIPT / EDGECHAT_AI_LOG / EDGECHAT_AI_DELAY_MS,
// read on every call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator, DEFAULT_DELAY_MS } from "../../tools/emulator/node.mjs";
import { GLM, LLAMA, readChunks, user } from "./helpers.mjs";

function tempDir(t) {
  const dir = mkdtempSync(join(tmpdir(), "edgechat-emu-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const logLines = (path) =>
  readFileSync(path, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));

test("createEmulator returns an Ai", () => {
  assert.equal(createEmulator({}).constructor.name, "Ai");
});

test("delay: 20 ms when unset, the number when set, 0 allowed", () => {
  assert.equal(DEFAULT_DELAY_MS, 20);
  const env = {};
  const ai = createEmulator(env);
  assert.equal(ai.io.delayMs(), 20);
  env.EDGECHAT_AI_DELAY_MS = "0";
  assert.equal(ai.io.delayMs(), 0);
  env.EDGECHAT_AI_DELAY_MS = "35";
  assert.equal(ai.io.delayMs(), 35);
});

test("delay is applied from the env var at call time", async () => {
  const env = { EDGECHAT_AI_DELAY_MS: "0" };
  const ai = createEmulator(env);
  let t = performance.now();
  await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 8 }));
  assert.ok(performance.now() - t < 120, "0 means no delay (not the 20 ms default)");
  env.EDGECHAT_AI_DELAY_MS = "30";
  t = performance.now();
  await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 8 }));
  assert.ok(performance.now() - t >= 210);
});

test("script: unset or missing file -> default reply; the file is re-read on every call", async (t) => {
  const dir = tempDir(t);
  const script = join(dir, "script.json");
  const env = { EDGECHAT_AI_DELAY_MS: "0" };
  const ai = createEmulator(env);
  assert.match((await ai.run(GLM, user("a"))).choices[0].message.content, /not a real model/);
  env.EDGECHAT_AI_SCRIPT = script; // does not exist yet
  assert.match((await ai.run(GLM, user("a"))).choices[0].message.content, /not a real model/);
  writeFileSync(script, JSON.stringify({ rules: [{ error: "3040: busy" }] }));
  await assert.rejects(ai.run(GLM, user("a")), /^Error: 3040: busy$/);
  writeFileSync(script, JSON.stringify({ rules: [{ json: { response: "from file" } }] }));
  assert.deepEqual(await ai.run(GLM, user("a")), { response: "from file" });
});

test("script: invalid JSON is a clear error from run", async (t) => {
  const dir = tempDir(t);
  const script = join(dir, "bad.json");
  writeFileSync(script, "{ rules: nope");
  const ai = createEmulator({ EDGECHAT_AI_SCRIPT: script, EDGECHAT_AI_DELAY_MS: "0" });
  await assert.rejects(ai.run(GLM, user("a")), (e) => {
    assert.ok(e.message.includes("EDGECHAT_AI_SCRIPT"));
    assert.ok(e.message.includes(script));
    assert.ok(e.message.includes("not valid JSON"));
    return true;
  });
});

test("log: one JSON line per finished call, appended synchronously", async (t) => {
  const dir = tempDir(t);
  const log = join(dir, "sub", "calls.jsonl");
  const env = { EDGECHAT_AI_LOG: log, EDGECHAT_AI_DELAY_MS: "0" };
  const ai = createEmulator(env);
  await ai.run(GLM, user("one"));
  assert.equal(logLines(log).length, 1, "readable right after the call resolves");
  const stream = await ai.run(LLAMA, { prompt: "two", stream: true });
  assert.equal(logLines(log).length, 1, "a stream is logged when it ends");
  await readChunks(stream);
  await assert.rejects(ai.run("@cf/nope", { prompt: "three" }), /^Error: 5007/);
  const lines = logLines(log);
  assert.equal(lines.length, 3);
  assert.deepEqual(
    lines.map((l) => [l.model, l.stream, l.error === null]),
    [
      [GLM, false, true],
      [LLAMA, true, true],
      ["@cf/nope", false, false],
    ],
  );
  assert.deepEqual(lines[1].inputs, { prompt: "two", stream: true });

  delete env.EDGECHAT_AI_LOG;
  await ai.run(GLM, user("four"));
  assert.equal(logLines(log).length, 3);
  assert.ok(!existsSync(join(dir, "undefined")));
});
