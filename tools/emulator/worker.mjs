// edgechat's Workers AI emulator hosted in a small JS Worker, so the Python
// Worker can run under `wrangler dev` with `AI` bound to it (a service binding
// to the `EmulatedAi` entrypoint, called over RPC).
//
// workerd has no filesystem. Under `npm start` (tools/workerd/dev.mjs) the
// script and the log are the files named by EDGECHAT_AI_SCRIPT and
// EDGECHAT_AI_LOG, which the launcher's control server reads and appends for
// this Worker (EDGECHAT_AI_CONTROL_URL; EDGECHAT_AI_SCRIPTED and
// EDGECHAT_AI_LOGGED say which are in use). Run alone (`wrangler dev -c
// tools/emulator/wrangler.toml`), they live in this isolate's memory and are
// driven over HTTP control routes:
//   PUT    /__emulator/script   JSON body sets the script; empty body clears it
//   GET    /__emulator/script   the current script (null when none)
//   GET    /__emulator/log      one JSON line per finished call
//   DELETE /__emulator/log      clears the log
//   POST   /__emulator/run      {model, inputs, options?, abort_after_ms?} -> the
//                               result (SSE or JSON); errors -> 502 {"error"}
//   POST   /__emulator/rpc-run  same, but through the SELF service binding (RPC)
//   GET    /__emulator/vectors/log   the Vectorize log, one JSON line per record
//   DELETE /__emulator/vectors/log   clears it
//
// `EmulatedVectorize` is a Vectorize index (vectorize.mjs) for bindings such
// as VECTORS: one store in this isolate's memory, shared by every request,
// for as long as the emulator runs. Under `npm start` its log goes to the
// file EDGECHAT_VECTORS_LOG through the launcher (EDGECHAT_VECTORS_LOGGED);
// EDGECHAT_VECTORS_LAG_MS is how long a mutation takes to show in queries.
import { WorkerEntrypoint } from "cloudflare:workers";
import { Ai } from "./ai.mjs";
import { Vectorize } from "./vectorize.mjs";

const DEFAULT_DELAY_MS = 20;
const MAX_LOG_LINES = 1000;

const state = {
  script: null,
  log: [],
  delayMs: DEFAULT_DELAY_MS,
  control: null,
  scripted: false,
  logged: false,
  vectorsLogged: false,
};

async function controlFetch(path, init) {
  const response = await fetch(`${state.control}${path}`, init);
  const text = await response.text();
  if (!response.ok) throw new Error(`edgechat emulator: the launcher's ${path} answered ${response.status}: ${text}`);
  return text;
}

const ai = new Ai({
  async readScript() {
    if (!state.scripted) return state.script;
    const text = await controlFetch("/ai/script");
    if (text.trim() === "") return null;
    try {
      return JSON.parse(text);
    } catch (err) {
      throw new Error(`edgechat emulator: EDGECHAT_AI_SCRIPT is not valid JSON: ${err.message}`);
    }
  },
  appendLog(record) {
    if (state.logged) return controlFetch("/ai/log", { method: "POST", body: JSON.stringify(record) });
    state.log.push(record);
    if (state.log.length > MAX_LOG_LINES) state.log.splice(0, state.log.length - MAX_LOG_LINES);
  },
  delayMs: () => state.delayMs,
});

// EDGECHAT_AI_DELAY_MS comes from [vars] (or `wrangler dev --var`); the
// launcher's settings likewise.
function configure(env) {
  const raw = env?.EDGECHAT_AI_DELAY_MS;
  const n = raw === undefined || raw === null || String(raw).trim() === "" ? DEFAULT_DELAY_MS : Number(raw);
  state.delayMs = Number.isFinite(n) && n >= 0 ? n : DEFAULT_DELAY_MS;
  state.control = env?.EDGECHAT_AI_CONTROL_URL || null;
  state.scripted = Boolean(state.control && env?.EDGECHAT_AI_SCRIPTED);
  state.logged = Boolean(state.control && env?.EDGECHAT_AI_LOGGED);
  state.vectorsLogged = Boolean(state.control && env?.EDGECHAT_VECTORS_LOGGED);
}

/**
 * The wall clock's offset in local runs (`npm start -- --clock-hook`): bound
 * to the Worker as DEV_CLOCK, it answers how far the launcher's control
 * server has moved the clock. workerd has no way to move a Worker's clock.
 */
export class DevClock extends WorkerEntrypoint {
  async offsetMs() {
    configure(this.env);
    if (!state.control) return 0;
    return JSON.parse(await controlFetch("/clock")).offset_ms;
  }
}

export class EmulatedAi extends WorkerEntrypoint {
  /**
   * The binding's contract. `options.signal` crosses RPC only when the caller
   * has the `enable_abortsignal_rpc` compatibility flag; cancelling the
   * returned stream always works.
   */
  async run(model, inputs, options = {}) {
    configure(this.env);
    const waitUntil = (promise) => this.ctx.waitUntil(promise);
    return ai.run(model, inputs, { ...(options ?? {}), waitUntil });
  }

  /** `env.AI.toMarkdown`: the emulator's converters (documents.mjs). */
  async toMarkdown(files) {
    configure(this.env);
    return ai.toMarkdown(files);
  }
}

// --- Vectorize ------------------------------------------------------------------

// The index `wrangler vectorize create` makes for edgechat (wrangler.toml):
// bge-m3's 1024 dimensions, cosine, and the metadata indexes the features
// filter on.
const VECTORS_INDEX = Object.freeze({
  dimensions: 1024,
  indexed: { kind: "string", owner: "string", base: "string", scope: "string" },
});
// A mutation shows in queries this long after the call (the real index takes
// "a few seconds"): long enough that code which queries right after its own
// upsert fails here as it would on the edge, short enough for tests, which
// wait for the mutation's "applied" record in the log, never for a time.
const DEFAULT_VECTORS_LAG_MS = 100;

const vectorsState = { index: null, records: [], log: [] };

function vectorIndex(env) {
  if (vectorsState.index === null) {
    const raw = env?.EDGECHAT_VECTORS_LAG_MS;
    const lag = raw === undefined || raw === null || String(raw).trim() === "" ? DEFAULT_VECTORS_LAG_MS : Number(raw);
    vectorsState.index = new Vectorize({
      ...VECTORS_INDEX,
      lagMs: Number.isFinite(lag) && lag >= 0 ? lag : DEFAULT_VECTORS_LAG_MS,
      // Kept until the call that made them (or the wait for a mutation) posts
      // them from its own request: workerd allows I/O only on behalf of the
      // request in progress.
      log: (record) => vectorsState.records.push(record),
    });
  }
  return vectorsState.index;
}

async function postVectorRecords() {
  const records = vectorsState.records.splice(0);
  if (records.length === 0) return;
  if (state.control && state.vectorsLogged) {
    await controlFetch("/vectors/log", { method: "POST", body: records.map((r) => JSON.stringify(r)).join("\n") });
    return;
  }
  vectorsState.log.push(...records);
  if (vectorsState.log.length > MAX_LOG_LINES) vectorsState.log.splice(0, vectorsState.log.length - MAX_LOG_LINES);
}

/**
 * A Vectorize index binding's methods, over RPC
 * (https://developers.cloudflare.com/vectorize/reference/client-api/). Each
 * call is logged before it returns; a mutation's "applied" record is logged
 * once it shows in queries (the request keeps running for it: waitUntil).
 */
export class EmulatedVectorize extends WorkerEntrypoint {
  async #call(work) {
    configure(this.env);
    const index = vectorIndex(this.env);
    try {
      const result = work(index);
      if (result?.mutationId) {
        this.ctx.waitUntil(index.applied(result.mutationId).then(postVectorRecords));
      }
      return result;
    } finally {
      await postVectorRecords();
    }
  }

  async upsert(vectors) {
    return this.#call((index) => index.upsert(vectors));
  }

  async insert(vectors) {
    return this.#call((index) => index.insert(vectors));
  }

  async query(vector, options) {
    return this.#call((index) => index.query(vector, options));
  }

  async getByIds(ids) {
    return this.#call((index) => index.getByIds(ids));
  }

  async deleteByIds(ids) {
    return this.#call((index) => index.deleteByIds(ids));
  }

  async describe() {
    return this.#call((index) => index.describe());
  }
}

function json(value, status = 200) {
  return new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });
}

function asResponse(result) {
  if (result instanceof ReadableStream) {
    return new Response(result, { headers: { "content-type": "text/event-stream", "cache-control": "no-store" } });
  }
  return json(result);
}

// The signal handed to run(): the client going away, or `abort_after_ms`
// from the body (under `wrangler dev` a client disconnect does not reach the
// worker, so this is the way to exercise aborts there).
function callSignal(request, abortAfterMs) {
  if (typeof abortAfterMs !== "number" || !(abortAfterMs >= 0)) return request.signal;
  const timeout = AbortSignal.timeout(abortAfterMs);
  return request.signal ? AbortSignal.any([request.signal, timeout]) : timeout;
}

async function runRoute(request, call) {
  let body;
  try {
    body = await request.json();
  } catch {
    return json({ error: "body must be JSON {model, inputs, options?, abort_after_ms?}" }, 400);
  }
  if (body === null || typeof body !== "object") {
    return json({ error: "body must be JSON {model, inputs, options?, abort_after_ms?}" }, 400);
  }
  const options = { ...(body.options ?? {}), signal: callSignal(request, body.abort_after_ms) };
  try {
    return asResponse(await call(body.model, body.inputs, options));
  } catch (err) {
    return json({ error: String(err?.message ?? err) }, 502);
  }
}

export default {
  async fetch(request, env) {
    configure(env);
    const { pathname } = new URL(request.url);
    const route = `${request.method} ${pathname}`;
    switch (route) {
      case "PUT /__emulator/script": {
        const text = await request.text();
        if (text.trim() === "") {
          state.script = null;
          return json({ ok: true, script: null });
        }
        let script;
        try {
          script = JSON.parse(text);
        } catch (err) {
          return json({ error: `script is not valid JSON: ${err.message}` }, 400);
        }
        if (script === null || typeof script !== "object" || !Array.isArray(script.rules)) {
          return json({ error: 'script must look like {"rules": [...]}' }, 400);
        }
        state.script = script;
        return json({ ok: true, rules: script.rules.length });
      }
      case "GET /__emulator/script":
        return json(state.script);
      case "GET /__emulator/log":
        return new Response(state.log.map((r) => `${JSON.stringify(r)}\n`).join(""), {
          headers: { "content-type": "application/x-ndjson" },
        });
      case "DELETE /__emulator/log":
        state.log.length = 0;
        return json({ ok: true });
      case "GET /__emulator/vectors/log":
        return new Response(vectorsState.log.map((r) => `${JSON.stringify(r)}\n`).join(""), {
          headers: { "content-type": "application/x-ndjson" },
        });
      case "DELETE /__emulator/vectors/log":
        vectorsState.log.length = 0;
        return json({ ok: true });
      case "POST /__emulator/run":
        return runRoute(request, (model, inputs, options) => ai.run(model, inputs, options));
      case "POST /__emulator/rpc-run":
        if (!env.SELF) return json({ error: "no SELF service binding configured" }, 501);
        return runRoute(request, (model, inputs, options) => env.SELF.run(model, inputs, options));
      default:
        return new Response(
          "edgechat Workers AI emulator. Bind AI to the EmulatedAi entrypoint of this worker; " +
            "control routes live under /__emulator/.\n",
          { status: pathname === "/" ? 200 : 404, headers: { "content-type": "text/plain; charset=utf-8" } },
        );
    }
  },
};
