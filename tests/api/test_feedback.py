"""Votes, ratings and the leaderboard over HTTP against the runner's local
D1: each user's feedback their own (every route tried with the other
user's ids), the refusals (404, 409, a malformed body's 400 naming the
field), ratings fitted from scripted votes matching the hand-computed
Bradley-Terry ones, My data, and the anonymous client's rule.
"""

from __future__ import annotations

import math
import time
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, KIMI, assert_error, post_chat, user
from tests.api.conftest import ClientFactory, Server, ServerPool, token_client

ANN = "ann-token-9b2e47c1d05f6a83"
BOB = "bob-token-4c81f2a7e9d036b5"
ROOT = "root-token-e6d3a0b8512c9f47"
# Carl's votes are the leaderboard test's alone; Dana's data is deleted.
CARL = "carl-token-2f7a9c05b1e4d638"
DANA = "dana-token-8e05c3b7a1f92d64"
KEYS = f"ann:{ANN},bob:{BOB},root:{ROOT},carl:{CARL},dana:{DANA}"
RATING = {"conversation": "c1", "node": "n1", "rating": "up", "model": "glm"}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    server = servers.get({"API_KEYS": KEYS, "ADMINS": "root"}, rate_limited=False)
    server.ai.script({"reply": {"content": "An answer."}})
    return server


def client_of(new_client: ClientFactory, server: Server, token: str) -> httpx.Client:
    return token_client(new_client, server, token)


@pytest.fixture
def ann(new_client: ClientFactory, server: Server) -> httpx.Client:
    return client_of(new_client, server, ANN)


@pytest.fixture
def bob(new_client: ClientFactory, server: Server) -> httpx.Client:
    return client_of(new_client, server, BOB)


def answered(client: httpx.Client, *models: str, blind: bool = False) -> dict[str, Any]:
    """A comparison with every slot answered and its outcome kept."""
    made = client.post("/api/comparisons", json={"models": list(models), "blind": blind})
    assert made.status_code == 201, made.text
    cid = made.json()["id"]
    for slot in range(len(models)):
        chat = post_chat(client, user("Which?"), params={"comparison": cid, "slot": slot})
        assert chat.events.final.name == "done"
    deadline = time.monotonic() + 15
    while True:  # the outcomes are kept after the streams, through waitUntil
        shown: dict[str, Any] = client.get(f"/api/comparisons/{cid}").json()
        if all(slot["state"] == "done" for slot in shown["slots"]):
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.05)


def vote(client: httpx.Client, cid: str, choice: int | str) -> httpx.Response:
    return client.post("/api/feedback", json={"comparison": cid, "choice": choice})


def slot_of(comparison: dict[str, Any], model: str) -> int:
    return next(s["slot"] for s in comparison["slots"] if s["model"] == model)


def test_feedback_is_each_users_own_whatever_route_names_the_others(
    ann: httpx.Client, bob: httpx.Client
) -> None:
    kept = ann.post("/api/feedback", json={**RATING, "tags": ["slow"], "text": "Ann's own words"})
    assert kept.status_code == 201, kept.text
    assert kept.json()["feedback"]["model"] == GLM
    bobs = bob.post("/api/feedback", json={**RATING, "rating": "down"})
    assert bobs.status_code == 201  # the same conversation and node ids: his own rating
    comparison = answered(ann, "glm", "kimi")
    # Bob tries each route with Ann's ids.
    assert_error(vote(bob, comparison["id"], 0), 404, "not_found")
    assert_error(bob.get(f"/api/comparisons/{comparison['id']}"), 404, "not_found")
    chat = post_chat(bob, user("hi"), params={"comparison": comparison["id"], "slot": 0})
    assert_error(chat.response, 404, "not_found")
    listed = bob.get("/api/feedback", params={"conversation": "c1"}).json()["feedback"]
    assert [(f["rating"], f["text"]) for f in listed] == [("down", None)]
    assert "Ann's own words" not in bob.get("/api/feedback").text
    assert_error(bob.get("/api/leaderboard", params={"user": "key:ann"}), 403, "admin_required")
    board = bob.get("/api/leaderboard").json()
    assert board["user"] == "key:bob"
    assert all(m["open"]["votes"] == 0 for m in board["models"])
    # Ann's vote is still hers to give, once.
    assert vote(ann, comparison["id"], 0).status_code == 201
    assert_error(vote(ann, comparison["id"], 1), 409, "already_voted")
    mine = ann.get("/api/feedback").json()
    assert [f["kind"] for f in mine["feedback"]] == ["vote", "rating"]
    assert mine["feedback"][1]["text"] == "Ann's own words"
    assert mine["seq"] >= 2


def test_a_vote_for_a_comparison_that_never_was_is_404_and_counts_nothing(
    ann: httpx.Client,
) -> None:
    before = ann.get("/api/leaderboard").json()
    assert_error(vote(ann, "Z" * 24, 0), 404, "not_found")
    assert ann.get("/api/leaderboard").json()["models"] == before["models"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"comparison": "SECRET-MARKER", "choice": 0},
            "comparison must be the id POST /api/comparisons gave.",
        ),
        (
            {"comparison": "Z" * 24, "choice": "SECRET-MARKER"},
            'choice must be a slot (0, 1, 2), "tie" or "both_bad".',
        ),
        (
            {"comparison": "Z" * 24, "choice": 0, "SECRET-MARKER": 1},
            "A vote takes comparison, choice only.",
        ),
        ({**RATING, "rating": "SECRET-MARKER"}, 'rating must be "up" or "down".'),
        (
            {**RATING, "node": "SECRET MARKER"},
            "node must be an id: 1 to 100 letters, digits, '.', '_' or '-'.",
        ),
        (
            {**RATING, "model": "SECRET-MARKER"},
            "model must be a model of GET /api/models, by alias or id.",
        ),
        (
            {**RATING, "tags": ["SECRET-MARKER"]},
            "tags must list different ones of: "
            "inaccurate, incomplete, unhelpful, too_long, unsafe, slow.",
        ),
        (
            {**RATING, "text": "SECRET-MARKER" * 100},
            "text must be a string of at most 500 characters.",
        ),
        (
            {"SECRET-MARKER": 1},
            "Feedback is a vote (comparison, choice) or a rating "
            "(conversation, node, rating, model, tags, text).",
        ),
    ],
)
def test_a_malformed_body_is_a_400_naming_the_field_never_echoing_it(
    ann: httpx.Client, body: dict[str, Any], message: str
) -> None:
    refused = ann.post("/api/feedback", json=body)
    assert_error(refused, 400, "invalid_request", "SECRET-MARKER", "SECRET MARKER")
    assert refused.json()["error"]["message"] == message


def bradley_terry_by_hand(wins: int, losses: int) -> tuple[float, float]:
    """Two models, ``wins`` : ``losses`` between them, each with the prior's
    one win and one loss against a reference model (θ = 0). The
    log-posterior is

        (w + 1) θa + (l + 1) θb - n log(e^θa + e^θb) - 2 log(1 + e^θa) - 2 log(1 + e^θb),

    unchanged by swapping the models and negating θ, so at its one maximum
    θb = -θa = -t, where it is (w - l) t - n log(2 cosh t) - 4 log(2 cosh(t/2)),
    whose slope (w - l) - n tanh t - 2 tanh(t/2) is zero. Solved by bisection;
    ratings (their mean 1000, as θa + θb = 0) are 1000 ± (400 / ln 10) t."""
    games = wins + losses
    low, high = -10.0, 10.0
    for _ in range(200):
        t = (low + high) / 2
        if games * math.tanh(t) + 2 * math.tanh(t / 2) < wins - losses:
            low = t
        else:
            high = t
    points = 400 / math.log(10)
    return 1000 + points * t, 1000 - points * t


def test_the_leaderboards_ratings_match_the_hand_computed_ones(
    new_client: ClientFactory, server: Server
) -> None:
    # A user of their own, so the board counts these votes alone.
    client = client_of(new_client, server, CARL)
    # Open: GLM preferred 3 times, Kimi once. Blind: one tie.
    for winner in (GLM, GLM, GLM, KIMI):
        comparison = answered(client, "glm", "kimi")
        assert vote(client, comparison["id"], slot_of(comparison, winner)).status_code == 201
    blind = answered(client, "glm", "kimi", blind=True)
    assert vote(client, blind["id"], "tie").status_code == 201
    board = client.get("/api/leaderboard", params={"days": 1}).json()
    assert board["method"]["name"] == "bradley_terry"
    assert board["method"]["prior_wins"] == 1
    by_model = {m["model"]: m for m in board["models"]}
    glm_rating, kimi_rating = bradley_terry_by_hand(3, 1)
    assert by_model[GLM]["open"]["rating"] == pytest.approx(glm_rating, abs=0.05)
    assert by_model[KIMI]["open"]["rating"] == pytest.approx(kimi_rating, abs=0.05)
    assert (by_model[GLM]["open"]["wins"], by_model[GLM]["open"]["losses"]) == (3, 1)
    assert by_model[GLM]["open"]["rating_low"] < glm_rating < by_model[GLM]["open"]["rating_high"]
    # The blind tie is counted apart: both at the mean.
    assert by_model[GLM]["blind"]["ties"] == 1
    assert by_model[GLM]["blind"]["rating"] == pytest.approx(1000, abs=0.05)
    assert by_model[KIMI]["blind"]["rating"] == pytest.approx(1000, abs=0.05)
    # Five comparisons, each model answered each: speed and cost per model.
    assert by_model[GLM]["answers"] == 5
    assert by_model[GLM]["ttft_ms"] > 0
    assert by_model[GLM]["usd_per_1000"] > 0
    # The admin sees everyone's, and can ask for carl's alone.
    admin = client_of(new_client, server, ROOT)
    only = admin.get("/api/leaderboard", params={"user": "key:carl", "days": 1}).json()
    assert only["user"] == "key:carl"
    assert only["models"] == board["models"]
    everyone = admin.get("/api/leaderboard").json()
    assert everyone["user"] is None
    assert everyone["viewer"] == {"user": "key:root", "admin": True}


def test_my_data_holds_the_feedback_and_delete_everything_takes_it(
    new_client: ClientFactory, server: Server
) -> None:
    dana = client_of(new_client, server, DANA)
    comparison = answered(dana, "glm", "kimi", blind=True)
    assert vote(dana, comparison["id"], "both_bad").status_code == 201
    dana.post("/api/feedback", json={**RATING, "text": "Kept until I say."})
    exported = dana.get("/api/my-data")
    assert exported.status_code == 200
    data = exported.json()
    assert comparison["id"] in [c["id"] for c in data["comparisons"]]
    assert {f["kind"] for f in data["feedback"]} == {"vote", "rating"}
    assert "Kept until I say." in exported.text
    gone = dana.delete("/api/my-data", headers={"if-match": "*"})
    assert gone.status_code == 204
    assert dana.get("/api/feedback").json()["feedback"] == []
    assert_error(dana.get(f"/api/comparisons/{comparison['id']}"), 404, "not_found")
    board = dana.get("/api/leaderboard").json()
    assert board["models"] == []
    left = dana.get("/api/my-data").json()
    assert (left["feedback"], left["comparisons"]) == ([], [])


@pytest.fixture
def anonymous(servers: ServerPool, new_client: ClientFactory) -> tuple[httpx.Client, Server]:
    # No identity configured: every client is the one anonymous user.
    server = servers.get({}, rate_limited=False)
    server.ai.script({"reply": {"content": "An answer."}})
    return new_client(server.url), server


def test_an_anonymous_client_gives_feedback_but_reads_none_back(
    anonymous: tuple[httpx.Client, Server],
) -> None:
    client, _ = anonymous
    comparison = answered(client, "glm", "kimi")
    assert vote(client, comparison["id"], 1).status_code == 201
    assert client.post("/api/feedback", json=RATING).status_code in (200, 201)
    with_text = client.post("/api/feedback", json={**RATING, "text": "Mine"})
    assert_error(with_text, 403, "sign_in_required")
    assert_error(client.get("/api/feedback"), 403, "sign_in_required")
    assert_error(client.get("/api/leaderboard"), 403, "sign_in_required")
    assert_error(client.get("/api/my-data"), 403, "sign_in_required")
