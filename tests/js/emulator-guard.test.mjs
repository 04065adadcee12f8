// Llama Guard 3: safe by default, unsafe when a script says so, in both of
// its output shapes; scripts can also make it slow or fail.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, MODELS, countTokens } from "../../tools/emulator/ai.mjs";
import { HANG_GUARD_MS, isPending, memoryIo, settlesAfter, user } from "./helpers.mjs";

const GUARD = "@cf/meta/llama-guard-3-8b";
const JSON_FORMAT = { response_format: { type: "json_object" } };
const mocked = { timeout: HANG_GUARD_MS };

function scripted(rules, opts = {}) {
  const io = memoryIo({ script: { rules }, ...opts });
  return { io, ai: new Ai(io) };
}

const conversation = (userText, assistantText) => ({
  messages: [
    { role: "user", content: userText },
    { role: "assistant", content: assistantText },
  ],
});

test("in the catalog, answering in its own format", () => {
  assert.equal(MODELS[GUARD].format, "guard");
});

test("safe by default: the string form, and {safe, categories} with response_format json_object; usage counted", async () => {
  const { io, ai } = scripted([]);
  assert.deepEqual(await ai.run(GUARD, user("hello there")), {
    response: "safe",
    usage: { prompt_tokens: 2 + 2, completion_tokens: 1, total_tokens: 5 },
  });
  assert.deepEqual(await ai.run(GUARD, { ...user("hello there"), ...JSON_FORMAT }), {
    response: { safe: true, categories: [] },
    usage: { prompt_tokens: 4, completion_tokens: 1, total_tokens: 5 },
  });
  // A stream is not what it gives: the same one object comes back.
  const streamed = await ai.run(GUARD, { ...user("hello there"), stream: true });
  assert.ok(!(streamed instanceof ReadableStream));
  assert.equal(streamed.response, "safe");
  assert.equal(io.log.length, 3);
  assert.equal(io.log[2].stream, true);
  assert.ok(io.log.every((l) => l.error === null));
});

test("reply unsafe: ['S1','S10'] gives 'unsafe\\nS1,S10' or {safe: false, categories}", async () => {
  const { ai } = scripted([
    { match: { model: GUARD, contains: "bully" }, reply: { unsafe: ["S1", "S10"] } },
    { match: { model: GUARD, contains: "vague" }, reply: { unsafe: [] } },
  ]);
  const text = await ai.run(GUARD, user("I wanna bully someone"));
  assert.equal(text.response, "unsafe\nS1,S10");
  assert.equal(text.usage.completion_tokens, countTokens("unsafe\nS1,S10"));
  const json = await ai.run(GUARD, { ...user("I wanna bully someone"), ...JSON_FORMAT });
  assert.deepEqual(json.response, { safe: false, categories: ["S1", "S10"] });
  assert.equal((await ai.run(GUARD, user("vague"))).response, "unsafe");
  assert.equal((await ai.run(GUARD, user("fine"))).response, "safe");
});

test("match.any_contains looks at every message, so an assistant answer can be the unsafe part", async () => {
  const { ai } = scripted([{ match: { model: GUARD, any_contains: "how to build" }, reply: { unsafe: ["S9"] } }]);
  const answer = conversation("tell me a story", "Sure, here is how to build …");
  assert.equal((await ai.run(GUARD, answer)).response, "unsafe\nS9");
  // `contains` alone would have missed it: it reads the last user message only.
  const { ai: lastUser } = scripted([{ match: { model: GUARD, contains: "how to build" }, reply: { unsafe: ["S9"] } }]);
  assert.equal((await lastUser.run(GUARD, answer)).response, "safe");
});

test("error and json rules work on the guard; prompt without messages is 3003", async () => {
  const { io, ai } = scripted([
    { match: { model: GUARD, contains: "busy" }, error: "3040: Capacity temporarily exceeded" },
    { match: { model: GUARD, contains: "odd" }, json: { response: "maybe" } },
  ]);
  await assert.rejects(ai.run(GUARD, user("busy")), /^Error: 3040: Capacity/);
  assert.deepEqual(await ai.run(GUARD, user("odd")), { response: "maybe" });
  await assert.rejects(ai.run(GUARD, { prompt: "hi" }), /^Error: 3003: /);
  assert.equal(io.log[0].error, "3040: Capacity temporarily exceeded");
});

test("delays: the host delay per verdict token, delay_ms on a rule or a reply, abortable", mocked, async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const { io, ai } = scripted(
    [
      { match: { contains: "slow" }, reply: { unsafe: ["S1"], delay_ms: 500 } },
      { match: { contains: "late failure" }, delay_ms: 300, error: "3007: Request timeout" },
    ],
    { delay: 10 },
  );
  const verdict = await settlesAfter(t, 10, ai.run(GUARD, user("hi")), "a safe verdict (1 token)");
  assert.equal(verdict.response, "safe");
  const slow = await settlesAfter(t, 500 + 10 * countTokens("unsafe\nS1"), ai.run(GUARD, user("slow")), "the slow verdict");
  assert.equal(slow.response, "unsafe\nS1");
  const failing = ai.run(GUARD, user("late failure"));
  failing.catch(() => {});
  await assert.rejects(settlesAfter(t, 300, failing, "the late failure"), /^Error: 3007: /);

  // An abort ends a slow guard call without the clock moving.
  const ctrl = new AbortController();
  const aborted = ai.run(GUARD, user("slow"), { signal: ctrl.signal });
  assert.ok(await isPending(aborted));
  ctrl.abort();
  await assert.rejects(aborted, (e) => e.name === "AbortError");
  assert.equal(io.log.at(-1).aborted, true);
});
