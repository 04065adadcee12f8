// The emulator's default answers: wire formats, non-stream shapes, errors,
// token accounting, pacing and the log line.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, MODELS, tokenize, countTokens } from "../../tools/emulator/ai.mjs";
import { GLM, GLM53, KIMI, LLAMA, decodeAll, memoryIo, readChunks, sseEvents, sseParsed, user } from "./helpers.mjs";

const OPENAI_MODELS = [
  "@cf/zai-org/glm-4.7-flash",
  "@cf/zai-org/glm-5.3-flash",
  "@cf/zai-org/glm-5.3",
  "@cf/moonshotai/kimi-k2.6",
  "@cf/moonshotai/kimi-k2.7-code",
];

test("the class is named Ai (the workers SDK wraps bindings by constructor name)", () => {
  assert.equal(Ai.name, "Ai");
  assert.deepEqual(Object.keys(MODELS).sort(), [...OPENAI_MODELS, LLAMA].sort());
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
  const io = memoryIo({ delay: 5 });
  const ai = new Ai(io);
  const before = Date.now();
  const signal = new AbortController().signal;
  const options = { signal, gateway: { id: "gw", skipCache: true }, extraHeaders: { "x-session-affinity": "ses_1" } };
  const stream = await ai.run(LLAMA, { prompt: "hello", stream: true, max_tokens: 3 }, options);
  assert.equal(io.log.length, 0, "a stream is logged when it finishes, not when it starts");
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
  assert.ok(line.t_start >= before && line.t_end >= line.t_start + 10, JSON.stringify(line));
  assert.ok(line.t_end <= Date.now());
  assert.doesNotThrow(() => JSON.stringify(line));
});

test("pacing: 5 tokens at 30 ms take at least 120 ms, one token per chunk", async () => {
  const io = memoryIo({ delay: 30 });
  const ai = new Ai(io);
  const t0 = performance.now();
  const stream = await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 5 });
  const chunks = await readChunks(stream);
  const tokenChunks = chunks.slice(0, 5);
  assert.equal(chunks.length, 7);
  assert.ok(tokenChunks.at(-1).at - t0 >= 120, `took ${tokenChunks.at(-1).at - t0} ms`);
  for (let i = 1; i < 5; i++) {
    assert.ok(tokenChunks[i].at - tokenChunks[i - 1].at >= 20, `gap ${i}: ${tokenChunks[i].at - tokenChunks[i - 1].at} ms`);
  }

  // Delay 0: no waiting, still one chunk per token.
  io.delay = 0;
  const t1 = performance.now();
  const fast = await readChunks(await ai.run(LLAMA, { prompt: "x", stream: true, max_tokens: 10 }));
  assert.equal(fast.length, 12);
  assert.ok(fast.at(-1).at - t1 < 150, `took ${fast.at(-1).at - t1} ms`);

  // A non-stream answer takes as long as its tokens would.
  io.delay = 30;
  const t2 = performance.now();
  await ai.run(LLAMA, { prompt: "x", max_tokens: 5 });
  assert.ok(performance.now() - t2 >= 120);
});

test("the io is read on every call (delay can change between calls)", async () => {
  const io = memoryIo({ delay: 0 });
  const ai = new Ai(io);
  let t = performance.now();
  await ai.run(LLAMA, { prompt: "x", max_tokens: 8 });
  assert.ok(performance.now() - t < 100);
  io.delay = 25;
  t = performance.now();
  await ai.run(LLAMA, { prompt: "x", max_tokens: 8 });
  assert.ok(performance.now() - t >= 190);
});
