// The baseline for the /chat and /v1 benchmark (bench/workerd.mjs): a
// JavaScript Worker that hands the model's stream to the
// client untouched, as Cloudflare's TypeScript chat template does. No
// validation, no re-framing: the least work a /chat can do. Any path is /chat,
// except /v1/chat/completions: the same pass-through behind the bearer token
// (API_TOKEN, when set), the least an OpenAI-compatible route over GLM can do
// (GLM already streams OpenAI chunks).
export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/v1/chat/completions" && env.API_TOKEN) {
      if (request.headers.get("authorization") !== `Bearer ${env.API_TOKEN}`) {
        return Response.json(
          { error: { message: "Invalid API key.", type: "invalid_request_error" } },
          { status: 401 },
        );
      }
    }
    const { messages, model, max_tokens } = await request.json();
    const stream = await env.AI.run(model, { messages, stream: true, max_completion_tokens: max_tokens });
    return new Response(stream, {
      headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" },
    });
  },
};
