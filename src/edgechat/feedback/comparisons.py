"""Comparisons: one question asked of 2 or 3 models, each answer a slot.

``POST /api/comparisons`` makes one (``parse``, then ``create``) once the
caller has passed the checks a comparison spends like that many answers
against (``web.compare``); nothing is asked of a model yet. Each answer is
then an ordinary ``POST /chat`` naming ``{"comparison": {"id", "slot"}}``:
``claim`` gives it the slot's model in the same statement that takes the
slot (each slot takes one request, and only the comparison's user's), and
``record`` keeps how it ended, through ``waitUntil``, with the
leaderboard's counts of it (``board_models``). A blind
comparison's slots are in a random order and ``read`` names their models
only once the comparison has its vote.

Every statement names the comparison's user (``user = ?``): another
user's comparison is never found, and a refusal says 404 as for one that
does not exist.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from edgechat.answer.framing import Outcome
from edgechat.core.errors import BadRequest, ModelNotFound, NotFound, SlotAnswered
from edgechat.core.ids import CLIENT_ID_RULE, is_client_id, new_id, random_below
from edgechat.core.models import AUTO, Model, lookup
from edgechat.core.ports import Database, DatabaseError
from edgechat.core.requests import MAX_COMPARED, MIN_COMPARED, Slot
from edgechat.users.budget import ACCOUNT
from edgechat.users.usage import day_of

__all__ = [
    "Asked",
    "Claimed",
    "Ended",
    "claim",
    "create",
    "ended",
    "parse",
    "read",
    "record",
]

FIELDS = ("models", "blind", "conversation")


@dataclass(frozen=True, slots=True)
class Asked:
    """A comparison as asked for: its models in the order given."""

    models: tuple[Model, ...]
    blind: bool = False
    conversation: str | None = None


def parse(data: Mapping[str, Any], allowed: Sequence[str]) -> Asked:
    """``POST /api/comparisons``'s body: ``{"models": [2 or 3 models],
    "blind": bool?, "conversation": id?}``; raises ``BadRequest`` naming the
    field, never repeating what it holds."""
    for key in data:
        if key not in FIELDS:
            raise BadRequest(public=f"A comparison takes {', '.join(FIELDS)} only.")
    names = data.get("models")
    if type(names) is not list or not MIN_COMPARED <= len(names) <= MAX_COMPARED:
        raise BadRequest(
            public=f"models must list {MIN_COMPARED} to {MAX_COMPARED} of GET /api/models' models."
        )
    models: list[Model] = []
    for index, name in enumerate(names):
        try:
            model = lookup(name, allowed) if type(name) is str else None
        except ModelNotFound:
            model = None
        if model is None or model is AUTO or model in models:
            raise BadRequest(
                public=f"models[{index}] must be another of GET /api/models' models (not auto)."
            )
        models.append(model)
    blind = data.get("blind", False)
    if type(blind) is not bool:
        raise BadRequest(public="blind must be true or false.")
    conversation = data.get("conversation")
    if conversation is not None and (
        type(conversation) is not str or not is_client_id(conversation)
    ):
        raise BadRequest(public=f"conversation must be a conversation id: {CLIENT_ID_RULE}.")
    return Asked(tuple(models), blind, conversation)


def shown_order(asked: Asked) -> tuple[Model, ...]:
    """The slots' models: in the order asked, or for a blind comparison in
    a random one (each order equally likely)."""
    if not asked.blind:
        return asked.models
    orders = list(itertools.permutations(asked.models))
    return orders[random_below(len(orders))]


_CREATE = (
    "INSERT INTO comparisons (id, user, blind, conversation, created) VALUES (?1, ?2, ?3, ?4, ?5)"
)
_SLOTS = (
    "INSERT INTO comparison_slots (comparison, slot, user, model, state, request) VALUES {rows}"
)


async def create(
    db: Database, user: str, asked: Asked, now_ms: int, *, answering: str | None = None
) -> dict[str, Any]:
    """A new comparison of ``asked``, as ``read`` would show it (a blind
    one's slots name no model). ``answering``: the request
    that answers every slot itself (the OpenAI API's), so none is open."""
    cid = new_id()
    models = shown_order(asked)
    state = "open" if answering is None else "answering"
    last = 3 + len(models)
    rows = ", ".join(f"(?1, {k}, ?2, ?{3 + k}, '{state}', ?{last})" for k in range(len(models)))
    statements: list[tuple[str, list[Any]]] = [
        (_CREATE, [cid, user, int(asked.blind), asked.conversation, now_ms]),
        (_SLOTS.format(rows=rows), [cid, user, *(m.id for m in models), answering]),
    ]
    await db.batch(statements)
    head = {
        "id": cid,
        "blind": asked.blind,
        "conversation": asked.conversation,
        "created": now_ms,
        "choice": None,
    }
    fresh = dict.fromkeys(_MEASURED)
    slots = [{**fresh, "slot": k, "model": m.id, "state": state} for k, m in enumerate(models)]
    return comparison_json(head, slots)


@dataclass(frozen=True, slots=True)
class Claimed:
    """A slot taken by a request: its model's id and the comparison's blindness."""

    model: str
    blind: bool


# The slot is the caller's, open, and (when the body named a model) that
# model's, in an open comparison: a blind one takes no named model at all,
# so that a refusal never tells a guess apart.
_CLAIM = (
    "UPDATE comparison_slots SET state = 'answering', request = ?4 "
    "WHERE comparison = ?1 AND slot = ?2 AND state = 'open' "
    "AND EXISTS (SELECT 1 FROM comparisons c WHERE c.id = ?1 AND c.user = ?5 "
    "AND (?3 IS NULL OR (c.blind = 0 AND comparison_slots.model = ?3))) "
    "RETURNING model, (SELECT blind FROM comparisons WHERE id = ?1) AS blind"
)
_SLOT_STATE = (
    "SELECT c.blind, s.model, s.state FROM comparisons c "
    "LEFT JOIN comparison_slots s ON s.comparison = c.id AND s.slot = ?2 "
    "WHERE c.id = ?1 AND c.user = ?3"
)


async def claim(db: Database, user: str, slot: Slot, request_id: str) -> Claimed:
    """Takes ``slot`` for ``request_id``: its model. Raises ``NotFound`` (no
    such comparison of the user's, or no such slot), ``SlotAnswered`` (a
    request took it already) or ``BadRequest`` (the body named a model: in
    a blind comparison, or not the slot's)."""
    named = None if slot.named is None else slot.named.id
    params = [slot.comparison, slot.index, named, request_id, user]
    taken = (await db.batch([(_CLAIM, params)]))[0]
    if taken:
        return Claimed(str(taken[0]["model"]), bool(taken[0]["blind"]))
    rows = (await db.batch([(_SLOT_STATE, [slot.comparison, slot.index, user])]))[0]
    if not rows:
        raise NotFound(public="No such comparison.", detail="claim of another's or no comparison")
    row = rows[0]
    if row["model"] is None:
        raise NotFound(public="The comparison has no such slot.", detail=f"slot {slot.index}")
    if row["state"] != "open":
        raise SlotAnswered(detail=f"slot {slot.index} is {row['state']}")
    if row["blind"]:
        raise BadRequest(public="model is not given for a blind comparison's answer.")
    raise BadRequest(public="model must be the comparison slot's model, or left out.")


@dataclass(frozen=True, slots=True)
class Ended:
    """How one answer of a comparison ended, as ``record`` keeps it."""

    done: bool
    ttft_ms: float | None = None
    tokens_per_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    finish_reason: str | None = None
    # A failed answer's error code ("client_closed": its client left).
    error: str | None = None


def ended(outcome: Outcome) -> Ended:
    """What ``record`` keeps of an answer's outcome: what it measured when it
    finished; its error's code when it did not."""
    if outcome.client_gone:
        return Ended(False, error="client_closed")
    if outcome.error is not None or outcome.model is None:
        code = outcome.error.code if outcome.error is not None else "internal_error"
        return Ended(False, ttft_ms=outcome.ttft_ms, error=code)
    usage = outcome.usage
    return Ended(
        True,
        ttft_ms=outcome.ttft_ms,
        tokens_per_s=outcome.tokens_per_s(),
        prompt_tokens=None if usage is None else usage["prompt_tokens"],
        completion_tokens=None if usage is None else usage["completion_tokens"],
        cost_usd=outcome.cost_usd(),
        finish_reason=outcome.finish_reason,
    )


_RECORD = (
    "UPDATE comparison_slots SET state = ?3, finished = ?4, ttft_ms = ?5, tokens_per_s = ?6, "
    "prompt_tokens = ?7, completion_tokens = ?8, cost_usd = ?9, finish_reason = ?10, error = ?11 "
    "WHERE comparison = ?1 AND slot = ?2 AND state = 'answering' AND request = ?12"
)
# The board's counts follow the slot's row, and only the change above: a
# record that changed nothing (none could: only the request that took the
# slot records it) counts nothing either. Counted for the user and for the
# account (``ACCOUNT``), in one statement.
_COUNT_ANSWER = (
    "INSERT INTO board_models (user, day, model, answers, failed, priced, cost_usd, up, down) "
    "SELECT w.who, ?5, s.model, s.state = 'done', s.state = 'failed', "
    "s.state = 'done' AND s.cost_usd IS NOT NULL, COALESCE(s.cost_usd, 0), 0, 0 "
    "FROM comparison_slots s JOIN (SELECT ?6 AS who UNION ALL SELECT ?7) w "
    "WHERE s.comparison = ?1 AND s.slot = ?2 AND s.request = ?3 AND s.finished = ?4 "
    "ON CONFLICT (user, day, model) DO UPDATE SET answers = answers + excluded.answers, "
    "failed = failed + excluded.failed, priced = priced + excluded.priced, "
    "cost_usd = cost_usd + excluded.cost_usd"
)


def record_statements(
    user: str, comparison: str, slot: int, request_id: str, end: Ended, now_s: float
) -> list[tuple[str, list[Any]]]:
    """The statements that keep ``end`` as the slot's, with its counts."""
    now_ms = int(now_s * 1000)
    row = [
        comparison,
        slot,
        "done" if end.done else "failed",
        now_ms,
        end.ttft_ms,
        end.tokens_per_s,
        end.prompt_tokens,
        end.completion_tokens,
        end.cost_usd,
        end.finish_reason,
        end.error,
        request_id,
    ]
    this = [comparison, slot, request_id, now_ms, day_of(now_s), user, ACCOUNT]
    return [(_RECORD, row), (_COUNT_ANSWER, this)]


async def record(
    db: Database, user: str, comparison: str, slot: int, request_id: str, end: Ended, now_s: float
) -> None:
    """Keeps how the slot's answer ended; runs after the reply, so a failure
    is logged (its own line: the request's is out), never raised."""
    try:
        await db.batch(record_statements(user, comparison, slot, request_id, end, now_s))
    except DatabaseError as exc:
        line = {"request_id": request_id, "comparison_error": f"record: {exc}"}
        print(json.dumps(line, separators=(",", ":")))


_READ = (
    "SELECT c.id, c.blind, c.conversation, c.created, "
    "(SELECT f.choice FROM feedback f WHERE f.user = c.user AND f.id = c.id) AS choice "
    "FROM comparisons c WHERE c.id = ?1 AND c.user = ?2"
)
# What a slot's row keeps once its answer ends.
_MEASURED = (
    "ttft_ms",
    "tokens_per_s",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "finish_reason",
    "error",
)
_READ_SLOTS = (
    f"SELECT slot, model, state, {', '.join(_MEASURED)} FROM comparison_slots "
    "WHERE comparison = ?1 "
    "AND EXISTS (SELECT 1 FROM comparisons WHERE id = ?1 AND user = ?2) ORDER BY slot"
)


def choice_json(choice: str) -> int | str:
    """A vote's choice as the API says it: a slot's number, ``tie`` or ``both_bad``."""
    return int(choice) if choice.isdigit() else choice


def slot_json(row: Mapping[str, Any], *, hidden: bool) -> dict[str, Any]:
    """One slot as the API shows it; ``hidden``: blind and not voted yet, so
    neither its model nor its cost (the price would tell the model)."""
    done = row["state"] == "done"
    tokens = None
    if row["completion_tokens"] is not None:
        tokens = {
            "prompt_tokens": row["prompt_tokens"],
            "completion_tokens": row["completion_tokens"],
        }
    return {
        "slot": row["slot"],
        "model": None if hidden else row["model"],
        "state": row["state"],
        "ttft_ms": row["ttft_ms"],
        "tokens_per_s": row["tokens_per_s"] if done else None,
        "usage": tokens,
        "cost_usd": None if hidden else row["cost_usd"],
        "finish_reason": row["finish_reason"],
        "error": row["error"],
    }


def comparison_json(head: Mapping[str, Any], slots: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    choice = head["choice"]
    hidden = bool(head["blind"]) and choice is None
    return {
        "id": head["id"],
        "blind": bool(head["blind"]),
        "conversation": head["conversation"],
        "created": head["created"],
        "vote": None if choice is None else choice_json(choice),
        "slots": [slot_json(row, hidden=hidden) for row in slots],
    }


async def read(db: Database, user: str, cid: str) -> dict[str, Any]:
    """The user's comparison as ``GET /api/comparisons/<id>`` shows it: its
    slots, how each ended, its vote; a blind one's models and costs once it
    has its vote. Raises ``NotFound`` (none, or another user's)."""
    head, slots = await db.batch([(_READ, [cid, user]), (_READ_SLOTS, [cid, user])])
    if not head:
        raise NotFound(public="No such comparison.", detail="read of another's or no comparison")
    return comparison_json(head[0], slots)
