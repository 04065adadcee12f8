// The emulator's script seam (every rule kind) and its abort/cancel handling.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai } from "../../tools/emulator/ai.mjs";
import {
  GLM,
  HANG_GUARD_MS,
  KIMI,
  LLAMA,
  concat,
  decodeAll,
  drainMicrotasks,
  isPending,
  memoryIo,
  readChunks,
  settlesAfter,
  sseParsed,
  user,
} from "./helpers.mjs";

const enc = new TextEncoder();
// Tests about time mock setTimeout: nothing waits for a real clock, so a
// pending read stays pending and a prompt abort is one that needs no tick.
const mocked = { timeout: HANG_GUARD_MS };
const mockTimers = (t) => t.mock.timers.enable({ apis: ["setTimeout"] });
const text = async (stream) => decodeAll((await readChunks(stream)).map((c) => c.bytes));

function scripted(rules, opts = {}) {
  const io = memoryIo({ script: { rules }, ...opts });
  return { io, ai: new Ai(io) };
}

test("match by model, by * and by contains; first matching rule wins; no match -> default", async () => {
  const { ai } = scripted([
    { match: { model: LLAMA }, json: { response: "llama rule" } },
    { match: { model: "*", contains: "weather" }, json: { response: "weather rule" } },
    { match: { contains: "weather" }, json: { response: "never reached" } },
    { match: { model: KIMI, contains: "kimi" }, json: { response: "kimi rule" } },
  ]);
  assert.deepEqual(await ai.run(LLAMA, { prompt: "weather?" }), { response: "llama rule" });
  assert.deepEqual(await ai.run(GLM, user("what weather today")), { response: "weather rule" });
  assert.deepEqual(await ai.run(KIMI, user("hi kimi")), { response: "kimi rule" });
  // contains looks at the last user message only
  const r = await ai.run(GLM, {
    messages: [
      { role: "user", content: "weather" },
      { role: "assistant", content: "sunny" },
      { role: "user", content: "thanks" },
    ],
  });
  assert.match(r.choices[0].message.content, /You asked: «thanks»/);
  const r2 = await ai.run(GLM, user("hi kimi"));
  assert.match(r2.choices[0].message.content, /not a real model/);
});

test("times: a rule serves its first N matching calls, then later rules apply; counts reset when the script changes", async () => {
  const { io, ai } = scripted([
    { match: { model: "*" }, times: 2, error: "3040: Capacity temporarily exceeded" },
    { match: { model: LLAMA }, times: 1, json: { response: "once" } },
  ]);
  await assert.rejects(ai.run(LLAMA, { prompt: "a" }), /^Error: 3040: Capacity/);
  await assert.rejects(ai.run(GLM, user("a")), /^Error: 3040: Capacity/);
  assert.deepEqual(await ai.run(LLAMA, { prompt: "a" }), { response: "once" });
  const r = await ai.run(LLAMA, { prompt: "a" });
  assert.match(r.response, /not a real model/);

  // The same content again keeps the counts...
  io.script = structuredClone(io.script);
  assert.match((await ai.run(LLAMA, { prompt: "a" })).response, /not a real model/);
  // ...a change resets them.
  io.script = { rules: [{ match: { model: "*" }, times: 1, error: "3021: Rate limited" }] };
  await assert.rejects(ai.run(GLM, user("a")), /^Error: 3021: /);
  assert.match((await ai.run(GLM, user("a"))).choices[0].message.content, /not a real model/);
});

test("error rule: thrown before any byte, even for stream calls, and logged", async () => {
  const { io, ai } = scripted([{ error: "3036: Daily free allocation used up" }]);
  await assert.rejects(ai.run(GLM, { ...user("a"), stream: true }), (e) => {
    assert.ok(e instanceof Error);
    assert.equal(e.message, "3036: Daily free allocation used up");
    return true;
  });
  assert.equal(io.log.length, 1);
  assert.equal(io.log[0].error, "3036: Daily free allocation used up");
  assert.equal(io.log[0].stream, true);
  assert.equal(io.log[0].aborted, false);
});

test("account used_up: every model, Llama Guard included, throws the allocation's code before any rule", async () => {
  for (const code of [3036, 4006]) {
    const io = memoryIo({ script: { account: { allocation: "used_up", code }, rules: [{ json: { response: "never" } }] } });
    const ai = new Ai(io);
    for (const model of [GLM, LLAMA, KIMI, "@cf/meta/llama-guard-3-8b"]) {
      await assert.rejects(ai.run(model, { ...user("a"), stream: true }), (e) => {
        assert.equal(e.message, `${code}: You have used up your daily free allocation of 10,000 neurons.`);
        return true;
      });
    }
    assert.deepEqual(
      io.log.map((call) => call.error.slice(0, 4)),
      [String(code), String(code), String(code), String(code)],
    );
  }
  const bad = new Ai(memoryIo({ script: { account: { allocation: "plenty" }, rules: [] } }));
  await assert.rejects(bad.run(GLM, user("a")), /`account` must be like/);
});

test("queued_ms: with rejectIfBusy the call fails at once with 3040; without, it waits in the queue", mocked, async (t) => {
  mockTimers(t);
  const { io, ai } = scripted([{ queued_ms: 5000, json: { response: "after the queue" } }]);
  await assert.rejects(ai.run(GLM, user("a"), { rejectIfBusy: true }), /^Error: 3040: Capacity/);
  assert.equal(io.log[0].options.rejectIfBusy, true);
  const answer = await settlesAfter(t, 5000, ai.run(GLM, user("a")), "the answer after queued_ms 5000");
  assert.deepEqual(answer, { response: "after the queue" });
});

test("json rule: returned as-is, even when stream was asked", async () => {
  const body = { id: "x", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "ok" } }] };
  const { io, ai } = scripted([{ json: body }]);
  const r = await ai.run(KIMI, { ...user("a"), stream: true });
  assert.ok(!(r instanceof ReadableStream));
  assert.deepEqual(r, body);
  assert.equal(io.log[0].stream, true);
});

test("a model outside the catalog answers only when a rule names it exactly", async () => {
  const { ai } = scripted([
    { match: { model: "@cf/future/model" }, json: { response: "future" } },
    { match: { model: "*" }, json: { response: "any" } },
  ]);
  assert.deepEqual(await ai.run("@cf/future/model", { prompt: "a" }), { response: "future" });
  await assert.rejects(ai.run("@cf/other/model", { prompt: "a" }), /^Error: 5007: /);
});

test("reply rule: OpenAI format with reasoning, usage override, done", async () => {
  const usage = { prompt_tokens: 100, completion_tokens: 7, total_tokens: 107 };
  const { ai } = scripted([{ reply: { content: "你好世界 ok", reasoning: "think hard", usage } }]);
  const events = sseParsed(await text(await ai.run(GLM, { ...user("a"), stream: true })));
  const deltas = events.slice(0, -3).map((e) => e.choices[0].delta);
  assert.deepEqual(deltas, [
    { reasoning_content: "think" },
    { reasoning_content: " hard" },
    { content: "你" },
    { content: "好" },
    { content: "世" },
    { content: "界" },
    { content: " ok" },
  ]);
  assert.equal(events.at(-3).choices[0].finish_reason, "stop");
  assert.deepEqual(events.at(-3).usage, usage);
  assert.deepEqual(events.at(-2), { response: "", usage });
  assert.equal(events.at(-1), "[DONE]");

  const r = await ai.run(GLM, user("a"));
  assert.deepEqual(r.choices[0].message, { role: "assistant", content: "你好世界 ok", reasoning_content: "think hard" });
  assert.deepEqual(r.usage, usage);
});

test("reply rule: format native on a GLM model, openai on Llama, done:false, usage:null, content null", async () => {
  const { io, ai } = scripted([
    { match: { contains: "native" }, reply: { content: "a b", format: "native", done: false } },
    { match: { contains: "openai" }, reply: { content: "c", format: "openai" } },
    { match: { contains: "nousage" }, reply: { content: "d", usage: null } },
    { match: { contains: "null" }, reply: { content: null, reasoning: "only thinking" } },
  ]);
  const native = await text(await ai.run(GLM, { ...user("native"), stream: true }));
  assert.equal(
    native,
    'data: {"response":"a"}\n\ndata: {"response":" b"}\n\n' +
      'data: {"response":"","usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n',
  );
  assert.deepEqual(await ai.run(GLM, user("native")), {
    response: "a b",
    usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 },
  });

  const oa = sseParsed(await text(await ai.run(LLAMA, { prompt: "openai", stream: true })));
  assert.equal(oa[0].object, "chat.completion.chunk");
  assert.deepEqual(oa[0].choices[0].delta, { content: "c" });
  assert.equal(oa.at(-1), "[DONE]");

  const nu = sseParsed(await text(await ai.run(GLM, { ...user("nousage"), stream: true })));
  assert.ok(nu.slice(0, -1).every((e) => !("usage" in e)));
  assert.deepEqual(nu.at(-2).choices[0], { index: 0, delta: {}, finish_reason: "stop" });
  assert.equal(nu.at(-1), "[DONE]");

  const n = await ai.run(KIMI, user("null"));
  assert.equal(n.choices[0].message.content, null);
  assert.equal(n.choices[0].message.reasoning_content, "only thinking");
  assert.ok(io.log.every((l) => l.error === null));
});

test("reply rule split_bytes: the byte stream is cut every N bytes, even inside a CJK character", async () => {
  const { ai } = scripted([
    { match: { contains: "split" }, reply: { content: "你好世界", split_bytes: 7 } },
    { reply: { content: "你好世界" } },
  ]);
  const whole = await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true }));
  const split = await readChunks(await ai.run(LLAMA, { prompt: "split", stream: true }));
  const splitBytes = split.map((c) => c.bytes);
  const wholeBytes = concat(whole.map((c) => c.bytes));

  // Same bytes overall (both prompts are one token, so even usage is equal).
  const splitText = decodeAll(splitBytes);
  assert.equal(splitText, new TextDecoder().decode(wholeBytes));
  assert.ok(split.length > whole.length);
  for (let i = 0; i < splitBytes.length - 1; i++) assert.equal(splitBytes[i].length, 7);
  assert.ok(splitBytes.at(-1).length >= 1 && splitBytes.at(-1).length <= 7);
  assert.equal(concat(splitBytes).length, enc.encode(splitText).length);

  // At least one boundary falls inside a 3-byte character: that chunk alone is not valid UTF-8.
  const strict = new TextDecoder("utf-8", { fatal: true });
  const broken = splitBytes.filter((b) => {
    try {
      strict.decode(b);
      return false;
    } catch {
      return true;
    }
  });
  assert.ok(broken.length > 0, "no chunk boundary splits a character");
  // And decoding each chunk on its own (the classic bug) corrupts the text.
  const naive = splitBytes.map((b) => new TextDecoder().decode(b)).join("");
  assert.notEqual(naive, splitText);
  assert.ok(splitText.includes('"你"') && splitText.includes('"界"'));
});

test("chunks rule: strings and b64 bytes are sent exactly, in order", async () => {
  const bytes = Uint8Array.from([0x64, 0x61, 0x74, 0x61, 0x3a, 0x20, 0xe4, 0xbd]); // "data: " + first 2 bytes of 你
  const { io, ai } = scripted([
    {
      chunks: [
        "data: {\"response\":\"hi\"}\n\n",
        { b64: Buffer.from(bytes).toString("base64") },
        { b64: Buffer.from([0xa0]).toString("base64") },
        "\n\n",
      ],
    },
  ]);
  const chunks = await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true }));
  assert.equal(chunks.length, 4);
  assert.deepEqual([...chunks[1].bytes], [...bytes]);
  assert.deepEqual([...chunks[2].bytes], [0xa0]);
  assert.equal(decodeAll(chunks.map((c) => c.bytes)), 'data: {"response":"hi"}\n\ndata: 你\n\n');
  assert.equal(io.log[0].error, null);
});

test("chunks rule: delay_ms spaces chunks", mocked, async (t) => {
  mockTimers(t);
  const { ai } = scripted([{ chunks: ["a", { delay_ms: 80 }, "b"] }]);
  const reader = (await ai.run(LLAMA, { prompt: "x", stream: true })).getReader();
  assert.equal(new TextDecoder().decode((await reader.read()).value), "a");
  const second = await settlesAfter(t, 80, reader.read(), "the chunk after delay_ms 80");
  assert.equal(new TextDecoder().decode(second.value), "b");
  assert.equal((await reader.read()).done, true);
});

test("chunks rule: an error chunk errors the stream mid-way with its message", async () => {
  const { io, ai } = scripted([{ chunks: ['data: {"response":"a"}\n\n', { error: "3040: Capacity lost mid-stream" }, "never"] }]);
  const reader = (await ai.run(LLAMA, { prompt: "x", stream: true })).getReader();
  const first = await reader.read();
  assert.equal(new TextDecoder().decode(first.value), 'data: {"response":"a"}\n\n');
  await assert.rejects(reader.read(), (e) => e instanceof Error && e.message === "3040: Capacity lost mid-stream");
  assert.equal(io.log.length, 1);
  assert.equal(io.log[0].error, "3040: Capacity lost mid-stream");
  assert.equal(io.log[0].aborted, false);
});

test("chunks rule: stall sends nothing more and never closes until aborted", mocked, async (t) => {
  mockTimers(t);
  const { io, ai } = scripted([{ chunks: ['data: {"response":"a"}\n\n', { stall: true }, "after"] }]);
  const ctrl = new AbortController();
  const reader = (await ai.run(LLAMA, { prompt: "x", stream: true }, { signal: ctrl.signal })).getReader();
  await reader.read();
  const pending = reader.read();
  // A minute of mocked time, a second at a time (the stall re-arms a 1 s timer).
  for (let s = 0; s < 60; s++) {
    assert.ok(await isPending(pending), `the stalled read settled after ${s} s`);
    t.mock.timers.tick(1000);
  }
  assert.ok(await isPending(pending));
  assert.equal(io.log.length, 0);
  // Prompt: the abort alone ends it, no timer has to fire.
  ctrl.abort();
  await assert.rejects(pending, (e) => e.name === "AbortError");
  assert.equal(io.log.length, 1);
  assert.equal(io.log[0].aborted, true);
});

test("chunks rule on a non-stream call: the chunks are the JSON body", async () => {
  const { ai } = scripted([{ chunks: ['{"response":', { delay_ms: 5 }, '"raw"}'] }]);
  assert.deepEqual(await ai.run(LLAMA, { prompt: "x" }), { response: "raw" });
});

test("abort mid-stream: the stream errors promptly with AbortError; log says aborted", mocked, async (t) => {
  mockTimers(t);
  const io = memoryIo({ delay: 200 });
  const ai = new Ai(io);
  const ctrl = new AbortController();
  const reader = (await ai.run(KIMI, { ...user("a"), stream: true }, { signal: ctrl.signal })).getReader();
  await settlesAfter(t, 200, reader.read(), "the first token");
  const pending = reader.read();
  assert.ok(await isPending(pending), "the next token waits for its 200 ms");
  // Prompt: the abort ends the read without the next token's timer firing.
  ctrl.abort();
  await assert.rejects(pending, (e) => e.name === "AbortError");
  assert.equal(io.log.length, 1);
  assert.equal(io.log[0].aborted, true);
  assert.equal(io.log[0].stream, true);
  assert.equal(typeof io.log[0].error, "string");
  // a later abort or read does not log again
  await assert.rejects(reader.read());
  assert.equal(io.log.length, 1);
});

test("abort with a custom reason: the stream errors with that reason", mocked, async (t) => {
  mockTimers(t);
  const io = memoryIo({ delay: 100 });
  const ai = new Ai(io);
  const ctrl = new AbortController();
  const reader = (await ai.run(LLAMA, { prompt: "a", stream: true }, { signal: ctrl.signal })).getReader();
  ctrl.abort(new Error("client went away"));
  await assert.rejects(reader.read(), /client went away/);
  assert.equal(io.log[0].error, "client went away");
});

test("abort before streaming: an aborted signal rejects the call; so does abort during a non-stream wait", mocked, async (t) => {
  mockTimers(t);
  const io = memoryIo({ delay: 50 });
  const ai = new Ai(io);
  const ctrl = new AbortController();
  ctrl.abort();
  await assert.rejects(ai.run(GLM, { ...user("a"), stream: true }, { signal: ctrl.signal }), (e) => e.name === "AbortError");
  assert.equal(io.log.length, 1);
  assert.equal(io.log[0].aborted, true);

  const ctrl2 = new AbortController();
  const call = ai.run(GLM, user("a"), { signal: ctrl2.signal });
  // The call waits out its 40+ tokens x 50 ms; the abort cuts it short with
  // no tick of the clock.
  assert.ok(await isPending(call), "a non-stream answer waits for its tokens");
  ctrl2.abort();
  await assert.rejects(call, (e) => e.name === "AbortError");
  assert.equal(io.log.length, 2);
  assert.equal(io.log[1].aborted, true);
  assert.equal(io.log[1].stream, false);
});

test("consumer cancel counts as aborted and stops generation", mocked, async (t) => {
  mockTimers(t);
  const io = memoryIo({ delay: 20 });
  const ai = new Ai(io);
  const stream = await ai.run(GLM, { ...user("a"), stream: true });
  const reader = stream.getReader();
  await settlesAfter(t, 20, reader.read(), "the first token");
  await reader.cancel("not interested");
  assert.equal(io.log.length, 1);
  assert.equal(io.log[0].aborted, true);
  assert.equal(io.log[0].error, null);
  // Far more mocked time than the whole answer needs (40+ tokens x 20 ms),
  // then a later call: it is logged, the cancelled one is not logged again.
  for (let i = 0; i < 200; i++) {
    await drainMicrotasks(); // let any woken generator run
    t.mock.timers.tick(20);
  }
  io.script = { rules: [{ json: { response: "later" } }] };
  await ai.run(LLAMA, { prompt: "later" });
  assert.deepEqual(io.log.map((l) => [l.model, l.aborted]), [[GLM, true], [LLAMA, false]]);

  // Cancelling a stall ends it too, and is logged by the time cancel() settles.
  io.script = { rules: [{ chunks: [{ stall: true }] }] };
  const stalled = await ai.run(GLM, { ...user("a"), stream: true });
  await stalled.cancel();
  assert.equal(io.log.length, 3);
  assert.equal(io.log[2].aborted, true);
  assert.equal(io.log[2].stream, true);
});

test("a broken script is a clear error, not a silent default", async () => {
  const ai = new Ai(memoryIo({ script: { rule: [] } }));
  await assert.rejects(ai.run(GLM, user("a")), /edgechat emulator script: expected an object like/);
  const ai2 = new Ai(memoryIo({ script: { rules: [{ chunks: [{ what: 1 }] }] } }));
  await assert.rejects(ai2.run(GLM, { ...user("a"), stream: true }), /unknown chunk/);
});

test("delay_ms on a rule or in a reply: a stream's first byte waits for it, then tokens are paced as usual", mocked, async (t) => {
  mockTimers(t);
  const { ai } = scripted(
    [
      { match: { contains: "reply" }, reply: { content: "a b", delay_ms: 250 } },
      { match: { contains: "chunks" }, delay_ms: 100, chunks: ["x"] },
      { match: { contains: "json" }, delay_ms: 70, json: { response: "late" } },
    ],
    { delay: 5 },
  );
  const reader = (await ai.run(LLAMA, { prompt: "reply", stream: true })).getReader();
  const first = await settlesAfter(t, 250 + 5, reader.read(), "the first token after delay_ms");
  assert.deepEqual(sseParsed(new TextDecoder().decode(first.value)), [{ response: "a" }]);
  await settlesAfter(t, 5, reader.read(), "the second token, paced by the host delay alone");

  const chunks = (await ai.run(LLAMA, { prompt: "chunks", stream: true })).getReader();
  assert.equal(new TextDecoder().decode((await settlesAfter(t, 100, chunks.read(), "the chunk")).value), "x");
  assert.deepEqual(await settlesAfter(t, 70, ai.run(LLAMA, { prompt: "json", stream: true }), "the json"), { response: "late" });
  // A non-stream reply waits delay_ms and its tokens.
  await settlesAfter(t, 250 + 2 * 5, ai.run(LLAMA, { prompt: "reply" }), "the non-stream reply");
});

test("delay_ms before an error: the call fails after the delay, or with the abort's reason if aborted first", mocked, async (t) => {
  mockTimers(t);
  const { io, ai } = scripted([{ delay_ms: 1000, error: "3040: Capacity temporarily exceeded" }]);
  const late = ai.run(GLM, { ...user("a"), stream: true });
  late.catch(() => {});
  await assert.rejects(settlesAfter(t, 1000, late, "the late error"), /^Error: 3040: /);
  const ctrl = new AbortController();
  const aborted = ai.run(GLM, { ...user("a"), stream: true }, { signal: ctrl.signal });
  assert.ok(await isPending(aborted));
  ctrl.abort();
  await assert.rejects(aborted, (e) => e.name === "AbortError");
  assert.deepEqual(io.log.map((l) => [l.aborted, l.error?.slice(0, 5)]), [[false, "3040:"], [true, "This "]]);
});

test("match.last_role and match.any_contains", async () => {
  const { ai } = scripted([
    { match: { last_role: "tool" }, json: { response: "after the tool" } },
    { match: { any_contains: "earlier" }, json: { response: "seen in any message" } },
  ]);
  const turn = (last) => ({ messages: [{ role: "system", content: "earlier words" }, last] });
  assert.deepEqual(await ai.run(GLM, turn({ role: "tool", content: "42" })), { response: "after the tool" });
  assert.deepEqual(await ai.run(GLM, turn({ role: "user", content: "hi" })), { response: "seen in any message" });
  assert.deepEqual(await ai.run(LLAMA, { prompt: "not earlier, later" }), { response: "seen in any message" });
  assert.match((await ai.run(LLAMA, { prompt: "nothing" })).response, /not a real model/);
});
