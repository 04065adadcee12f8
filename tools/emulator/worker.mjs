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
import { WorkerEntrypoint } from "cloudflare:workers";
import { Ai } from "./ai.mjs";

const DEFAULT_DELAY_MS = 20;
const MAX_LOG_LINES = 1000;

const state = { script: null, log: [], delayMs: DEFAULT_DELAY_MS, control: null, scripted: false, logged: false };

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
