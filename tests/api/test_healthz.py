"""`GET /healthz` over HTTP, against the runner or any edgechat server."""

import httpx


def test_healthz_answers_ok(edgechat_url: str) -> None:
    response = httpx.get(edgechat_url + "/healthz", timeout=10)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json() == {"status": "ok"}


def test_healthz_refuses_other_methods_with_allow(edgechat_url: str) -> None:
    response = httpx.post(edgechat_url + "/healthz", timeout=10)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


def test_unknown_api_path_is_a_generic_404(edgechat_url: str) -> None:
    response = httpx.get(edgechat_url + "/api/nothing-here", timeout=10)
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found."}}
