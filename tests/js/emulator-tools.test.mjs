// Tool calls on the OpenAI-style models: scripted `tool_calls` in the OpenAI
// streaming and non-stream shapes, and the tool turns of a conversation.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Ai, TOOL_ARGUMENT_PIECE, countTokens } from "../../tools/emulator/ai.mjs";
import {
  GLM,
  HANG_GUARD_MS,
  KIMI,
  LLAMA,
  decodeAll,
  memoryIo,
  readChunks,
  settlesAfter,
  sseParsed,
  user,
} from "./helpers.mjs";

const events = async (stream) => sseParsed(decodeAll((await readChunks(stream)).map((c) => c.bytes)));

function scripted(rules, opts = {}) {
  const io = memoryIo({ script: { rules }, ...opts });
  return { io, ai: new Ai(io) };
}

// An OpenAI-format model id of no family the emulator knows, named by a rule.
const LLAMA_LIKE = "@cf/example/other-model";

const WEATHER_ARGS = '{"city":"Paris","unit":"celsius"}';
const TOOLS = [
  {
    type: "function",
    function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
  },
];

/** Rebuilds the calls from streamed deltas, the way an OpenAI client does. */
function assembleCalls(evs) {
  const calls = [];
  for (const ev of evs) {
    for (const d of ev.choices?.[0]?.delta?.tool_calls ?? []) {
      if (d.id !== undefined) {
        assert.equal(calls[d.index], undefined, "a second head for one call");
        calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: d.function.arguments } };
      } else {
        calls[d.index].function.arguments += d.function.arguments;
      }
    }
  }
  return calls;
}

test("stream: content first, then each call's head (index, id, type, name) and its arguments in pieces; finish tool_calls", async () => {
  const { io, ai } = scripted([
    {
      match: { contains: "weather" },
      reply: {
        content: "Let me check.",
        tool_calls: [
          { id: "call_1", name: "get_weather", arguments: WEATHER_ARGS },
          { name: "get_time", arguments: { tz: "Europe/Paris" } },
        ],
      },
    },
  ]);
  const evs = await events(await ai.run(KIMI, { ...user("weather in Paris?"), tools: TOOLS, stream: true }));
  assert.equal(evs.at(-1), "[DONE]");
  assert.deepEqual(Object.keys(evs.at(-2)), ["response", "usage"]);
  const finish = evs.at(-3);
  assert.deepEqual(finish.choices, [{ index: 0, delta: {}, finish_reason: "tool_calls" }]);

  const deltas = evs.slice(0, -3).map((e) => e.choices[0].delta);
  const content = deltas.filter((d) => "content" in d);
  const tools = deltas.filter((d) => "tool_calls" in d);
  assert.equal(content.length + tools.length, deltas.length, "only content and tool_calls deltas");
  assert.equal(content.map((d) => d.content).join(""), "Let me check.");
  assert.ok(deltas.findIndex((d) => "tool_calls" in d) > deltas.findLastIndex((d) => "content" in d), "content comes before the calls");

  // Heads, exactly as OpenAI sends them: the arguments start empty.
  assert.deepEqual(tools[0], {
    tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }],
  });
  const pieces0 = tools.slice(1).filter((d) => d.tool_calls[0].index === 0 && d.tool_calls[0].id === undefined);
  assert.equal(pieces0.length, Math.ceil(WEATHER_ARGS.length / TOOL_ARGUMENT_PIECE));
  assert.ok(pieces0.length > 2, "the arguments come in a few pieces");
  for (const p of pieces0) assert.deepEqual(Object.keys(p.tool_calls[0]), ["index", "function"]);
  for (const p of pieces0) assert.deepEqual(Object.keys(p.tool_calls[0].function), ["arguments"]);

  const calls = assembleCalls(evs);
  assert.deepEqual(calls, [
    { id: "call_1", type: "function", function: { name: "get_weather", arguments: WEATHER_ARGS } },
    // An object is serialised; a missing id is made up in Kimi's form.
    { id: "functions.get_time:1", type: "function", function: { name: "get_time", arguments: '{"tz":"Europe/Paris"}' } },
  ]);

  // Every head and piece is one completion token, with running usage.
  const usage = evs.at(-2).usage;
  assert.equal(usage.completion_tokens, deltas.length);
  evs.slice(0, -3).forEach((e, i) => assert.equal(e.usage.completion_tokens, i + 1));
  assert.equal(io.log[0].error, null);
});

test("made-up ids take each model's form: Kimi's functions.<name>:<n> repeat across turns, GLM's chatcmpl-tool-…", async () => {
  const rule = (model) => ({ match: { model }, reply: { tool_calls: [{ name: "get_weather" }, { name: "get_time" }] } });
  const { ai } = scripted([rule(KIMI), rule(GLM), rule(LLAMA_LIKE)]);
  const ids = async (model) => (await ai.run(model, { ...user("x"), tools: TOOLS })).choices[0].message.tool_calls.map((c) => c.id);
  const kimi = await ids(KIMI);
  assert.deepEqual(kimi, ["functions.get_weather:0", "functions.get_time:1"]);
  assert.deepEqual(await ids(KIMI), kimi, "the next turn's calls have the same ids");
  const glm = await ids(GLM);
  for (const id of glm) assert.match(id, /^chatcmpl-tool-[0-9a-f]{12}$/);
  assert.notEqual(glm[0], glm[1]);
  const again = await ids(GLM);
  assert.ok(again.every((id) => !glm.includes(id)), "GLM's ids are new on every call");
});

test("non-stream: message.tool_calls (whole objects), content null when there is none, finish_reason tool_calls", async () => {
  const { ai } = scripted([{ reply: { tool_calls: [{ id: "call_9", name: "get_weather", arguments: WEATHER_ARGS }] } }]);
  const r = await ai.run(GLM, { ...user("weather?"), tools: TOOLS, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.deepEqual(r.choices[0].message, {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_9", type: "function", function: { name: "get_weather", arguments: WEATHER_ARGS } }],
  });
  assert.equal(r.usage.completion_tokens, 1 + Math.ceil(WEATHER_ARGS.length / TOOL_ARGUMENT_PIECE));

  // The stream says the same.
  const evs = await events(await ai.run(GLM, { ...user("weather?"), tools: TOOLS, stream: true }));
  assert.deepEqual(assembleCalls(evs), r.choices[0].message.tool_calls);
  assert.deepEqual(evs.at(-2).usage, r.usage);
});

test("content and reasoning may come before the calls; an empty content stays empty", async () => {
  const { ai } = scripted([
    { match: { contains: "think" }, reply: { reasoning: "need the weather", content: "", tool_calls: [{ name: "f" }] } },
  ]);
  const r = await ai.run(KIMI, user("think"));
  assert.deepEqual(r.choices[0].message, {
    role: "assistant",
    content: "",
    reasoning_content: "need the weather",
    tool_calls: [{ id: r.choices[0].message.tool_calls[0].id, type: "function", function: { name: "f", arguments: "{}" } }],
  });
  const evs = await events(await ai.run(KIMI, { ...user("think"), stream: true }));
  const kinds = evs.slice(0, -3).map((e) => Object.keys(e.choices[0].delta)[0]);
  assert.deepEqual(kinds, ["reasoning_content", "reasoning_content", "reasoning_content", "tool_calls", "tool_calls"]);
});

test("arguments are cut between characters, never inside a surrogate pair", async () => {
  const args = '{"q":"😀😀😀😀😀😀"}';
  const { ai } = scripted([{ reply: { tool_calls: [{ name: "search", arguments: args }] } }]);
  const evs = await events(await ai.run(GLM, { ...user("x"), stream: true }));
  const pieces = evs
    .slice(0, -3)
    .map((e) => e.choices[0].delta.tool_calls?.[0])
    .filter((d) => d && d.id === undefined)
    .map((d) => d.function.arguments);
  assert.ok(pieces.length > 1);
  for (const p of pieces) assert.ok(p.isWellFormed(), `a piece with half a character: ${JSON.stringify(p)}`);
  assert.equal(pieces.join(""), args);
});

test("max_completion_tokens cuts inside the calls: finish length, the partial call as sent", async () => {
  const { ai } = scripted([{ reply: { tool_calls: [{ id: "c", name: "get_weather", arguments: WEATHER_ARGS }] } }]);
  const r = await ai.run(GLM, { ...user("x"), max_completion_tokens: 3 });
  assert.equal(r.choices[0].finish_reason, "length");
  assert.deepEqual(r.choices[0].message.tool_calls, [
    { id: "c", type: "function", function: { name: "get_weather", arguments: WEATHER_ARGS.slice(0, 2 * TOOL_ARGUMENT_PIECE) } },
  ]);
  const evs = await events(await ai.run(GLM, { ...user("x"), max_completion_tokens: 3, stream: true }));
  assert.equal(evs.at(-3).choices[0].finish_reason, "length");
  assert.deepEqual(assembleCalls(evs), r.choices[0].message.tool_calls);
});

test("tool-call tokens are paced by the delay like any token", { timeout: HANG_GUARD_MS }, async (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const { ai } = scripted([{ reply: { tool_calls: [{ name: "f", arguments: "{}" }] } }], { delay: 40 });
  const reader = (await ai.run(GLM, { ...user("x"), stream: true })).getReader();
  const head = await settlesAfter(t, 40, reader.read(), "the call's head");
  assert.equal(sseParsed(new TextDecoder().decode(head.value))[0].choices[0].delta.tool_calls[0].function.name, "f");
  await settlesAfter(t, 40, reader.read(), "the arguments piece");
  // non-stream: both tokens' worth of time
  await settlesAfter(t, 80, ai.run(GLM, user("x")), "the non-stream answer");
});

test("tools in the request but no scripted match: the plain default answer", async () => {
  const { ai } = scripted([{ match: { contains: "weather" }, reply: { tool_calls: [{ name: "get_weather" }] } }]);
  const r = await ai.run(GLM, { ...user("hello"), tools: TOOLS, tool_choice: "auto" });
  assert.equal(r.choices[0].finish_reason, "stop");
  assert.equal("tool_calls" in r.choices[0].message, false);
  assert.match(r.choices[0].message.content, /You asked: «hello»$/);
});

test("a tool turn is accepted: an assistant message with tool_calls and a tool message count in prompt_tokens", async () => {
  const { io, ai } = scripted([
    { match: { last_role: "tool" }, reply: { content: "It is 18 degrees in Paris." } },
    { match: { contains: "weather" }, reply: { tool_calls: [{ id: "call_1", name: "get_weather", arguments: WEATHER_ARGS }] } },
  ]);
  const first = await ai.run(KIMI, { ...user("weather in Paris?"), tools: TOOLS });
  const call = first.choices[0].message.tool_calls[0];
  const messages = [
    { role: "user", content: "weather in Paris?" },
    { role: "assistant", content: null, tool_calls: [call] },
    { role: "tool", tool_call_id: call.id, content: '{"temp":18}' },
  ];
  const second = await ai.run(KIMI, { messages, tools: TOOLS, reasoning_effort: null });
  assert.equal(second.choices[0].message.content, "It is 18 degrees in Paris.");
  assert.equal(second.choices[0].finish_reason, "stop");
  const expected =
    countTokens("weather in Paris?") + 2 + (2 + countTokens("get_weather") + countTokens(WEATHER_ARGS)) + (countTokens('{"temp":18}') + 2);
  assert.equal(second.usage.prompt_tokens, expected);
  assert.ok(io.log.every((l) => l.error === null));

  // A stream of the same turn works too (the default answer, no tool rule matched).
  io.script = null;
  const evs = await events(await ai.run(KIMI, { messages, stream: true }));
  assert.equal(evs.at(-2).usage.prompt_tokens, expected);
});

test("tool_calls on a native reply is a script error (edgechat sends Llama no tools); a call needs a name", async () => {
  const { ai } = scripted([
    { match: { model: LLAMA }, reply: { tool_calls: [{ name: "f" }] } },
    { match: { contains: "noname" }, reply: { tool_calls: [{ arguments: "{}" }] } },
  ]);
  await assert.rejects(ai.run(LLAMA, { prompt: "x" }), /edgechat emulator script: `tool_calls` need the openai format/);
  await assert.rejects(ai.run(GLM, user("noname")), /tool call 0 needs a string `name`/);
  // Without a script Llama answers tools-carrying requests like any other.
  const plain = await new Ai(memoryIo()).run(LLAMA, { ...user("hi"), tools: TOOLS });
  assert.match(plain.response, /You asked: «hi»$/);
});
