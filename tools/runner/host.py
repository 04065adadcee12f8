# The Python half of the runner: imports the Worker's main module and calls
# `Default(ctx, env).fetch(request)` for each request, converting the JS request
# into the SDK's `Request` and the returned `Response` back into a JS Response,
# as workerd does for the class entry point, and
# `Default(ctx, env).scheduled(controller, env, ctx)` for a scheduled event.
# Evaluated by python.mjs, which takes `make_handler`, `make_scheduled` and
# `settings_problem` from its globals.
import importlib
import sys

from pyodide.ffi import JsProxy
from workers import Request


def make_handler(module_name):
    module = importlib.import_module(module_name)
    entrypoint = module.Default

    async def handle(js_request, js_env, js_ctx):
        worker = entrypoint(js_ctx, js_env)
        response = await worker.fetch(Request(js_request))
        if isinstance(response, JsProxy):
            return response
        js_object = getattr(response, "js_object", None)
        if js_object is None:
            raise TypeError(f"fetch() returned {type(response).__name__}, not a Response")
        return js_object

    return handle


def make_scheduled(module_name):
    """The scheduled event's handler, or None when ``Default`` has none."""
    entrypoint = importlib.import_module(module_name).Default
    if not hasattr(entrypoint, "scheduled"):
        return None

    async def run(js_controller, js_env, js_ctx):
        await entrypoint(js_ctx, js_env).scheduled(js_controller, js_env, js_ctx)

    return run


def settings_problem(js_env):
    """What is wrong with the Worker's ``[vars]``, as its own settings parser
    says, or None. Called once the Worker is imported: only a Worker that
    imported edgechat's config is checked (the probe and JS workers are not).

    The variables are read as the platform seam reads them, one attribute of
    ``env`` at a time, so the parser sees the values a request would see. Its
    messages name the variable and the rule, never a value."""
    config = sys.modules.get("edgechat.config")
    if config is None:
        return None
    try:
        config.Settings.from_vars(lambda name: getattr(js_env, name, None))
    except ValueError as exc:
        return str(exc)
    return None
