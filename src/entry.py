"""edgechat's entry point: the runtime makes a ``Default(ctx, env)`` per request.

This is where the core (``app``) meets the platform seam (``platform``); the
settings are read from ``[vars]`` once per isolate, on its first request.
"""

from workers import WorkerEntrypoint

from edgechat.platform.worker import WallClock, WorkerPlatform, WorkerSchedule, to_response
from edgechat.web import app

_settings = app.SettingsOnce()
_wall = WallClock()
_cooling = app.Cooling(wall=_wall)
_access_keys = app.AccessKeys()


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        await _wall.follow(self.env)
        platform = WorkerPlatform(request, self.env, self.ctx)
        reply = await app.handle(platform.incoming(), platform, _settings, _cooling, _access_keys)
        return to_response(reply, self.ctx)

    # A Cron Trigger ([triggers] in wrangler.toml). The Python Workers docs
    # show `scheduled(self, controller, env, ctx)`; the class entry point has
    # env and ctx on self, so they are optional here and not used
    # (developers.cloudflare.com/workers/runtime-apis/handlers/scheduled/).
    async def scheduled(self, controller, env=None, ctx=None):
        await _wall.follow(self.env)
        now_ms = int(controller.scheduledTime) + round(_wall.offset_s * 1000)
        await app.scheduled(WorkerSchedule(self.env, self.ctx), _settings, now_ms, controller.cron)
