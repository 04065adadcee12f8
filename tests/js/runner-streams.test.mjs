// The runner's model of workerd's native streams (tools/runner/streams.mjs):
// IdentityTransformStream, the AI binding's byte-stream results, BYOB reads
// with a minimum and readAtLeast, tee() and pipeTo's options.
//
// Nothing here waits for a guessed time. Where a test shows that a promise is
// still pending it first lets one macrotask turn pass (`turn()`): every
// microtask queued so far has run, and with in-memory streams nothing else
// could settle the promise.
import { test } from "node:test";
import assert from "node:assert/strict";
import { inflateRawSync, inflateSync } from "node:zlib";
import { Ai as EmulatorAi } from "../../tools/emulator/ai.mjs";
import { Ai } from "../../tools/runner/bindings.mjs";
import { AUTO_ALLOCATE_CHUNK_SIZE, isNativeStream } from "../../tools/runner/streams.mjs";
import { GLM, LLAMA, decodeAll, memoryIo, user } from "./helpers.mjs";

const turn = () => new Promise((resolve) => setImmediate(resolve));
const bytes = (text) => new TextEncoder().encode(text);
const text = (view) => new TextDecoder().decode(view);

/** "pending", "fulfilled" or "rejected", after a macrotask turn. */
async function state(promise) {
  let s = "pending";
  promise.then(
    () => (s = "fulfilled"),
    () => (s = "rejected"),
  );
  await turn();
  return s;
}

const rejection = (promise) =>
  promise.then(
    (value) => assert.fail(`expected a rejection, got ${JSON.stringify(value)}`),
    (err) => err,
  );

/** Items handed out in order: `take()` resolves with the next one, however early it came. */
function queue() {
  const items = [];
  const takers = [];
  return {
    put(item) {
      if (takers.length) takers.shift()(item);
      else items.push(item);
    },
    take: () => (items.length ? Promise.resolve(items.shift()) : new Promise((r) => takers.push(r))),
  };
}

/** A JS ReadableStream whose every pull is announced (`pulled()`) and answered by the test. */
function controlledSource() {
  const pulls = queue();
  const source = { cancelled: null, pulled: pulls.take };
  source.stream = new ReadableStream(
    {
      pull(controller) {
        return new Promise((done) => {
          pulls.put({
            give(chunk) {
              controller.enqueue(chunk);
              done();
            },
          });
        });
      },
      cancel(reason) {
        source.cancelled = { reason };
      },
    },
    { highWaterMark: 0 },
  );
  return source;
}

/** A JS WritableStream that records chunks (`written()` announces each); `hold` makes writes wait. */
function recordingSink({ hold = false } = {}) {
  const writes = queue();
  const sink = { chunks: [], aborted: null, closed: false, held: [], written: writes.take };
  sink.stream = new WritableStream({
    write(chunk) {
      sink.chunks.push(chunk);
      writes.put(chunk);
      if (hold) return new Promise((release) => sink.held.push(release));
      return undefined;
    },
    close() {
      sink.closed = true;
    },
    abort(reason) {
      sink.aborted = { reason };
    },
  });
  return sink;
}

/** The AI binding as the runner hands it to the Worker, over the emulator core. */
function emulatedAi(rules = null) {
  const io = memoryIo({ script: rules ? { rules } : null, delay: 0 });
  return { ai: new Ai(new EmulatorAi(io)), log: io.log };
}

const stallRule = (contains, ...chunks) => ({ match: { contains }, chunks: [...chunks, { stall: true }] });

async function readAll(stream) {
  const reader = stream.getReader();
  const parts = [];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return parts;
    parts.push(value);
  }
}

// ---------------------------------------------------------------------------
// IdentityTransformStream

test("IdentityTransformStream is a global TransformStream subclass, and readAtLeast is installed", () => {
  const its = new IdentityTransformStream();
  assert.ok(its instanceof TransformStream);
  assert.equal(Object.prototype.toString.call(its), "[object IdentityTransformStream]");
  assert.ok(its.readable instanceof ReadableStream);
  assert.ok(its.writable instanceof WritableStream);
  assert.equal(its.readable, its.readable);
  assert.equal(typeof ReadableStreamBYOBReader.prototype.readAtLeast, "function");
  assert.ok(isNativeStream(its.readable) && isNativeStream(its.writable));
  assert.ok(!isNativeStream(new TransformStream().readable));
});

test("a write resolves only once a read has taken it; queued writes settle in turn", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const first = writer.write(bytes("one"));
  const second = writer.write(bytes("two"));
  assert.equal(await state(first), "pending");
  const reader = readable.getReader();
  const a = await reader.read();
  assert.equal(text(a.value), "one");
  assert.equal(await state(first), "fulfilled");
  assert.equal(await state(second), "pending");
  assert.equal(text((await reader.read()).value), "two");
  await second;
});

test("a default read takes at most 4096 bytes: a larger write is delivered over several reads", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const big = new Uint8Array(10000).map((_, i) => i % 251);
  const written = writer.write(big);
  const reader = readable.getReader();
  const sizes = [];
  const got = [];
  while (got.reduce((n, c) => n + c.length, 0) < big.length) {
    const { value } = await reader.read();
    assert.equal(value.buffer.byteLength, AUTO_ALLOCATE_CHUNK_SIZE);
    sizes.push(value.length);
    got.push(value);
  }
  await written;
  assert.deepEqual(sizes, [4096, 4096, 1808]);
  assert.deepEqual(Buffer.concat(got), Buffer.from(big));
});

test("chunk types: bytes of any view are copied, strings are UTF-8, other values are refused per write", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reader = readable.getReader();
  const source = bytes("abc");
  const w = writer.write(source);
  source[0] = 0x7a; // the write took a copy
  assert.equal(text((await reader.read()).value), "abc");
  await w;
  for (const chunk of [bytes("de").buffer, new DataView(bytes("fg").buffer), new Uint16Array([0x6968])]) {
    const [, r] = await Promise.all([writer.write(chunk), reader.read()]);
    assert.ok(r.value instanceof Uint8Array);
  }
  const [, s] = await Promise.all([writer.write("héllo ✓"), reader.read()]);
  assert.equal(text(s.value), "héllo ✓");
  for (const bad of [42, { a: 1 }, null, [1, 2]]) {
    const err = await rejection(writer.write(bad));
    assert.ok(err instanceof TypeError);
    assert.match(err.message, /non-ArrayBuffer\/ArrayBufferView/);
  }
  // Zero-length writes are no-ops that resolve at once, even behind a waiting write.
  const waiting = writer.write(bytes("x"));
  assert.equal(await state(writer.write(new Uint8Array(0))), "fulfilled");
  assert.equal(await state(writer.write("")), "fulfilled");
  assert.equal(await state(writer.write()), "fulfilled");
  // The stream is still usable after the refused writes.
  assert.equal(text((await reader.read()).value), "x");
  await waiting;
});

test("closing the writable ends the readable once queued writes are read", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reader = readable.getReader();
  const pendingRead = reader.read();
  writer.write(bytes("last"));
  const closed = writer.close();
  assert.equal(text((await pendingRead).value), "last");
  await closed;
  assert.deepEqual(await reader.read(), { done: true, value: undefined });
  await reader.closed;
});

test("aborting the writable errors the readable and rejects the write in flight at once", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reason = new Error("stop");
  const inFlight = writer.write(bytes("never read"));
  const reader = readable.getReader();
  await writer.abort(reason);
  assert.equal(await rejection(inFlight), reason);
  assert.equal(await rejection(reader.read()), reason);
});

test("cancelling the readable rejects the pending write, every later write and a pipe into it", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reason = new Error("client went away");
  const pending = writer.write(bytes("a"));
  await readable.cancel(reason);
  assert.equal(await rejection(pending), reason);
  assert.equal(await rejection(writer.write(bytes("b"))), reason);
  writer.releaseLock();
  const source = new ReadableStream({
    start(c) {
      c.enqueue(bytes("c"));
    },
  });
  assert.equal(await rejection(source.pipeTo(writable)), reason);
  // A write failing before any read: the untouched writable errors on its next write.
  const other = new IdentityTransformStream();
  await other.readable.cancel(reason);
  assert.equal(await rejection(other.writable.getWriter().write(bytes("d"))), reason);
});

test("desiredSize stays 1 without a highWaterMark; with one it counts bytes until they are read", async () => {
  const plain = new IdentityTransformStream().writable.getWriter();
  plain.write(bytes("12345"));
  plain.write(bytes("678"));
  assert.equal(plain.desiredSize, 1);

  const { readable, writable } = new IdentityTransformStream({ highWaterMark: 10 });
  const writer = writable.getWriter();
  assert.equal(writer.desiredSize, 10);
  writer.write(new Uint8Array(1));
  writer.write(new Uint8Array(9));
  assert.equal(writer.desiredSize, 0);
  assert.equal(await state(writer.ready), "pending");
  const reader = readable.getReader();
  await reader.read();
  await writer.ready;
  assert.equal(writer.desiredSize, 1);
  await reader.read();
  assert.equal(await state(writer.ready), "fulfilled");
  assert.equal(writer.desiredSize, 10);
  assert.throws(() => new IdentityTransformStream(5), TypeError);
});

test("its readable is a byte stream: BYOB reads with a minimum take from successive writes", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const writer = writable.getWriter();
  const reader = readable.getReader({ mode: "byob" });
  const read = reader.read(new Uint8Array(16), { min: 6 });
  const w1 = writer.write(bytes("abc"));
  const w2 = writer.write(bytes("defgh"));
  const r = await read;
  assert.equal(text(r.value), "abcdefgh");
  await Promise.all([w1, w2]);
  // readAtLeast: the same read; a short read only at EOF, then done.
  writer.write(bytes("xy"));
  writer.close();
  const short = await reader.readAtLeast(4, new Uint8Array(8));
  assert.deepEqual([short.done, text(short.value)], [false, "xy"]);
  const end = await reader.read(new Uint8Array(8));
  assert.equal(end.done, true);
  assert.equal(end.value.byteLength, 0);
  assert.equal(end.value.buffer.byteLength, 8);
});

// ---------------------------------------------------------------------------
// BYOB reads, readAtLeast and the reader rules of native streams

test("Node has read(view, {min}) natively; readAtLeast is the runner's, with workerd's checks", async () => {
  const native = new ReadableStream({
    type: "bytes",
    start(c) {
      c.enqueue(bytes("ab"));
      c.enqueue(bytes("cde"));
    },
  });
  const nodeReader = native.getReader({ mode: "byob" });
  const r = await nodeReader.read(new Uint8Array(10), { min: 4 });
  assert.equal(text(r.value), "abcde"); // Node fills from several queued chunks
  const { ai } = emulatedAi();
  const stream = await ai.run(LLAMA, { ...user("one two three"), stream: true });
  const reader = stream.getReader({ mode: "byob" });
  for (const [min, view, pattern] of [
    [0, new Uint8Array(4), /invalid minimum/],
    [5, new Uint8Array(4), /Minimum bytes to read \(5\) exceeds size of buffer \(4\)/],
    [3, new Uint16Array(2), /Minimum bytes to read \(6\) exceeds size of buffer \(4\)/],
    [1, new Uint8Array(0), /positive-sized/],
  ]) {
    const err = await rejection(reader.readAtLeast(min, view));
    assert.ok(err instanceof TypeError, String(err));
    assert.match(err.message, pattern);
  }
  const err = await rejection(reader.read(new Uint8Array(4), { min: 9 }));
  assert.ok(err instanceof TypeError);
  await reader.cancel();
});

test("a native stream serves one read at a time and keeps its reader while a read is outstanding", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader();
  const first = reader.read();
  const err = await rejection(reader.read());
  assert.ok(err instanceof TypeError);
  assert.match(err.message, /single pending read/);
  assert.throws(() => reader.releaseLock(), /outstanding read promises/);
  const writer = writable.getWriter();
  await Promise.all([writer.write(bytes("z")), first]);
  reader.releaseLock();
  assert.equal(readable.locked, false);
});

test("a BYOB read returns a Uint8Array whatever view it was given, over the detached buffer", async () => {
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader({ mode: "byob" });
  const buffer = new ArrayBuffer(8);
  const read = reader.read(new Uint32Array(buffer));
  await writable.getWriter().write(new Uint8Array([1, 0, 0, 0, 2, 0, 0, 0]));
  const { value } = await read;
  assert.ok(value instanceof Uint8Array);
  assert.equal(buffer.byteLength, 0); // detached: reuse value.buffer
  assert.equal(value.buffer.byteLength, 8);
});

// ---------------------------------------------------------------------------
// The AI binding's streamed results

test("env.AI keeps the class name Ai; a streamed result is a native byte stream, a plain result is untouched", async () => {
  const { ai } = emulatedAi();
  assert.equal(ai.constructor.name, "Ai");
  const stream = await ai.run(GLM, { ...user("hello there"), stream: true });
  assert.ok(stream instanceof ReadableStream);
  assert.ok(isNativeStream(stream));
  stream.getReader({ mode: "byob" }).releaseLock(); // only a byte stream has BYOB readers
  assert.ok(decodeAll(await readAll(stream)).endsWith("data: [DONE]\n\n"));
  const result = await ai.run(LLAMA, user("hi"));
  assert.match(result.response, /emulator/);
});

test("a BYOB read with a minimum fills from several upstream chunks, pulled one at a time on demand", async () => {
  const chunks = ["data: 1\n\n", "data: 22\n\n", "data: 333\n\n", "data: [DONE]\n\n"];
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const stream = await ai.run(LLAMA, { ...user("x"), stream: true });
  const reader = stream.getReader({ mode: "byob" });
  const first = await reader.readAtLeast(15, new Uint8Array(64));
  assert.equal(text(first.value), chunks[0] + chunks[1]);
  const second = await reader.read(new Uint8Array(first.value.buffer), { min: 1 });
  assert.equal(text(second.value), chunks[2]); // no more than the one chunk it needed
  const rest = await reader.read(new Uint8Array(second.value.buffer), { min: 64 });
  assert.deepEqual([rest.done, text(rest.value)], [false, chunks[3]]); // short only at EOF
  const end = await reader.read(new Uint8Array(rest.value.buffer));
  assert.equal(end.done, true);
});

test("a chunk larger than the read is served over several reads", async () => {
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks: ["data: abcdefghij\n\n"] }]);
  const reader = (await ai.run(LLAMA, { ...user("x"), stream: true })).getReader({ mode: "byob" });
  const parts = [];
  let buffer = new ArrayBuffer(4);
  for (;;) {
    const { done, value } = await reader.read(new Uint8Array(buffer));
    if (done) break;
    parts.push(text(value));
    buffer = value.buffer;
  }
  assert.deepEqual(parts, ["data", ": ab", "cdef", "ghij", "\n\n"]);
});

test("cancelling the result cancels the emulator's stream (logged as aborted)", async () => {
  const { ai, log } = emulatedAi([stallRule("x", "data: a\n\n")]);
  const stream = await ai.run(LLAMA, { ...user("x"), stream: true });
  const reader = stream.getReader();
  await reader.read();
  const pending = reader.read();
  await reader.cancel(new Error("enough"));
  assert.deepEqual(await pending, { done: true, value: undefined });
  assert.equal(log.length, 1);
  assert.equal(log[0].aborted, true);
});

test("an upstream error errors the result with the same reason", async () => {
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks: ["data: a\n\n", { error: "3040: out of capacity" }] }]);
  const reader = (await ai.run(LLAMA, { ...user("x"), stream: true })).getReader({ mode: "byob" });
  await reader.read(new Uint8Array(64));
  const err = await rejection(reader.read(new Uint8Array(64)));
  assert.equal(err.message, "3040: out of capacity");

  // An aborted signal errors the stream with the signal's reason, also through the wrapper.
  const { ai: ai2 } = emulatedAi([stallRule("x", "data: a\n\n")]);
  const controller = new AbortController();
  const stream = await ai2.run(LLAMA, { ...user("x"), stream: true }, { signal: controller.signal });
  const r2 = stream.getReader();
  await r2.read();
  const reason = new Error("deadline");
  const pending = r2.read();
  controller.abort(reason);
  assert.equal(await rejection(pending), reason);
});

// ---------------------------------------------------------------------------
// tee()

test("tee() of a result: both branches are native byte streams; the slow one accumulates and one BYOB read takes it all", async () => {
  const chunks = ["data: 1\n\n", "data: 2\n\n", "data: 3\n\n", "data: [DONE]\n\n"];
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const stream = await ai.run(LLAMA, { ...user("x"), stream: true });
  const [fast, slow] = stream.tee();
  assert.ok(isNativeStream(fast) && isNativeStream(slow));
  const fastParts = await readAll(fast); // the fast branch drives the upstream alone
  assert.deepEqual(fastParts.map(text), chunks);
  const reader = slow.getReader({ mode: "byob" });
  const all = await reader.read(new Uint8Array(256));
  assert.equal(text(all.value), chunks.join(""));
  assert.equal((await reader.read(new Uint8Array(all.value.buffer))).done, true);
});

test("tee(): a default read coalesces what a branch has buffered, up to 4096 bytes", async () => {
  const chunks = Array.from({ length: 5 }, (_, i) => `data: ${"x".repeat(1000)}${i}\n\n`);
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const [a, b] = (await ai.run(LLAMA, { ...user("x"), stream: true })).tee();
  await readAll(a);
  const sizes = (await readAll(b)).map((v) => v.length);
  assert.deepEqual(sizes, [4096, chunks.join("").length - 4096]);
});

test("tee(): no upstream read until a branch reads; one branch cancelled leaves the other; both cancel the upstream", async () => {
  const { ai, log } = emulatedAi([stallRule("x", "data: a\n\n", "data: b\n\n")]);
  const [a, b] = (await ai.run(LLAMA, { ...user("x"), stream: true })).tee();
  await a.cancel(new Error("not watching"));
  const reader = b.getReader();
  assert.equal(text((await reader.read()).value), "data: a\n\n");
  assert.equal(text((await reader.read()).value), "data: b\n\n");
  assert.equal(log.length, 0);
  const pending = reader.read();
  await reader.cancel(new Error("done"));
  await pending;
  assert.equal(log.length, 1);
  assert.equal(log[0].aborted, true);
});

test("tee(): an upstream error reaches a branch after what it has buffered", async () => {
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks: ["data: a\n\n", { error: "3040: busy" }] }]);
  const [a, b] = (await ai.run(LLAMA, { ...user("x"), stream: true })).tee();
  const ra = a.getReader();
  await ra.read();
  assert.equal((await rejection(ra.read())).message, "3040: busy");
  const rb = b.getReader();
  assert.equal(text((await rb.read()).value), "data: a\n\n");
  assert.equal((await rejection(rb.read())).message, "3040: busy");
});

// ---------------------------------------------------------------------------
// pipeTo / pipeThrough

test("CompressionStream: a result piped into its writable flows with nothing reading the readable, which inflates to the result", async () => {
  const chunks = Array.from({ length: 200 }, (_, i) => `data: {"n":${i},"pad":"${"x".repeat(100)}"}\n\n`);
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const [drained, watched] = (await ai.run(LLAMA, { ...user("x"), stream: true })).tee();
  const discard = new CompressionStream("deflate-raw");
  assert.ok(discard instanceof TransformStream && isNativeStream(discard.readable));
  // No read of the readable: the pipe still takes every chunk (workerd's
  // CompressionStream has no backpressure), so the watched branch gets them all.
  await drained.pipeTo(discard.writable);
  const reader = watched.getReader({ mode: "byob" });
  const all = await reader.read(new Uint8Array(64 << 10));
  assert.equal(text(all.value), chunks.join(""));
  const compressed = Buffer.concat(await readAll(discard.readable));
  assert.ok(compressed.length < chunks.join("").length / 10);
  assert.equal(inflateRawSync(compressed).toString(), chunks.join(""));
});

test("CompressionStream: a failed source aborts it; an unknown format is refused; writes through a writer work too", async () => {
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks: ["data: a\n\n", { error: "3040: busy" }] }]);
  const failing = new CompressionStream("gzip");
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  assert.equal((await rejection(result.pipeTo(failing.writable))).message, "3040: busy");
  assert.equal((await rejection(failing.readable.getReader().read())).message, "3040: busy");
  assert.throws(() => new CompressionStream("br"), TypeError);
  const plain = new CompressionStream("deflate");
  const writer = plain.writable.getWriter();
  await writer.write(bytes("hello "));
  await writer.write("world");
  await writer.close();
  assert.equal(inflateSync(Buffer.concat(await readAll(plain.readable))).toString(), "hello world");
});

test("a result piped into an IdentityTransformStream with preventClose leaves the writable for a last write", async () => {
  const chunks = ["data: 1\n\n", "data: 2\n\n"];
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const { readable, writable } = new IdentityTransformStream();
  const body = readAll(readable);
  await result.pipeTo(writable, { preventClose: true, preventAbort: true });
  assert.equal(writable.locked, false);
  const writer = writable.getWriter();
  await writer.write(bytes("event: done\n\n"));
  await writer.close();
  assert.equal(decodeAll(await body), chunks.join("") + "event: done\n\n");
});

test("pipeTo into an IdentityTransformStream from its own kind is refused, as in workerd", async () => {
  const a = new IdentityTransformStream();
  const b = new IdentityTransformStream();
  const err = await rejection(a.readable.pipeTo(b.writable));
  assert.ok(err instanceof TypeError);
  assert.match(err.message, /Inter-TransformStream ReadableStream.pipeTo\(\) is not implemented/);
  const c = new IdentityTransformStream();
  assert.throws(() => c.readable.pipeThrough(new IdentityTransformStream()), /Inter-TransformStream/);
  const [branch] = new IdentityTransformStream().readable.tee();
  assert.match((await rejection(branch.pipeTo(new IdentityTransformStream().writable))).message, /Inter-TransformStream/);
  // A binding result may be piped through one.
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks: ["data: z\n\n"] }]);
  const out = (await ai.run(LLAMA, { ...user("x"), stream: true })).pipeThrough(new IdentityTransformStream());
  assert.equal(decodeAll(await readAll(out)), "data: z\n\n");
});

test("native pipe, signal aborted while it waits for the upstream: rejects, errors the source despite preventCancel, the destination stays usable", async () => {
  const { ai, log } = emulatedAi([stallRule("x", "data: first\n\n")]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader();
  const controller = new AbortController();
  const piping = result.pipeTo(writable, { signal: controller.signal, preventAbort: true, preventCancel: true });
  assert.equal(text((await reader.read()).value), "data: first\n\n");
  const reason = new Error("stop relaying");
  controller.abort(reason);
  assert.equal(await rejection(piping), reason);
  assert.equal(result.locked, false);
  assert.equal(await rejection(result.getReader().read()), reason); // errored, not usable
  assert.equal(log[0].aborted, true); // the upstream was dropped
  const writer = writable.getWriter(); // the destination was not aborted
  const [, r] = await Promise.all([writer.write(bytes("closing event")), reader.read()]);
  assert.equal(text(r.value), "closing event");
});

test("native pipe, signal aborted while a write waits for the reader: the chunk is lost and the destination broken", async () => {
  const { ai } = emulatedAi([stallRule("x", "data: first\n\n")]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader({ mode: "byob" });
  const controller = new AbortController();
  const piping = result.pipeTo(writable, { signal: controller.signal, preventAbort: true, preventCancel: true });
  // One byte read: the rest of the pipe's write is still waiting for a reader.
  const one = await reader.read(new Uint8Array(1));
  assert.equal(text(one.value), "d");
  controller.abort(new Error("stop"));
  await rejection(piping);
  const err = await rejection(reader.read(new Uint8Array(64)));
  assert.equal(err.message, "Network connection lost.");
  const writeErr = await rejection(writable.getWriter().write(bytes("closing event")));
  assert.match(writeErr.message, /internal error/);
});

test("native pipe, signal aborted without preventAbort: the destination is aborted with the reason", async () => {
  const { ai } = emulatedAi([stallRule("x", "data: first\n\n")]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader();
  const controller = new AbortController();
  const piping = result.pipeTo(writable, { signal: controller.signal });
  await reader.read();
  const reason = new Error("stop");
  controller.abort(reason);
  assert.equal(await rejection(piping), reason);
  assert.equal(await rejection(reader.read()), reason);
});

test("native pipe: a cancelled destination rejects the pipe on its next write and drops the upstream", async () => {
  const { ai, log } = emulatedAi([stallRule("x", "data: 1\n\n", { delay_ms: 0 }, "data: 2\n\n")]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader();
  const piping = result.pipeTo(writable, { preventCancel: true });
  await reader.read();
  const gone = new Error("Network connection lost.");
  await reader.cancel(gone);
  assert.equal(await rejection(piping), gone);
  assert.equal(log[0].aborted, true);
});

test("JS pipe, signal aborted while a read is pending: settles when that read resolves and drops its chunk", async () => {
  const source = controlledSource();
  const sink = recordingSink();
  const controller = new AbortController();
  const piping = source.stream.pipeTo(sink.stream, {
    signal: controller.signal,
    preventAbort: true,
    preventCancel: true,
  });
  (await source.pulled()).give("chunk 1");
  assert.equal(await sink.written(), "chunk 1");
  const pull = await source.pulled(); // the pipe is waiting for its next chunk
  const reason = new Error("pause");
  controller.abort(reason);
  assert.equal(await state(piping), "pending"); // the signal is only checked between steps
  pull.give("chunk 2");
  assert.equal(await rejection(piping), reason);
  // Both ends are usable again, but chunk 2 was read by the pipe and dropped.
  assert.equal(source.stream.locked, false);
  assert.equal(sink.stream.locked, false);
  assert.equal(source.cancelled, null);
  assert.equal(sink.aborted, null);
  const reader = source.stream.getReader();
  const next = reader.read();
  (await source.pulled()).give("chunk 3");
  assert.equal((await next).value, "chunk 3");
  const writer = sink.stream.getWriter();
  await writer.write("after");
  assert.deepEqual(sink.chunks, ["chunk 1", "after"]);
});

test("JS pipe, signal aborted while a write is in flight: the write completes, nothing is lost", async () => {
  const source = controlledSource();
  const sink = recordingSink({ hold: true });
  const controller = new AbortController();
  const piping = source.stream.pipeTo(sink.stream, {
    signal: controller.signal,
    preventAbort: true,
    preventCancel: true,
  });
  (await source.pulled()).give("chunk 1");
  await sink.written();
  const reason = new Error("pause");
  controller.abort(reason);
  sink.held[0]();
  assert.equal(await rejection(piping), reason);
  assert.deepEqual(sink.chunks, ["chunk 1"]);
  const reader = source.stream.getReader();
  const next = reader.read();
  (await source.pulled()).give("chunk 2");
  assert.equal((await next).value, "chunk 2");
});

test("JS pipe, signal aborted without the prevent options: the source is cancelled and the destination aborted", async () => {
  const source = controlledSource();
  const sink = recordingSink();
  const controller = new AbortController();
  const piping = source.stream.pipeTo(sink.stream, { signal: controller.signal });
  (await source.pulled()).give("chunk 1");
  await sink.written();
  const pull = await source.pulled();
  const reason = new Error("stop");
  controller.abort(reason);
  pull.give("chunk 2");
  assert.equal(await rejection(piping), reason);
  assert.equal(source.cancelled.reason, reason);
  assert.equal(sink.aborted.reason, reason);
});

test("an already aborted signal: into an IdentityTransformStream nothing is touched; into a JS stream both ends are shut", async () => {
  const reason = new Error("too late");
  const signal = AbortSignal.abort(reason);
  const { ai, log } = emulatedAi([stallRule("x", "data: a\n\n")]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const its = new IdentityTransformStream();
  assert.equal(await rejection(result.pipeTo(its.writable, { signal })), reason);
  assert.equal(result.locked || its.writable.locked, false);
  assert.equal(log.length, 0);
  await result.cancel();

  const source = controlledSource();
  const sink = recordingSink();
  assert.equal(await rejection(source.stream.pipeTo(sink.stream, { signal })), reason);
  assert.equal(source.cancelled.reason, reason);
  assert.equal(sink.aborted.reason, reason);
});

test("a manual read/write relay stops between chunks without losing any", async () => {
  // The portable way to hand a stream over part-way: workerd's pipeTo cannot.
  const source = controlledSource();
  const { readable, writable } = new IdentityTransformStream();
  const body = readable.getReader();
  const reader = source.stream.getReader();
  const writer = writable.getWriter();
  let stop = false;
  const relay = (async () => {
    while (!stop) {
      const { done, value } = await reader.read();
      if (done) break;
      await writer.write(value);
    }
    reader.releaseLock();
  })();
  const first = body.read();
  (await source.pulled()).give(bytes("one"));
  assert.equal(text((await first).value), "one");
  const pull = await source.pulled();
  stop = true;
  pull.give(bytes("two")); // read by the relay before it sees `stop`: still written
  assert.equal(text((await body.read()).value), "two");
  await relay;
  const again = source.stream.getReader();
  const next = again.read();
  (await source.pulled()).give(bytes("three"));
  assert.equal(text((await next).value), "three");
});

test("streams workerd treats like Node's keep Node's standard pipe", async () => {
  const source = new ReadableStream({
    start(c) {
      c.enqueue("a");
      c.enqueue("b");
      c.close();
    },
  });
  const sink = recordingSink();
  await source.pipeTo(sink.stream);
  assert.deepEqual(sink.chunks, ["a", "b"]);
  assert.equal(sink.closed, true);
  const out = new ReadableStream({
    start(c) {
      c.enqueue("x");
      c.close();
    },
  }).pipeThrough(new TransformStream());
  assert.deepEqual(await readAll(out), ["x"]);
});

// ---------------------------------------------------------------------------
// edgechat's relay: a result read a little, tee'd, one branch piped into the
// response's IdentityTransformStream, the other watched with BYOB reads

test("relay: bytes left over from an earlier read reach both branches; the pipe settles when the source ends", async () => {
  const chunks = ["data: first\n\n", "data: 22\n\n", "data: 333\n\n", "data: [DONE]\n\n"];
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const head = result.getReader({ mode: "byob" });
  const part = await head.read(new Uint8Array(6)); // "data: ", the rest of the chunk stays queued
  assert.equal(text(part.value), "data: ");
  head.releaseLock();
  const [copy, watched] = result.tee();
  const { readable, writable } = new IdentityTransformStream();
  const body = readAll(readable);
  const piping = copy.pipeTo(writable, { preventClose: true, preventAbort: true });
  const watcher = watched.getReader({ mode: "byob" });
  const first = await watcher.read(new Uint8Array(256));
  assert.equal(text(first.value), "first\n\n");
  await piping;
  assert.equal(writable.locked, false);
  assert.equal(copy.locked, false);
  assert.equal((await copy.getReader().read()).done, true); // the piped branch is closed
  const rest = await watcher.read(new Uint8Array(256));
  assert.equal(text(rest.value), chunks.slice(1).join("")); // coalesced
  assert.equal((await watcher.read(new Uint8Array(8))).done, true);
  const writer = writable.getWriter();
  await writer.write(bytes("event: done\n\n"));
  await writer.close();
  assert.equal(decodeAll(await body), chunks.join("").slice(6) + "event: done\n\n");
});

test("relay: writes queued before the pipe go first; a chunk larger than a read is served over several", async () => {
  const big = "x".repeat(10000);
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks: [big] }]);
  const result = await ai.run(LLAMA, { ...user("x"), stream: true });
  const { readable, writable } = new IdentityTransformStream();
  const early = writable.getWriter();
  const meta = early.write(bytes("event: meta\n\n"));
  early.releaseLock();
  const piping = result.pipeTo(writable, { preventClose: true });
  const reader = readable.getReader();
  assert.equal(text((await reader.read()).value), "event: meta\n\n");
  await meta;
  const sizes = [];
  for (let n = 0; n < big.length; ) {
    const { value } = await reader.read();
    sizes.push(value.length);
    n += value.length;
  }
  assert.deepEqual(sizes, [4096, 4096, 1808]);
  await piping;
});

test("relay: a slow branch keeps thousands of chunks, in order, while the other is piped", async () => {
  const chunks = Array.from({ length: 3000 }, (_, i) => `data: ${i}\n\n`);
  const { ai } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const [copy, watched] = (await ai.run(LLAMA, { ...user("x"), stream: true })).tee();
  const { readable, writable } = new IdentityTransformStream();
  const body = readAll(readable);
  await copy.pipeTo(writable);
  assert.equal(decodeAll(await body), chunks.join(""));
  const reader = watched.getReader({ mode: "byob" });
  const parts = [];
  let buffer = new ArrayBuffer(1000);
  for (;;) {
    const { done, value } = await reader.read(new Uint8Array(buffer));
    if (done) break;
    parts.push(value.slice());
    buffer = value.buffer;
  }
  assert.equal(decodeAll(parts), chunks.join(""));
});

test("relay: the client cancelling the body rejects the pipe at its next write; the watched branch keeps flowing", async () => {
  const chunks = ["data: 1\n\n", "data: 2\n\n", "data: 3\n\n"];
  const { ai, log } = emulatedAi([{ match: { contains: "x" }, chunks }]);
  const [copy, watched] = (await ai.run(LLAMA, { ...user("x"), stream: true })).tee();
  const { readable, writable } = new IdentityTransformStream();
  const reader = readable.getReader();
  const piping = copy.pipeTo(writable, { preventClose: true, preventAbort: true, preventCancel: true });
  assert.equal(text((await reader.read()).value), "data: 1\n\n");
  const gone = new Error("Network connection lost.");
  await reader.cancel(gone);
  assert.equal(await rejection(piping), gone);
  assert.equal(await rejection(copy.getReader().read()), gone); // the branch was errored
  const all = await readAll(watched);
  assert.equal(decodeAll(all), chunks.join(""));
  assert.equal(log[0].aborted, false);
});

test("fetch() response bodies are native byte streams, read whole across chunks by a tee branch", async () => {
  const { createServer } = await import("node:http");
  const server = createServer((req, res) => {
    res.writeHead(201, { "content-type": "text/event-stream" });
    res.write("data: a\n\n");
    res.end("data: b\n\n");
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const response = await fetch(`http://127.0.0.1:${server.address().port}/`, { method: "POST", body: "x" });
    assert.equal(response.status, 201);
    assert.equal(response.headers.get("content-type"), "text/event-stream");
    assert.ok(isNativeStream(response.body));
    const [drained, watched] = response.body.tee();
    await drained.pipeTo(new WritableStream());
    const reader = watched.getReader({ mode: "byob" });
    const { value } = await reader.read(new Uint8Array(64));
    assert.equal(new TextDecoder().decode(value), "data: a\n\ndata: b\n\n");
  } finally {
    server.close();
  }
});

/** A loopback origin whose `/moved` answers `status` with a Location, and the server it points to. */
async function redirectingOrigins(status) {
  const { createServer } = await import("node:http");
  const calls = [];
  const listen = (server) => new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
  const target = await listen(
    createServer((req, res) => {
      calls.push({ at: "target", method: req.method, authorization: req.headers.authorization ?? null });
      res.end("followed");
    }),
  );
  const origin = await listen(
    createServer((req, res) => {
      calls.push({ at: "origin", method: req.method, authorization: req.headers.authorization ?? null });
      res.writeHead(status, { location: `http://127.0.0.1:${target.address().port}/landing` });
      res.end("moved");
    }),
  );
  return {
    url: `http://127.0.0.1:${origin.address().port}/moved`,
    calls,
    close: () => {
      for (const server of [origin, target]) {
        server.close();
        server.closeAllConnections();
      }
    },
  };
}

for (const status of [302, 307]) {
  test(`fetch() with redirect "manual" returns the ${status} itself and never calls its Location`, async () => {
    const origins = await redirectingOrigins(status);
    try {
      const init = { method: "POST", body: "{}", headers: { authorization: "Bearer k" }, redirect: "manual" };
      const response = await fetch(origins.url, init);
      assert.equal(response.status, status);
      assert.match(response.headers.get("location"), /\/landing$/);
      assert.ok(isNativeStream(response.body));
      assert.equal(await response.text(), "moved");
      assert.deepEqual(origins.calls, [{ at: "origin", method: "POST", authorization: "Bearer k" }]);
    } finally {
      origins.close();
    }
  });
}

test('fetch() follows a redirect by default, as workerd does ("follow")', async () => {
  const origins = await redirectingOrigins(307);
  try {
    const response = await fetch(origins.url, { method: "POST", body: "{}" });
    assert.equal(response.status, 200);
    assert.equal(await response.text(), "followed");
    assert.deepEqual(
      origins.calls.map((call) => call.at),
      ["origin", "target"],
    );
  } finally {
    origins.close();
  }
});

test('fetch() refuses redirect "error" before any request, with workerd\'s TypeError', async () => {
  const origins = await redirectingOrigins(307);
  try {
    for (const call of [
      () => fetch(origins.url, { method: "POST", body: "{}", redirect: "error" }),
      () => fetch(new Request(origins.url, { redirect: "error" })),
    ]) {
      const err = await rejection(call());
      assert.ok(err instanceof TypeError);
      assert.match(err.message, /^Invalid redirect value, must be one of "follow" or "manual"/);
    }
    assert.deepEqual(origins.calls, []);
  } finally {
    origins.close();
  }
});
