"""The routing table over HTTP: the page, /api/models, 405 + Allow, unknown paths."""

from __future__ import annotations

import httpx
import pytest

from tests.api.checks import GLM, KIMI, LLAMA, assert_error


def _csp(response: httpx.Response) -> dict[str, list[str]]:
    header = response.headers.get("content-security-policy")
    assert header, "the page has no Content-Security-Policy"
    directives: dict[str, list[str]] = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            directives[words[0].lower()] = words[1:]
    return directives


def test_page_is_served_with_security_headers(client: httpx.Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == "text/html"
    assert "<html" in response.text.lower() or "<!doctype html" in response.text.lower()
    assert response.headers.get("x-content-type-options") == "nosniff"
    assert response.headers.get("referrer-policy") in {
        "no-referrer",
        "same-origin",
        "strict-origin",
        "strict-origin-when-cross-origin",
    }
    csp = _csp(response)
    assert csp.get("frame-ancestors") == ["'none'"], csp
    scripts = csp.get("script-src", csp.get("default-src"))
    assert scripts is not None, f"the CSP does not restrict scripts: {csp}"
    assert "'unsafe-inline'" not in scripts, csp
    assert "*" not in scripts, csp


def test_page_answers_head(client: httpx.Client) -> None:
    response = client.head("/")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == "text/html"


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_page_refuses_other_methods(client: httpx.Client, method: str) -> None:
    # The page is a static asset: the platform's assets router refuses other
    # methods itself, with an empty 405, before the Worker would run (seen
    # on workerd 1.20261117.1, whose router is the one the edge runs).
    response = client.request(method, "/", content=b"{}")
    assert response.status_code == 405
    assert response.content == b""


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/healthz", "GET, HEAD"),
        ("DELETE", "/healthz", "GET, HEAD"),
        ("POST", "/api/models", "GET, HEAD"),
        ("DELETE", "/api/models", "GET, HEAD"),
    ],
)
def test_wrong_method_is_405_with_allow(
    client: httpx.Client, method: str, path: str, allow: str
) -> None:
    response = client.request(method, path)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == allow


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_chat_refuses_other_methods_and_allows_post(client: httpx.Client, method: str) -> None:
    response = client.request(method, "/chat")
    assert_error(response, 405, "method_not_allowed")
    allowed = {word.strip() for word in response.headers["allow"].split(",")}
    assert "POST" in allowed, response.headers["allow"]
    assert method not in allowed


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/no-such-page-q7Zx"),
        ("POST", "/no-such-page-q7Zx"),
        ("GET", "/api/no-such-thing-q7Zx"),
        ("POST", "/chat/q7Zx"),
        ("GET", "/healthz/q7Zx"),
    ],
)
def test_unknown_path_is_a_generic_404(client: httpx.Client, method: str, path: str) -> None:
    response = client.request(method, path)
    assert_error(response, 404, "not_found", "q7Zx")


def test_api_responses_carry_nosniff(client: httpx.Client) -> None:
    for path in ("/healthz", "/api/models", "/api/limits"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.headers.get("x-content-type-options") == "nosniff", path


def test_models_lists_exactly_the_allowed_models(client: httpx.Client) -> None:
    response = client.get("/api/models")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == "application/json"
    models = response.json()
    assert isinstance(models, list)
    for entry in models:
        assert set(entry) == {
            "alias",
            "id",
            "label",
            "family",
            "context_window",
            "price_in_per_m",
            "price_out_per_m",
            "price_cached_in_per_m",
            "free_plan",
            "tools",
            "vision",
            "default",
        }, entry
        assert isinstance(entry["label"], str), entry
        assert entry["label"].strip(), entry
    summary = [
        (
            m["alias"],
            m["id"],
            m["family"],
            m["context_window"],
            m["price_in_per_m"],
            m["price_out_per_m"],
            m["price_cached_in_per_m"],
            m["free_plan"],
            m["default"],
        )
        for m in models
    ]
    assert summary == [
        # auto: the largest window of the models it may choose, no price until routed.
        ("auto", "auto", "Auto", 262_144, None, None, None, False, False),
        ("glm", GLM, "GLM", 131_072, 0.06, 0.40, None, True, True),
        ("kimi", KIMI, "Kimi", 262_144, 0.95, 4.00, 0.16, False, False),
        ("llama", LLAMA, "Llama", 32_000, 0.15, 0.29, None, True, False),
    ]


def test_models_answers_head(client: httpx.Client) -> None:
    response = client.head("/api/models")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0] == "application/json"
