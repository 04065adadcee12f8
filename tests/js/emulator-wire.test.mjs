// The emulator's default answers: wire formats, non-stream shapes, errors,
// token accounting, pacing and the log line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, MODELS, tokenize, countTokens } from "../../tools/emulator/ai.mjs";
import {
  GLM,
  GLM53,
  HANG_GUARD_MS,
  KIMI,
  LLAMA,
  decodeAll,
  isPending,
  memoryIo,
  readChunks,
  settlesAfter,
  sseEvents,
  sseParsed,
  user,
} from "./helpers.mjs";

// Every model the catalog says answers in the OpenAI format is checked
// against that format below (the catalog is not restated here).
const OPENAI_MODELS = Object.keys(MODELS).filter((m) => MODELS[m].format === "openai");

test("the class is named Ai (the workers SDK wraps bindings by constructor name)", () => {
  assert.equal(Ai.name, "Ai");
  assert.ok(OPENAI_MODELS.length > 0);
  assert.equal(MODELS[LLAMA].format, "native", "the native-format test below uses Llama");
});

test("tokens: CJK characters one by one, words with their leading space, lossless", () => {
  assert.deepEqual(tokenize("Hello, world! 你好 ok  "), ["Hello,", " world!", " 你", "好", " ok", "  "]);
  const text = "mixed 中文 text\nwith lines";
  assert.equal(tokenize(text).join(""), text);
  assert.equal(countTokens(""), 0);
});

for (const model of OPENAI_MODELS) {
  test(`OpenAI-style stream for ${model}: reasoning, content, running usage, finish, native usage, [DONE]`, async () => {
    const io = memoryIo();
    const ai = new Ai(io);
    const stream = await ai.run(model, { ...user("你好 there"), stream: true });
    assert.ok(stream instanceof ReadableStream);
    const chunks = await readChunks(stream);
    for (const c of chunks) assert.ok(c.bytes instanceof Uint8Array);
    const text = decodeAll(chunks.map((c) => c.bytes));
    const events = sseParsed(text);

    // One event per upstream chunk (one token per chunk when unsplit).
    assert.equal(chunks.length, events.length);
    for (const c of chunks) assert.equal(sseEvents(new TextDecoder().decode(c.bytes)).length, 1);

    assert.equal(events.at(-1), "[DONE]");
    const native = events.at(-2);
    assert.deepEqual(Object.keys(native), ["response", "usage"]);
    assert.equal(native.response, "");
    const finish = events.at(-3);
    assert.deepEqual(finish.choices, [{ index: 0, delta: {}, finish_reason: "stop" }]);

    const deltas = events.slice(0, -3);
    let seenContent = false;
    let reasoning = "";
    let content = "";
    deltas.forEach((ev, i) => {
      assert.deepEqual(Object.keys(ev), ["id", "object", "created", "model", "choices", "usage"]);
      assert.equal(ev.object, "chat.completion.chunk");
      assert.equal(ev.model, model);
      assert.equal(ev.id, deltas[0].id);
      assert.equal(typeof ev.created, "number");
      assert.equal(ev.choices.length, 1);
      assert.equal(ev.choices[0].index, 0);
      const delta = ev.choices[0].delta;
      assert.equal(Object.keys(delta).length, 1);
      if ("reasoning_content" in delta) {
        assert.ok(!seenContent, "reasoning after content");
        reasoning += delta.reasoning_content;
      } else {
        seenContent = true;
        content += delta.content;
      }
      // running usage
      assert.equal(ev.usage.completion_tokens, i + 1);
      assert.equal(ev.usage.total_tokens, ev.usage.prompt_tokens + i + 1);
    });
    assert.ok(reasoning.length > 0, "GLM/Kimi think first by default");
    assert.match(content, /edgechat local Workers AI emulator, not a real model/);
    assert.ok(content.includes(model));
    assert.ok(content.includes("«你好 there»"));
    assert.deepEqual(native.usage, deltas.at(-1).usage);
    assert.deepEqual(finish.usage, native.usage);
    assert.equal(native.usage.completion_tokens, deltas.length);
    // prompt tokens: 3 content tokens + 2 for the message framing
    assert.equal(native.usage.prompt_tokens, 5);
    assert.equal(io.log.length, 1);
  });
}

test("native stream (Llama): one response per token, then usage, then [DONE]", async () => {
  const ai = new Ai(memoryIo());
  const stream = await ai.run(LLAMA, { prompt: "你好", stream: true });
  const chunks = await readChunks(stream);
  const events = sseParsed(decodeAll(chunks.map((c) => c.bytes)));
  assert.equal(chunks.length, events.length);
  assert.equal(events.at(-1), "[DONE]");
  const last = events.at(-2);
  assert.deepEqual(Object.keys(last), ["response", "usage"]);
  const tokens = events.slice(0, -2);
  for (const ev of tokens) assert.deepEqual(Object.keys(ev), ["response"]);
  const text = tokens.map((e) => e.response).join("");
  assert.equal(text, `This is the edgechat local Workers AI emulator, not a real model (${LLAMA}). You asked: «你好»`);
  assert.deepEqual(last.usage, { prompt_tokens: 2, completion_tokens: tokens.length, total_tokens: 2 + tokens.length });
});

test("non-stream shapes: chat.completion for GLM/Kimi, {response, usage} for Llama", async () => {
  const ai = new Ai(memoryIo());
  const glm = await ai.run(GLM, user("hi"));
  assert.deepEqual(Object.keys(glm), ["id", "object", "created", "model", "choices", "usage"]);
  assert.equal(glm.object, "chat.completion");
  assert.equal(glm.model, GLM);
  assert.equal(glm.choices.length, 1);
  const { index, message, finish_reason } = glm.choices[0];
  assert.equal(index, 0);
  assert.equal(finish_reason, "stop");
  assert.equal(message.role, "assistant");
  assert.match(message.content, /not a real model \(@cf\/zai-org\/glm-4\.7-flash\)\. You asked: «hi»$/);
  assert.equal(typeof message.reasoning_content, "string");
  assert.equal(
    glm.usage.completion_tokens,
    countTokens(message.content) + countTokens(message.reasoning_content),
  );

  // The non-stream answer is the stream's answer.
  const stream = await ai.run(GLM, { ...user("hi"), stream: true });
  const events = sseParsed(decodeAll((await readChunks(stream)).map((c) => c.bytes)));
  const streamedContent = events
    .filter((e) => e.choices?.[0]?.delta?.content !== undefined)
    .map((e) => e.choices[0].delta.content)
    .join("");
  assert.equal(streamedContent, message.content);
  assert.deepEqual(events.at(-2).usage, glm.usage);

  const llama = await ai.run(LLAMA, { messages: [{ role: "system", content: "be brief" }, { role: "user", content: "yo" }] });
  assert.deepEqual(Object.keys(llama), ["response", "usage"]);
  assert.match(llama.response, /You asked: «yo»$/);
  assert.deepEqual(llama.usage, {
    prompt_tokens: 2 + 2 + 1 + 2,
    completion_tokens: countTokens(llama.response),
    total_tokens: 7 + countTokens(llama.response),
  });
});

test("thinking is off with enable_thinking false or reasoning_effort null; Llama never thinks", async () => {
  const ai = new Ai(memoryIo());
  const off1 = await ai.run(GLM53, { ...user("a"), chat_template_kwargs: { enable_thinking: false } });
  assert.equal("reasoning_content" in off1.choices[0].message, false);
  const off2 = await ai.run(KIMI, { ...user("a"), reasoning_effort: null });
  assert.equal("reasoning_content" in off2.choices[0].message, false);
  const on = await ai.run(KIMI, { ...user("a"), reasoning_effort: "low" });
  assert.equal(typeof on.choices[0].message.reasoning_content, "string");

  const stream = await ai.run(GLM, { ...user("a"), stream: true, chat_template_kwargs: { enable_thinking: false } });
  const events = sseParsed(decodeAll((await readChunks(stream)).map((c) => c.bytes)));
  assert.ok(events.every((e) => e === "[DONE]" || !("reasoning_content" in (e.choices?.[0]?.delta ?? {}))));
});

test("max_completion_tokens / max_tokens cut the answer with finish_reason length", async () => {
  const ai = new Ai(memoryIo());
  const stream = await ai.run(GLM, { ...user("a"), stream: true, max_completion_tokens: 3, chat_template_kwargs: { enable_thinking: false } });
  const events = sseParsed(decodeAll((await readChunks(stream)).map((c) => c.bytes)));
  assert.equal(events.length, 3 + 3);
  assert.deepEqual(events.slice(0, 3).map((e) => e.choices[0].delta.content), ["This", " is", " the"]);
  assert.equal(events[3].choices[0].finish_reason, "length");
  assert.equal(events[4].usage.completion_tokens, 3);

  const r = await ai.run(GLM, { ...user("a"), max_tokens: 2, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(r.choices[0].message.content, "This is");
  assert.equal(r.choices[0].finish_reason, "length");

  // All of the budget spent on reasoning: content is null.
  const thinking = await ai.run(GLM, { ...user("a"), max_completion_tokens: 2 });
  assert.equal(thinking.choices[0].message.content, null);
  assert.equal(countTokens(thinking.choices[0].message.reasoning_content), 2);
  assert.equal(thinking.choices[0].finish_reason, "length");

  const llama = await ai.run(LLAMA, { prompt: "x", max_tokens: 4 });
  assert.equal(llama.response, "This is the edgechat");
  assert.equal(llama.usage.completion_tokens, 4);
});

test("unknown model throws 5007, missing messages/prompt throws 3003, both logged", async () => {
  const io = memoryIo();
  const ai = new Ai(io);
  await assert.rejects(ai.run("@cf/glm-4", user("a")), (e) => e instanceof Error && /^5007: /.test(e.message));
  await assert.rejects(ai.run("@cf/moonshot/kimi", { ...user("a"), stream: true }), /^Error: 5007: /);
  await assert.rejects(ai.run(GLM, { stream: true }), (e) => /^3003: /.test(e.message));
  await assert.rejects(ai.run(GLM, { messages: [] }), (e) => /^3003: /.test(e.message));
  await assert.rejects(ai.run(GLM, null), (e) => /^3003: /.test(e.message));
  assert.equal(io.log.length, 5);
  assert.match(io.log[0].error, /^5007: /);
  assert.equal(io.log[1].stream, true);
  assert.match(io.log[2].error, /^3003: /);
  assert.ok(io.log.every((l) => l.aborted === false));
});

test("log line: fields, options without the signal, written when the stream closes", async () => {
  // io.now is the emulator's clock seam: the test moves it between the start
  // and the end of the stream, so t_end is provably taken at the end.
  let clock = 1_000_000;
  const io = memoryIo({ delay: 0 });
  io.now = () => clock;
  const ai = new Ai(io);
  const signal = new AbortController().signal;
  const options = { signal, gateway: { id: "gw", skipCache: true }, extraHeaders: { "x-session-affinity": "ses_1" } };
  const stream = await ai.run(LLAMA, { prompt: "hello", stream: true, max_tokens: 3 }, options);
  assert.equal(io.log.length, 0, "a stream is logged when it finishes, not when it starts");
  clock += 420;
  await readChunks(stream);
  assert.equal(io.log.length, 1);
  const line = io.log[0];
  assert.deepEqual(Object.keys(line).sort(), ["aborted", "error", "inputs", "model", "options", "stream", "t_end", "t_start"]);
  assert.equal(line.model, LLAMA);
  assert.deepEqual(line.inputs, { prompt: "hello", stream: true, max_tokens: 3 });
  assert.deepEqual(line.options, { gateway: { id: "gw", skipCache: true }, extraHeaders: { "x-session-affinity": "ses_1" } });
  assert.equal(line.stream, true);
  assert.equal(line.aborted, false);
  assert.equal(line.error, null);
  assert.equal(line.t_start, 1_000_000);
  assert.equal(line.t_end, 1_000_420);
  assert.doesNotThrow(() => JSON.stringify(line));

  // Without io.now the times are epoch milliseconds.
  const plain = memoryIo();
  const before = Date.now();
  await new Ai(plain).run(LLAMA, { prompt: "x", max_tokens: 1 });
  const after = Date.now();
  assert.ok(before <= plain.log[0].t_start && plain.log[0].t_start <= plain.log[0].t_end && plain.log[0].t_end <= after);
});

// Pacing is proven on mocked timers: each token waits exactly its delay, and
// no real clock (or machine load) takes part.
const mocked = { timeout: HANG_GUARD_MS };

test("pacing: each of 5 tokens waits 30 ms, one token per chunk; the closing events do not wait", mocked, async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const io = memoryIo({ delay: 30 });
  const ai = new Ai(io);
  const reader = (await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 5 })).getReader();
  const dec = new TextDecoder();
  for (let i = 0; i < 5; i++) {
    const { value } = await settlesAfter(t, 30, reader.read(), `token ${i}`);
    assert.equal(sseParsed(dec.decode(value)).length, 1);
  }
  // usage and [DONE] follow at once, then the end.
  const rest = [];
  for (;;) {
    const r = reader.read();
    assert.ok(!(await isPending(r)), "a closing event waited for the clock");
    const { value, done } = await r;
    if (done) break;
    rest.push(dec.decode(value));
  }
  assert.equal(rest.length, 2);
  assert.equal(sseParsed(rest.at(-1))[0], "[DONE]");

  // Delay 0: no waiting (the mocked clock never moves), still one chunk per token.
  io.delay = 0;
  const fast = await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 10 }));
  assert.equal(fast.length, 12);

  // A non-stream answer takes as long as its tokens would.
  io.delay = 30;
  const whole = await settlesAfter(t, 5 * 30, ai.run(LLAMA, { prompt: "x", max_tokens: 5 }), "the non-stream answer");
  assert.equal(whole.usage.completion_tokens, 5);
});

test("the io is read on every call (delay can change between calls)", mocked, async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const io = memoryIo({ delay: 0 });
  const ai = new Ai(io);
  const call = ai.run(LLAMA, { prompt: "x", max_tokens: 8 });
  assert.ok(!(await isPending(call)), "delay 0: answered without the clock moving");
  await call;
  io.delay = 25;
  await settlesAfter(t, 8 * 25, ai.run(LLAMA, { prompt: "x", max_tokens: 8 }), "the answer at 25 ms a token");
});
