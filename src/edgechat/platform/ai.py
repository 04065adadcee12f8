"""The ``AI`` binding and the runtime's ``fetch``, as the ``Ai``, ``Fetch``
(the providers' APIs, aborted with the client) and ``Outbound`` (spend
alerts, aborted by nothing but their own bound) ports. Binding errors are
translated here, with chaining: a JavaScript error whose message starts with
a Workers AI code becomes the matching ``UpstreamError``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from js import (
    AbortController,
    AbortSignal,
    Array,
    Blob,
    Object,
)
from js import fetch as js_fetch
from pyodide.ffi import JsException, to_js

from edgechat.core.errors import Misconfigured
from edgechat.core.faults import UpstreamError, UpstreamMalformed, from_binding_error
from edgechat.core.ports import OutboundError
from edgechat.platform.interop import js_object, raw_binding
from edgechat.platform.streams import BindingUpstream

__all__ = ["BindingAi", "BindingFetch", "OutboundFetch"]


def _abort_signal(client_signal: Any) -> tuple[Any, Any]:
    """A controller of our own, and the signal that fires with it or with the client."""
    controller = AbortController.new()
    signal = controller.signal
    if client_signal is not None:
        signal = AbortSignal.any(to_js([signal, client_signal]))
    return controller, signal


# Logged (never sent) when a route needs the model and nothing is bound as
# AI: the routes that do not (the page, /healthz, history) keep working.
UNBOUND_AI = (
    'no AI binding: bind Workers AI as AI ([ai] binding = "AI" in wrangler.toml; '
    "npm start binds it to the emulator)"
)


class BindingAi:
    """``ports.Ai`` over the ``AI`` binding; aborts when the client goes away.
    Without the binding, every call is a ``Misconfigured`` naming it."""

    def __init__(self, binding: Any, client_signal: Any, ctx: Any = None) -> None:
        self._binding = None if binding is None else raw_binding(binding)
        self._client_signal = client_signal
        self._ctx = ctx

    def _bound(self) -> Any:
        if self._binding is None:
            raise Misconfigured(detail=UNBOUND_AI)
        return self._binding

    async def _run(self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]) -> Any:
        binding = self._bound()
        controller, signal = _abort_signal(self._client_signal)
        call = None
        try:
            call = binding.run(
                model_id, js_object(inputs), js_object({**options, "signal": signal})
            )
            result = await call
        except JsException as exc:
            raise from_binding_error(str(exc)) from exc
        except BaseException:
            controller.abort()  # the caller gave up waiting (a deadline, a cancel)
            if self._ctx is not None and call is not None:
                # Until the call has taken the abort in: a binding that is a
                # Worker reached over RPC (the emulator in local runs) gets it
                # as a message, which the end of this request would cut off.
                # The real binding's fetch fails at once. Best effort: a
                # request already torn down takes no more work.
                with contextlib.suppress(JsException):
                    self._ctx.waitUntil(call.then(Object, Array.of))
            raise
        return result, controller

    async def stream(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> BindingUpstream:
        result, controller = await self._run(model_id, inputs, options)
        if not hasattr(result, "getReader"):
            # A complete answer although a stream was asked for: the binding
            # parses an application/json reply (``ai-api.ts``, ``run``).
            result = result.to_py()
        return BindingUpstream(result, controller, self._client_signal)

    async def run(
        self, model_id: str, inputs: dict[str, Any], options: dict[str, Any]
    ) -> dict[str, Any]:
        result, _ = await self._run(model_id, inputs, options)
        answer = result.to_py() if hasattr(result, "to_py") else result
        if not isinstance(answer, dict):
            raise UpstreamMalformed(detail=f"{model_id} answered no JSON object")
        return answer

    async def to_markdown(self, files: list[tuple[str, str, bytes]]) -> list[dict[str, Any]]:
        # https://developers.cloudflare.com/workers-ai/features/markdown-conversion/:
        # a list of {name, blob} in, a list of ConversionResult out, in order.
        documents = [
            # The parts as a JavaScript Array: workerd's Blob takes no other
            # sequence (a Python list arrives as a proxy).
            js_object(
                {"name": name, "blob": Blob.new(Array.of(to_js(data)), js_object({"type": kind}))}
            )
            for name, kind, data in files
        ]
        try:
            results = await self._bound().toMarkdown(to_js(documents))
        except JsException as exc:
            raise from_binding_error(str(exc)) from exc
        answer = results.to_py() if hasattr(results, "to_py") else results
        if not isinstance(answer, list) or not all(isinstance(r, dict) for r in answer):
            raise UpstreamMalformed(detail="toMarkdown answered no list of results")
        return answer


class BindingFetch:
    """``ports.Fetch`` over the runtime's ``fetch``; aborts with the client.

    Redirects are not followed (``redirect: "manual"``; workerd's fetch takes
    ``"follow"`` or ``"manual"``, ``Request::tryParseRedirect`` in
    ``src/workerd/api/http.c++``): the provider's key goes in
    ``Authorization`` to the configured origin only, and a 3xx comes back as
    the answer, which is that provider failing (``ProviderAi``)."""

    def __init__(self, client_signal: Any) -> None:
        self._client_signal = client_signal

    async def post(
        self, url: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, dict[str, str], BindingUpstream]:
        controller, signal = _abort_signal(self._client_signal)
        init = js_object(
            {"method": "POST", "headers": headers, "signal": signal, "redirect": "manual"}
        )
        init.body = to_js(body)
        try:
            response = await js_fetch(url, init)
        except JsException as exc:
            # The message names the failure (DNS, refused, reset), never the key.
            raise UpstreamError(detail=f"fetch failed: {exc}") from exc
        except BaseException:
            controller.abort()
            raise
        reply_headers: dict[str, str] = Object.fromEntries(response.headers).to_py()
        stream = BindingUpstream(response.body, controller, self._client_signal)
        return int(response.status), reply_headers, stream


class OutboundFetch:
    """``ports.Outbound`` over the runtime's ``fetch``, with a signal of its
    own (``AbortSignal.timeout``) and never the client's: a POST made in
    ``waitUntil`` after the reply, or by the cron run, is not cut off when
    the client leaves. The answer's body is cancelled unread, which
    releases the connection (one of the six a request may hold open)."""

    async def post(self, url: str, headers: dict[str, str], body: bytes, within: float) -> int:
        init = js_object(
            {
                "method": "POST",
                "headers": headers,
                "redirect": "manual",
                "signal": AbortSignal.timeout(max(1, round(within * 1000))),
            }
        )
        init.body = to_js(body)
        try:
            response = await js_fetch(url, init)
        except JsException as exc:
            # The error's name alone: a fetch error's message may hold the URL.
            raise OutboundError(str(getattr(exc, "name", None) or "Error")) from exc
        answer = response.body
        if hasattr(answer, "cancel"):  # null when the answer has no body
            with contextlib.suppress(JsException):
                await answer.cancel()
        return int(response.status)
