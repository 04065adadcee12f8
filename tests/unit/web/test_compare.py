"""Comparisons, votes, ratings and the leaderboard through ``app.handle``,
on the project's migrations in CPython's SQLite (D1 is SQLite) and a
scripted AI: what each route answers, what the database keeps, and what
the leaderboard counts."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from edgechat.answer import cache
from edgechat.core.faults import UpstreamBusy
from edgechat.core.http import Incoming, Reply
from edgechat.web import app
from tests.kit.sse import parse
from tests.unit.fakes import (
    FakeAi,
    FakeDb,
    FakeKv,
    FakePlatform,
    FakeRateLimiter,
    FakeSink,
    model,
    usage,
)
from tests.unit.fakes import openai_stream as openai

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"
SELF = "https://chat.example.com"
GLM, KIMI, LLAMA = model("glm").id, model("kimi").id, model("llama").id
TOKENS = {"ann": "ann-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}


def migrated() -> FakeDb:
    db = FakeDb()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        db.connection.executescript(path.read_text())
    return db


def answering(*ids: str) -> FakeAi:
    script = {
        name: openai(("content", f"An answer of {k}."), usage=usage(10, 5))
        for k, name in enumerate(ids)
    }
    return FakeAi(script)


class Deployment:
    """One deployment's bindings, shared by the requests a test makes."""

    def __init__(self, ai: FakeAi | None = None, **vars: str) -> None:
        self.db = migrated()
        self.usage_db: FakeDb | None = None
        self.ai = ai or answering(GLM, KIMI, LLAMA)
        self.limiter = FakeRateLimiter()
        keys = ",".join(f"{name}:{token}" for name, token in TOKENS.items())
        self.vars: dict[str, object] = {"API_KEYS": keys, "ADMINS": "ann", **vars}
        self.settings = app.SettingsOnce()

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        user: str | None = "ann",
        query: str = "",
        headers: Mapping[str, str] | None = None,
        kv: FakeKv | None = None,
    ) -> tuple[Reply, bytes]:
        sent = {"content-type": "application/json", "cf-connecting-ip": "203.0.113.9"}
        if user is not None:
            sent["authorization"] = f"Bearer {TOKENS[user]}"
        request = Incoming(method, path, SELF, {**sent, **(headers or {})}, query=query)
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        where = FakePlatform(
            vars=self.vars,
            body=raw if body is not None else b"",
            ai=self.ai,
            rate_limiter=self.limiter,
            history=self.db,
            db=self.usage_db,
            kv=kv,
        )

        async def run() -> tuple[Reply, bytes]:
            reply = await app.handle(request, where, self.settings)
            sink = FakeSink()
            if reply.stream is not None:
                await asyncio.wait_for(reply.stream(sink), 2)
            await where.settle()
            return reply, sink.body if reply.stream is not None else reply.body

        return asyncio.run(run())

    def json(self, *args: Any, **kwargs: Any) -> tuple[int, Any]:
        reply, body = self.call(*args, **kwargs)
        return reply.status, json.loads(body)

    def compare(self, *models: str, blind: bool = False, user: str = "ann") -> dict[str, Any]:
        status, made = self.json(
            "POST", "/api/comparisons", {"models": list(models), "blind": blind}, user=user
        )
        assert status == 201, made
        return made  # type: ignore[no-any-return]

    def answer(self, cid: str, slot: int, *, user: str = "ann", **body: Any) -> Any:
        question = {"messages": [{"role": "user", "content": "Which is better?"}], **body}
        reply, raw = self.call(
            "POST", "/chat", question, user=user, query=f"comparison={cid}&slot={slot}"
        )
        return reply, (parse(raw) if reply.stream is not None else json.loads(raw))

    def slots(self) -> list[tuple[Any, ...]]:
        rows = self.db.connection.execute(
            "SELECT slot, model, state, error FROM comparison_slots ORDER BY comparison, slot"
        )
        return [tuple(row) for row in rows]


def test_a_comparison_answers_each_slot_with_its_model_once_and_keeps_how_it_went() -> None:
    site = Deployment()
    made = site.compare("glm", "kimi")
    assert [s["model"] for s in made["slots"]] == [GLM, KIMI]
    assert made["blind"] is False
    assert len(site.limiter.keys) == 2  # a token per answer
    for slot in (0, 1):
        reply, events = site.answer(made["id"], slot)
        assert reply.status == 200
        assert events.meta["comparison"] == {"id": made["id"], "slot": slot, "blind": False}
        assert events.meta["model"] == [GLM, KIMI][slot]
        assert events.final.data["cost_usd"] is not None
    # The answers took no token of their own, and each model answered its own.
    assert len(site.limiter.keys) == 2
    assert site.ai.models_called == [GLM, KIMI]
    assert site.slots() == [(0, GLM, "done", None), (1, KIMI, "done", None)]
    again, body = site.answer(made["id"], 0)
    assert again.status == 409
    assert body["error"]["code"] == "slot_answered"
    status, shown = site.json("GET", f"/api/comparisons/{made['id']}")
    assert status == 200
    assert [s["state"] for s in shown["slots"]] == ["done", "done"]
    assert shown["slots"][0]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}


def test_a_blind_comparison_names_no_model_until_its_vote() -> None:
    site = Deployment()
    made = site.compare("glm", "kimi", "llama", blind=True)
    assert [s["model"] for s in made["slots"]] == [None, None, None]
    for slot in range(3):
        reply, events = site.answer(made["id"], slot)
        assert reply.status == 200
        assert events.meta["model"] is None
        assert events.final.data["model"] is None
        assert events.final.data["cost_usd"] is None
        assert events.final.data["usage"]["completion_tokens"] == 5
        assert "X-Edgechat-Route" not in reply.headers
    _, before = site.json("GET", f"/api/comparisons/{made['id']}")
    assert [s["model"] for s in before["slots"]] == [None, None, None]
    assert [s["cost_usd"] for s in before["slots"]] == [None, None, None]
    status, voted = site.json("POST", "/api/feedback", {"comparison": made["id"], "choice": 1})
    assert status == 201
    assert voted["feedback"]["choice"] == 1
    revealed = [s["model"] for s in voted["comparison"]["slots"]]
    assert sorted(revealed) == sorted([GLM, KIMI, LLAMA])
    _, after = site.json("GET", f"/api/comparisons/{made['id']}")
    assert [s["model"] for s in after["slots"]] == revealed
    assert all(s["cost_usd"] is not None for s in after["slots"])


def test_a_blind_answer_that_names_a_model_is_refused_whatever_the_model() -> None:
    site = Deployment()
    made = site.compare("glm", "kimi", blind=True)
    for name in ("glm", "kimi"):
        reply, body = site.answer(made["id"], 0, model=name)
        assert reply.status == 400
        assert body["error"]["message"] == "model is not given for a blind comparison's answer."
    open_ = site.compare("glm", "kimi")
    reply, body = site.answer(open_["id"], 0, model="kimi")
    assert reply.status == 400
    assert body["error"]["message"] == "model must be the comparison slot's model, or left out."
    reply, _ = site.answer(open_["id"], 0, model="glm")
    assert reply.status == 200
    assert site.ai.models_called == [GLM]


def test_another_users_comparison_is_not_found_and_nothing_of_it_changes() -> None:
    site = Deployment()
    made = site.compare("glm", "kimi")
    reply, body = site.answer(made["id"], 0, user="bob")
    assert reply.status == 404
    assert body["error"]["code"] == "not_found"
    assert site.json("GET", f"/api/comparisons/{made['id']}", user="bob")[0] == 404
    status, refused = site.json(
        "POST", "/api/feedback", {"comparison": made["id"], "choice": "tie"}, user="bob"
    )
    assert (status, refused["error"]["code"]) == (404, "not_found")
    unknown = "A" * 24
    assert site.json("POST", "/api/feedback", {"comparison": unknown, "choice": 0})[0] == 404
    assert site.slots() == [(0, GLM, "open", None), (1, KIMI, "open", None)]
    assert site.ai.models_called == []


def test_a_vote_needs_two_finished_answers_and_is_given_once() -> None:
    site = Deployment(
        FakeAi(
            {
                GLM: UpstreamBusy(detail="busy"),
                KIMI: openai(("content", "k")),
                LLAMA: openai(("content", "l")),
            }
        )
    )
    made = site.compare("glm", "kimi", "llama")
    reply, refused = site.answer(made["id"], 0)
    assert (reply.status, refused["error"]["code"]) == (503, "model_busy")
    assert site.slots()[0] == (0, GLM, "failed", "model_busy")
    site.answer(made["id"], 1)
    vote = {"comparison": made["id"], "choice": 2}
    status, refused = site.json("POST", "/api/feedback", vote)
    assert (status, refused["error"]["code"]) == (409, "answer_unfinished")
    site.answer(made["id"], 2)
    status, refused = site.json("POST", "/api/feedback", {**vote, "choice": 0})
    assert (status, refused["error"]["code"]) == (409, "answer_unfinished")
    assert site.json("POST", "/api/feedback", vote)[0] == 201
    status, refused = site.json("POST", "/api/feedback", {**vote, "choice": 1})
    assert (status, refused["error"]["code"]) == (409, "already_voted")
    counted = site.db.connection.execute(
        "SELECT model, votes, wins, losses FROM board_votes WHERE user = 'key:ann' ORDER BY model"
    ).fetchall()
    assert [tuple(row) for row in counted] == [(LLAMA, 1, 1, 0), (KIMI, 1, 0, 1)]


def test_the_checks_a_comparison_spends_against_refuse_it_before_any_model_is_asked() -> None:
    site = Deployment()
    site.limiter = FakeRateLimiter(allow=2)
    status, body = site.json("POST", "/api/comparisons", {"models": ["glm", "kimi", "llama"]})
    assert (status, body["error"]["code"]) == (429, "rate_limited")
    assert site.ai.models_called == []
    assert site.db.connection.execute("SELECT COUNT(*) FROM comparisons").fetchone()[0] == 0


def test_a_spent_budget_refuses_a_comparison_before_any_model_is_asked() -> None:
    site = Deployment(USER_DAILY_USD="0.000001")
    site.usage_db = FakeDb()
    site.usage_db.connection.execute(
        "CREATE TABLE spend (day TEXT NOT NULL, user TEXT NOT NULL, requests INTEGER NOT NULL "
        "DEFAULT 0, usd REAL NOT NULL DEFAULT 0, neurons REAL NOT NULL DEFAULT 0, "
        "PRIMARY KEY (day, user))"
    )
    from edgechat.users.usage import day_of

    site.usage_db.connection.execute(
        "INSERT INTO spend VALUES (?, 'key:ann', 1, 1.0, 0)", (day_of(),)
    )
    status, body = site.json("POST", "/api/comparisons", {"models": ["glm", "kimi"]})
    assert (status, body["error"]["code"]) == (429, "budget_exhausted")
    assert site.ai.models_called == []


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"models": ["glm"]}, "models must list 2 to 3 of GET /api/models' models."),
        (
            {"models": ["glm", "glm"]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        (
            {"models": ["glm", "SECRET-MODEL"]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        ({"models": ["glm", "kimi"], "blind": "yes"}, "blind must be true or false."),
        (
            {"models": ["glm", "kimi"], "SECRET": 1},
            "A comparison takes models, blind, conversation only.",
        ),
    ],
)
def test_a_malformed_comparison_is_a_400_naming_the_field(body: Any, message: str) -> None:
    site = Deployment(MODELS="auto,glm,kimi,llama")
    status, refused = site.json("POST", "/api/comparisons", body)
    assert status == 400
    assert refused["error"]["message"] == message
    assert "SECRET" not in json.dumps(refused)


def test_ratings_are_each_users_own_replaced_not_added_and_counted() -> None:
    site = Deployment()
    rating = {"conversation": "c1", "node": "n1", "rating": "up", "model": "glm", "tags": ["slow"]}
    status, kept = site.json("POST", "/api/feedback", rating)
    assert status == 201
    assert kept["feedback"]["model"] == GLM
    status, kept = site.json("POST", "/api/feedback", {**rating, "rating": "down", "text": " Meh "})
    assert status == 200
    assert kept["feedback"]["text"] == "Meh"
    site.json("POST", "/api/feedback", {**rating, "node": "n2"}, user="bob")
    counted = site.db.connection.execute(
        "SELECT user, up, down FROM board_models ORDER BY user"
    ).fetchall()
    # Each user's, and the account's (everyone's) beside them.
    assert [tuple(row) for row in counted] == [("*", 1, 1), ("key:ann", 0, 1), ("key:bob", 1, 0)]
    status, mine = site.json("GET", "/api/feedback")
    assert status == 200
    assert [(f["node"], f["rating"]) for f in mine["feedback"]] == [("n1", "down")]
    _, bobs = site.json("GET", "/api/feedback", user="bob")
    assert [(f["node"], f["rating"]) for f in bobs["feedback"]] == [("n2", "up")]


def test_the_leaderboard_is_the_users_own_and_an_admins_everyones() -> None:
    site = Deployment()
    for user, winner in (("ann", 0), ("ann", 0), ("bob", 1)):
        made = site.compare("glm", "kimi", user=user)
        site.answer(made["id"], 0, user=user)
        site.answer(made["id"], 1, user=user)
        site.json("POST", "/api/feedback", {"comparison": made["id"], "choice": winner}, user=user)
    status, bobs = site.json("GET", "/api/leaderboard", user="bob")
    assert status == 200
    assert bobs["user"] == "key:bob"
    by_model = {m["model"]: m for m in bobs["models"]}
    assert by_model[KIMI]["open"]["wins"] == 1
    assert by_model[GLM]["open"]["losses"] == 1
    assert by_model[GLM]["answers"] == 1
    assert site.json("GET", "/api/leaderboard", user="bob", query="user=key:ann")[0] == 403
    _, everyone = site.json("GET", "/api/leaderboard", query="days=7")
    assert everyone["user"] is None
    glm = next(m for m in everyone["models"] if m["model"] == GLM)
    assert (glm["open"]["votes"], glm["open"]["wins"], glm["open"]["losses"]) == (3, 2, 1)
    assert glm["open"]["rating_low"] < glm["open"]["rating"] < glm["open"]["rating_high"]
    assert glm["answers"] == 3
    assert glm["ttft_ms"] is not None
    _, anns = site.json("GET", "/api/leaderboard", query="user=key:bob")
    assert {m["model"]: m["open"]["wins"] for m in anns["models"]} == {GLM: 0, KIMI: 1}


def test_my_data_holds_the_feedback_and_delete_everything_takes_it_and_its_counts() -> None:
    site = Deployment()
    made = site.compare("glm", "kimi", blind=True)
    site.answer(made["id"], 0)
    site.answer(made["id"], 1)
    site.json("POST", "/api/feedback", {"comparison": made["id"], "choice": "both_bad"})
    site.json("POST", "/api/feedback", {"conversation": "c1", "node": "n1", "rating": "up"})
    other = site.compare("glm", "kimi", user="bob")
    status, mine = site.json("GET", "/api/my-data")
    assert status == 200
    assert [f["kind"] for f in mine["feedback"]] == ["vote", "rating"]
    assert [c["id"] for c in mine["comparisons"]] == [made["id"]]
    assert all(s["model"] for s in mine["comparisons"][0]["slots"])
    reply, _ = site.call("DELETE", "/api/my-data", headers={"if-match": "*"})
    assert reply.status == 204
    left = site.db.connection.execute
    assert left("SELECT COUNT(*) FROM feedback").fetchone()[0] == 0
    assert left("SELECT user FROM comparisons").fetchall()[0][0] == "key:bob"
    for table in ("board_votes", "board_pairs", "board_models"):
        assert left(f"SELECT COUNT(*) FROM {table} WHERE user = 'key:ann'").fetchone()[0] == 0
    # The account's counts are Bob's alone now (his comparison has no answer yet).
    assert left("SELECT SUM(votes) FROM board_votes WHERE user = '*'").fetchone()[0] == 0
    account = left("SELECT SUM(answers), SUM(up) FROM board_models WHERE user = '*'")
    assert tuple(account.fetchone()) == (0, 0)
    assert site.json("GET", f"/api/comparisons/{other['id']}", user="bob")[0] == 200


def test_a_comparisons_answer_is_never_the_caches_and_never_stored_there() -> None:
    site = Deployment(CACHE_MODE="all")
    kv = FakeKv()
    made = site.compare("glm", "kimi")
    reply, raw = site.call(
        "POST",
        "/chat",
        {"messages": [{"role": "user", "content": "Cache me?"}]},
        query=f"comparison={made['id']}&slot=0",
        kv=kv,
    )
    assert reply.status == 200
    assert "X-Edgechat-Cache" not in reply.headers
    assert not [key for key in (*kv.items, *kv.gets) if key.startswith(cache.KEY_PREFIX)]
    assert parse(raw).final.name == "done"


def test_v1_compare_answers_a_choice_per_model_and_a_failed_one_says_so() -> None:
    ai = FakeAi(
        {GLM: UpstreamBusy(detail="busy"), KIMI: openai(("content", "Kimi's."), usage=usage(3, 2))}
    )
    site = Deployment(ai)
    body = {
        "model": "glm",
        "messages": [{"role": "user", "content": "Which?"}],
        "edgechat": {"compare_with": ["kimi"]},
    }
    status, done = site.json("POST", "/v1/chat/completions", body)
    assert status == 200, done
    failed, answered = done["choices"]
    assert (failed["index"], failed["model"], failed["finish_reason"]) == (0, GLM, "error")
    assert failed["message"] == {"role": "assistant", "content": None}
    assert failed["edgechat"]["error"]["code"] == "model_busy"
    assert (answered["index"], answered["model"]) == (1, KIMI)
    assert answered["message"]["content"] == "Kimi's."
    assert answered["edgechat"]["usage"]["completion_tokens"] == 2
    assert done["usage"]["completion_tokens"] == 2
    assert site.slots() == [(0, GLM, "failed", "model_busy"), (1, KIMI, "done", None)]
    # A token for each answer, taken before any model was asked.
    assert len(site.limiter.keys) == 2


def test_v1_compare_with_every_answer_failing_is_the_first_ones_error() -> None:
    ai = FakeAi({GLM: UpstreamBusy(detail="busy"), KIMI: UpstreamBusy(detail="busy")})
    site = Deployment(ai)
    body = {
        "model": "glm",
        "messages": [{"role": "user", "content": "Which?"}],
        "edgechat": {"compare_with": ["kimi"]},
    }
    status, refused = site.json("POST", "/v1/chat/completions", body)
    assert status == 503
    assert refused["error"]["code"] == "model_busy"
    assert [row[2] for row in site.slots()] == ["failed", "failed"]
