// Python's fixed cost per request, stage by stage: the Worker is loaded in
// this process exactly as the runner loads it (same Pyodide, same bindings,
// the emulator at zero delay), and each stage is called many times from
// JavaScript while process.cpuUsage() counts the CPU it takes. No HTTP: the
// figures are the Worker's own.
//
//   npm run bench:cost [-- --requests N]
//
// Stages, each including the ones before it:
//   1. the call into Pyodide: an async Python function returning a Response
//      made in JavaScript;
//   2. the SDK's wrappers: Default(ctx, env), workers.Request around the JS
//      request, a workers.Response converted back;
//   3. GET /healthz through edgechat (routing, headers, the request log line);
//   4. POST /chat with a 50-token answer, body read to the end;
//   and the choices on the path (settings, headers, inputs, the Response, the
//   output check's reading of a whole answer), each beside what it replaced;
//   and, beside them, the JS pass-through Worker's /chat over the same binding.
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { unstable_readConfig } from "wrangler";
import { createEnv } from "../tools/runner/bindings.mjs";
import { ExecutionContext } from "../tools/runner/context.mjs";
import { loadInProcess } from "./in_process.mjs";
import { configWithoutRateLimiter, median, ROOT } from "./lib.mjs";

const { values } = parseArgs({
  options: { requests: { type: "string", default: "400" }, rounds: { type: "string", default: "3" } },
});
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);
const MODEL = "@cf/zai-org/glm-4.7-flash";
const quiet = () => {};

// A Python module beside the Worker with stages 1 and 2, and the choices
// made on the path to the first byte, each beside what it replaced.
const PROBES = `
import js
from js import Object
from js import Response as JsResponse
from pyodide.ffi import to_js
from workers import Request, Response, WorkerEntrypoint

from edgechat.app import SettingsOnce
from edgechat.config import Settings
from edgechat.platform import WorkerPlatform
from edgechat.moderation import answer_text
from edgechat.upstream import DeltaKind, UpstreamReader


def js_object(values):
    return to_js(values, dict_converter=Object.fromEntries)



class Bare(WorkerEntrypoint):
    async def fetch(self, request):
        return Response("ok")


async def call_only(js_request, js_env, js_ctx, js_response):
    return js_response


async def sdk_wrappers(js_request, js_env, js_ctx):
    response = await Bare(js_ctx, js_env).fetch(Request(js_request))
    return response.js_object


class Relayed:
    """A relay as /chat runs one, over an upstream that never ends: each
    look() is what Python does once per watch interval while an answer
    streams (a rest that the timer ends, then a look that finds bytes)."""

    async def start(self, stream):
        from edgechat.platform import BindingUpstream, StreamSink

        self.sink = StreamSink()
        self.upstream = BindingUpstream(stream, js.AbortController.new(), None)
        await self.upstream.read(1.0)  # phase 1: the first bytes
        self.relay = await self.upstream.relay(self.sink)

    async def look(self):
        assert not await self.relay.rest(0.0)
        seen = await self.relay.observe(1.0)
        assert isinstance(seen, bytes), seen


HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
           "X-Content-Type-Options": "nosniff", "X-Request-Id": "0123456789abcdef"}
INPUTS = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
          "stream": True, "max_completion_tokens": 256}
ONCE = SettingsOnce()
# A whole 2,000-token GLM answer as the output check reads it.
_CHUNK = '{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" w%d"}}]}'
ANSWER = "".join("data: " + _CHUNK % i + "\\n\\n" for i in range(2000)).encode()


def text_by_reader():
    reader = UpstreamReader()
    deltas = reader.feed(ANSWER) + reader.finish()
    return "".join(text for kind, text in deltas if kind is DeltaKind.CONTENT)


def choices(js_request, js_env, js_ctx):
    env = Bare(js_ctx, js_env).env
    platform = WorkerPlatform(Request(js_request), env, js_ctx)
    binding = env.AI
    return {
        "settings from [vars] on every request": lambda: Settings.from_vars(platform.var),
        "settings once per isolate": lambda: ONCE.get(platform),
        "headers through the SDK's Request": lambda: dict(Request(js_request).headers.items()),
        "headers in one Object.fromEntries": lambda: Object.fromEntries(js_request.headers).to_py(),
        "AI inputs through the SDK's wrapper": lambda: binding._convert_args((INPUTS,), {}),
        "AI inputs by to_js at the seam": lambda: js_object(INPUTS),
        "workers.Response": lambda: Response("ok", status=200, headers=HEADERS).js_object,
        "a JS Response made at the seam": lambda: JsResponse.new("ok", js_object({"status": 200, "headers": js_object(HEADERS)})),
        "output check: 2,000-token text, per event": text_by_reader,
        "output check: the text in one regex pass": lambda: answer_text(ANSWER),
    }
`;

function chatRequest(content) {
  const body = JSON.stringify({ messages: [{ role: "user", content }], model: MODEL, max_tokens: 256 });
  return new Request("http://127.0.0.1/chat", {
    method: "POST",
    headers: { "content-type": "application/json", "cf-connecting-ip": "127.0.0.9" },
    body,
  });
}

async function drain(response) {
  const reader = response.body.getReader();
  let bytes = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return bytes;
    bytes += value.byteLength;
  }
}

// CPU microseconds per call of each stage: rounds go through the stages in
// turn, so a burst of noise from elsewhere on the machine hits all alike;
// the median round counts.
async function cpuPerCall(stages) {
  for (const [, once] of stages) for (let i = 0; i < 50; i += 1) await once(); // warm up
  const rounds = stages.map(() => []);
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [index, [, once]] of stages.entries()) {
      const before = process.cpuUsage();
      for (let i = 0; i < REQUESTS; i += 1) await once();
      const used = process.cpuUsage(before);
      rounds[index].push((used.user + used.system) / REQUESTS);
    }
  }
  return stages.map(([name], index) => [name, median(rounds[index])]);
}

async function main() {
  const configPath = configWithoutRateLimiter();
  const config = unstable_readConfig({ config: configPath });
  process.env.EDGECHAT_AI_DELAY_MS = "0";
  const script = join(ROOT, ".cache", "bench-cost-script.json");
  const words = Array.from({ length: 50 }, (_, i) => (i ? ` w${i}` : "w0")).join("");
  writeFileSync(script, JSON.stringify({ rules: [{ match: { contains: "short" }, reply: { content: words } }] }));
  process.env.EDGECHAT_AI_SCRIPT = script;

  const bindings = await createEnv({ config, configPath, log: quiet });
  const { env } = bindings;
  const worker = await loadInProcess(env, config);
  const { pyodide, pending } = worker;
  const probes = pyodide.runPython(`${PROBES}\n(call_only, sdk_wrappers, choices, Relayed)`);
  const [callOnly, sdkWrappers, makeChoices, Relayed] = probes.toJs({ depth: 1 });
  // A native stream that sends one event each time it is allowed to (one
  // per look: what Python sees is there, and nothing piles up), its response
  // body drained as a client would.
  const { systemStream } = await import("../tools/runner/streams.mjs");
  const event = new TextEncoder().encode('data: {"response":"w"}\n\n');
  let allowed = 1;
  let wake = () => {};
  const gated = systemStream(
    new ReadableStream({
      async pull(c) {
        while (allowed === 0) await new Promise((resolve) => (wake = resolve));
        allowed -= 1;
        c.enqueue(event.slice());
      },
    }),
  );
  const relayed = Relayed();
  await relayed.start(gated);
  const body = relayed.sink.readable.getReader();
  (async () => {
    for (;;) if ((await body.read()).done) return;
  })();
  const lookOnce = () => {
    allowed += 1;
    wake();
    return relayed.look();
  };
  const passthrough = (await import(join(ROOT, "bench/passthrough-js/worker.mjs"))).default;
  const jsResponse = new Response("ok");
  // The request log goes to stdout from Python; keep it out of the figures' way.
  pyodide.setStdout({ batched: quiet });

  const healthz = () => new Request("http://127.0.0.1/healthz", { headers: { "cf-connecting-ip": "127.0.0.9" } });
  const stages = [
    ["1. call into Pyodide", () => callOnly(healthz(), env, new ExecutionContext(pending), jsResponse)],
    [
      "2. + the SDK's Request/Response wrappers",
      async () => (await sdkWrappers(healthz(), env, new ExecutionContext(pending))).text(),
    ],
    ["3. GET /healthz through edgechat", async () => (await worker.fetch(healthz())).text()],
    ["4. POST /chat, 50-token answer", async () => drain(await worker.fetch(chatRequest("short please")))],
    [
      "   JS pass-through, same /chat",
      async () => drain(await passthrough.fetch(chatRequest("short please"), env, new ExecutionContext(pending))),
    ],
    ["5. one look at a relayed answer (per watch interval)", lookOnce],
    [
      "   the same chunk and timer without Python",
      async () => {
        allowed += 1;
        wake();
        await new Promise((resolve) => setTimeout(resolve, 0));
      },
    ],
  ];
  if (process.env.EDGECHAT_BENCH_PROFILE) {
    // Where stage 4's Python time goes, by function (cProfile inside Pyodide).
    pyodide.runPython("import cProfile\n_profile = cProfile.Profile()\n_profile.enable()");
    for (let i = 0; i < REQUESTS; i += 1) await stages[3][1]();
    pyodide.setStdout({ batched: (line) => console.log(line) });
    pyodide.runPython(
      "_profile.disable()\nimport pstats\ns = pstats.Stats(_profile); s.sort_stats('tottime').print_stats(25)",
    );
    pyodide.setStdout({ batched: quiet });
  }
  const results = await cpuPerCall(stages);
  const choices = makeChoices(healthz(), env, new ExecutionContext(pending)).toJs({ depth: 1 });
  const entries = choices instanceof Map ? [...choices] : Object.entries(choices);
  const choiceResults = await cpuPerCall(entries.map(([name, call]) => [name, async () => call()]));
  await pending.drain();

  console.log(
    `machine: ${cpus().length} × ${cpus()[0]?.model ?? "cpu"}, Node ${process.version}; ${ROUNDS} × ${REQUESTS} calls per stage, median`,
  );
  console.log("CPU per request (µs), in-process, no HTTP:");
  for (const [name, us] of results) console.log(`  ${name.padEnd(44)} ${us.toFixed(0).padStart(6)}`);
  const [s1, s2, s3, s4, js, lookAll, lookJs] = results.map(([, us]) => us);
  const look = lookAll - lookJs;
  console.log("where Python's cost goes:");
  console.log(
    `  the call into Pyodide ${s1.toFixed(0)} µs; the SDK's wrappers ${(s2 - s1).toFixed(0)} µs;` +
      ` edgechat's routing and log ${(s3 - s2).toFixed(0)} µs; the /chat work beyond /healthz ${(s4 - s3).toFixed(0)} µs`,
  );
  console.log(`  /chat added over the JS pass-through: ${(s4 - js).toFixed(0)} µs per request`);
  // A streaming answer costs Python the request's fixed cost plus one look per
  // watch interval (4 s by default), whatever its number of tokens.
  const fixed = s4 - js;
  const seconds = ((10_000 - fixed) / look) * 4;
  console.log(
    `  one look: ${look.toFixed(0)} µs of Python; at one look per 4 s an answer may stream for` +
      ` ${seconds.toFixed(0)} s before Python's added CPU reaches 10 ms` +
      ` (${Math.floor(seconds * 50)} tokens at 50 a second)`,
  );
  console.log("choices on the path to the first byte, each beside what it replaced (CPU µs per call):");
  for (let i = 0; i < choiceResults.length; i += 2) {
    const [[before, a], [after, b]] = [choiceResults[i], choiceResults[i + 1]];
    console.log(
      `  ${before.padEnd(40)} ${a.toFixed(1).padStart(7)}   →   ${after.padEnd(36)} ${b.toFixed(1).padStart(7)}`,
    );
  }
  await bindings.dispose();
  process.exit(0);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
