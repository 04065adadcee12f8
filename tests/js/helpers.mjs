// Shared helpers for edgechat's JS tests (not a test file itself).

/** Rejects if `promise` does not settle within `ms`. */
export function within(ms, promise, label = "operation") {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${label} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/** Reads a stream to its end: [{bytes, at}] with `at` from performance.now(). */
export async function readChunks(stream, ms = 5000) {
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

/** Resolves once `check()` is truthy, polling every 10 ms, for at most `ms`. */
export async function waitFor(check, ms = 2000, label = "condition") {
  const end = Date.now() + ms;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`${label} not reached within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const GLM = "@cf/zai-org/glm-4.7-flash";
export const GLM53 = "@cf/zai-org/glm-5.3";
export const KIMI = "@cf/moonshotai/kimi-k2.6";
export const LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8";

export const user = (content) => ({ messages: [{ role: "user", content }] });
