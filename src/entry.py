from workers import Response, WorkerEntrypoint


async def on_fetch(request, env, ctx):
    return Response.json({"ok": True})


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await on_fetch(request, self.env, self.ctx)
