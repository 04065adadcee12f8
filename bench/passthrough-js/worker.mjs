// The baseline for bench/chat.mjs: a JavaScript Worker that hands the model's
// stream to the client untouched, as Cloudflare's TypeScript chat template
// does. No validation, no re-framing: the least work a /chat can do.
export default {
  async fetch(request, env) {
    const { messages, model, max_tokens } = await request.json();
    const stream = await env.AI.run(model, { messages, stream: true, max_completion_tokens: max_tokens });
    return new Response(stream, {
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
    });
  },
};
