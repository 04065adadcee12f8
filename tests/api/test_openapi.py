"""``GET /openapi.json``: the document, as a static asset."""

from __future__ import annotations

import json

import httpx

from tests.kit.conformance import DOCUMENT


def test_the_document_is_served_as_json(client: httpx.Client) -> None:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    assert response.json() == json.loads(DOCUMENT.read_text())
    # The assets router answers it: no Python ran (the Worker stamps every
    # reply it makes with X-Request-Id).
    assert "x-request-id" not in response.headers


def test_head_answers_without_a_body(client: httpx.Client) -> None:
    response = client.head("/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].split(";")[0].strip() == "application/json"
    assert response.content == b""
