"""``npm start`` (real ``wrangler dev`` on workerd), observed from outside
through the probe Worker: assets, vars, bindings, ``waitUntil``, signals."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from tests.harness import Runner
from tests.kit.ratelimit import in_one_window

# How long to wait for something that must happen before calling it a hang: a
# guard far above what a loaded machine needs, never a claim about speed.
HANG_GUARD_S = 20.0


def get(runner: Runner, path: str, **kwargs: object) -> httpx.Response:
    return httpx.get(runner.base_url + path, timeout=HANG_GUARD_S, **kwargs)  # type: ignore[arg-type]


def eventually(check: Callable[[], bool], what: str) -> None:
    """Polls until `check()` holds; fails only when it never does."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not check():
        assert time.monotonic() < deadline, f"{what} never happened"
        time.sleep(0.02)


def kv(runner: Runner, key: str) -> str | None:
    value: str | None = get(runner, "/kv", params={"key": key}).json()["value"]
    return value


def test_static_asset_is_served_with_headers_file_applied(probe: Runner) -> None:
    response = get(probe, "/")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert "probe page" in response.text
    assert response.headers["x-probe-header"] == "applied"


def test_unknown_path_falls_through_to_the_worker(probe: Runner) -> None:
    response = get(probe, "/no/such/file")
    assert response.status_code == 404
    assert response.text == "worker fallback: /no/such/file"


def test_run_worker_first_routes_to_worker_even_when_an_asset_exists(probe: Runner) -> None:
    response = get(probe, "/api/shadowed.txt")
    assert response.text == "worker fallback: /api/shadowed.txt"


def test_run_worker_first_exclusion_serves_the_asset(probe: Runner) -> None:
    response = get(probe, "/api/public/file.txt")
    assert response.status_code == 200
    assert response.text == "public asset\n"


def test_non_get_methods_reach_the_worker(probe: Runner) -> None:
    response = httpx.post(probe.base_url + "/echo", content=b"hello body", timeout=HANG_GUARD_S)
    assert response.status_code == 200
    echoed = response.json()
    assert echoed["method"] == "POST"
    assert echoed["body"] == "hello body"


def test_request_carries_the_clients_address(probe: Runner) -> None:
    # The TCP peer's address, as the edge sets it (the per-client rate limit
    # keys on it). Unlike the edge, workerd's local entry keeps a
    # CF-Connecting-IP the client sends itself (tools/workerd/README.md).
    client = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.7"))
    with client:
        echoed = client.get(probe.base_url + "/echo", timeout=HANG_GUARD_S).json()
    assert echoed["headers"]["cf-connecting-ip"] == "127.0.0.7"


def test_vars_come_from_config_and_the_vars_file_overrides(probe: Runner) -> None:
    values = get(probe, "/vars?names=GREETING,OVERRIDDEN,SECRET_TOKEN").json()
    assert values == {
        "GREETING": "from wrangler.toml",
        "OVERRIDDEN": "from --vars",
        "SECRET_TOKEN": "s3cret",
    }


def test_worker_exception_gives_500_and_the_runner_keeps_serving(probe: Runner) -> None:
    response = get(probe, "/boom")
    assert response.status_code == 500
    # Unlike the edge (Cloudflare's error page 1101, no traceback), wrangler
    # dev's entry answers an uncaught exception with its stack (miniflare
    # workers/core/entry.worker.js, `fetch`: `new Response(e?.stack ...)`).
    assert "RuntimeError: probe worker exploded on purpose" in response.text
    # Not asserted: the log. wrangler prints a Worker's uncaught exception
    # from its inspector connection (cli.js, `Runtime.exceptionThrown`), and
    # under npm start that printed nothing until the Worker's first reload
    # (seen on wrangler 4.164, workerd 1.20261117.1).
    assert get(probe, "/echo").status_code == 200


def test_streamed_body_arrives_incrementally(probe: Runner) -> None:
    # The Worker writes chunk 0, then waits for a gate only this test opens:
    # chunk 0 reaching the client while the Worker is still writing proves
    # the body is not buffered (a buffering runner fails the read). It is an
    # event stream, as edgechat's are: a compressed body is held back (next test).
    url = probe.base_url + "/stream?n=3&delay_ms=0&gate=stream-gate-1&type=text/event-stream"
    with httpx.stream("GET", url, timeout=HANG_GUARD_S) as response:
        assert response.status_code == 200
        assert "content-encoding" not in response.headers
        chunks = response.iter_raw()
        assert next(chunks) == b"chunk 0\n"
        assert kv(probe, "stream-gate-1") is None  # the Worker is still held
        get(probe, "/kv", params={"key": "stream-gate-1", "value": "open"})
        rest = b"".join(chunks)
    assert rest == b"chunk 1\nchunk 2\n"


@pytest.mark.parametrize(
    ("kind", "encoding"), [("text/plain", "gzip"), ("text/event-stream", None)]
)
def test_types_cloudflare_compresses_are_gzipped_event_streams_are_not(
    probe: Runner, kind: str, encoding: str | None
) -> None:
    # For a client that accepts gzip, miniflare's entry marks the types
    # Cloudflare's edge compresses (workers/core/entry.worker.js,
    # `ensureAcceptableEncoding`; text/event-stream is not one) and workerd
    # compresses them, holding small writes back (kj/compat/gzip.c++,
    # `GzipAsyncOutputStream::write` deflates with Z_NO_FLUSH): a streamed
    # text/plain body reaches such a client in large pieces only.
    headers = {"accept-encoding": "gzip"}
    response = get(
        probe, "/stream", params={"n": "1", "delay_ms": "0", "type": kind}, headers=headers
    )
    assert response.headers.get("content-encoding") == encoding
    assert response.text == "chunk 0\n"


def test_kv_binding_round_trips_from_python(probe: Runner) -> None:
    assert get(probe, "/kv?key=k1").json() == {"value": None}
    assert get(probe, "/kv?key=k1&value=v1").json() == {"value": "v1"}
    assert get(probe, "/kv?key=k1").json() == {"value": "v1"}


def test_rate_limiter_binding_enforces_the_configured_limit(probe: Runner) -> None:
    in_one_window(needed_s=10)
    outcomes = [get(probe, "/limit?key=client-a").json()["success"] for _ in range(4)]
    assert outcomes == [True, True, True, False]
    # Keys are counted separately.
    assert get(probe, "/limit?key=client-b").json()["success"] is True


def test_wait_until_work_finishes_after_the_response(probe: Runner) -> None:
    # The waitUntil task waits for a gate the test opens after the response:
    # the work cannot have run before, so the first read is None by
    # construction, not because a timer has not fired yet.
    params = {"key": "later-1", "gate": "later-gate-1"}
    assert get(probe, "/later", params=params).json() == {"scheduled": True}
    assert kv(probe, "later-1") is None
    get(probe, "/kv", params={"key": "later-gate-1", "value": "open"})
    eventually(lambda: kv(probe, "later-1") is not None, "the waitUntil task")
    assert kv(probe, "later-1") == "done after the response"


def test_client_disconnect_fires_request_signal(probe: Runner) -> None:
    # The route writes a tick every 50 ms: workerd notices a client that left
    # at its next write to it, and fires request.signal as the request ends
    # (worker-entrypoint.c++, WorkerEntrypoint::request).
    url = probe.base_url + "/watch-signal?key=sig-1"
    with httpx.stream("GET", url, timeout=HANG_GUARD_S) as response:
        ticks = response.iter_raw()  # kept: dropping it closes the connection
        assert next(ticks).startswith(b"tick")
        assert kv(probe, "sig-1") is None  # connected: the signal has not fired
    eventually(lambda: kv(probe, "sig-1") == "aborted", "request.signal firing on disconnect")


def test_assets_binding_is_a_fetcher_from_python(probe: Runner) -> None:
    response = get(probe, "/asset-via-binding")
    assert response.status_code == 200
    assert "probe page" in response.text


@pytest.mark.parametrize("method", ["HEAD"])
def test_head_of_an_asset_has_no_body(probe: Runner, method: str) -> None:
    response = httpx.request(method, probe.base_url + "/", timeout=HANG_GUARD_S)
    assert response.status_code == 200
    assert response.content == b""
