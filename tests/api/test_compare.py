"""Comparisons over HTTP against the runner: one question for 2 or 3
models (``POST /api/comparisons``), each answer a ``/chat`` stream of its
slot, blind ones hidden until the vote, refusals before any model is
asked, a failing stream among three, and the OpenAI API's
``edgechat.compare_with`` through the official client.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Any

import httpx
import pytest

from tests.api.checks import GLM, KIMI, LLAMA, Chat, assert_error, chunk_of, post_chat, user
from tests.api.conftest import ClientFactory, Server, ServerPool, openai_client, token_client
from tests.kit.ratelimit import in_one_window

ANN = "ann-token-5d0c7a21e98b4f36"
BOB = "bob-token-a3e61f09c27d8b54"
KEYS = f"ann:{ANN},bob:{BOB}"
# Each model says nothing of itself (the emulator's default answer names it).
ANSWERS = [
    {"match": {"model": GLM}, "reply": {"content": "First answer.", "delay_ms": 30}},
    {"match": {"model": KIMI}, "reply": {"content": "Second answer.", "delay_ms": 30}},
    {"match": {"model": LLAMA}, "reply": {"content": "Third answer.", "delay_ms": 30}},
]
TEXT = {GLM: "First answer.", KIMI: "Second answer.", LLAMA: "Third answer."}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    # Every request of a user shares the key's bucket: the limiter is
    # test_the_rate_limit_...'s own runner.
    return servers.get({"API_KEYS": KEYS}, rate_limited=False)


@pytest.fixture
def ann(new_client: ClientFactory, server: Server) -> httpx.Client:
    return token_client(new_client, server, ANN)


@pytest.fixture
def bob(new_client: ClientFactory, server: Server) -> httpx.Client:
    return token_client(new_client, server, BOB)


def compare(client: httpx.Client, *models: str, blind: bool = False) -> dict[str, Any]:
    made = client.post("/api/comparisons", json={"models": list(models), "blind": blind})
    assert made.status_code == 201, made.text
    body: dict[str, Any] = made.json()
    return body


def answer(client: httpx.Client, cid: str, slot: int, **body: Any) -> Chat:
    return post_chat(
        client, user("Which is better?", **body), params={"comparison": cid, "slot": slot}
    )


def answer_all(client: httpx.Client, cid: str, slots: int) -> list[Chat]:
    """Every slot's stream at once, as the page asks them side by side."""
    with concurrent.futures.ThreadPoolExecutor(slots) as pool:
        return list(pool.map(lambda k: answer(client, cid, k), range(slots)))


def settled(client: httpx.Client, cid: str) -> dict[str, Any]:
    """The comparison once no slot is still answering (each keeps how it
    ended after its stream, through waitUntil); bounded, never a guessed sleep."""
    deadline = time.monotonic() + 15
    while True:
        shown = client.get(f"/api/comparisons/{cid}")
        assert shown.status_code == 200, shown.text
        body: dict[str, Any] = shown.json()
        states = [slot["state"] for slot in body["slots"]]
        if "answering" not in states and "open" not in states:
            return body
        assert time.monotonic() < deadline, states
        time.sleep(0.05)


def test_two_models_answer_side_by_side_each_its_own_slot(
    ann: httpx.Client, server: Server
) -> None:
    server.ai.script(*ANSWERS)
    made = compare(ann, "glm", "kimi")
    assert [slot["model"] for slot in made["slots"]] == [GLM, KIMI]
    assert [slot["state"] for slot in made["slots"]] == ["open", "open"]
    assert made["blind"] is False
    assert made["vote"] is None
    assert server.ai.calls() == []  # nothing is asked until a slot is
    chats = answer_all(ann, made["id"], 2)
    for slot, (chat, model) in enumerate(zip(chats, (GLM, KIMI), strict=True)):
        assert chat.response.status_code == 200
        events = chat.events
        assert events.meta["model"] == model
        assert events.meta["comparison"] == {"id": made["id"], "slot": slot, "blind": False}
        assert events.text() == TEXT[model]
        done = events.final.data
        assert events.final.name == "done"
        assert done["model"] == model
        assert done["comparison"] == events.meta["comparison"]
        assert done["ttft_ms"] > 0
        assert done["cost_usd"] > 0
    calls = server.ai.wait_for_calls(2)
    assert sorted(call["model"] for call in calls) == [KIMI, GLM]
    shown = settled(ann, made["id"])
    for slot in shown["slots"]:
        assert slot["state"] == "done"
        assert slot["error"] is None
        assert slot["ttft_ms"] > 0
        assert slot["usage"]["completion_tokens"] == 2
        assert slot["cost_usd"] > 0
    # Each slot takes one request.
    again = answer(ann, made["id"], 1)
    assert_error(again.response, 409, "slot_answered")
    assert len(server.ai.calls()) == 2


def test_blind_mode_hides_the_models_until_the_vote_then_names_them(
    ann: httpx.Client, server: Server
) -> None:
    server.ai.script(*ANSWERS)
    made = compare(ann, "glm", "kimi", "llama", blind=True)
    assert [slot["model"] for slot in made["slots"]] == [None, None, None]
    chats = answer_all(ann, made["id"], 3)
    texts = []
    for chat in chats:
        events = chat.events
        assert events.meta["model"] is None
        assert events.meta["comparison"]["blind"] is True
        done = events.final.data
        assert done["model"] is None
        assert done["cost_usd"] is None
        assert done["usage"]["completion_tokens"] == 2
        assert "x-edgechat-route" not in chat.response.headers
        texts.append(events.text())
    assert sorted(texts) == sorted(TEXT.values())
    before = settled(ann, made["id"])
    assert [slot["model"] for slot in before["slots"]] == [None, None, None]
    assert [slot["cost_usd"] for slot in before["slots"]] == [None, None, None]
    # A guess at a slot's model is refused whatever it is, and takes nothing.
    other = compare(ann, "glm", "kimi", blind=True)
    for name in ("glm", "kimi"):
        guessed = answer(ann, other["id"], 0, model=name)
        assert_error(guessed.response, 400, "invalid_request")
    assert settled_states(ann, other["id"]) == ["open", "open"]
    voted = ann.post("/api/feedback", json={"comparison": made["id"], "choice": 2})
    assert voted.status_code == 201, voted.text
    revealed = voted.json()["comparison"]
    assert voted.json()["feedback"]["choice"] == 2
    by_slot = {slot["slot"]: slot["model"] for slot in revealed["slots"]}
    assert sorted(by_slot.values()) == sorted(TEXT)
    for slot, chat in enumerate(chats):
        assert TEXT[by_slot[slot]] == chat.events.text()  # the order shown was the slots'
    after = ann.get(f"/api/comparisons/{made['id']}").json()
    assert after["vote"] == 2
    assert [slot["model"] for slot in after["slots"]] == [by_slot[k] for k in range(3)]
    assert all(slot["cost_usd"] > 0 for slot in after["slots"])


def settled_states(client: httpx.Client, cid: str) -> list[str]:
    return [slot["state"] for slot in client.get(f"/api/comparisons/{cid}").json()["slots"]]


def test_one_of_three_streams_failing_leaves_a_vote_between_the_others(
    ann: httpx.Client, server: Server
) -> None:
    server.ai.script(
        {
            "match": {"model": KIMI},
            "chunks": [chunk_of({"content": "Half an"}), {"delay_ms": 20}, {"error": "3040: gone"}],
        },
        *ANSWERS,
    )
    made = compare(ann, "glm", "kimi", "llama")
    first, failing, third = answer_all(ann, made["id"], 3)
    assert first.events.final.name == "done"
    assert third.events.final.name == "done"
    assert failing.events.final.name == "error"
    assert failing.events.final.data["code"] == "upstream_error"
    assert "Half an" in failing.events.text()
    shown = settled(ann, made["id"])
    assert [slot["state"] for slot in shown["slots"]] == ["done", "failed", "done"]
    assert shown["slots"][1]["error"] == "upstream_error"
    refused = ann.post("/api/feedback", json={"comparison": made["id"], "choice": 1})
    assert_error(refused, 409, "answer_unfinished")
    voted = ann.post("/api/feedback", json={"comparison": made["id"], "choice": 0})
    assert voted.status_code == 201, voted.text
    twice = ann.post("/api/feedback", json={"comparison": made["id"], "choice": "tie"})
    assert_error(twice, 409, "already_voted")


def test_another_users_comparison_is_not_found_and_its_slots_stay_open(
    ann: httpx.Client, bob: httpx.Client, server: Server
) -> None:
    server.ai.script(*ANSWERS)
    made = compare(ann, "glm", "kimi")
    taken = answer(bob, made["id"], 0)
    assert_error(taken.response, 404, "not_found")
    assert_error(bob.get(f"/api/comparisons/{made['id']}"), 404, "not_found")
    unknown = "Q" * 24
    assert_error(answer(ann, unknown, 0).response, 404, "not_found")
    assert_error(ann.get(f"/api/comparisons/{unknown}"), 404, "not_found")
    assert settled_states(ann, made["id"]) == ["open", "open"]
    assert server.ai.calls() == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"comparison": "Q" * 24}, "A comparison's answer names both comparison and slot."),
        (
            {"comparison": "SECRET-MARKER", "slot": 0},
            "comparison must be the id POST /api/comparisons gave.",
        ),
        ({"comparison": "Q" * 24, "slot": 7}, "slot must be one of 0, 1, 2."),
    ],
)
def test_a_malformed_slot_is_a_400_naming_it(
    ann: httpx.Client, params: dict[str, Any], message: str
) -> None:
    refused = post_chat(ann, user("hi"), params=params)
    assert_error(refused.response, 400, "invalid_request", "SECRET-MARKER")
    assert refused.response.json()["error"]["message"] == message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"models": ["glm"]}, "models must list 2 to 3 of GET /api/models' models."),
        (
            {"models": ["glm", "SECRET-MARKER"]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        (
            {"models": ["glm", "glm"]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        ({"models": ["glm", "kimi"], "blind": "SECRET-MARKER"}, "blind must be true or false."),
        (
            {"models": ["glm", "kimi"], "SECRET-MARKER": 1},
            "A comparison takes models, blind, conversation only.",
        ),
    ],
)
def test_a_malformed_comparison_is_a_400_naming_the_field(
    ann: httpx.Client, server: Server, body: dict[str, Any], message: str
) -> None:
    refused = ann.post("/api/comparisons", json=body)
    assert_error(refused, 400, "invalid_request", "SECRET-MARKER")
    assert refused.json()["error"]["message"] == message


@pytest.fixture
def limited(servers: ServerPool) -> Server:
    return servers.get({"API_KEYS": KEYS})  # the rate limiter: 20 a minute a key


def test_the_rate_limit_refuses_a_comparison_before_any_model_is_asked(
    new_client: ClientFactory, limited: Server
) -> None:
    client = token_client(new_client, limited, BOB)
    in_one_window()
    rating = {"conversation": "c1", "node": "n1", "rating": "up"}
    for k in range(19):  # each write takes a token
        assert client.post("/api/feedback", json=rating).status_code in (200, 201), k
    # The 20th token is there, the 21st is not: a comparison of two is refused whole.
    refused = client.post("/api/comparisons", json={"models": ["glm", "kimi"]})
    assert_error(refused, 429, "rate_limited")
    assert int(refused.headers["retry-after"]) > 0
    assert limited.ai.calls() == []


@pytest.fixture
def budgeted(servers: ServerPool) -> Server:
    return servers.get({"API_KEYS": KEYS, "USER_DAILY_USD": "0.0005"}, rate_limited=False)


def test_a_spent_budget_refuses_a_comparison_before_any_model_is_asked(
    new_client: ClientFactory, budgeted: Server
) -> None:
    client = token_client(new_client, budgeted, ANN)
    costly = {"prompt_tokens": 10_000, "completion_tokens": 1_000, "total_tokens": 11_000}
    budgeted.ai.script({"reply": {"content": "A costly answer.", "usage": costly}})
    assert post_chat(client, user("hi")).events.final.name == "done"
    deadline = time.monotonic() + 15
    while True:  # the spend is counted after the answer
        refused = client.post("/api/comparisons", json={"models": ["glm", "kimi"]})
        if refused.status_code != 201 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    budgeted.ai.reset()
    refused = client.post("/api/comparisons", json={"models": ["glm", "kimi", "llama"]})
    assert_error(refused, 429, "budget_exhausted")
    assert refused.json()["error"]["resets_at"].endswith("T00:00:00Z")
    assert budgeted.ai.calls() == []


@pytest.fixture
def openai_answers(server: Server) -> Server:
    server.ai.script(*ANSWERS)
    return server


def test_v1_clients_compare_with_the_official_client_and_vote_with_their_key(
    openai_answers: Server, ann: httpx.Client
) -> None:
    with openai_client(openai_answers, ANN) as client:
        completion = client.chat.completions.create(
            model="glm",
            messages=[{"role": "user", "content": "Which is better?"}],
            extra_body={"edgechat": {"compare_with": ["kimi", "llama"]}},
        )
    assert len(completion.choices) == 3
    assert completion.model == GLM
    named = [(choice.index, getattr(choice, "model", None)) for choice in completion.choices]
    assert named == [(0, GLM), (1, KIMI), (2, LLAMA)]
    for choice in completion.choices:
        model = getattr(choice, "model", None)
        assert choice.message.content == TEXT[model]
        assert choice.finish_reason == "stop"
        extension = choice.model_extra["edgechat"]
        assert extension["cost_usd"] > 0
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 6
    cid = completion.model_extra["edgechat"]["comparison"]
    shown = settled(ann, cid)
    assert [slot["model"] for slot in shown["slots"]] == [GLM, KIMI, LLAMA]
    voted = ann.post("/api/feedback", json={"comparison": cid, "choice": 1})
    assert voted.status_code == 201, voted.text
    assert voted.json()["comparison"]["vote"] == 1


def test_v1_compare_refuses_a_stream_auto_and_a_wrong_n(openai_answers: Server) -> None:
    import openai

    with openai_client(openai_answers, ANN) as client:
        for extra, stream in (
            ({"edgechat": {"compare_with": ["kimi"]}}, True),
            ({"edgechat": {"compare_with": ["glm"]}}, False),
            ({"edgechat": {"compare_with": ["kimi"]}, "n": 3}, False),
            ({"edgechat": {"compare_with": ["SECRET-MARKER"]}}, False),
        ):
            with pytest.raises(openai.BadRequestError) as refused:
                client.chat.completions.create(
                    model="glm",
                    messages=[{"role": "user", "content": "hi"}],
                    stream=stream,
                    extra_body=extra,
                )
            assert "SECRET-MARKER" not in str(refused.value)
    assert openai_answers.ai.calls() == []
