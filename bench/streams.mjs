// What the runner's model of workerd's native streams (tools/runner/streams.mjs)
// costs in JavaScript per chunk, measured side by side in one process:
//
//   source  the upstream alone: a JS ReadableStream of 150-byte chunks (about
//           one token's SSE event, copied per chunk as the Workers AI emulator
//           does), drained by its own reader: the cost of the pacing and of
//           making the chunks, common to the two below.
//   (a)     the binding's native stream (`systemStream`, as bindings.mjs makes
//           it) drained by a default reader, as tools/runner/main.mjs
//           `sendResponse` drains the JS pass-through Worker's body
//           (bench/passthrough-js).
//   (b)     edgechat's relay (src/edgechat/platform.py): the native stream ->
//           tee() -> branch A pipeTo(IdentityTransformStream.writable,
//           {preventClose, preventAbort}); branch B read with a 64 KiB BYOB
//           reader once per --watch-ms; the ITS readable drained by a default
//           reader; once the pipe settles, B is read to its end and a closing
//           event is written and the writable closed.
//
// At the edge (b)'s tee, pipe and IdentityTransformStream are C++ with no JS
// per chunk, so what (b) costs over (a) here is the runner's own overhead,
// which bench/chat.mjs counts against the Python Worker.
//
// Three kinds of arrival: paced (one chunk per setTimeout(--delay-ms): one
// chunk per macrotask, the process idle in between, as with a model
// streaming tokens), one chunk per macrotask with no idle (setImmediate), and
// zero delay (every pull answered at once). CPU is process.cpuUsage(), user +
// system, per chunk; each figure is the median of --rounds rounds, and the
// difference is the median of the rounds' own differences.
//
//   node bench/streams.mjs [--chunks N] [--immediate-chunks N] [--zero-chunks N]
//                          [--streams N] [--delay-ms N] [--watch-ms N]
//                          [--rounds N] [--module PATH] [--verbose]
//
// --streams runs that many streams at once (default 1); --module loads
// another copy of streams.mjs (to compare two versions); --verbose prints
// every round.

import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

const { values } = parseArgs({
  options: {
    chunks: { type: "string", default: "250" },
    "immediate-chunks": { type: "string", default: "5000" },
    "zero-chunks": { type: "string", default: "5000" },
    streams: { type: "string", default: "1" },
    "delay-ms": { type: "string", default: "5" },
    "watch-ms": { type: "string", default: "1000" },
    rounds: { type: "string", default: "15" },
    verbose: { type: "boolean", default: false },
    module: { type: "string", default: new URL("../tools/runner/streams.mjs", import.meta.url).pathname },
  },
});
const CHUNKS = Number(values.chunks);
const IMMEDIATE_CHUNKS = Number(values["immediate-chunks"]);
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

const immediate = () => new Promise((r) => setImmediate(r));

/**
 * The upstream: `chunks` chunks of CHUNK_BYTES, each after a setTimeout of
 * DELAY_MS ("timer"), after a setImmediate ("immediate"), or at once ("zero").
 */
function upstream(chunks, pace) {
  let sent = 0;
  return new ReadableStream(
    {
      async pull(c) {
        if (sent === chunks) {
          c.close();
          return;
        }
        if (pace === "timer") await sleep(DELAY_MS);
        else if (pace === "immediate") await immediate();
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
  source: (chunks, pace) => drain(upstream(chunks, pace)),
  direct: (chunks, pace) => drain(systemStream(upstream(chunks, pace))),
  async relay(chunks, pace) {
    const stream = systemStream(upstream(chunks, pace));
    const its = new IdentityTransformStream();
    const body = drain(its.readable);
    const [copy, watched] = stream.tee();
    const piping = copy.pipeTo(its.writable, { preventClose: true, preventAbort: true });
    let finished = false;
    const settled = piping.then(
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
      let timer;
      await Promise.race([new Promise((r) => (timer = setTimeout(r, WATCH_MS))), settled]);
      clearTimeout(timer);
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
async function run(name, chunks, pace) {
  gc();
  await sleep(20);
  const before = process.cpuUsage();
  const results = await Promise.all(Array.from({ length: STREAMS }, () => scenarios[name](chunks, pace)));
  const used = process.cpuUsage(before);
  for (const bytes of results) {
    if (bytes !== chunks * CHUNK_BYTES) throw new Error(`${name}: ${bytes} bytes, expected ${chunks * CHUNK_BYTES}`);
  }
  return (used.user + used.system) / (chunks * STREAMS);
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// Rounds run the three in turn (the order rotating), so that drifts in the
// machine's speed (CPU frequency, a VM's steal) hit them alike; what is
// reported is each one's median, and the median of the rounds' differences.
async function measure(label, chunks, pace) {
  const names = Object.keys(scenarios);
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  const diffs = [];
  await run("relay", Math.min(chunks, 200), "zero"); // warm up the JIT
  await run("direct", Math.min(chunks, 200), "zero");
  for (let round = 0; round < ROUNDS; round += 1) {
    const order = names.map((_, i) => names[(i + round) % names.length]);
    const got = {};
    for (const name of order) got[name] = await run(name, chunks, pace);
    for (const name of names) samples[name].push(got[name]);
    diffs.push(got.relay - got.direct);
  }
  const m = Object.fromEntries(names.map((n) => [n, median(samples[n])]));
  const direct = m.direct - m.source;
  const relay = m.relay - m.source;
  const diff = median(diffs);
  const f = (x) => x.toFixed(1).padStart(7);
  console.log(`\n${label}: ${STREAMS} stream(s) x ${chunks} chunks of ${CHUNK_BYTES} B, median of ${ROUNDS} rounds`);
  console.log(`  CPU µs per chunk      total   over the source alone`);
  console.log(`  source alone        ${f(m.source)}`);
  console.log(`  (a) direct          ${f(m.direct)}   ${f(direct)}`);
  console.log(`  (b) relay           ${f(m.relay)}   ${f(relay)}`);
  console.log(
    `  ratio (b) / (a)     ${(m.relay / m.direct).toFixed(2).padStart(7)}   ${(relay / direct).toFixed(2).padStart(7)}`,
  );
  console.log(
    `  difference (b) - (a)  ${f(diff)} µs per chunk (median of the rounds; range ${Math.min(...diffs).toFixed(1)} to ${Math.max(...diffs).toFixed(1)})`,
  );
  if (values.verbose) {
    for (const n of names) console.log(`  ${n.padEnd(8)} ${samples[n].map((x) => x.toFixed(1)).join(" ")}`);
    console.log(`  (b)-(a)  ${diffs.map((x) => x.toFixed(1)).join(" ")}`);
  }
  return { ...m, diff };
}

console.log(`streams module: ${values.module}`);
const runs = [
  ["paced", `paced: one chunk per setTimeout(${DELAY_MS} ms), watched every ${WATCH_MS} ms`, CHUNKS, "timer"],
  ["per macrotask", "one chunk per macrotask (setImmediate), never idle", IMMEDIATE_CHUNKS, "immediate"],
  ["at zero delay", "zero delay (every pull answered at once)", ZERO_CHUNKS, "zero"],
];
const summary = [];
for (const [short, label, chunks, pace] of runs) {
  if (chunks > 0) summary.push(`${(await measure(label, chunks, pace)).diff.toFixed(1)} ${short}`);
}
console.log(`\n(b) - (a), µs per chunk: ${summary.join(", ")}`);
