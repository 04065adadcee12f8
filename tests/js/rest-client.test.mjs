// The real-API client, against a local fake Workers AI on 127.0.0.1.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { inspect } from "node:util";
import { Ai } from "../../tools/emulator/rest.mjs";
import { GLM, HANG_GUARD_MS, LLAMA, decodeAll, readChunks, user, waitFor } from "./helpers.mjs";

const TOKEN = "tok_SECRET_0123456789abcdef";
const SSE = [
  'data: {"id":"c1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"你"}}]}\n\n',
  'data: {"response":"","usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n\n',
  "data: [DONE]\n\n",
];

let server;
let baseUrl;
const requests = [];
const closed = []; // paths whose connection closed before the response finished

before(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const rec = { method: req.method, url: req.url, headers: req.headers, body: body ? JSON.parse(body) : null };
      requests.push(rec);
      res.on("close", () => {
        if (!res.writableFinished) closed.push(req.url);
      });
      const model = decodeURIComponent(req.url.replace(/^.*\/(ai\/run|workers-ai)\//, ""));
      const prompt = rec.body?.messages?.at(-1)?.content ?? rec.body?.prompt ?? "";
      if (prompt === "capacity") {
        res.writeHead(429, { "content-type": "application/json" });
        return res.end(JSON.stringify({ success: false, errors: [{ code: 3040, message: "Capacity temporarily exceeded" }], result: null }));
      }
      if (prompt === "echo-token") {
        // A misbehaving upstream that echoes the credentials back.
        res.writeHead(401, { "content-type": "application/json" });
        return res.end(JSON.stringify({ success: false, errors: [{ code: 10000, message: `bad token ${req.headers.authorization}` }] }));
      }
      if (prompt === "html") {
        res.writeHead(502, { "content-type": "text/html" });
        return res.end(`<html>bad gateway for ${req.headers.authorization}</html>`);
      }
      if (prompt === "ok-but-failed") {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ success: false, errors: [{ code: 5035, message: "needs the Workers Paid plan" }] }));
      }
      if (prompt === "slow-headers") {
        return; // never answers; the client must abort
      }
      if (rec.body?.stream === true && prompt === "stall") {
        res.writeHead(200, { "content-type": "text/event-stream" });
        res.write(SSE[0]);
        return; // stalls after the first event
      }
      if (rec.body?.stream === true && prompt === "json-anyway") {
        res.writeHead(200, { "content-type": "application/json" });
        return res.end(JSON.stringify({ result: { response: "whole" }, success: true, errors: [], messages: [] }));
      }
      if (rec.body?.stream === true) {
        res.writeHead(200, { "content-type": "text/event-stream" });
        // Cut the second event (and the 3-byte character) across writes.
        const all = Buffer.from(SSE.join(""));
        let i = 0;
        const step = () => {
          if (i >= all.length) return res.end();
          res.write(all.subarray(i, i + 50));
          i += 50;
          setTimeout(step, 5);
        };
        return step();
      }
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ result: { response: `answer from ${model}`, usage: { prompt_tokens: 1 } }, success: true, errors: [], messages: [] }));
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}/client/v4`;
});

after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

const client = () => new Ai({ accountId: "acc123", apiToken: TOKEN, baseUrl, gatewayBaseUrl: baseUrl.replace("/client/v4", "/gw/v1") });

test("the class is named Ai and does not show its token", () => {
  const ai = client();
  assert.equal(ai.constructor.name, "Ai");
  assert.ok(!inspect(ai).includes(TOKEN));
  assert.ok(!JSON.stringify(ai).includes(TOKEN));
  assert.throws(() => new Ai({ accountId: "a" }), /apiToken is required/);
});

test("non-stream: POSTs the inputs with the bearer token and returns `result`", async () => {
  requests.length = 0;
  const r = await client().run(LLAMA, { prompt: "hi", max_tokens: 5 });
  assert.deepEqual(r, { response: `answer from ${LLAMA}`, usage: { prompt_tokens: 1 } });
  assert.equal(requests.length, 1);
  const req = requests[0];
  assert.equal(req.method, "POST");
  assert.equal(req.url, `/client/v4/accounts/acc123/ai/run/${LLAMA}`);
  assert.equal(req.headers.authorization, `Bearer ${TOKEN}`);
  assert.match(req.headers["content-type"], /application\/json/);
  assert.deepEqual(req.body, { prompt: "hi", max_tokens: 5 });
});

test("stream: returns the upstream SSE body byte for byte", async () => {
  const stream = await client().run(GLM, { ...user("hi"), stream: true });
  assert.ok(stream instanceof ReadableStream);
  const chunks = await readChunks(stream);
  assert.ok(chunks.length >= 2, "arrives in several chunks");
  assert.equal(decodeAll(chunks.map((c) => c.bytes)), SSE.join(""));
});

test("stream asked but a whole JSON answer came back: returns the result object", async () => {
  const r = await client().run(GLM, { ...user("json-anyway"), stream: true });
  assert.deepEqual(r, { response: "whole" });
});

test("errors map to `<code>: message`", async () => {
  await assert.rejects(client().run(GLM, user("capacity")), (e) => e instanceof Error && e.message === "3040: Capacity temporarily exceeded");
  await assert.rejects(client().run(GLM, { ...user("capacity"), stream: true }), /^Error: 3040: Capacity/);
  await assert.rejects(client().run(GLM, user("ok-but-failed")), /^Error: 5035: needs the Workers Paid plan$/);
  await assert.rejects(client().run(GLM, user("html")), /^Error: 502: Workers AI returned HTTP 502/);
});

test("the token never appears in an error, even when the upstream echoes it", async () => {
  for (const prompt of ["echo-token", "html"]) {
    const err = await client().run(GLM, user(prompt)).then(
      () => assert.fail("should have thrown"),
      (e) => e,
    );
    assert.ok(!err.message.includes(TOKEN), err.message);
    assert.ok(!String(err.stack).includes(TOKEN));
    assert.ok(err.message.includes("[redacted]"));
  }
  // An unreachable host: the network error carries no token either.
  const dead = new Ai({ accountId: "a", apiToken: TOKEN, baseUrl: "http://127.0.0.1:1/client/v4" });
  const err = await dead.run(GLM, user("x")).catch((e) => e);
  assert.ok(err instanceof Error);
  assert.ok(!err.message.includes(TOKEN));
});

test("extraHeaders are sent; gateway options route through AI Gateway with cf-aig headers", async () => {
  requests.length = 0;
  await client().run(GLM, user("hi"), {
    extraHeaders: { "x-session-affinity": "ses_42" },
    gateway: { id: "my-gw", skipCache: true, cacheTtl: 60, metadata: { user: "u1" } },
  });
  const req = requests[0];
  assert.equal(req.url, `/gw/v1/acc123/my-gw/workers-ai/${GLM}`);
  assert.equal(req.headers["x-session-affinity"], "ses_42");
  assert.equal(req.headers["cf-aig-skip-cache"], "true");
  assert.equal(req.headers["cf-aig-cache-ttl"], "60");
  assert.deepEqual(JSON.parse(req.headers["cf-aig-metadata"]), { user: "u1" });
  assert.equal(req.headers.authorization, `Bearer ${TOKEN}`);
});

// A failure to abort would hang; the test's timeout is the hang guard.
test("signal: aborts a call waiting for headers, and a stream mid-way (the upstream sees the close)", { timeout: HANG_GUARD_MS }, async () => {
  requests.length = 0;
  const ctrl = new AbortController();
  const call = client().run(GLM, user("slow-headers"), { signal: ctrl.signal });
  // Abort once the upstream holds the request, so the call is waiting for headers.
  await waitFor(() => requests.some((r) => r.body?.messages?.at(-1)?.content === "slow-headers"), undefined, "the request to reach the upstream");
  ctrl.abort();
  await assert.rejects(call, (e) => e.name === "AbortError");

  closed.length = 0;
  const ctrl2 = new AbortController();
  const stream = await client().run(GLM, { ...user("stall"), stream: true }, { signal: ctrl2.signal });
  const reader = stream.getReader();
  const first = await reader.read();
  assert.ok(new TextDecoder().decode(first.value).startsWith("data: "));
  const pending = reader.read();
  ctrl2.abort();
  await assert.rejects(pending, (e) => e.name === "AbortError");
  await waitFor(() => closed.some((u) => u.endsWith(GLM)), undefined, "the upstream connection to close");
});
