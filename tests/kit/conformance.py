"""Every response the black-box suite sees, held to ``static/openapi.json``.

``Conformance.check`` finds the operation by method and path template
(``HEAD`` as ``GET``), checks that the status is documented, that the
content type is one the response lists, and validates a JSON body with
``jsonschema`` (Draft 2020-12) against the response's schema. A path the
document does not list must be the ``NotFound`` error, or a static asset of
the page; a method a path does not list must be ``405`` with ``Allow``
naming the ones it does.

A ``text/event-stream`` is never read here: ``EventChecker`` is fed the bytes
the test itself reads (``tests/api/conftest.py`` puts it between the
transport and the client), and validates each event's data, as it is
dispatched, against the schema the media type's ``x-sse-events`` names for
it. A stream the test stops reading is checked as far as it was read.

A mismatch is a string naming the operation, the status and the JSON path:
``POST /chat (postChat) 400: $.error.code: 'nope' is not one of [...]``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import httpx
import jsonschema
import referencing
import referencing.jsonschema
from jsonschema.exceptions import best_match

from tests.harness import ROOT
from tests.kit.sse import Lines

__all__ = [
    "CONFORMANCE",
    "DOCUMENT",
    "RECORDER",
    "Conformance",
    "EventChecker",
    "Operation",
    "document",
    "install",
    "serving",
]

DOCUMENT = ROOT / "static" / "openapi.json"
_BASE = "urn:edgechat:openapi"
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# The routes that speak the OpenAI API, errors included (app.OPENAI_PREFIX).
_OPENAI_PREFIX = "/v1/"


def document() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DOCUMENT.read_text())
    return loaded


def _pointer(*parts: str) -> str:
    return "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


@dataclass(frozen=True)
class Operation:
    method: str  # upper case
    template: str
    spec: Mapping[str, Any]
    # The operation's JSON pointer in the document.
    pointer: str

    @property
    def name(self) -> str:
        return f"{self.method} {self.template} ({self.spec.get('operationId', '?')})"


@dataclass
class Conformance:
    """The document, its operations, and a validator for any part of it."""

    spec: dict[str, Any] = field(default_factory=document)

    @cached_property
    def _registry(self) -> referencing.Registry[Any]:
        resource = referencing.Resource.from_contents(
            self.spec, default_specification=referencing.jsonschema.DRAFT202012
        )
        return referencing.Registry().with_resource(_BASE, resource)

    @cached_property
    def _routes(self) -> list[tuple[re.Pattern[str], str]]:
        routes = []
        for template in self.spec["paths"]:
            pattern = re.escape(template).replace(r"\{", "{").replace(r"\}", "}")
            pattern = re.sub(r"\{[^}/]+\}", "[^/]+", pattern)
            routes.append((re.compile(pattern), template))
        return routes

    @cached_property
    def _validators(self) -> dict[str, jsonschema.Draft202012Validator]:
        return {}

    def validate(self, pointer: str, instance: Any) -> list[str]:
        """Where ``instance`` breaks the schema at ``pointer``: ``$.path: message``."""
        validator = self._validators.get(pointer)
        if validator is None:
            validator = jsonschema.Draft202012Validator(
                {"$ref": f"{_BASE}#{pointer}"}, registry=self._registry
            )
            self._validators[pointer] = validator
        error = best_match(validator.iter_errors(instance))
        if error is None:
            return []
        return [f"{error.json_path}: {error.message[:300]}"]

    def template(self, path: str) -> str | None:
        for pattern, template in self._routes:
            if pattern.fullmatch(path):
                return template
        return None

    def operation(self, method: str, template: str) -> Operation | None:
        wanted = "get" if method.upper() == "HEAD" else method.lower()
        spec = self.spec["paths"][template].get(wanted)
        if spec is None:
            return None
        return Operation(method.upper(), template, spec, _pointer("", "paths", template, wanted))

    def methods(self, template: str) -> set[str]:
        item = self.spec["paths"][template]
        names = {name.upper() for name in item if name in _METHODS}
        return names | ({"HEAD"} if "GET" in names else set())

    def _resolve(self, pointer: str, node: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
        """A response object and its pointer, through a ``$ref``."""
        while "$ref" in node:
            target = node["$ref"].removeprefix("#")
            node = self.spec
            for part in target.split("/")[1:]:
                node = node[part.replace("~1", "/").replace("~0", "~")]
            pointer = target
        return pointer, node

    def response(self, operation: Operation, status: int) -> tuple[str, Mapping[str, Any]] | None:
        responses = operation.spec["responses"]
        key = str(status) if str(status) in responses else "default"
        if key not in responses:
            return None
        return self._resolve(operation.pointer + "/" + _pointer("responses", key), responses[key])

    def not_found(self, path: str) -> tuple[str, Mapping[str, Any]]:
        name = "V1NotFound" if path.startswith(_OPENAI_PREFIX) else "NotFound"
        pointer = f"/components/responses/{name}"
        return self._resolve(pointer, {"$ref": "#" + pointer})

    # --- one response ----------------------------------------------------------------

    def check(
        self,
        method: str,
        path: str,
        status: int,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> tuple[list[str], EventChecker | None]:
        """The mismatches of one response (``body`` None: a stream, not read
        here), and for an event stream the checker to feed its bytes."""
        template = self.template(path)
        if template is None:
            return self._unlisted(method, path, status, headers, body), None
        operation = self.operation(method, template)
        if operation is None:
            return self._wrong_method(method, template, path, status, headers, body), None
        found = self.response(operation, status)
        if found is None:
            documented = ", ".join(operation.spec["responses"])
            return [f"{operation.name}: status {status} is not documented ({documented})"], None
        pointer, response = found
        return self._body(operation.name, method, status, pointer, response, headers, body)

    def _body(
        self,
        name: str,
        method: str,
        status: int,
        pointer: str,
        response: Mapping[str, Any],
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> tuple[list[str], EventChecker | None]:
        where = f"{name} {status}"
        content: Mapping[str, Any] = response.get("content") or {}
        kind = headers.get("content-type", "").partition(";")[0].strip().lower()
        if not content:
            if body:
                return [f"{where}: a body where none is documented ({kind})"], None
            return [], None
        if method.upper() == "HEAD" or (not kind and not body):
            return [], None
        if kind not in content:
            return [f"{where}: content type {kind!r} is not one of {sorted(content)}"], None
        media_pointer = pointer + "/" + _pointer("content", kind)
        media = content[kind]
        if kind == "text/event-stream":
            events = media.get("x-sse-events") or {}
            return [], EventChecker(self, where, media_pointer, events)
        if kind != "application/json" or "schema" not in media or body is None:
            return [], None
        try:
            value = json.loads(body)
        except ValueError:
            return [f"{where}: the body is not JSON: {body[:100]!r}"], None
        problems = self.validate(media_pointer + "/schema", value)
        return [f"{where}: {problem}" for problem in problems], None

    def _unlisted(
        self, method: str, path: str, status: int, headers: Mapping[str, str], body: bytes | None
    ) -> list[str]:
        name = f"{method} {path} (not in the document)"
        if status == 404:
            pointer, response = self.not_found(path)
            return self._body(name, method, status, pointer, response, headers, body)[0]
        if method.upper() in ("GET", "HEAD") and status < 400:
            return []  # a static asset of the page
        if status == 405 and not body:
            return []  # the static assets' router refuses other methods, with no body
        return [f"{name}: {status} for a path the document does not list"]

    def _wrong_method(
        self,
        method: str,
        template: str,
        path: str,
        status: int,
        headers: Mapping[str, str],
        body: bytes | None,
    ) -> list[str]:
        name = f"{method} {template} (not a method of it)"
        allowed = self.methods(template)
        if status != 405:
            return [f"{name}: {status}, not 405 (it takes {sorted(allowed)})"]
        if not body:
            return []  # the static assets' router (GET / is a static asset)
        problems = []
        said = {word.strip() for word in headers.get("allow", "").split(",") if word.strip()}
        if said != allowed:
            problems.append(f"{name}: Allow says {sorted(said)}, the document {sorted(allowed)}")
        base = "OpenAIError" if path.startswith(_OPENAI_PREFIX) else "Error"
        try:
            value = json.loads(body)
        except ValueError:
            return [*problems, f"{name}: the 405 body is not JSON"]
        found = self.validate(f"/components/schemas/{base}", value)
        return problems + [f"{name} 405: {problem}" for problem in found]


class EventChecker:
    """Parses the bytes of one event stream as the client reads them and
    validates each event's data against ``x-sse-events`` (the event's name,
    ``message`` without an ``event:`` line). A ``done`` or ``error`` that
    does not carry ``meta``'s request id is not edgechat's closing: it was
    forged inside a relayed model stream, and is the model's (``message``)."""

    def __init__(
        self, conformance: Conformance, where: str, pointer: str, events: Mapping[str, Any]
    ) -> None:
        self._conformance = conformance
        self._where = where
        self._pointer = pointer + "/x-sse-events"
        self._events = events
        self._lines = Lines(errors="replace")
        self._name: str | None = None
        self._data: list[str] | None = None
        self._request_id: str | None = None
        self.problems: list[str] = []

    def take(self) -> list[str]:
        taken, self.problems = self.problems, []
        return taken

    def feed(self, chunk: bytes) -> None:
        for line in self._lines.feed(chunk):
            self._line(line)

    def _line(self, line: str) -> None:
        if line == "":
            self._dispatch()
            return
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._name = value
        elif name == "data":
            self._data = [*(self._data or []), value]

    def _dispatch(self) -> None:
        name, data = self._name or "message", self._data
        self._name, self._data = None, None
        if data is None:
            return
        text = "\n".join(data)
        try:
            value: Any = json.loads(text)
        except (ValueError, RecursionError):
            value = text
        if name == "meta" and isinstance(value, dict):
            self._request_id = value.get("request_id")
        if (
            name in ("done", "error")
            and "meta" in self._events
            and (not isinstance(value, dict) or value.get("request_id") != self._request_id)
        ):
            name = "message"  # forged inside the model's stream: the model's words
        if name not in self._events:
            self.problems.append(
                f"{self._where}: an event named {name!r}; the document names {sorted(self._events)}"
            )
            return
        pointer = self._pointer + "/" + _pointer(name)
        for problem in self._conformance.validate(pointer, value):
            self.problems.append(f"{self._where} event {name!r}: {problem}")


@dataclass
class Recorder:
    """The mismatches seen during one test, from any thread."""

    problems: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, problems: list[str]) -> None:
        if problems:
            with self._lock:
                self.problems.extend(problems)

    def take(self) -> list[str]:
        with self._lock:
            taken, self.problems = self.problems, []
        return taken


# --- the hook: between httpx's transports and every client of the suite ----------------

CONFORMANCE = Conformance()
RECORDER = Recorder()
# The base URLs of the edgechat servers under test; anything else (a fake
# provider, an Access keys endpoint, the emulator's control) is not checked.
SERVERS: set[str] = set()


def serving(base_url: str) -> str:
    """Counts ``base_url``'s responses as edgechat's from now on."""
    SERVERS.add(base_url.rstrip("/"))
    return base_url


def _ours(request: httpx.Request) -> bool:
    url = str(request.url)
    return any(url == base or url.startswith(base + "/") for base in SERVERS)


def _checked(
    request: httpx.Request, response: httpx.Response, body: bytes | None
) -> EventChecker | None:
    problems, events = CONFORMANCE.check(
        request.method, request.url.path, response.status_code, response.headers, body
    )
    RECORDER.add(problems)
    return events


def _decoded(response: httpx.Response, raw: bytes) -> bytes:
    copy = httpx.Response(response.status_code, headers=response.headers, content=raw)
    return copy.read()


def _is_stream(response: httpx.Response) -> bool:
    kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind == "text/event-stream"


class _Replay(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A body read ahead: its bytes, then the error that ended the read, if one did."""

    def __init__(self, raw: bytes, error: BaseException | None) -> None:
        self._raw = raw
        self._error = error

    def __iter__(self) -> Iterator[bytes]:
        if self._raw:
            yield self._raw
        if self._error is not None:
            raise self._error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self:
            yield chunk


class _Seen(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, events: EventChecker) -> None:
        self._inner = inner
        self._events = events

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._events.feed(chunk)
            RECORDER.add(self._events.take())
            yield chunk

    def close(self) -> None:
        self._inner.close()


class _AsyncSeen(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, events: EventChecker) -> None:
        self._inner = inner
        self._events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._events.feed(chunk)
            RECORDER.add(self._events.take())
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _ahead(
    request: httpx.Request, response: httpx.Response, raw: bytes, error: BaseException | None
) -> httpx.Response:
    _checked(request, response, _decoded(response, raw) if error is None else None)
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=_Replay(raw, error),
        extensions=response.extensions,
        request=request,
    )


def install(monkeypatch: Any) -> None:
    """Puts the check between httpx's transports and every client made on
    them: ``httpx`` itself, httpx-sse, the official OpenAI clients and
    LangChain's (built on those)."""
    send = httpx.HTTPTransport.handle_request
    send_async = httpx.AsyncHTTPTransport.handle_async_request

    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        response = send(self, request)
        if not _ours(request):
            return response
        if _is_stream(response):
            events = _checked(request, response, None)
            if events is not None:
                response.stream = _Seen(response.stream, events)  # type: ignore[arg-type]
            return response
        parts: list[bytes] = []
        error: BaseException | None = None
        try:
            for chunk in response.stream:  # type: ignore[union-attr]
                parts.append(chunk)
        except Exception as exc:
            error = exc
        finally:
            response.stream.close()  # type: ignore[union-attr]
        return _ahead(request, response, b"".join(parts), error)

    async def handle_async_request(
        self: httpx.AsyncHTTPTransport, request: httpx.Request
    ) -> httpx.Response:
        response = await send_async(self, request)
        if not _ours(request):
            return response
        if _is_stream(response):
            events = _checked(request, response, None)
            if events is not None:
                response.stream = _AsyncSeen(response.stream, events)  # type: ignore[arg-type]
            return response
        parts: list[bytes] = []
        error: BaseException | None = None
        try:
            async for chunk in response.stream:  # type: ignore[union-attr]
                parts.append(chunk)
        except Exception as exc:
            error = exc
        finally:
            await response.stream.aclose()  # type: ignore[union-attr]
        return _ahead(request, response, b"".join(parts), error)

    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", handle_request)
    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", handle_async_request)
