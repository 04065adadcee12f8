"""What the page and clients read about this deployment: health, the model
catalog, the limits, the presets, and the CORS preflight.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from edgechat.answer.context import Context
from edgechat.config import presets
from edgechat.core.errors import NotFound
from edgechat.core.http import Reply, json_reply
from edgechat.core.models import catalog_json
from edgechat.web import guards

__all__ = ["api_presets", "healthz", "limits", "models", "page", "preflight", "preflight_for"]


async def healthz(ctx: Context) -> Reply:
    return json_reply(200, {"status": "ok"})


async def models(ctx: Context) -> Reply:
    s = ctx.settings
    return json_reply(200, catalog_json(s.models, s.default_model))


async def limits(ctx: Context) -> Reply:
    # The page reads its limits here, so the server is their one source.
    return json_reply(200, ctx.settings.limits.to_json())


async def api_presets(ctx: Context) -> Reply:
    # The page offers these when a conversation starts; their prompts stay here.
    return json_reply(200, presets.presets_json(ctx.settings.presets))


async def page(ctx: Context) -> Reply:
    # The page is a static asset served before the Worker runs; reaching here
    # means it is missing from the deployment.
    raise NotFound(detail="index.html not among the static assets")


def preflight_for(allow: str) -> Callable[[Context], Awaitable[Reply]]:
    """A route's CORS preflight, ``allow`` its methods."""

    async def preflight(ctx: Context) -> Reply:
        origin = guards.cors_origin(ctx.request, ctx.settings)
        if origin is None:
            # Browsers only preflight cross-site requests; a same-origin one needs none.
            return Reply(204, {"Allow": allow})
        return Reply(
            204,
            {
                **guards.cors_headers(origin),
                "Access-Control-Allow-Methods": allow,
                "Access-Control-Allow-Headers": "content-type, authorization, cache-control",
                "Access-Control-Max-Age": "600",
            },
        )

    return preflight


# The preflight of a route that takes POST alone.
preflight = preflight_for("POST, OPTIONS")
