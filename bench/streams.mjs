// What the runner's model of workerd's native streams (tools/runner/streams.mjs)
// costs in JavaScript per chunk, measured side by side in one process:
//
//   source  the upstream alone: a JS ReadableStream of ~150-byte chunks (as the
//           Workers AI emulator makes them), drained by its own reader. This is
//           the cost of the timers and of producing the chunks, common to both.
//   direct  the binding's native stream (`systemStream`) drained by a default
//           reader, as tools/runner/main.mjs `sendResponse` drains the JS
//           pass-through Worker's body (bench/passthrough-js).
//   relay   edgechat's path (src/edgechat/platform.py): native stream ->
//           tee() -> branch A pipeTo(IdentityTransformStream.writable,
//           {preventClose, preventAbort}); branch B read with a BYOB reader
//           (64 KiB) once per --watch-ms; the ITS readable drained by a default
//           reader; when the pipe settles, B is read to its end and a closing
//           event is written and the writable closed.
//
// In workerd the relay's tee, pipe and ITS are C++ with no JS per chunk, so
// what `relay` costs over `direct` is the runner's own overhead, counted
// against the Python Worker in bench/chat.mjs.
//
// Each is run at paced arrival (one chunk per setTimeout(--delay-ms), so one
// chunk per macrotask) and at zero delay (the source answers every pull at
// once), --streams at a time, --rounds times interleaved; the median round is
// reported. CPU is process.cpuUsage() (user + system) per chunk.
//
//   node bench/streams.mjs [--chunks N] [--streams N] [--delay-ms N]
//                          [--watch-ms N] [--rounds N] [--module PATH]
//
// --module loads another copy of streams.mjs (to compare before and after).
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    chunks: { type: "string", default: "1000" },
    streams: { type: "string", default: "8" },
    "delay-ms": { type: "string", default: "5" },
    "watch-ms": { type: "string", default: "1000" },
    rounds: { type: "string", default: "3" },
    "zero-chunks": { type: "string", default: "4000" },
    module: { type: "string", default: new URL("../tools/runner/streams.mjs", import.meta.url).pathname },
  },
});
const CHUNKS = Number(values.chunks);
const ZERO_CHUNKS = Number(values["zero-chunks"]);
const STREAMS = Number(values.streams);
const DELAY_MS = Number(values["delay-ms"]);
const WATCH_MS = Number(values["watch-ms"]);
const ROUNDS = Number(values.rounds);
const CHUNK_BYTES = 150;

const { systemStream } = await import(pathToFileURL(resolve(values.module)).href);

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const CHUNK = new Uint8Array(CHUNK_BYTES).fill(0x61);
const CLOSING = new TextEncoder().encode("event: done\ndata: {}\n\n");

/** The upstream: `chunks` chunks of CHUNK_BYTES, each after setTimeout(delay) (none at 0). */
function upstream(chunks, delay) {
  let sent = 0;
  return new ReadableStream(
    {
      async pull(c) {
        if (sent === chunks) {
          c.close();
          return;
        }
        if (delay > 0) await sleep(delay);
        sent += 1;
        c.enqueue(CHUNK.slice()); // the emulator copies each step's bytes too
      },
    },
    { highWaterMark: 0 },
  );
}

async function drain(stream) {
  const reader = stream.getReader();
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.byteLength;
  }
}

const scenarios = {
  source: (chunks, delay) => drain(upstream(chunks, delay)),
  direct: (chunks, delay) => drain(systemStream(upstream(chunks, delay))),
  async relay(chunks, delay) {
    const stream = systemStream(upstream(chunks, delay));
    const its = new IdentityTransformStream();
    const body = drain(its.readable);
    const [copy, watched] = stream.tee();
    const piping = copy.pipeTo(its.writable, { preventClose: true, preventAbort: true });
    let finished = false;
    piping.then(
      () => (finished = true),
      () => (finished = true),
    );
    const reader = watched.getReader({ mode: "byob" });
    let buffer = new ArrayBuffer(64 << 10);
    let seen = 0;
    const look = async () => {
      const r = await reader.read(new Uint8Array(buffer));
      if (r.done) return false;
      buffer = r.value.buffer;
      seen += r.value.byteLength;
      return true;
    };
    // Python looks once per watch interval while the pipe runs ...
    while (!finished) {
      await Promise.race([sleep(WATCH_MS), piping.catch(() => {})]);
      if (finished) break;
      if (!(await look())) break;
    }
    await piping;
    // ... then reads what is left and writes its closing event.
    while (await look());
    const writer = its.writable.getWriter();
    await writer.write(CLOSING);
    await writer.close();
    const bytes = await body;
    if (seen !== chunks * CHUNK_BYTES) throw new Error(`the watched branch saw ${seen} bytes`);
    return bytes - CLOSING.byteLength;
  },
};

/** CPU µs per chunk of one run of `name`: STREAMS streams at once. */
async function run(name, chunks, delay) {
  gc();
  await sleep(20);
  const before = process.cpuUsage();
  const results = await Promise.all(Array.from({ length: STREAMS }, () => scenarios[name](chunks, delay)));
  const used = process.cpuUsage(before);
  for (const bytes of results) {
    if (bytes !== chunks * CHUNK_BYTES) throw new Error(`${name}: ${bytes} bytes, expected ${chunks * CHUNK_BYTES}`);
  }
  return (used.user + used.system) / (chunks * STREAMS);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function measure(label, chunks, delay) {
  const names = Object.keys(scenarios);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  await run("relay", Math.min(chunks, 200), 0); // warm up the JIT
  await run("direct", Math.min(chunks, 200), 0);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const name of names) samples[name].push(await run(name, chunks, delay));
  }
  const m = Object.fromEntries(names.map((n) => [n, median(samples[n])]));
  const direct = m.direct - m.source;
  const relay = m.relay - m.source;
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`\n${label}: ${STREAMS} streams x ${chunks} chunks of ${CHUNK_BYTES} B, median of ${ROUNDS}`);
  console.log(`  CPU µs per chunk      total   over the source alone`);
  console.log(`  source alone        ${f(m.source)}`);
  console.log(`  direct (a)          ${f(m.direct)}   ${f(direct)}`);
  console.log(`  relay  (b)          ${f(m.relay)}   ${f(relay)}`);
  console.log(`  relay - direct                ${f(m.relay - m.direct)} µs per chunk`);
  console.log(
    `  relay / direct      ${(m.relay / m.direct).toFixed(2).padStart(7)}   ${(direct > 0 ? relay / direct : NaN).toFixed(2).padStart(7)}`,
  );
  return { ...m, diff: m.relay - m.direct };
}

console.log(`streams module: ${values.module}`);
const paced = await measure(`paced (setTimeout ${DELAY_MS} ms per chunk, watch every ${WATCH_MS} ms)`, CHUNKS, DELAY_MS);
const zero = await measure("zero delay", ZERO_CHUNKS, 0);
console.log(
  `\nrelay - direct: ${paced.diff.toFixed(1)} µs per chunk paced, ${zero.diff.toFixed(1)} µs per chunk at zero delay`,
);
