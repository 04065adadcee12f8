// LangChain.js's ChatOpenAI (npm @langchain/openai) against edgechat's /v1,
// for tests/api/test_frameworks.py: runs every scenario and prints one JSON
// object of what the framework saw. EDGECHAT_V1_URL and EDGECHAT_V1_TOKEN
// say where; the emulator's script is the Python test's.
import { ToolMessage } from "@langchain/core/messages";
import { ChatOpenAI } from "@langchain/openai";

const baseURL = process.env.EDGECHAT_V1_URL;
const apiKey = process.env.EDGECHAT_V1_TOKEN;
const chat = (model, options = {}) =>
  new ChatOpenAI({ model, apiKey, maxRetries: 0, configuration: { baseURL }, ...options });

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city.",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const forecastSchema = {
  title: "Forecast",
  description: "The weather in a city.",
  type: "object",
  properties: { city: { type: "string" }, celsius: { type: "integer" } },
  required: ["city", "celsius"],
  additionalProperties: false,
};

/** The chunks of a stream added up, as LangChain.js agents do; and their classes. */
async function streamed(runnable, input) {
  let total = null;
  const kinds = new Set();
  for await (const chunk of await runnable.stream(input)) {
    kinds.add(chunk.constructor.name);
    total = total === null ? chunk : total.concat(chunk);
  }
  return { total, kinds: [...kinds] };
}

async function errorOf(promise) {
  try {
    await promise;
    return null;
  } catch (err) {
    return { class: err.constructor.name, status: err.status ?? null, message: String(err.message) };
  }
}

const usageOf = (message) => {
  const { input_tokens, output_tokens, total_tokens } = message.usage_metadata ?? {};
  return { input_tokens, output_tokens, total_tokens };
};

const out = {};
const question = [{ role: "user", content: "Hello from LangChain.js" }];
const kimi = chat("kimi", { streamUsage: true });
const whole = await kimi.invoke(question);
out.whole = { text: whole.content, usage: usageOf(whole) };
const { total, kinds } = await streamed(kimi, question);
out.stream = { text: total.content, usage: usageOf(total), kinds };

// A tool loop over a thinking model, streamed: the turn's chunks carry the calls.
const withTools = chat("kimi").bindTools([weatherTool]);
const messages = [{ role: "user", content: "Weather in Zürich? (loop)" }];
const calls = [];
for (let step = 0; step < 3; step += 1) {
  const turn = (await streamed(withTools, messages)).total;
  messages.push(turn);
  if (!turn.tool_calls?.length) break;
  for (const call of turn.tool_calls) {
    calls.push({ id: call.id, name: call.name, args: call.args });
    const result = JSON.stringify({ city: call.args.city, celsius: 21 });
    messages.push(new ToolMessage({ content: result, tool_call_id: call.id }));
  }
}
out.loop = { calls, answer: messages.at(-1).content };

out.structured = await chat("glm")
  .withStructuredOutput(forecastSchema, { method: "jsonSchema" })
  .invoke("structured weather, please");

out.errors = {
  notFound: await errorOf(chat("gpt-5").invoke("hello")),
  auth: await errorOf(
    new ChatOpenAI({ model: "glm", apiKey: "wrong", maxRetries: 0, configuration: { baseURL } }).invoke("hello"),
  ),
  busy: await errorOf(chat("kimi").invoke("please fail")),
};

process.stdout.write(JSON.stringify(out));
