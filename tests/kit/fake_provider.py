"""A fake OpenAI-compatible provider over HTTP, for tests of a fallback to
providers' own APIs.

It listens on 127.0.0.1 (a free port) in a background thread and serves
``POST <base_path>/chat/completions`` (``base_path`` defaults to ``/v1``)
the way OpenAI's Chat Completions API answers
(https://platform.openai.com/docs/api-reference/chat):

- ``stream: true``: ``text/event-stream`` in HTTP chunks, one event each:
  a role chunk (``delta: {"role": "assistant", "content": ""}``), one
  chunk per content piece, a chunk with ``finish_reason``, then, when
  ``stream_options.include_usage`` is true, a ``choices: []`` chunk with the
  usage (the other chunks then carry ``"usage": null``), then
  ``data: [DONE]``;
- otherwise one ``chat.completion`` JSON object;
- errors as OpenAI's ``{"error": {"message", "type", "param", "code"}}``.

Each test scripts it: answers are queued with :meth:`FakeProvider.answer`
and taken one per request, in order; when the queue is empty the
``default`` answer is given. An answer is a :class:`Reply`, a :class:`Fail`,
a :class:`Stall` or a :class:`Redirect` (to another server, typically a
second ``FakeProvider``, whose records then show whether a client followed
it and with which headers). With ``api_key`` set, a request without
``Authorization: Bearer <api_key>`` gets a 401 and takes no answer.

Every request is recorded (:class:`Recorded`), whatever its path or method,
before it is answered. Tests wait for events, never for a guessed time:
:meth:`FakeProvider.wait_for_request`, :meth:`FakeProvider.wait_for_stall`
and :meth:`FakeProvider.wait_for_end` block on a condition until the
exchange got that far (with a hang guard that turns "never" into a failure).

A stall holds the connection open until the client goes away or the
provider stops; :meth:`FakeProvider.stop` wakes every stalled exchange and
closes every connection, so teardown never hangs::

    @pytest.fixture
    def provider() -> Iterator[FakeProvider]:
        with FakeProvider(api_key="sk-test") as fake:
            yield fake
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

__all__ = [
    "HANG_GUARD_S",
    "Answer",
    "End",
    "Fail",
    "FakeProvider",
    "Recorded",
    "Redirect",
    "Reply",
    "Stall",
]

# Far above what a loaded machine needs: a wait that reaches it is a failure,
# never a claim about speed.
HANG_GUARD_S = 20.0

End = Literal["complete", "dropped", "client_gone", "server_stopped"]


@dataclass(frozen=True)
class Reply:
    """An answer. ``chunks`` are the streamed content pieces (by default
    ``text`` cut before each word, whitespace kept). ``usage`` replaces the
    computed one: ``prompt_tokens`` counts the words of the messages' text,
    ``completion_tokens`` the content pieces. ``stall_after=N`` stops a
    stream after N events (the role chunk is the first; 0: after the
    headers) and holds the connection; on a non-stream request it sends the
    status line and headers, then holds. ``drop_after=N`` closes the
    connection after N events of a stream without ending its chunked body
    (the provider died mid-answer). ``inject`` is written as it is before
    event ``inject_at`` (a provider sending what is no model's event)."""

    text: str = "Hello from the fake provider."
    chunks: tuple[str, ...] | None = None
    finish_reason: str = "stop"
    usage: Mapping[str, int] | None = None
    stall_after: int | None = None
    drop_after: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    inject: bytes = b""
    inject_at: int = 2

    def pieces(self) -> list[str]:
        if self.chunks is not None:
            return list(self.chunks)
        return re.findall(r"\s*\S+|\s+", self.text)


@dataclass(frozen=True)
class Fail:
    """An HTTP error with OpenAI's error body; ``message``, ``type`` and
    ``code`` default to what OpenAI sends for the status."""

    status: int
    message: str | None = None
    type: str | None = None
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Stall:
    """Not a byte, not even a status line: the connection is held until the
    client goes away or the provider stops."""


@dataclass(frozen=True)
class Redirect:
    """A redirect, as an API whose host moved answers: ``status`` (a 3xx)
    with ``Location: location`` and a short text body. ``location`` is sent
    as given (absolute, or a path on this provider)."""

    location: str
    status: int = 307
    headers: Mapping[str, str] = field(default_factory=dict)


Answer = Reply | Fail | Stall | Redirect

# What OpenAI's API sends for each status: (message, type, code).
_ERRORS: dict[int, tuple[str, str, str | None]] = {
    400: ("Invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to access this resource.", "invalid_request_error", None),
    404: ("Not found.", "invalid_request_error", None),
    405: ("Method not allowed.", "invalid_request_error", None),
    429: ("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
    500: ("The server had an error while processing your request.", "server_error", None),
    503: ("The engine is currently overloaded, please try again later.", "server_error", None),
}


def _error_body(status: int, message: str | None, kind: str | None, code: str | None) -> bytes:
    default_message, default_type, default_code = _ERRORS.get(
        status, ("Error.", "server_error" if status >= 500 else "invalid_request_error", None)
    )
    error = {
        "message": message or default_message,
        "type": kind or default_type,
        "param": None,
        "code": code if code is not None else default_code,
    }
    return json.dumps({"error": error}).encode()


@dataclass(frozen=True)
class Recorded:
    """One request as it arrived. Header names are lower-case; ``body`` is
    the parsed JSON, or None when the body is not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes


@dataclass(eq=False)
class _Exchange:
    index: int  # 1-based
    request: Recorded
    stalled: bool = False
    end: End | None = None


def _words(content: Any) -> int:
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(_words(part.get("text")) for part in content if isinstance(part, dict))
    return 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; streams use chunked encoding
    server: _Server
    timeout = HANG_GUARD_S  # an idle keep-alive connection is closed after this

    def setup(self) -> None:
        super().setup()
        self.server.fake._opened(self.connection)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.fake._closed(self.connection)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args  # quiet: tests read the records instead

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_PUT = do_PATCH = do_DELETE = do_POST

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _handle(self) -> None:
        fake = self.server.fake
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = self.path.split("?", 1)[0]
        request = Recorded(
            method=self.command,
            path=path,
            headers={name.lower(): value for name, value in self.headers.items()},
            body=body,
            raw=raw,
        )
        exchange = fake._record(request)
        try:
            end = self._answer(fake, exchange)
        except OSError:  # the client went away while we wrote
            end = "client_gone"
            self.close_connection = True
        fake._ended(exchange, end)

    def _answer(self, fake: FakeProvider, exchange: _Exchange) -> End:
        request = exchange.request
        if request.path != fake.base_path + "/chat/completions":
            message = f"Unknown request URL: {request.method} {request.path}."
            return self._fail(Fail(404, message=message))
        if request.method != "POST":
            return self._fail(Fail(405, headers={"allow": "POST"}))
        if fake.api_key is not None and (
            request.headers.get("authorization") != f"Bearer {fake.api_key}"
        ):
            return self._fail(Fail(401))
        if not isinstance(request.body, dict):
            return self._fail(Fail(400, message="We could not parse the JSON body."))
        answer = fake._next_answer()
        if isinstance(answer, Fail):
            return self._fail(answer)
        if isinstance(answer, Stall):
            return self._hold(fake, exchange)
        if isinstance(answer, Redirect):
            return self._redirect(answer)
        if request.body.get("stream") is True:
            return self._stream(fake, exchange, answer)
        return self._complete(fake, exchange, answer)

    def _send_head(self, status: int, headers: Mapping[str, str]) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _fail(self, fail: Fail) -> End:
        payload = _error_body(fail.status, fail.message, fail.type, fail.code)
        self._send_head(
            fail.status,
            {
                "content-type": "application/json",
                "content-length": str(len(payload)),
                **fail.headers,
            },
        )
        self.wfile.write(payload)
        return "complete"

    def _redirect(self, redirect: Redirect) -> End:
        payload = f"Moved to {redirect.location}\n".encode()
        self._send_head(
            redirect.status,
            {
                "location": redirect.location,
                "content-type": "text/plain; charset=utf-8",
                "content-length": str(len(payload)),
                **redirect.headers,
            },
        )
        self.wfile.write(payload)
        return "complete"

    def _base(self, fake: FakeProvider, exchange: _Exchange) -> dict[str, Any]:
        body = exchange.request.body
        return {
            "id": f"chatcmpl-fake-{exchange.index}",
            "created": int(time.time()),
            "model": body.get("model") or "fake-model",
        }

    def _usage(self, exchange: _Exchange, reply: Reply, pieces: list[str]) -> dict[str, int]:
        if reply.usage is not None:
            return dict(reply.usage)
        messages = exchange.request.body.get("messages")
        prompt = sum(_words(m.get("content")) for m in messages or [] if isinstance(m, dict))
        completion = len([piece for piece in pieces if piece])
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def _complete(self, fake: FakeProvider, exchange: _Exchange, reply: Reply) -> End:
        pieces = reply.pieces()
        payload = json.dumps(
            {
                **self._base(fake, exchange),
                "object": "chat.completion",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "".join(pieces)},
                        "finish_reason": reply.finish_reason,
                    }
                ],
                "usage": self._usage(exchange, reply, pieces),
            }
        ).encode()
        self._send_head(
            200,
            {
                "content-type": "application/json",
                "content-length": str(len(payload)),
                **reply.headers,
            },
        )
        if reply.stall_after is not None:
            return self._hold(fake, exchange)
        self.wfile.write(payload)
        return "complete"

    def _stream(self, fake: FakeProvider, exchange: _Exchange, reply: Reply) -> End:
        body = exchange.request.body
        options = body.get("stream_options")
        with_usage = isinstance(options, dict) and options.get("include_usage") is True
        base = {**self._base(fake, exchange), "object": "chat.completion.chunk"}
        pieces = reply.pieces()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            event = {
                **base,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }
            if with_usage:
                event["usage"] = None
            return event

        events: list[Any] = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in pieces]
        events.append(chunk({}, reply.finish_reason))
        if with_usage:
            events.append({**base, "choices": [], "usage": self._usage(exchange, reply, pieces)})
        events.append("[DONE]")

        self._send_head(
            200,
            {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                "transfer-encoding": "chunked",
                **reply.headers,
            },
        )
        for sent, event in enumerate(events):
            if reply.stall_after is not None and sent >= reply.stall_after:
                return self._hold(fake, exchange)
            if reply.drop_after is not None and sent >= reply.drop_after:
                self.close_connection = True  # closed with the body unfinished
                return "dropped"
            if reply.inject and sent == reply.inject_at:
                self._write_chunk(reply.inject)
            data = event if isinstance(event, str) else json.dumps(event, ensure_ascii=False)
            self._write_chunk(f"data: {data}\n\n".encode())
        self._write_chunk(b"")  # the last chunk of the chunked body
        return "complete"

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _hold(self, fake: FakeProvider, exchange: _Exchange) -> End:
        """Sends nothing more until the client goes away or the provider stops."""
        self.close_connection = True
        fake._stalled(exchange)
        while True:
            readable, _, _ = select.select([self.connection, fake._wake_r], [], [])
            if fake._wake_r in readable:
                return "server_stopped"
            try:
                data = self.connection.recv(65536)
            except (ConnectionError, OSError):
                return "client_gone"
            if not data:
                return "client_gone"


def _shut(connection: socket.socket) -> None:
    """Ends a connection's reads and writes, so its handler thread returns."""
    with contextlib.suppress(OSError):  # already gone
        connection.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    # Handler threads are daemons, so a test that forgets stop() cannot keep
    # the interpreter from exiting; stop() joins them itself (socketserver
    # joins only non-daemon threads).
    daemon_threads = True

    def __init__(self, fake: FakeProvider) -> None:
        self.fake = fake
        self.handlers: list[threading.Thread] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name="fake-provider-handler",
            daemon=True,
        )
        self.handlers = [t for t in self.handlers if t.is_alive()]
        self.handlers.append(thread)
        thread.start()


class FakeProvider:
    """The fake provider; a context manager that starts and stops it."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_path: str = "/v1",
        default: Answer | None = None,
    ) -> None:
        self.api_key = api_key
        self.base_path = "/" + base_path.strip("/") if base_path.strip("/") else ""
        self.default: Answer = default if default is not None else Reply()
        self._queue: list[Answer] = []
        self._exchanges: list[_Exchange] = []
        self._changed = threading.Condition()
        self._connections: set[socket.socket] = set()
        self._stopping = False
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._wake_r = -1
        self._wake_w = -1

    # -- life -----------------------------------------------------------------

    def start(self) -> FakeProvider:
        assert self._server is None, "the fake provider is already running"
        self._wake_r, self._wake_w = os.pipe()
        self._stopping = False
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-provider",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving, wakes every stalled exchange, closes every
        connection and joins the handler threads."""
        server, thread = self._server, self._thread
        if server is None or thread is None:
            return
        self._server = self._thread = None
        os.write(self._wake_w, b"x")  # never read: every hold sees it
        server.shutdown()
        thread.join()
        with self._changed:
            self._stopping = True  # a connection opened from now on is shut at once
            for connection in self._connections:
                _shut(connection)
        server.server_close()
        for handler in server.handlers:  # all woken: each returns promptly
            handler.join()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "the fake provider is not running"
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """The base URL a client appends ``/chat/completions`` to."""
        return f"http://127.0.0.1:{self.port}{self.base_path}"

    # -- script ---------------------------------------------------------------

    def answer(self, *answers: Answer) -> None:
        """Queues answers, one per coming request, in order."""
        with self._changed:
            self._queue.extend(answers)

    def _next_answer(self) -> Answer:
        with self._changed:
            return self._queue.pop(0) if self._queue else self.default

    # -- records --------------------------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        with self._changed:
            return [exchange.request for exchange in self._exchanges]

    def wait_for_request(self, n: int, timeout: float = HANG_GUARD_S) -> Recorded:
        """The n-th request (1-based), once it has arrived."""
        return self._wait(n, lambda e: True, "arrive", timeout).request

    def wait_for_stall(self, n: int, timeout: float = HANG_GUARD_S) -> None:
        """Returns once the n-th exchange is held (everything it will send is sent)."""
        self._wait(n, lambda e: e.stalled, "stall", timeout)

    def wait_for_end(self, n: int, timeout: float = HANG_GUARD_S) -> End:
        """How the n-th exchange ended: ``complete`` (all of the answer was
        written), ``dropped`` (``Reply.drop_after``), ``client_gone`` or
        ``server_stopped``."""
        end = self._wait(n, lambda e: e.end is not None, "end", timeout).end
        assert end is not None
        return end

    def _wait(self, n: int, done: Any, what: str, timeout: float) -> _Exchange:
        assert n >= 1, "requests are counted from 1"
        with self._changed:
            ok = self._changed.wait_for(
                lambda: len(self._exchanges) >= n and done(self._exchanges[n - 1]), timeout
            )
            if not ok:
                raise AssertionError(
                    f"request {n} did not {what} within {timeout} s "
                    f"({len(self._exchanges)} request(s) so far)"
                )
            return self._exchanges[n - 1]

    # -- called by the handler threads ---------------------------------------

    def _record(self, request: Recorded) -> _Exchange:
        with self._changed:
            exchange = _Exchange(len(self._exchanges) + 1, request)
            self._exchanges.append(exchange)
            self._changed.notify_all()
            return exchange

    def _stalled(self, exchange: _Exchange) -> None:
        with self._changed:
            exchange.stalled = True
            self._changed.notify_all()

    def _ended(self, exchange: _Exchange, end: End) -> None:
        with self._changed:
            exchange.end = end
            self._changed.notify_all()

    def _opened(self, connection: socket.socket) -> None:
        with self._changed:
            self._connections.add(connection)
            if self._stopping:
                _shut(connection)

    def _closed(self, connection: socket.socket) -> None:
        with self._changed:
            self._connections.discard(connection)
