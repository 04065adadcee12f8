// The run of one answer (static/js/answer.js) on the page's own HTML in
// happy-dom, /chat played by a scripted fetch: what reaches the message from
// each shape of stream, how the answer ends, and what the page shows of it.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, afterEach, beforeEach, describe, test } from "node:test";
import { Window } from "happy-dom";

const window = new Window({ url: "https://edgechat.example/", settings: { errorCapture: "disabled" } });
const page = readFileSync(new URL("../../static/index.html", import.meta.url), "utf8");
window.document.body.innerHTML = new window.DOMParser().parseFromString(page, "text/html").body.innerHTML;
// The page's modules use the browser's globals, as in the page; fetch is the test's.
const globals = {
  document: window.document,
  localStorage: window.localStorage,
  requestAnimationFrame: window.requestAnimationFrame.bind(window),
  cancelAnimationFrame: window.cancelAnimationFrame.bind(window),
};
for (const [name, value] of Object.entries(globals)) {
  Object.defineProperty(globalThis, name, { value, configurable: true, writable: true });
}
window.localStorage.setItem("edgechat.lang", "en");
const { answer, stopActive, streamAnswer } = await import("../../static/js/answer.js");
const { fillModels } = await import("../../static/js/composer.js");
const { ui } = await import("../../static/js/dom.js");
const { state, store } = await import("../../static/js/state.js");
const { addVersion, thread, versionOf } = await import("../../static/js/tree.js");

const realFetch = globalThis.fetch;
after(() => {
  globalThis.fetch = realFetch;
  window.happyDOM.close();
});

const GLM = "@cf/zai-org/glm-4.7-flash";
const LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8";
const USAGE = { prompt_tokens: 12, completion_tokens: 5, total_tokens: 17 };

// /chat's events as the Worker frames them: its own named ones, the model's unnamed.
const ours = (name, data) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
const meta = (model = GLM) => ours("meta", { request_id: "r1", model });
const chunk = (delta) =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ delta }] })}\n\n`;
const llama = (response, extra = {}) => `data: ${JSON.stringify({ response, ...extra })}\n\n`;
// The blank line before a closing event is the Worker's (an upstream cut mid-line cannot glue onto it).
const done = (extra = {}) =>
  `\n${ours("done", { request_id: "r1", model: GLM, finish_reason: "stop", usage: USAGE, cost_usd: 2e-5, ttft_ms: 40, ...extra })}`;
const error = (code, message, retryable) => `\n${ours("error", { code, message, retryable, request_id: "r1" })}`;

const encoder = new TextEncoder();

/** A /chat response streaming `text` in pieces of `size` bytes (so cut inside characters too). */
function sse(text, size = 5) {
  const bytes = encoder.encode(text);
  let at = 0;
  const body = new ReadableStream({
    pull(controller) {
      if (at >= bytes.length) return controller.close();
      controller.enqueue(bytes.slice(at, at + size));
      at += size;
    },
  });
  return new Response(body, { headers: { "Content-Type": "text/event-stream; charset=utf-8" } });
}

/**
 * A /chat stream the test writes as it goes. `wanted()` resolves once the page
 * has read everything written so far and asks for more; aborting the request
 * fails the stream, as a browser's fetch does.
 */
function feed(signal) {
  let controller;
  let asked;
  let asking = new Promise((resolve) => (asked = resolve));
  const body = new ReadableStream({ start: (c) => (controller = c), pull: () => asked() }, { highWaterMark: 0 });
  signal?.addEventListener("abort", () => controller.error(new DOMException("aborted", "AbortError")));
  return {
    response: new Response(body, { headers: { "Content-Type": "text/event-stream" } }),
    write: (text) => controller.enqueue(encoder.encode(text)),
    close: () => controller.close(),
    fail: () => controller.error(new TypeError("network error")),
    async wanted() {
      await asking;
      asking = new Promise((resolve) => (asked = resolve));
    },
  };
}

/** Makes `reply(init)` the server: each call to fetch is kept, its body parsed. */
function serve(reply) {
  const calls = [];
  globalThis.fetch = async (url, init) => {
    calls.push({ url, init, body: JSON.parse(init.body) });
    return reply(init);
  };
  return calls;
}

/** Serves a feed(); `opened` resolves with it once the page has sent its request. */
function serveFeed() {
  let open;
  const opened = new Promise((resolve) => (open = resolve));
  const calls = serve((init) => {
    const stream = feed(init.signal);
    open(stream);
    return stream.response;
  });
  return { calls, opened };
}

const streaming = () => ({ role: "assistant", content: "", reasoning: "", status: "streaming" });
const REQUEST = { body: { messages: [{ role: "user", content: "hi" }] }, headers: {} };

/** What streamAnswer makes of the response `reply` gives. */
async function read(reply, onText) {
  serve(reply);
  const message = streaming();
  await streamAnswer(message, { ...REQUEST, signal: new AbortController().signal }, onText);
  return message;
}

/** Runs `body` with performance.now() reading `clock.now`, the page's one clock. */
async function withClock(body) {
  const real = Object.getOwnPropertyDescriptor(globalThis, "performance");
  const clock = { now: 1000 };
  Object.defineProperty(globalThis, "performance", { value: { now: () => clock.now }, configurable: true });
  try {
    await body(clock);
  } finally {
    Object.defineProperty(globalThis, "performance", real);
  }
}

describe("streamAnswer: what a /chat stream leaves in the message", () => {
  test("a whole answer: meta, the model's chunks, then done with its figures", async () => {
    const pieces = [];
    const message = await read(
      () =>
        sse(
          `: ping\n\n${meta()}${chunk({ role: "assistant", content: "" })}` +
            `${chunk({ content: "你好，" })}${chunk({ content: "edge!" })}data: [DONE]\n\n` +
            done({ fallback_from: "@cf/x", moderation: { safe: true, categories: [] } }),
        ),
      () => pieces.push(1),
    );
    assert.equal(message.content, "你好，edge!");
    assert.equal(message.reasoning, "");
    assert.equal(message.status, "done");
    assert.equal(message.error, undefined);
    const { tps, ...figures } = message.stats;
    assert.deepEqual(figures, { model: GLM, ttft_ms: 40, usage: USAGE, cost_usd: 2e-5, fallback_from: "@cf/x" });
    assert.deepEqual(message.moderation, { safe: true, categories: [] });
    assert.equal(pieces.length, 2, "once per piece of text, not for the empty role chunk");
  });

  test("a knowledge base's sources are kept in the answer's stats; none kept when none was near", async () => {
    const sources = [{ n: 1, base: "b", document: "d", name: "tea.md", chunk: 0, id: "d:0", score: 0.9, text: "Tea." }];
    const cited = await read(() => sse(`${meta()}${chunk({ content: "Tea [1]." })}${done({ sources })}`));
    assert.deepEqual(cited.stats.sources, sources);
    const none = await read(() => sse(`${meta()}${chunk({ content: "No idea." })}${done({ sources: [] })}`));
    assert.equal("sources" in none.stats, false);
  });

  test("the pace is counted from the first text, not from the request; none for an instant answer", async () => {
    await withClock(async (clock) => {
      for (const [seconds, tps] of [
        [2, 2.5],
        [0.05, undefined],
      ]) {
        const { opened } = serveFeed();
        const message = streaming();
        const reading = streamAnswer(message, { ...REQUEST, signal: new AbortController().signal });
        const stream = await opened;
        await stream.wanted();
        clock.now += 30; // the model thinking before its first token: not part of the pace
        stream.write(`${meta()}${chunk({ content: "Five tokens of text" })}`);
        await stream.wanted();
        clock.now += seconds * 1000;
        stream.write(done());
        stream.close();
        await reading;
        assert.equal(message.stats.tps, tps, `${seconds} s`);
      }
    });
  });

  test("Llama's {response} events, its closing usage chunk and [DONE]", async () => {
    const text = `${meta(LLAMA)}${llama("Hello")}${llama(" there")}${llama("", { usage: USAGE })}data: [DONE]\n\n`;
    const message = await read(() => sse(text + done({ model: LLAMA }), 3));
    assert.equal(message.content, "Hello there");
    assert.equal(message.status, "done");
    assert.equal(message.stats.model, LLAMA);
  });

  test("reasoning first, then the answer, each in its own field", async () => {
    const message = await read(() =>
      sse(
        `${meta()}${chunk({ reasoning_content: "The user greets. " })}${chunk({ reasoning_content: "Greet back." })}` +
          `${chunk({ content: "Hi!" })}${done()}`,
      ),
    );
    assert.equal(message.reasoning, "The user greets. Greet back.");
    assert.equal(message.content, "Hi!");
    assert.equal(message.status, "done");
  });

  test("an error event keeps the text before it, and nothing after it counts", async () => {
    const message = await read(() =>
      sse(
        `${meta()}${chunk({ content: "Half an ans" })}${error("upstream_timeout", "The model went silent.", true)}` +
          `${chunk({ content: "wer" })}${done()}`,
      ),
    );
    assert.equal(message.content, "Half an ans");
    assert.equal(message.status, "error");
    assert.deepEqual(message.error, { code: "upstream_timeout", message: "The model went silent.", retryable: true });
    assert.equal(message.stats, undefined);
  });

  test("a done or error without meta's request id is not the end of the answer", async () => {
    const forged = `${ours("done", { model: "forged" })}${ours("error", { code: "x", request_id: "r2" })}`;
    const message = await read(() =>
      sse(`${meta()}${chunk({ content: "Still " })}${forged}${chunk({ content: "here." })}${done()}`),
    );
    assert.equal(message.content, "Still here.");
    assert.equal(message.status, "done");
    assert.equal(message.stats.model, GLM);
    const cut = await read(() => sse(`${meta()}${chunk({ content: "x" })}${forged}`));
    assert.equal(cut.status, "interrupted");
  });

  test("a stream that just closes was cut off, whatever came before", async () => {
    const cut = await read(() => sse(`${meta()}${chunk({ content: "Three words in" })}`));
    assert.equal(cut.content, "Three words in");
    assert.equal(cut.status, "interrupted");
    // A done without its closing blank line never arrived (SSE drops an unended event).
    const unended = await read(() => sse(`${meta()}${chunk({ content: "x" })}${done().trimEnd()}`));
    assert.equal(unended.status, "interrupted");
    assert.equal(unended.stats, undefined);
    assert.equal((await read(() => sse(meta()))).status, "interrupted");
  });

  test("a request refused before any answer: its status, code, wait and categories", async () => {
    const busy = await read(() =>
      Response.json(
        { error: { code: "content_refused", message: "Refused.", categories: ["S2"] } },
        { status: 400, headers: { "Retry-After": "30" } },
      ),
    );
    assert.equal(busy.status, "error");
    assert.deepEqual(busy.error, {
      code: "content_refused",
      status: 400,
      message: "Refused.",
      retryAfter: 30,
      categories: ["S2"],
    });
    const html = await read(() => new Response("<h1>Bad gateway</h1>", { status: 502 }));
    assert.deepEqual(html.error, {
      code: undefined,
      status: 502,
      message: "",
      retryAfter: undefined,
      categories: undefined,
    });
  });

  test("a daily limit refused: the reset time it names is kept", async () => {
    const spent = await read(() =>
      Response.json(
        { error: { code: "budget_exhausted", message: "Spent.", resets_at: "2026-12-03T00:00:00Z" } },
        { status: 429, headers: { "Retry-After": "3600" } },
      ),
    );
    assert.deepEqual(spent.error, {
      code: "budget_exhausted",
      status: 429,
      message: "Spent.",
      retryAfter: 3600,
      categories: undefined,
      resetsAt: "2026-12-03T00:00:00Z",
    });
  });

  test("a connection that fails: offline before any text, cut off after some", async () => {
    const offline = await read(() => Promise.reject(new TypeError("Failed to fetch")));
    assert.equal(offline.status, "error");
    assert.deepEqual(offline.error, { offline: true });

    for (const [before, status] of [
      [meta(), "error"],
      [`${meta()}${chunk({ content: "Some" })}`, "interrupted"],
    ]) {
      const { opened } = serveFeed();
      const message = streaming();
      const reading = streamAnswer(message, { ...REQUEST, signal: new AbortController().signal });
      const stream = await opened;
      await stream.wanted();
      stream.write(before);
      await stream.wanted();
      stream.fail();
      await reading;
      assert.equal(message.status, status, before);
      assert.equal(message.error?.offline, status === "error" || undefined);
    }
  });

  test("the request: a POST of the body as JSON with the given headers and signal", async () => {
    const calls = serve(() => sse(done()));
    const signal = new AbortController().signal;
    const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
    await streamAnswer(streaming(), { ...REQUEST, headers, signal });
    assert.equal(calls.length, 1);
    assert.equal(calls[0].url, "/chat");
    assert.equal(calls[0].init.method, "POST");
    assert.equal(calls[0].init.headers, headers);
    assert.equal(calls[0].init.signal, signal);
    assert.deepEqual(calls[0].body, REQUEST.body);
  });
});

describe("answer(): one answer on the page", () => {
  beforeEach(() => {
    window.localStorage.removeItem("edgechat.token");
    ui.reasoning.checked = true;
    state.limits = null;
  });
  afterEach(() => assert.equal(state.active, null, "the page is idle again"));

  /** A conversation on screen that ends with the question `text`. */
  function asked(text) {
    const conversation = store.create();
    addVersion(conversation, { role: "user", content: text });
    return conversation;
  }

  const articles = () => [...ui.messages.querySelectorAll("article")];
  const frame = () => new Promise((resolve) => window.requestAnimationFrame(resolve));

  test("asks with the thread, shows the answer as it streams, and is idle after", async () => {
    state.models = [
      { alias: "glm", id: GLM, label: "GLM", default: true, free_plan: true },
      { alias: "kimi", id: "@cf/kimi", label: "Kimi", vision: true, free_plan: false },
    ];
    fillModels();
    ui.model.value = "kimi";
    ui.reasoning.checked = false;
    window.localStorage.setItem("edgechat.token", "secret");
    const conversation = asked("Tell me about the edge");
    const { calls, opened } = serveFeed();
    const run = answer(conversation);
    assert.equal(ui.stop.hidden, false, "Stop while it streams");
    assert.equal(ui.send.hidden, true);
    const stream = await opened;
    await stream.wanted();
    // The conversation's id names it for the prompt cache.
    assert.deepEqual(calls[0].body, {
      messages: [{ role: "user", content: "Tell me about the edge" }],
      model: "kimi",
      reasoning: false,
      conversation: conversation.id,
    });
    assert.deepEqual(calls[0].init.headers, {
      "Content-Type": "application/json",
      Accept: "text/event-stream",
      Authorization: "Bearer secret",
    });
    stream.write(`${meta()}${chunk({ content: "The edge is **near**" })}`);
    await stream.wanted();
    await frame();
    const shown = articles().at(-1);
    assert.equal(shown.getAttribute("aria-busy"), "true");
    assert.equal(shown.querySelector(".answer strong").textContent, "near");

    stream.write(`${chunk({ content: " you." })}${done()}`);
    stream.close();
    await run;
    const message = thread(conversation).at(-1);
    assert.equal(message.content, "The edge is **near** you.");
    assert.equal(message.status, "done");
    assert.equal(articles().at(-1).getAttribute("aria-busy"), "false");
    assert.equal(articles().at(-1).querySelector(".answer").textContent, "The edge is near you.");
    assert.match(articles().at(-1).querySelector(".stats").textContent, /GLM · 40 ms/);
    assert.equal(ui.stop.hidden, true);
    assert.equal(ui.send.hidden, false);
    // Kept, and the conversation is the newest.
    assert.equal(
      JSON.parse(window.localStorage.getItem("edgechat.conversations.v2")).length,
      store.conversations.length,
    );
    assert.equal(store.sorted()[0], conversation);
    state.models = [];
    ui.model.disabled = true;
  });

  test("regenerate asks past the server's cache and keeps the old answer as a version", async () => {
    const conversation = asked("Pick a colour");
    serve(() => sse(`${meta()}${chunk({ content: "Blue." })}${done()}`));
    await answer(conversation);
    const calls = serve(() => sse(`${meta()}${chunk({ content: "Green." })}${done()}`));
    await answer(conversation, { fresh: true });
    assert.equal(calls[0].init.headers["Cache-Control"], "no-cache");
    assert.deepEqual(calls[0].body.messages, [{ role: "user", content: "Pick a colour" }]);
    const latest = thread(conversation).at(-1);
    assert.equal(latest.content, "Green.");
    assert.deepEqual(versionOf(conversation, latest), { index: 1, count: 2 });
  });

  test("Stop ends it as stopped, the text kept", async () => {
    const conversation = asked("Count to a million");
    const { opened } = serveFeed();
    const run = answer(conversation);
    const stream = await opened;
    await stream.wanted();
    stream.write(`${meta()}${chunk({ content: "1, 2, 3" })}`);
    await stream.wanted();
    stopActive();
    await run;
    const message = thread(conversation).at(-1);
    assert.equal(message.status, "stopped");
    assert.equal(message.content, "1, 2, 3");
    assert.equal(articles().at(-1).querySelector(".footer .tag").textContent, "Stopped");
  });

  test("a cut-off answer says so, with Retry", async () => {
    const conversation = asked("Hello?");
    serve(() => sse(`${meta()}${chunk({ content: "Hel" })}`));
    await answer(conversation);
    const alert = articles().at(-1).querySelector("[role=alert]");
    assert.match(alert.textContent, /cut off/i);
    assert.ok([...alert.querySelectorAll("button")].some((b) => b.textContent === "Retry"));
  });

  test("a 401 asks for the token, forgetting the one refused", async () => {
    window.localStorage.setItem("edgechat.token", "wrong");
    const conversation = asked("Let me in");
    serve(() => Response.json({ error: { code: "unauthorized", message: "Token needed." } }, { status: 401 }));
    await answer(conversation);
    assert.equal(thread(conversation).at(-1).error.status, 401);
    assert.equal(ui.tokenDialog.open, true);
    assert.equal(window.localStorage.getItem("edgechat.token"), null);
    assert.equal(ui.tokenHint.textContent, state.t.tokenRejected);
    ui.tokenDialog.close();
  });
});
