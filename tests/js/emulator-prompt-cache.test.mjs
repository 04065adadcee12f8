// The emulator's prompt caching: a session named by `x-session-affinity`
// (the binding's extraHeaders) reports as cached the tokens of the messages
// its prompt shares with the session's previous prompt of the same model.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, SESSION_HEADER, countTokens } from "../../tools/emulator/ai.mjs";
import { GLM, KIMI, LLAMA, memoryIo } from "./helpers.mjs";

const SYSTEM = { role: "system", content: "You are a helpful assistant." };
const FIRST = [SYSTEM, { role: "user", content: "What is prefix caching?" }];
const SECOND = [...FIRST, { role: "assistant", content: "Reusing a prompt's start." }, { role: "user", content: "Why?" }];
// A message's tokens: its content's and 2 for the role (the emulator's rule).
const tokensOf = (messages) => messages.reduce((n, m) => n + countTokens(m.content) + 2, 0);

function session(id) {
  return { extraHeaders: { [SESSION_HEADER]: id } };
}

async function usageOf(ai, model, messages, options) {
  const body = await ai.run(model, { messages }, options);
  return body.usage;
}

test("a session's second prompt reports its shared messages as cached; the first is cold", async () => {
  const ai = new Ai(memoryIo());
  const cold = await usageOf(ai, KIMI, FIRST, session("ses-a"));
  assert.equal(cold.prompt_tokens_details, undefined);
  const warm = await usageOf(ai, KIMI, SECOND, session("ses-a"));
  assert.deepEqual(warm.prompt_tokens_details, { cached_tokens: tokensOf(FIRST) });
  assert.equal(warm.prompt_tokens, tokensOf(SECOND));
});

test("another session, another model, or no header: nothing cached", async () => {
  const ai = new Ai(memoryIo());
  await usageOf(ai, KIMI, FIRST, session("ses-a"));
  assert.equal((await usageOf(ai, KIMI, SECOND, session("ses-b"))).prompt_tokens_details, undefined);
  assert.equal((await usageOf(ai, GLM, SECOND, session("ses-a"))).prompt_tokens_details, undefined);
  assert.equal((await usageOf(ai, KIMI, SECOND, {})).prompt_tokens_details, undefined);
  // Llama (the native format) reports no cache, whatever the header.
  await usageOf(ai, LLAMA, FIRST, session("ses-l"));
  assert.equal((await usageOf(ai, LLAMA, SECOND, session("ses-l"))).prompt_tokens_details, undefined);
});

test("the cache ends at the first message that differs", async () => {
  const ai = new Ai(memoryIo());
  await usageOf(ai, KIMI, SECOND, session("ses-a"));
  const edited = [SYSTEM, { role: "user", content: "Something else" }, ...SECOND.slice(2)];
  const usage = await usageOf(ai, KIMI, edited, session("ses-a"));
  assert.deepEqual(usage.prompt_tokens_details, { cached_tokens: tokensOf([SYSTEM]) });
});

test("a stream's running and final usage carry the cached tokens, and the log the header", async () => {
  const io = memoryIo();
  const ai = new Ai(io);
  await usageOf(ai, GLM, FIRST, session("ses-s"));
  const stream = await ai.run(GLM, { messages: SECOND, stream: true }, session("ses-s"));
  const text = await new Response(stream).text();
  const usages = text
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)).usage)
    .filter(Boolean);
  assert.ok(usages.length > 2);
  for (const usage of usages) assert.deepEqual(usage.prompt_tokens_details, { cached_tokens: tokensOf(FIRST) });
  assert.deepEqual(io.log.at(-1).options.extraHeaders, { [SESSION_HEADER]: "ses-s" });
});
