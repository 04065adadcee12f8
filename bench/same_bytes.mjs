// Whether two checkouts of edgechat answer the same emulator script with the
// same bytes: /chat, /v1 streamed (with and without usage) and /v1 whole,
// over answers of each shape (GLM with reasoning, cut inside characters,
// Llama's native stream, a tool call, a whole JSON body, a fallback after
// 3040, a stream cut off without its end). What differs by nature between two
// runs is masked first: request ids, times to first token, `created`.
//
//   git worktree add /tmp/before <commit>   # with node_modules, .venv and
//   node bench/same_bytes.mjs /tmp/before      # python_modules linked in
//   node bench/same_bytes.mjs /tmp/before 'stream glm "busy'   # and show these bodies
//
// Prints one line per request and exits 1 if any pair differs.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { configOf, ROOT, startRunner, stopRunner } from "./lib.mjs";

const [OTHER, SHOW] = process.argv.slice(2);
if (!OTHER) throw new Error("usage: node bench/same_bytes.mjs <other checkout> [request to show]");

const GLM = "@cf/zai-org/glm-4.7-flash";
const SCRIPT = {
  rules: [
    { match: { model: GLM, contains: "busy" }, error: "3040: Capacity temporarily exceeded" },
    { match: { contains: "split" }, reply: { content: "你好，世界 🙂", reasoning: "hmm, 想想", split_bytes: 5 } },
    {
      match: { contains: "weather" },
      reply: { tool_calls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] },
    },
    {
      match: { contains: "whole" },
      json: { response: "One document.", usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } },
    },
    { match: { contains: "cut" }, reply: { content: "Half an answer", done: false, finish_reason: null } },
  ],
};

const QUESTIONS = ["hello", "split it", "what is the weather", "whole please", "busy now", "cut short"];
const MODELS = ["glm", "llama", "kimi"];

function mask(text) {
  return text
    .replace(/[0-9a-f]{32}/g, "<id>")
    .replace(/"ttft_ms":[0-9.]+/g, '"ttft_ms":<t>')
    .replace(/"created":\d+/g, '"created":<t>');
}

async function ask(url, path, body) {
  const response = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer same-bytes-token" },
    body: JSON.stringify(body),
  });
  return `${response.status} ${response.headers.get("content-type")}\n${mask(await response.text())}`;
}

function requests() {
  const out = [];
  for (const model of MODELS) {
    for (const question of QUESTIONS) {
      const messages = [{ role: "user", content: question }];
      const tools = [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }];
      const withTools = model === "llama" ? {} : { tools };
      out.push([`/chat ${model} "${question}"`, "/chat", { model, messages, max_tokens: 64 }]);
      for (const [name, extra] of [
        ["stream", { stream: true }],
        ["stream+usage", { stream: true, stream_options: { include_usage: true } }],
        ["whole", {}],
      ]) {
        out.push([
          `/v1 ${name} ${model} "${question}"`,
          "/v1/chat/completions",
          { model, messages, max_tokens: 64, ...withTools, ...extra },
        ]);
      }
    }
  }
  return out;
}

const scriptPath = join(ROOT, ".cache", "same-bytes-script.json");
mkdirSync(join(ROOT, ".cache"), { recursive: true });
writeFileSync(scriptPath, JSON.stringify(SCRIPT));
const env = { EDGECHAT_AI_DELAY_MS: "0", EDGECHAT_AI_SCRIPT: scriptPath };
const varsPath = join(ROOT, ".cache", "same-bytes.vars");
// Models stay warm after a 3040, so every request meets the same chain.
writeFileSync(varsPath, "API_TOKEN=same-bytes-token\nCOOLDOWN_MAX_S=0\n");
const args = ["--vars", varsPath];
const other = await startRunner(configOf(OTHER, "same-bytes"), { env, args });
const here = await startRunner(configOf(ROOT, "same-bytes"), { env, args });
let differ = 0;
try {
  for (const [name, path, body] of requests()) {
    const [a, b] = [await ask(other.url, path, body), await ask(here.url, path, body)];
    const same = a === b;
    differ += same ? 0 : 1;
    console.log(`${same ? "same   " : "DIFFER "} ${name}`);
    if (!same || (SHOW && name.includes(SHOW))) console.log(`--- ${OTHER}\n${a}\n--- this checkout\n${b}`);
  }
} finally {
  await stopRunner(other.child);
  await stopRunner(here.child);
}
console.log(differ ? `${differ} answers differ` : "every answer is the same, byte for byte");
process.exit(differ ? 1 : 0);
