// A burst of streams with faults, for bench/chat.mjs's memory rows: many
// clients at once through /chat and /v1/chat/completions (streamed and
// whole), the Workers AI emulator scripted to fail in the ways a model does
// (capacity before the first byte, an error mid-stream, a stall mid-stream
// that only the idle deadline ends, a slow start, a pause), and a share of
// the clients vanishing, half before the answer starts and half mid-stream.
// (No model silent before its first token: that holds a request for the
// whole first-token deadline, 60 s by default, which would make the burst
// that long; the mid-stream stall covers a deadline ending an answer.)
// The mix is drawn from a seeded generator, so every run asks the same.
import { request } from "node:http";

const GLM = "@cf/zai-org/glm-4.7-flash";

function words(count) {
  return Array.from({ length: count }, (_, i) => ` w${i}`).join("");
}

function chunk(text) {
  const event = { id: "burst", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: text } }] };
  return `data: ${JSON.stringify(event)}\n\n`;
}

// The emulator's script (tools/emulator/README.md, "Scripts"): one rule per
// kind of answer, matched by a word of the question.
export const FAULT_RULES = [
  { match: { contains: "burst-ok" }, reply: { content: words(300) } },
  { match: { model: GLM, contains: "burst-busy" }, error: "3040: Capacity temporarily exceeded" },
  {
    match: { contains: "burst-cut" },
    chunks: [chunk("a"), { delay_ms: 200 }, chunk(" b"), { delay_ms: 200 }, { error: "3040: Capacity lost" }],
  },
  { match: { contains: "burst-stall" }, chunks: [chunk("a"), { delay_ms: 100 }, chunk(" b"), { stall: true }] },
  { match: { contains: "burst-slow" }, delay_ms: 1500, reply: { content: words(50) } },
  {
    match: { contains: "burst-pause" },
    chunks: [chunk("a"), { delay_ms: 2000 }, chunk(" b"), 'data: {"response":"","usage":{}}\n\n', "data: [DONE]\n\n"],
  },
];

// How often each kind is asked: healthy answers are the most common.
export const KINDS = ["ok", "ok", "ok", "ok", "busy", "cut", "stall", "slow", "pause"];

/** A deterministic generator in [0, 1) (a linear congruential one). */
function seeded(seed) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
}

let nextAddress = 0;
// Each client from its own loopback address (the rate limiter, where bound,
// is keyed by client IP).
function localAddress() {
  nextAddress += 1;
  return `127.3.${Math.floor(nextAddress / 250) % 250}.${(nextAddress % 250) + 2}`;
}

/** One client: resolves with how it ended ("200", "503", …, or "vanished"). */
function client(baseUrl, { token, kind, v1, stream, vanish }) {
  const content = `burst-${kind} please`;
  const body = JSON.stringify(
    v1 ? { model: "glm", messages: [{ role: "user", content }], stream } : { messages: [{ role: "user", content }] },
  );
  return new Promise((resolve) => {
    let vanished = false;
    const leave = () => {
      vanished = true;
      req.destroy();
    };
    const req = request(
      `${baseUrl}${v1 ? "/v1/chat/completions" : "/chat"}`,
      {
        method: "POST",
        localAddress: localAddress(),
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          "content-length": Buffer.byteLength(body),
        },
      },
      (res) => {
        if (vanish?.when === "mid") res.once("data", () => setTimeout(leave, vanish.afterMs));
        res.on("data", () => {});
        res.on("end", () => resolve(String(res.statusCode)));
        res.on("close", () => resolve(vanished ? "vanished" : String(res.statusCode)));
      },
    );
    req.on("error", () => resolve(vanished ? "vanished" : "error"));
    req.end(body);
    // Early: gone while the Worker reads the question or calls the model.
    if (vanish?.when === "early") setTimeout(leave, vanish.afterMs);
  });
}

/**
 * Sends `count` clients at once; `vanishing` of them leave part-way; `kinds`
 * is the mix of answers asked for (FAULT_RULES' words). Resolves with the
 * count of each ending ("200", "502", "vanished", …) and the seconds the
 * burst took.
 */
export async function faultBurst(baseUrl, { count, vanishing = 0.2, token, seed = 1, kinds = KINDS }) {
  const random = seeded(seed);
  const clients = Array.from({ length: count }, () => {
    const kind = kinds[Math.floor(random() * kinds.length)];
    const v1 = random() < 0.5;
    const stream = !v1 || random() < 0.8;
    // Early ones leave within 100 ms of asking, the others within 300 ms of
    // their first bytes.
    const leaving = random() < vanishing;
    const early = random() < 0.5;
    const afterMs = Math.floor(random() * (early ? 100 : 300));
    const vanish = leaving ? { when: early ? "early" : "mid", afterMs } : null;
    return { token, kind, v1, stream, vanish };
  });
  const started = performance.now();
  const endings = await Promise.all(clients.map((options) => client(baseUrl, options)));
  const counts = {};
  for (const ending of endings) counts[ending] = (counts[ending] ?? 0) + 1;
  return { counts, seconds: (performance.now() - started) / 1000 };
}
