"""Small helpers every binding adapter uses to cross between Python and
JavaScript: options objects, a promise raced against a timer, and a
binding's own JavaScript object.
"""

from __future__ import annotations

import math
from typing import Any

from js import (
    Object,
    Promise,
    clearTimeout,
    setTimeout,
)
from pyodide.ffi import to_js

__all__ = ["bounded", "js_object", "raw_binding"]


def js_object(values: dict[str, Any]) -> Any:
    # A Python dict handed to JavaScript arrives as a proxy whose keys are not
    # properties; options objects must be real JS objects. (Built per call: JS
    # objects made at import time would not survive the memory snapshot.)
    return to_js(values, dict_converter=Object.fromEntries)


async def bounded(promise: Any, within: float) -> Any:
    """``promise``, raced against a timer of ``within`` seconds that resolves
    to undefined (None in Python). One await either way: no timer task on the
    Python side.

    The timer is a ``setTimeout`` resolving a JS promise, cleared once the race
    is run: a timer left running after the read won would hold the race until
    its deadline (thousands after a burst of streams), and one stopped by
    rejecting it (``scheduler.wait``'s signal) costs Python a future that
    settles per race. Pyodide hands every promise a JS call returns to
    Python as a ``PyodideFuture`` whose settling schedules Python callbacks
    (``pyodide/webloop.py``); ``Promise.withResolvers()`` returns an object,
    so this timer never becomes one (bench/profile.mjs, in git history: per answer as many
    event-loop callbacks as without a timer stop, a third fewer than with
    the signal). ``setTimeout``/``clearTimeout`` are the Workers runtime's
    standard timers; ``Promise.withResolvers`` is ES2024, in V8 since 12.2."""
    if within == math.inf:
        return await promise
    timer = Promise.withResolvers()
    handle = setTimeout(timer.resolve, max(within, 0.0) * 1000)
    try:
        return await Promise.race(to_js([promise, timer.promise]))
    finally:
        clearTimeout(handle)


def raw_binding(binding: Any) -> Any:
    # The SDK fronts each binding with a wrapper that converts every argument
    # and result generically (``workers/rpc.py``, ``_BindingWrapper``): about
    # 0.3 ms a call in Pyodide. The seam converts what it sends itself.
    return getattr(binding, "_binding", binding)
