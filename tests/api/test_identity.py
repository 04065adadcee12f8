"""Who is asking, over HTTP: Cloudflare Access tokens signed by the test
(keys served from a loopback keys endpoint), named keys, and ``/api/me``.

Every broken token gets the same 401, and the log says why without the
token; a keys endpoint that is down fails closed with a 503.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, assert_error, log_record, post_chat, user
from tests.api.conftest import Server, ServerPool
from tests.kit.access import AUD, KeysServer, SigningKey, keys_server

KEY = SigningKey("kid-live")
NEXT = SigningKey("kid-next")
STRANGER = SigningKey("kid-nobody-has")
CI_TOKEN = "ci-token-5b8e0c71d2a94f36"
ASSERTION = "cf-access-jwt-assertion"


@pytest.fixture(scope="module")
def team() -> Iterator[KeysServer]:
    with keys_server(KEY) as server:
        yield server


@pytest.fixture
def server(servers: ServerPool, team: KeysServer) -> Server:
    return servers.get(
        {
            "ACCESS_TEAM_DOMAIN": team.team,
            "ACCESS_AUD": AUD,
            "API_KEYS": f"ci:{CI_TOKEN}",
            "ADMINS": "ci",
        }
    )


@pytest.fixture
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        yield client


def token(
    key: SigningKey, team: KeysServer, header: dict[str, Any] | None = None, **claims: Any
) -> str:
    return key.token(key.claims(team.team, **claims), header=header)


def test_a_valid_access_token_is_its_user(
    http: httpx.Client, server: Server, team: KeysServer
) -> None:
    signed = token(KEY, team)
    me = http.get("/api/me", headers={ASSERTION: signed})
    assert me.status_code == 200
    assert me.json() == {"user": "ann@example.com", "via": "access", "admin": False}
    chat = post_chat(http, user("hi"), headers={ASSERTION: signed})
    assert chat.events.text().startswith("This is the edgechat local Workers AI emulator")
    request_id = chat.response.headers["x-request-id"]
    assert log_record(server, request_id=request_id)["user"] == "access:ann@example.com"
    assert signed.split(".")[2][:24] not in server.log_text()


def broken(team: KeysServer) -> dict[str, str]:
    claims = KEY.claims(team.team)
    good = KEY.token(claims)
    return {
        "expired": token(KEY, team, exp=1_000_000_000),
        "not yet valid": token(KEY, team, nbf=4_000_000_000),
        "wrong aud": token(KEY, team, aud=["someone-else"]),
        "wrong issuer": token(KEY, team, iss="https://evil.cloudflareaccess.com"),
        "unknown kid": token(STRANGER, team),
        "alg none": KEY.token(claims, alg="none"),
        "HS256 with the public key": KEY.token(claims, alg="HS256"),
        "truncated": good[:-16],
        "padded": good + "==",
        "huge header": token(KEY, team, header={"pad": "x" * 9000}),
    }


def test_every_broken_token_is_refused_the_same_way_and_logged_without_it(
    http: httpx.Client, server: Server, team: KeysServer
) -> None:
    fetched = team.fetches
    bodies = set()
    for kind, bad in broken(team).items():
        response = http.post("/chat", json=user("hi"), headers={ASSERTION: bad})
        assert_error(response, 401, "unauthorized")
        bodies.add(response.text)
        record = log_record(server, request_id=response.headers["x-request-id"])
        assert record["error_code"] == "unauthorized", kind
        assert bad[-24:] not in server.log_text(), kind
    missing = http.post("/chat", json=user("hi"))
    bodies.add(missing.text)
    assert len(bodies) == 1, bodies
    # The unknown kid made one more fetch of the keys before it was refused.
    assert team.fetches == fetched + 1
    assert server.ai.calls() == []


def test_a_rotated_key_is_fetched_when_a_token_names_it(
    http: httpx.Client, team: KeysServer
) -> None:
    team.keys = [KEY, NEXT]
    try:
        response = http.get(
            "/api/me", headers={ASSERTION: token(NEXT, team, email="bo@example.com")}
        )
        assert response.status_code == 200
        assert response.json()["user"] == "bo@example.com"
    finally:
        team.keys = [KEY]


def test_a_named_key_is_its_user_on_every_route(http: httpx.Client, server: Server) -> None:
    auth = {"authorization": f"Bearer {CI_TOKEN}"}
    assert http.get("/api/me", headers=auth).json() == {"user": "ci", "via": "key", "admin": True}
    completion = http.post(
        "/v1/chat/completions",
        headers=auth,
        json={"model": "glm", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert completion.status_code == 200
    assert [call["model"] for call in server.ai.calls()] == [GLM]
    wrong = http.get("/api/me", headers={"authorization": "Bearer not-the-token"})
    assert_error(wrong, 401, "unauthorized")
    assert CI_TOKEN not in server.log_text()


def test_without_identity_settings_the_page_talks_to_an_anonymous_user(
    client: httpx.Client,
) -> None:
    me = client.get("/api/me")
    assert me.status_code == 200
    assert me.json() == {"user": "anonymous", "via": "anonymous", "admin": False}


def test_a_keys_endpoint_that_is_down_fails_closed(servers: ServerPool) -> None:
    with keys_server(KEY) as down:
        down.status = 503
        server = servers.get({"ACCESS_TEAM_DOMAIN": down.team, "ACCESS_AUD": AUD})
        with httpx.Client(base_url=server.url, timeout=30.0) as http:
            response = http.post("/chat", json=user("hi"), headers={ASSERTION: token(KEY, down)})
    assert_error(response, 503, "identity_unavailable")
    assert int(response.headers["retry-after"]) > 0
    assert server.ai.calls() == []
