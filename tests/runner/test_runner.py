"""The offline runner, observed from outside through the probe Worker."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.harness import Runner


def get(runner: Runner, path: str, **kwargs: object) -> httpx.Response:
    return httpx.get(runner.base_url + path, timeout=10, **kwargs)  # type: ignore[arg-type]


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
    response = httpx.post(probe.base_url + "/echo", content=b"hello body", timeout=10)
    assert response.status_code == 200
    echoed = response.json()
    assert echoed["method"] == "POST"
    assert echoed["body"] == "hello body"


def test_request_carries_client_ip_the_client_cannot_forge(probe: Runner) -> None:
    echoed = get(probe, "/echo", headers={"CF-Connecting-IP": "203.0.113.9"}).json()
    assert echoed["headers"]["cf-connecting-ip"] == "127.0.0.1"


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
    assert "exploded" not in response.text
    assert "Traceback" not in response.text
    # The traceback goes to the runner's log, not to the client.
    deadline = time.monotonic() + 5
    while "probe worker exploded on purpose" not in probe.log_text():
        assert time.monotonic() < deadline, "traceback missing from the runner log"
        time.sleep(0.05)
    assert get(probe, "/echo").status_code == 200


def test_streamed_body_arrives_incrementally(probe: Runner) -> None:
    arrivals: list[tuple[float, bytes]] = []
    start = time.monotonic()
    with httpx.stream("GET", probe.base_url + "/stream?n=5&delay_ms=150", timeout=10) as response:
        assert response.status_code == 200
        for chunk in response.iter_raw():
            arrivals.append((time.monotonic() - start, chunk))
    body = b"".join(chunk for _, chunk in arrivals)
    assert body == b"".join(f"chunk {i}\n".encode() for i in range(5))
    # Five writes 150 ms apart: the first arrives long before the last.
    assert len(arrivals) >= 4
    assert arrivals[-1][0] - arrivals[0][0] >= 0.45


def test_kv_binding_round_trips_from_python(probe: Runner) -> None:
    assert get(probe, "/kv?key=k1").json() == {"value": None}
    assert get(probe, "/kv?key=k1&value=v1").json() == {"value": "v1"}
    assert get(probe, "/kv?key=k1").json() == {"value": "v1"}


def test_rate_limiter_binding_enforces_the_configured_limit(probe: Runner) -> None:
    outcomes = [get(probe, "/limit?key=client-a").json()["success"] for _ in range(4)]
    assert outcomes == [True, True, True, False]
    # Keys are counted separately.
    assert get(probe, "/limit?key=client-b").json()["success"] is True


def test_wait_until_work_finishes_after_the_response(probe: Runner) -> None:
    assert get(probe, "/later?key=later-1").json() == {"scheduled": True}
    assert get(probe, "/kv?key=later-1").json() == {"value": None}
    deadline = time.monotonic() + 5
    while get(probe, "/kv?key=later-1").json()["value"] is None:
        assert time.monotonic() < deadline, "waitUntil task never completed"
        time.sleep(0.05)
    assert get(probe, "/kv?key=later-1").json() == {"value": "done after the response"}


def test_client_disconnect_fires_request_signal(probe: Runner) -> None:
    with httpx.stream("GET", probe.base_url + "/watch-signal?key=sig-1", timeout=10) as response:
        assert next(response.iter_raw()).startswith(b"tick")
    deadline = time.monotonic() + 3
    while get(probe, "/kv?key=sig-1").json()["value"] != "aborted":
        assert time.monotonic() < deadline, "request.signal did not fire on disconnect"
        time.sleep(0.05)


def test_assets_binding_is_a_fetcher_from_python(probe: Runner) -> None:
    response = get(probe, "/asset-via-binding")
    assert response.status_code == 200
    assert "probe page" in response.text


@pytest.mark.parametrize("method", ["HEAD"])
def test_head_of_an_asset_has_no_body(probe: Runner, method: str) -> None:
    response = httpx.request(method, probe.base_url + "/", timeout=10)
    assert response.status_code == 200
    assert response.content == b""
