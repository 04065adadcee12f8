// Shared helpers for edgechat's JS tests (not a test file itself).
//
// No helper proves anything by elapsed time. `within`, `readChunks` and
// `waitFor` take a hang guard: a generous limit that turns "never happens"
// into a failure instead of a stuck suite, never a claim about speed. Tests
// that are about time use node:test's mock timers and `isPending`.

// Captured before any test can mock them, so a guard still fires under
// `t.mock.timers`.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

/** A hang guard for waits in these tests; far above what a loaded machine needs. */
export const HANG_GUARD_MS = 20_000;

/** Rejects if `promise` has not settled after `ms` (a hang guard, not a proof). */
export function within(ms, promise, label = "operation") {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = realSetTimeout(() => reject(new Error(`${label} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => realClearTimeout(timer));
}

/** Resolves after every microtask queued so far (and those they queue) has run. */
export const drainMicrotasks = () => new Promise((resolve) => setImmediate(resolve));

/**
 * Whether `promise` is still pending once every microtask has run. With the
 * timers mocked nothing else can settle it, so "pending" is a fact, not a
 * guess about how long to wait.
 */
export async function isPending(promise) {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  await drainMicrotasks();
  return !settled;
}

/**
 * With `t.mock.timers` enabled for setTimeout: proves `promise` waits for
 * exactly `ms` of (mocked) time — still pending at ms - 1, settled at ms —
 * and returns what it settles with.
 */
export async function settlesAfter(t, ms, promise, label = "the promise") {
  await drainMicrotasks(); // the code under test has started its timer
  t.mock.timers.tick(ms - 1);
  if (!(await isPending(promise))) throw new Error(`${label} settled before ${ms} ms`);
  t.mock.timers.tick(1);
  if (await isPending(promise)) throw new Error(`${label} still pending after ${ms} ms`);
  return promise;
}

/** Reads a stream to its end: [{bytes, at}] with `at` from performance.now(). */
export async function readChunks(stream, ms = HANG_GUARD_MS) {
  const reader = stream.getReader();
  const chunks = [];
  const go = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return chunks;
      chunks.push({ bytes: value, at: performance.now() });
    }
  })();
  return within(ms, go, "reading the stream");
}

export function concat(parts) {
  const total = parts.reduce((n, p) => n + p.length, 0);
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** Decodes chunks with one streaming decoder, as a correct reader must. */
export function decodeAll(parts) {
  const dec = new TextDecoder("utf-8", { fatal: true });
  let s = "";
  for (const p of parts) s += dec.decode(p, { stream: true });
  return s + dec.decode();
}

/**
 * Splits SSE text into event payloads (the text after "data: "). Fails if the
 * text is not exactly a sequence of `data: ...\n\n` events.
 */
export function sseEvents(text) {
  if (text === "") return [];
  if (!text.endsWith("\n\n")) throw new Error(`SSE text does not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((ev) => {
      if (!ev.startsWith("data: ") || ev.includes("\n")) throw new Error(`not a single data line: ${JSON.stringify(ev)}`);
      return ev.slice("data: ".length);
    });
}

/** Like sseEvents, with JSON payloads parsed and "[DONE]" kept as the string. */
export function sseParsed(text) {
  return sseEvents(text).map((d) => (d === "[DONE]" ? d : JSON.parse(d)));
}

/** An io for Ai that keeps the script and log in memory. */
export function memoryIo({ script = null, delay = 0 } = {}) {
  const io = {
    script,
    delay,
    log: [],
    readScript: () => io.script,
    appendLog: (r) => io.log.push(structuredClone(r)),
    delayMs: () => io.delay,
  };
  return io;
}

/**
 * Resolves with `check()`'s value once it is truthy, polling every 10 ms; `ms`
 * is a hang guard, not a proof.
 */
export async function waitFor(check, ms = HANG_GUARD_MS, label = "condition") {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`${label} not reached within ${ms} ms`);
    await new Promise((r) => realSetTimeout(r, 10));
  }
}

export const GLM = "@cf/zai-org/glm-4.7-flash";
export const GLM53 = "@cf/zai-org/glm-5.3";
export const KIMI = "@cf/moonshotai/kimi-k2.6";
export const LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8";

export const user = (content) => ({ messages: [{ role: "user", content }] });
