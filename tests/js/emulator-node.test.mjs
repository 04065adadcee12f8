// The Node host: EDGECHAT_AI_SCRIPT / EDGECHAT_AI_LOG / EDGECHAT_AI_DELAY_MS,
// read on every call.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createEmulator } from "../../tools/emulator/node.mjs";
import { GLM, HANG_GUARD_MS, LLAMA, readChunks, settlesAfter, user } from "./helpers.mjs";

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

const firstToken = async (ai) => (await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 8 })).getReader().read();

// The timers are mocked: a token comes when the test moves the clock, so the
// delay is proven exactly, whatever the machine's load.
test("delay: 20 ms when unset, the number when set, 0 allowed", { timeout: HANG_GUARD_MS }, async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const env = {};
  const ai = createEmulator(env);
  assert.equal(ai.io.delayMs(), 20);
  await settlesAfter(t, 20, firstToken(ai), "the first token with the delay unset");
  env.EDGECHAT_AI_DELAY_MS = "0";
  assert.equal(ai.io.delayMs(), 0);
  env.EDGECHAT_AI_DELAY_MS = "35";
  assert.equal(ai.io.delayMs(), 35);
  await settlesAfter(t, 35, firstToken(ai), "the first token at 35 ms");
});

test("delay is applied from the env var at call time", { timeout: HANG_GUARD_MS }, async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const env = { EDGECHAT_AI_DELAY_MS: "0" };
  const ai = createEmulator(env);
  // 0 means no delay (not the 20 ms default): the whole answer arrives while
  // the mocked clock never moves.
  const chunks = await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 8 }));
  assert.equal(chunks.length, 8 + 2);
  env.EDGECHAT_AI_DELAY_MS = "30";
  await settlesAfter(t, 30, firstToken(ai), "the first token after the variable changed to 30");
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
