"""The Worker's entry point: the runtime makes a `Default(ctx, env)` per request."""

from workers import Response, WorkerEntrypoint


async def on_fetch(request, env, ctx):
    path = request.url.split("?", 1)[0].split("/", 3)[-1]
    if path == "healthz":
        if request.method not in ("GET", "HEAD"):
            return Response.json(
                {"error": {"code": "method_not_allowed", "message": "Method not allowed."}},
                status=405,
                headers={"Allow": "GET, HEAD"},
            )
        return Response.json({"status": "ok"}, headers={"Cache-Control": "no-store"})
    return Response.json({"error": {"code": "not_found", "message": "Not found."}}, status=404)


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await on_fetch(request, self.env, self.ctx)
