"""edgechat's entry point: the runtime makes a ``Default(ctx, env)`` per request."""

from workers import WorkerEntrypoint

from edgechat.platform import on_fetch


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        return await on_fetch(request, self.env, self.ctx)
