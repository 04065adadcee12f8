// The emulator hosted in a JS Worker under a real, offline `wrangler dev`:
// control routes, a direct call, and calls through the RPC entrypoint.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { GLM, HANG_GUARD_MS, KIMI, LLAMA, decodeAll, readChunks, sseParsed, user, waitFor } from "./helpers.mjs";
import { imagePart, jpeg, png } from "./image-fixtures.mjs";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = join(ROOT, "node_modules/.bin");

function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

let child;
let output = "";
let base;

before(async () => {
  const port = await freePort();
  const inspector = await freePort();
  base = `http://127.0.0.1:${port}`;
  child = spawn(
    join(BIN, "wrangler"),
    [
      "dev",
      "-c", "tools/emulator/wrangler.toml",
      "--ip", "127.0.0.1",
      "--port", String(port),
      "--inspector-port", String(inspector),
      "--var", "EDGECHAT_AI_DELAY_MS:0",
      "--show-interactive-dev-session=false",
    ],
    {
      cwd: ROOT,
      // wrangler 4 needs Node >= 22.12: the Node 22 from node_modules goes first.
      env: { ...process.env, PATH: `${BIN}:${process.env.PATH}`, WRANGLER_SEND_METRICS: "false", CI: "1" },
      detached: true, // its own process group, so cleanup reaches workerd too
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  child.stdout.on("data", (d) => (output += d));
  child.stderr.on("data", (d) => (output += d));
  const exited = new Promise((_, reject) => child.once("exit", (code) => reject(new Error(`wrangler dev exited (${code}):\n${output}`))));
  exited.catch(() => {});
  const ready = waitFor(
    async () => {
      try {
        return (await fetch(`${base}/`, { signal: AbortSignal.timeout(1000) })).status === 200;
      } catch {
        return false;
      }
    },
    60_000,
    "wrangler dev to serve the emulator",
  );
  await Promise.race([ready, exited]).catch((err) => {
    throw new Error(`${err.message}\n--- wrangler output ---\n${output}`);
  });
});

after(async () => {
  if (!child || child.exitCode !== null) return;
  const gone = new Promise((r) => child.once("exit", r));
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {
    return;
  }
  const t = setTimeout(() => {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }, 5000);
  await gone;
  clearTimeout(t);
  // workerd lives in the same group; make sure nothing is left.
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {
    // the group is empty
  }
});

const putScript = (script) =>
  fetch(`${base}/__emulator/script`, { method: "PUT", body: script === null ? "" : JSON.stringify(script) });
const getLog = async () =>
  (await (await fetch(`${base}/__emulator/log`)).text())
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l));
const call = (route, body) =>
  fetch(`${base}/__emulator/${route}`, { method: "POST", body: JSON.stringify(body), signal: AbortSignal.timeout(HANG_GUARD_MS) });

test("control routes: script set/get/clear, log clear", { timeout: 30_000 }, async () => {
  assert.equal((await putScript({ rules: [{ json: { response: "x" } }] })).status, 200);
  assert.deepEqual(await (await fetch(`${base}/__emulator/script`)).json(), { rules: [{ json: { response: "x" } }] });
  assert.equal((await fetch(`${base}/__emulator/script`, { method: "PUT", body: "{nope" })).status, 400);
  assert.equal((await putScript(null)).status, 200);
  assert.equal(await (await fetch(`${base}/__emulator/script`)).json(), null);
  assert.equal((await fetch(`${base}/__emulator/log`, { method: "DELETE" })).status, 200);
  assert.deepEqual(await getLog(), []);
  assert.equal((await fetch(`${base}/nothing-here`)).status, 404);
});

test("POST /__emulator/run streams the default answer and logs it", { timeout: 30_000 }, async () => {
  await putScript(null);
  await fetch(`${base}/__emulator/log`, { method: "DELETE" });
  const res = await call("run", { model: GLM, inputs: { ...user("你好"), stream: true } });
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /text\/event-stream/);
  const events = sseParsed(decodeAll((await readChunks(res.body)).map((c) => c.bytes)));
  assert.equal(events.at(-1), "[DONE]");
  assert.deepEqual(Object.keys(events.at(-2)), ["response", "usage"]);
  const content = events
    .filter((e) => e.choices?.[0]?.delta?.content !== undefined)
    .map((e) => e.choices[0].delta.content)
    .join("");
  assert.equal(content, `This is the edgechat local Workers AI emulator, not a real model (${GLM}). You asked: «你好»`);
  assert.ok(events.some((e) => e.choices?.[0]?.delta?.reasoning_content !== undefined));
  const log = await waitFor(async () => {
    const l = await getLog();
    return l.length === 1 && l;
  }, undefined, "the call to be logged");
  assert.equal(log[0].model, GLM);
  assert.equal(log[0].stream, true);
  assert.equal(log[0].aborted, false);
});

test("a scripted error comes back as 502 with its code; json is returned as-is", { timeout: 30_000 }, async () => {
  await putScript({
    rules: [
      { match: { contains: "busy" }, times: 1, error: "3040: Capacity temporarily exceeded" },
      { match: { model: LLAMA }, json: { response: "scripted" } },
    ],
  });
  const res = await call("run", { model: GLM, inputs: { ...user("busy"), stream: true } });
  assert.equal(res.status, 502);
  assert.deepEqual(await res.json(), { error: "3040: Capacity temporarily exceeded" });
  const again = await call("run", { model: GLM, inputs: user("busy") });
  assert.equal(again.status, 200, "times: 1 served once");
  assert.deepEqual(await (await call("run", { model: LLAMA, inputs: { prompt: "x", stream: true } })).json(), { response: "scripted" });
  assert.equal((await call("run", { model: "@cf/nope", inputs: { prompt: "x" } })).status, 502);
});

test("through the EmulatedAi RPC entrypoint: bytes survive (split inside a CJK character), errors keep their code", { timeout: 30_000 }, async () => {
  await putScript({
    rules: [
      { match: { contains: "split" }, reply: { content: "你好世界", split_bytes: 5 } },
      { match: { contains: "fail" }, error: "3036: Daily free allocation used up" },
    ],
  });
  const direct = await call("run", { model: LLAMA, inputs: { prompt: "split", stream: true } });
  const viaRpc = await call("rpc-run", { model: LLAMA, inputs: { prompt: "split", stream: true } });
  assert.equal(viaRpc.status, 200);
  const a = decodeAll((await readChunks(direct.body)).map((c) => c.bytes));
  const b = decodeAll((await readChunks(viaRpc.body)).map((c) => c.bytes));
  assert.equal(b, a);
  assert.deepEqual(
    sseParsed(b).slice(0, 4).map((e) => e.response),
    ["你", "好", "世", "界"],
  );
  const failed = await call("rpc-run", { model: GLM, inputs: user("fail") });
  assert.equal(failed.status, 502);
  assert.deepEqual(await failed.json(), { error: "3036: Daily free allocation used up" });
  const nonStream = await (await call("rpc-run", { model: LLAMA, inputs: { prompt: "hey" } })).json();
  assert.match(nonStream.response, /You asked: «hey»$/);
});

test("an AbortSignal crosses RPC and ends a stalled stream (log: aborted)", { timeout: 30_000 }, async () => {
  await putScript({ rules: [{ chunks: ['data: {"response":"a"}\n\n', { stall: true }] }] });
  await fetch(`${base}/__emulator/log`, { method: "DELETE" });
  const res = await call("rpc-run", { model: LLAMA, inputs: { prompt: "x", stream: true }, abort_after_ms: 300 });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const first = await reader.read();
  assert.equal(new TextDecoder().decode(first.value), 'data: {"response":"a"}\n\n');
  // The body ends (or errors) once the signal fires, not never (a stall
  // alone never ends it; the test's timeout is the hang guard).
  try {
    while (!(await reader.read()).done);
  } catch {
    // an errored body is an acceptable end
  }
  const log = await waitFor(async () => {
    const l = await getLog();
    return l.length === 1 && l;
  }, undefined, "the aborted call to be logged");
  assert.equal(log[0].aborted, true);
  assert.equal(log[0].stream, true);
  assert.match(log[0].error, /abort|timed? ?out/i);
});

test("in workerd: tool calls stream over RPC, a vision model reads its images, Llama Guard gives its verdict", { timeout: 30_000 }, async () => {
  await putScript({
    rules: [
      { match: { contains: "weather" }, reply: { tool_calls: [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }] } },
      { match: { model: "@cf/meta/llama-guard-3-8b", any_contains: "bad" }, reply: { unsafe: ["S1", "S10"] } },
    ],
  });
  const res = await call("rpc-run", { model: KIMI, inputs: { ...user("weather?"), stream: true } });
  assert.equal(res.status, 200);
  const events = sseParsed(decodeAll((await readChunks(res.body)).map((c) => c.bytes)));
  const args = events
    .flatMap((e) => e.choices?.[0]?.delta?.tool_calls ?? [])
    .map((d) => d.function.arguments)
    .join("");
  assert.equal(args, '{"city":"Paris"}');
  assert.equal(events.at(-3).choices[0].finish_reason, "tool_calls");

  const inputs = {
    messages: [{ role: "user", content: [{ type: "text", text: "what?" }, imagePart("image/png", png(64, 32)), imagePart("image/jpeg", jpeg(9, 7))] }],
    reasoning_effort: null,
  };
  const vision = await (await call("rpc-run", { model: KIMI, inputs })).json();
  assert.match(vision.choices[0].message.content, / I see 2 images: image\/png 64×32, image\/jpeg 9×7\. /);
  const refused = await call("run", { model: GLM, inputs });
  assert.equal(refused.status, 502);
  assert.match((await refused.json()).error, /^5006: /);

  const guard = await call("rpc-run", {
    model: "@cf/meta/llama-guard-3-8b",
    inputs: { messages: [{ role: "user", content: "hi" }, { role: "assistant", content: "bad words" }], response_format: { type: "json_object" } },
  });
  assert.deepEqual((await guard.json()).response, { safe: false, categories: ["S1", "S10"] });
});
