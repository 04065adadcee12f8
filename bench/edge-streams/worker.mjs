// The stream shapes of edgechat's answers, in a JavaScript Worker that runs
// unchanged in workerd itself and in the offline runner (bench/edge_streams.mjs
// measures both). The upstream is a `fetch()` of a paced SSE stream, a native
// body in both runtimes, as the AI binding's is. Python's part (reading the
// first words, the framing) is left out: what is measured is what the
// streams cost around it.
//
//   ?shape=pass     the model's stream handed to the client untouched
//                   (bench/passthrough-js: the least a Worker can do);
//   ?shape=relay    /chat after its first words (edgechat.delivery,
//                   `_relay_rest`): tee(), one branch piped natively into an
//                   IdentityTransformStream that is the response, the other
//                   read once per watch interval with a BYOB read;
//   ?shape=forward  /v1 streams (`_forward_rest`, platform.BindingForward):
//                   tee(), one branch piped into a CompressionStream that is
//                   never read (so the tee pulls as the model sends, natively),
//                   the other read once per batch (every 100 ms, growing to
//                   1 s) and each batch's bytes written to the response;
//   ?shape=forward-js  the same, the branch drained into a JavaScript
//                   WritableStream that keeps nothing (edgechat until
//                   2026-12-04).
//
// `up` names the upstream; `watch` the relay's interval in ms (4000, as
// `delivery.watch_interval` with the default idle timeout).

const READ_BYTES = 64 << 10; // platform.READ_BYTES
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// delivery.forward_batch, in seconds.
const forwardBatch = (streamedS) => Math.min(1.0, Math.max(0.1, 0.1 * streamedS));

async function relay(body, watchMs) {
  const { readable, writable } = new IdentityTransformStream();
  const [copy, watched] = body.tee();
  const piped = copy.pipeTo(writable, { preventClose: true, preventAbort: true });
  const reader = watched.getReader({ mode: "byob" });
  (async () => {
    let buffer = new ArrayBuffer(READ_BYTES);
    let ended = false;
    piped.then(() => (ended = true));
    while (!ended) {
      await Promise.race([piped, sleep(watchMs)]);
      for (;;) {
        const { value, done } = await reader.read(new Uint8Array(buffer));
        if (done) break;
        buffer = value.buffer;
        if (!ended) break; // one look per interval; after the end, read it out
      }
    }
    const writer = writable.getWriter();
    await writer.write(new TextEncoder().encode("event: done\ndata: {}\n\n"));
    await writer.close();
  })();
  return readable;
}

async function forward(body, sink) {
  const { readable, writable } = new IdentityTransformStream();
  const [drained, watched] = body.tee();
  drained.pipeTo(sink).catch(() => {});
  const reader = watched.getReader({ mode: "byob" });
  const writer = writable.getWriter();
  (async () => {
    const began = Date.now();
    let buffer = new ArrayBuffer(READ_BYTES);
    for (;;) {
      const { value, done } = await reader.read(new Uint8Array(buffer));
      if (done) break;
      buffer = value.buffer;
      await writer.write(value.slice());
      await sleep(forwardBatch((Date.now() - began) / 1000) * 1000);
    }
    await writer.write(new TextEncoder().encode("data: [DONE]\n\n"));
    await writer.close();
  })();
  return readable;
}

export default {
  async fetch(request) {
    const url = new URL(request.url);
    const upstream = await fetch(url.searchParams.get("up"));
    const shape = url.searchParams.get("shape");
    const body =
      shape === "relay"
        ? await relay(upstream.body, Number(url.searchParams.get("watch") ?? 4000))
        : shape === "forward"
          ? await forward(upstream.body, new CompressionStream("deflate-raw").writable)
          : shape === "forward-js"
            ? await forward(upstream.body, new WritableStream())
            : upstream.body;
    return new Response(body, {
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
    });
  },
};
