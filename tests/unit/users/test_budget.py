"""Daily budgets (``budget``), over SQLite as D1 runs it, and through ``app.handle``:
the read runs beside the model call, a refusal aborts it, counts add up."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from edgechat.answer.candidates import Cooling
from edgechat.core.errors import BudgetExhausted
from edgechat.core.faults import UpstreamQuotaExhausted
from edgechat.core.http import Incoming
from edgechat.core.models import find
from edgechat.core.ports import DatabaseError
from edgechat.users import budget
from edgechat.users.usage import NEURONS_PER_USD, day_of
from edgechat.web import app
from tests.unit.fakes import FakeAi, FakeDb, FakePlatform, FakeSink, openai_stream, usage

GLM = find("glm")
assert GLM is not None
DAY = "2026-12-02"
NOON = 1_795_000_000.0 - 1_795_000_000.0 % 86_400 + 43_200


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_counts_add_up_per_user_and_for_the_account() -> None:
    db = FakeDb()
    for user, usd in (("key:a", 0.5), ("key:a", 0.25), ("key:b", 1.0)):
        run(budget.count(db, DAY, user, budget.spend_of(GLM, usd), "r"))
    rows = db.connection.execute("SELECT user, requests, usd FROM spend ORDER BY user").fetchall()
    assert [tuple(row) for row in rows] == [("*", 3, 1.75), ("key:a", 2, 0.75), ("key:b", 1, 1.0)]
    neurons = db.connection.execute("SELECT neurons FROM spend WHERE user = '*'").fetchone()[0]
    assert neurons == pytest.approx(1.75 * NEURONS_PER_USD)


def test_a_provider_s_answer_costs_dollars_but_no_neurons() -> None:
    provider = budget.spend_of(GLM, 1.0)
    assert provider.neurons > 0
    from edgechat.config.providers import Provider

    model = Provider("acme", "https://acme.example/v1", "m", "k", 1.0, 1.0).model
    assert budget.spend_of(model, 1.0) == budget.Spend(1.0, 0.0)


def test_the_check_refuses_past_a_limit_until_midnight() -> None:
    db = FakeDb()
    run(budget.count(db, DAY, "key:a", budget.spend_of(GLM, 0.10), "r"))
    limits = budget.Limits(user_usd=0.10, account_neurons=20_000)
    verdict = run(budget.check(db, limits, DAY, "key:a", NOON))
    assert isinstance(verdict.user, BudgetExhausted)
    assert verdict.user.headers() == {"Retry-After": str(43_200)}
    assert verdict.user.to_json()["error"]["resets_at"].endswith("T00:00:00Z")
    assert verdict.account is None  # 9,091 Neurons of 20,000
    other = run(budget.check(db, limits, DAY, "key:b", NOON))
    assert other == budget.Verdict()
    # Another day starts afresh; the account limit counts everyone.
    assert run(budget.check(db, limits, "2026-12-03", "key:a", NOON)) == budget.Verdict()
    run(budget.count(db, DAY, "key:b", budget.spend_of(GLM, 0.15), "r"))
    account = run(budget.check(db, limits, DAY, "key:c", NOON)).account
    assert isinstance(account, UpstreamQuotaExhausted)
    assert account.status == 429


def test_neurons_limit_a_user_too() -> None:
    db = FakeDb()
    run(budget.count(db, DAY, "anonymous", budget.Spend(0.0, 500.0), "r"))
    verdict = run(budget.check(db, budget.Limits(user_neurons=500), DAY, "anonymous", NOON))
    assert verdict.user is not None


def test_limits_are_read_from_vars() -> None:
    from edgechat.config.settings import Settings

    s = Settings.from_mapping(
        {"USER_DAILY_USD": "0.5", "USER_DAILY_NEURONS": "2000", "DAILY_NEURON_LIMIT": "10000"}
    )
    assert s.budget == budget.Limits(0.5, 2000, 10_000)
    assert not Settings().budget
    for var in ("USER_DAILY_USD", "USER_DAILY_NEURONS", "DAILY_NEURON_LIMIT"):
        with pytest.raises(ValueError, match=var):
            Settings.from_mapping({var: "-1"})


# --- through app.handle -------------------------------------------------------------

BODY = json.dumps({"messages": [{"role": "user", "content": "Hi"}]}).encode()
HEADERS = {"content-type": "application/json", "authorization": "Bearer tok-0123456789abcdef"}


def platform(db: FakeDb, ai: FakeAi | None = None, **vars: str) -> FakePlatform:
    hello = openai_stream(("content", "Hi!"), usage=usage(1000, 1000))
    return FakePlatform(
        vars={"API_KEYS": "ann:tok-0123456789abcdef", **vars},
        body=BODY,
        ai=ai or FakeAi({GLM.id: hello}),
        db=db,
    )


def serve(where: FakePlatform, cooling: Cooling | None = None) -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        request = Incoming("POST", "/chat", "https://chat.example", HEADERS)
        reply = await app.handle(request, where, cooling=cooling)
        sink = FakeSink()
        if reply.stream is not None:
            await reply.stream(sink)
        await where.settle()
        return reply.status, reply.body or sink.body

    return asyncio.run(go())


def test_an_answer_is_counted_and_the_next_one_refused_once_over_budget() -> None:
    db = FakeDb()
    status, _ = serve(platform(db, USER_DAILY_USD="0.0001"))
    assert status == 200
    row = db.connection.execute("SELECT usd FROM spend WHERE user = 'key:ann'").fetchone()
    assert row[0] == pytest.approx((1000 * 0.06 + 1000 * 0.40) / 1e6)
    ai = FakeAi({GLM.id: openai_stream(("content", "never"))})
    status, body = serve(platform(db, ai, USER_DAILY_USD="0.0001"))
    assert status == 429
    assert json.loads(body)["error"]["code"] == "budget_exhausted"
    # The model call started with the read, and was aborted by the refusal.
    assert [call.model_id for call in ai.calls] == [GLM.id]
    assert all(call.cancelled or call.abandoned for call in ai.calls)


def test_past_the_account_limit_workers_ai_is_not_asked_again_today() -> None:
    db = FakeDb()
    run(budget.count(db, day_of(), "key:x", budget.Spend(0.0, 10_000.0), "r"))
    cooling = Cooling()
    ai = FakeAi({GLM.id: openai_stream(("content", "never"))})
    status, body = serve(platform(db, ai, DAILY_NEURON_LIMIT="10000"), cooling)
    assert status == 429
    assert json.loads(body)["error"]["code"] == "quota_exhausted"
    assert cooling.allocation_resets() is not None
    later = FakeAi({})
    status, _ = serve(platform(db, later, DAILY_NEURON_LIMIT="10000"), cooling)
    assert status == 429
    assert later.calls == []


def test_a_failing_store_lets_the_request_through(capsys: pytest.CaptureFixture[str]) -> None:
    db = FakeDb()
    db.fail = True
    status, _ = serve(platform(db, USER_DAILY_USD="0.0001"))
    assert status == 200
    out = capsys.readouterr().out
    assert '"budget_error":"read: D1_ERROR' in out
    assert '"budget_error": "count: D1_ERROR' in out


# --- a named key's own budget (KEY_DAILY_USD, KEY_DAILY_NEURONS) ----------------------

KEYS = "ann:tok-0123456789abcdef,ci:tok-fedcba9876543210"


def test_a_key_s_own_limits_replace_the_users_and_none_lifts_them() -> None:
    from edgechat.config.settings import Settings

    s = Settings.from_mapping(
        {
            "API_KEYS": KEYS,
            "USER_DAILY_USD": "0.5",
            "USER_DAILY_NEURONS": "2000",
            "KEY_DAILY_USD": "ci:25, ann:none",
            "KEY_DAILY_NEURONS": "ci:none",
            "DAILY_NEURON_LIMIT": "10000",
        }
    )
    assert s.budget.for_user("key:ci") == budget.Limits(25.0, None, 10_000)
    assert s.budget.for_user("key:ann") == budget.Limits(None, 2000, 10_000)
    # Anyone else (an Access user, the anonymous one) keeps USER_DAILY_*.
    assert s.budget.for_user("access:bo@example.com") == budget.Limits(0.5, 2000, 10_000)
    # Only overrides: still a budget to keep.
    only = Settings.from_mapping({"API_KEYS": KEYS, "KEY_DAILY_NEURONS": "ci:300"})
    assert only.budget
    assert only.budget.for_user("key:ci") == budget.Limits(None, 300, None)
    assert not only.budget.for_user("key:ann")
    # API_TOKEN is the key api_token.
    token = Settings.from_mapping({"API_TOKEN": "t" * 20, "KEY_DAILY_USD": "api_token:1.5"})
    assert token.budget.for_user("key:api_token").user_usd == 1.5
    # Without the secrets (scripts/check-config.sh reads [vars] alone) the
    # names cannot be checked, only the entries' form.
    unchecked = Settings.from_mapping({"KEY_DAILY_USD": "ci:2"})
    assert unchecked.budget.for_user("key:ci").user_usd == 2.0


@pytest.mark.parametrize(
    ("vars", "message"),
    [
        ({"KEY_DAILY_USD": "ci:1,:2"}, r"KEY_DAILY_USD entry 2 must be name:amount"),
        ({"KEY_DAILY_USD": "ann:1,ci:x"}, r"entry 2 \(ci\) must be a positive amount"),
        ({"API_KEYS": KEYS, "KEY_DAILY_USD": "bo:1"}, r"KEY_DAILY_USD entry 1 .*\(ann, ci\)"),
        ({"API_KEYS": KEYS, "KEY_DAILY_USD": "ci"}, r"KEY_DAILY_USD entry 1 must be name:amount"),
        ({"API_KEYS": KEYS, "KEY_DAILY_USD": "ci:1,ann:0"}, r"entry 2 \(ann\) must be a positive"),
        ({"API_KEYS": KEYS, "KEY_DAILY_USD": "ci:-1"}, r"positive amount of US dollars, or none"),
        ({"API_KEYS": KEYS, "KEY_DAILY_USD": "ci:nan"}, r"positive amount of US dollars"),
        ({"API_KEYS": KEYS, "KEY_DAILY_NEURONS": "ci:1.5"}, r"positive amount of Neurons"),
        ({"API_KEYS": KEYS, "KEY_DAILY_NEURONS": "ci:1,ci:2"}, r"names the key ci more than once"),
    ],
)
def test_a_bad_key_limit_is_a_configuration_error_naming_it(
    vars: dict[str, str], message: str
) -> None:
    from edgechat.config.settings import Settings

    with pytest.raises(ValueError, match=message) as refused:
        Settings.from_mapping(vars)
    assert "tok-" not in str(refused.value)  # never a token


def test_a_key_s_own_budget_refuses_it_while_another_key_goes_on() -> None:
    db = FakeDb()
    run(budget.count(db, day_of(), "key:ann", budget.Spend(0.01, 0.0), "r"))
    vars = {"API_KEYS": KEYS, "USER_DAILY_USD": "1", "KEY_DAILY_USD": "ann:0.005"}
    status, body = serve(platform(db, **vars))
    assert status == 429
    assert json.loads(body)["error"]["code"] == "budget_exhausted"
    # ci is under USER_DAILY_USD, having spent as much.
    run(budget.count(db, day_of(), "key:ci", budget.Spend(0.01, 0.0), "r"))
    ci = {**HEADERS, "authorization": "Bearer tok-fedcba9876543210"}

    async def go() -> int:
        reply = await app.handle(
            Incoming("POST", "/chat", "https://chat.example", ci), platform(db, **vars)
        )
        if reply.stream is not None:
            await reply.stream(FakeSink())
        return reply.status

    assert run(go()) == 200


# --- reservations against a cap (the shadow trials' row) ------------------------------


def shadow_row(db: FakeDb) -> tuple[int, float] | None:
    row = db.connection.execute(
        "SELECT requests, usd FROM spend WHERE day = ? AND user = ?", (DAY, budget.SHADOW)
    ).fetchone()
    return None if row is None else (row[0], row[1])


def test_a_reservation_is_made_only_while_the_day_stays_within_the_cap() -> None:
    db = FakeDb()
    three = budget.Spend(0.03, 0.03 * NEURONS_PER_USD)
    # The day's first reservation is guarded too (an INSERT without a conflict).
    assert run(budget.reserve(db, DAY, budget.SHADOW, budget.Spend(0.11, 0.0), 0.10)) is False
    assert shadow_row(db) is None
    granted = [run(budget.reserve(db, DAY, budget.SHADOW, three, 0.10)) for _ in range(4)]
    assert granted == [True, True, True, False]  # 0.09 held; 0.12 would pass 0.10
    assert shadow_row(db) == (0, pytest.approx(0.09))
    # Up to the cap exactly.
    assert run(budget.reserve(db, DAY, budget.SHADOW, budget.Spend(0.01, 0.0), 0.10)) is True
    assert shadow_row(db) == (0, pytest.approx(0.10))
    # Another day, another cap's worth; other rows untouched.
    assert run(budget.reserve(db, "2026-12-03", budget.SHADOW, three, 0.10)) is True
    assert db.connection.execute("SELECT count(*) FROM spend").fetchone()[0] == 2


def test_concurrent_reservations_never_pass_the_cap_together() -> None:
    db = FakeDb()
    each = budget.Spend(0.004, 0.0)

    async def twenty() -> list[bool]:
        return list(
            await asyncio.gather(
                *(budget.reserve(db, DAY, budget.SHADOW, each, 0.0130) for _ in range(20))
            )
        )

    granted = run(twenty())
    assert granted.count(True) == 3  # floor(0.013 / 0.004)
    row = shadow_row(db)
    assert row is not None
    assert row[1] <= 0.0130


def test_a_settled_reservation_becomes_the_cost_on_its_row_and_the_account_s() -> None:
    db = FakeDb()
    reserved = budget.spend_of(GLM, 0.05)
    assert run(budget.reserve(db, DAY, budget.SHADOW, reserved, 1.0))
    run(budget.count(db, DAY, budget.SHADOW, budget.spend_of(GLM, 0.002), "r", reserved=reserved))
    rows = db.connection.execute("SELECT user, requests, usd, neurons FROM spend ORDER BY user")
    found = {row[0]: tuple(row)[1:] for row in rows.fetchall()}
    assert found["*"] == (1, pytest.approx(0.002), pytest.approx(0.002 * NEURONS_PER_USD))
    assert found[budget.SHADOW] == (1, pytest.approx(0.002), pytest.approx(0.002 * NEURONS_PER_USD))


def test_a_batch_makes_every_table_it_is_given_when_one_is_missing() -> None:
    db = FakeDb()
    other = "CREATE TABLE IF NOT EXISTS other (n INTEGER)"
    rows = run(budget.batch(db, [("SELECT count(*) AS n FROM other", [])], (budget.SCHEMA, other)))
    assert rows == [[{"n": 0}]]
    assert db.batches[-1][:2] == [budget.SCHEMA, other]
    # Once made, one statement: no CREATE.
    run(budget.batch(db, [("SELECT count(*) AS n FROM spend", [])]))
    assert db.batches[-1] == ["SELECT count(*) AS n FROM spend"]


def test_a_count_returns_the_totals_after_it() -> None:
    # RETURNING on the upsert: what the answer crossed is known without a read.
    db = FakeDb()
    first = run(budget.count(db, DAY, "key:a", budget.Spend(0.5, 10.0), "r"))
    assert first == {"key:a": budget.Spend(0.5, 10.0), "*": budget.Spend(0.5, 10.0)}
    run(budget.count(db, DAY, "key:b", budget.Spend(0.25, 0.0), "r"))
    after = run(budget.count(db, DAY, "key:a", budget.Spend(0.25, 5.0), "r"))
    assert after == {"key:a": budget.Spend(0.75, 15.0), "*": budget.Spend(1.0, 15.0)}
    assert len(db.batches) == 4  # the first made the table: one more batch


def test_a_failed_count_returns_none() -> None:
    db = FakeDb()
    db.fail = True
    assert run(budget.count(db, DAY, "key:a", budget.Spend(0.5, 1.0), "r")) is None


def test_the_rows_of_several_days() -> None:
    db = FakeDb()
    assert run(budget.spent_on(db, "2026-12-01", DAY)) == {}
    run(budget.count(db, "2026-12-01", "key:a", budget.Spend(0.5, 1.0), "r"))
    run(budget.count(db, DAY, "key:a", budget.Spend(0.25, 2.0), "r"))
    run(budget.count(db, "2026-12-03", "key:a", budget.Spend(9.0, 9.0), "r"))
    assert run(budget.spent_on(db, "2026-12-01", DAY)) == {
        "2026-12-01": {"key:a": budget.Spend(0.5, 1.0), "*": budget.Spend(0.5, 1.0)},
        DAY: {"key:a": budget.Spend(0.25, 2.0), "*": budget.Spend(0.25, 2.0)},
    }


def test_a_batch_makes_the_tables_it_is_given() -> None:
    db = FakeDb()
    schema = ("CREATE TABLE IF NOT EXISTS t (x INTEGER)", "CREATE INDEX IF NOT EXISTS tx ON t (x)")
    rows = run(budget.batch(db, [("INSERT INTO t VALUES (1) RETURNING x", [])], schema))
    assert rows == [[{"x": 1}]]
    with pytest.raises(DatabaseError, match="no such table: u"):
        run(budget.batch(db, [("SELECT * FROM u", [])], schema))
