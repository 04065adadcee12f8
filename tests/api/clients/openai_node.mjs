// The official `openai` client from npm against edgechat's /v1, for
// tests/api/test_openai_node.py: runs every scenario and prints one JSON
// object of what the client saw. EDGECHAT_V1_URL and EDGECHAT_V1_TOKEN say where.
import OpenAI from "openai";

const baseURL = process.env.EDGECHAT_V1_URL;
const apiKey = process.env.EDGECHAT_V1_TOKEN;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0 });
const hello = [{ role: "user", content: "Hello from node" }];
const weather = {
  type: "function",
  function: { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
};

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return { class: err.constructor.name, status: err.status ?? null, code: err.code ?? null };
  }
}

const out = {};
out.models = (await client.models.list()).data.map((m) => m.id);

const whole = await client.chat.completions.create({ model: "glm", messages: hello });
out.whole = { content: whole.choices[0].message.content, finish: whole.choices[0].finish_reason, usage: whole.usage };

const stream = await client.chat.completions.create({
  model: "llama",
  messages: hello,
  stream: true,
  stream_options: { include_usage: true },
});
let text = "";
let last = null;
let everyChunkHasChoices = true;
for await (const chunk of stream) {
  if (!Array.isArray(chunk.choices)) everyChunkHasChoices = false;
  text += chunk.choices[0]?.delta?.content ?? "";
  last = chunk;
}
out.stream = { text, lastChoices: last.choices, lastUsage: last.usage, everyChunkHasChoices };

const called = await client.chat.completions.create({
  model: "glm",
  messages: [{ role: "user", content: "node weather?" }],
  tools: [weather],
});
const call = called.choices[0].message.tool_calls?.[0];
out.toolCall = { finish: called.choices[0].finish_reason, id: call?.id, name: call?.function.name, arguments: call?.function.arguments };
const answered = await client.chat.completions.create({
  model: "glm",
  messages: [
    { role: "user", content: "node weather?" },
    called.choices[0].message,
    { role: "tool", tool_call_id: call?.id, content: "21" },
  ],
  tools: [weather],
});
out.toolAnswer = answered.choices[0].message.content;

out.errors = {
  notFound: await errorOf(client.chat.completions.create({ model: "nope", messages: hello })),
  badRequest: await errorOf(client.chat.completions.create({ model: "glm", messages: hello, n: 3 })),
  auth: await errorOf(new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 }).models.list()),
};
const broken = await client.chat.completions.create({
  model: "glm",
  messages: [{ role: "user", content: "node break" }],
  stream: true,
});
out.errors.midStream = await errorOf(
  (async () => {
    for await (const _ of broken) {
      // read until the error event
    }
  })(),
);
console.log(JSON.stringify(out));
