# The Python half of the runner: imports the Worker's main module and calls
# `Default(ctx, env).fetch(request)` for each request, converting the JS request
# into the SDK's `Request` and the returned `Response` back into a JS Response,
# as workerd does for the class entry point. Evaluated by python.mjs; the value
# of the last expression is handed back to JavaScript.
import importlib

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


make_handler  # noqa: B018 - the value handed back to python.mjs
