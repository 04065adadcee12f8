"""Each user's feedback in D1 (the ``DB`` binding; ``migrations/``): votes
on their comparisons and ratings of any answer, listed back to them alone,
exported and erased with the rest of their data.

``POST /api/feedback`` takes either:

- a **vote**, ``{"comparison": id, "choice": slot | "tie" | "both_bad"}``:
  one per comparison, between the answers that finished (the slot chosen
  did; a tie or "both bad" needs two that did). The statement that keeps
  it checks all of that in its ``WHERE`` and adds the vote to the
  leaderboard's counts (``board_votes``, ``board_pairs``) in the same
  transaction, so no vote is counted twice and none refused is counted;
- a **rating**, ``{"conversation": id, "node": id, "rating": "up" |
  "down", "model"?, "tags"?, "text"?}``: one per answer (the page's node),
  replaced by a later one; its model's 👍/👎 counts follow it
  (``board_models``).

Every statement names the user (``user = ?``): nothing of another user's
is read, counted or told apart from what does not exist.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from edgechat.core.errors import AlreadyVoted, AnswerUnfinished, BadRequest, NotFound
from edgechat.core.http import seq_window, whole_param
from edgechat.core.ids import CLIENT_ID_RULE, is_client_id, is_random_id
from edgechat.core.models import find
from edgechat.core.ports import Database
from edgechat.core.requests import MAX_COMPARED
from edgechat.feedback.comparisons import choice_json, comparison_json
from edgechat.users.budget import ACCOUNT
from edgechat.users.usage import day_of

__all__ = [
    "CHOICES",
    "RATINGS",
    "TAGS",
    "Rating",
    "Vote",
    "erase",
    "export",
    "list_page",
    "parse",
    "rate",
    "vote",
]

# What a vote may choose besides a slot: "tie" (both as good), "both_bad".
CHOICES = ("tie", "both_bad")
RATINGS = ("up", "down")
# Why a rating was given, the page's fixed reasons.
TAGS = ("inaccurate", "incomplete", "unhelpful", "too_long", "unsafe", "slow")

VOTE_FIELDS = ("comparison", "choice")
RATING_FIELDS = ("conversation", "node", "rating", "model", "tags", "text")

MAX_PAGE = 200
DEFAULT_PAGE = 50


@dataclass(frozen=True, slots=True)
class Vote:
    comparison: str
    # A slot's number, "tie" or "both_bad", as the database keeps it (text).
    choice: str


@dataclass(frozen=True, slots=True)
class Rating:
    conversation: str
    node: str
    rating: str
    model: str | None = None
    tags: tuple[str, ...] = ()
    text: str | None = None

    @property
    def id(self) -> str:
        # Client ids hold no "/", and a vote's id (a comparison's) none either.
        return f"{self.conversation}/{self.node}"


def parse(data: Mapping[str, Any], max_text: int) -> Vote | Rating:
    """A ``POST /api/feedback`` body; raises ``BadRequest`` naming the field,
    never repeating what it holds."""
    if "comparison" in data:
        return _vote(data)
    return _rating(data, max_text)


def _vote(data: Mapping[str, Any]) -> Vote:
    for key in data:
        if key not in VOTE_FIELDS:
            raise BadRequest(public=f"A vote takes {', '.join(VOTE_FIELDS)} only.")
    cid = data["comparison"]
    if type(cid) is not str or not is_random_id(cid):
        raise BadRequest(public="comparison must be the id POST /api/comparisons gave.")
    choice = data.get("choice")
    slots = ", ".join(str(k) for k in range(MAX_COMPARED))
    if type(choice) is int and 0 <= choice < MAX_COMPARED:
        return Vote(cid, str(choice))
    if type(choice) is str and choice in CHOICES:
        return Vote(cid, choice)
    raise BadRequest(public=f'choice must be a slot ({slots}), "tie" or "both_bad".')


def _rating(data: Mapping[str, Any], max_text: int) -> Rating:
    for key in data:
        if key not in RATING_FIELDS:
            raise BadRequest(
                public="Feedback is a vote (comparison, choice) or a rating "
                f"({', '.join(RATING_FIELDS)})."
            )
    ids = {}
    for name in ("conversation", "node"):
        value = data.get(name)
        if type(value) is not str or not is_client_id(value):
            raise BadRequest(public=f"{name} must be an id: {CLIENT_ID_RULE}.")
        ids[name] = value
    rating = data.get("rating")
    if type(rating) is not str or rating not in RATINGS:
        raise BadRequest(public='rating must be "up" or "down".')
    model = data.get("model")
    found = find(model) if type(model) is str else None
    if model is not None and found is None:
        raise BadRequest(public="model must be a model of GET /api/models, by alias or id.")
    tags = data.get("tags", [])
    if (
        type(tags) is not list
        or not all(type(tag) is str and tag in TAGS for tag in tags)
        or len(set(tags)) != len(tags)
    ):
        raise BadRequest(public=f"tags must list different ones of: {', '.join(TAGS)}.")
    text = data.get("text")
    if text is not None and (type(text) is not str or len(text) > max_text):
        raise BadRequest(public=f"text must be a string of at most {max_text} characters.")
    return Rating(
        ids["conversation"],
        ids["node"],
        rating,
        None if found is None else found.id,
        tuple(tags),
        (text.strip() or None) if text is not None else None,
    )


_NEXT_SEQ = "COALESCE((SELECT MAX(seq) FROM feedback WHERE user = ?1), 0) + 1"

# The vote, if the comparison is the user's, has no vote yet, and what it
# chooses finished (two answers at least, the one chosen among them).
_VOTE = (
    "INSERT INTO feedback (user, id, seq, kind, comparison, choice, conversation, day, "
    "created, updated, request) "
    f"SELECT ?1, ?2, {_NEXT_SEQ}, 'vote', ?2, ?3, c.conversation, ?4, ?5, ?5, ?6 "
    "FROM comparisons c WHERE c.id = ?2 AND c.user = ?1 "
    "AND (SELECT COUNT(*) FROM comparison_slots WHERE comparison = ?2 AND state = 'done') >= 2 "
    "AND (?7 IS NULL OR EXISTS (SELECT 1 FROM comparison_slots "
    "WHERE comparison = ?2 AND slot = ?7 AND state = 'done')) "
    "ON CONFLICT (user, id) DO NOTHING RETURNING seq"
)
# The vote's counts, from the row just written (``request``: this one), so
# a vote refused above counts nothing; the user's and the account's
# (``ACCOUNT``) in one statement. Each finished answer's model takes part
# in the vote: the chosen one wins, the others lose, or all tie.
_BOTH = "JOIN (SELECT ?1 AS who UNION ALL SELECT ?4) w"
_COUNT_VOTE = (
    "INSERT INTO board_votes (user, day, blind, model, votes, wins, losses, ties, both_bad) "
    "SELECT w.who, f.day, c.blind, s.model, 1, f.choice = CAST(s.slot AS TEXT), "
    "f.choice NOT IN ('tie', 'both_bad') AND f.choice <> CAST(s.slot AS TEXT), "
    "f.choice = 'tie', f.choice = 'both_bad' "
    "FROM feedback f JOIN comparisons c ON c.id = f.comparison "
    f"JOIN comparison_slots s ON s.comparison = c.id {_BOTH} "
    "WHERE f.user = ?1 AND f.id = ?2 AND f.request = ?3 AND s.state = 'done' "
    "ON CONFLICT (user, day, blind, model) DO UPDATE SET votes = votes + excluded.votes, "
    "wins = wins + excluded.wins, losses = losses + excluded.losses, "
    "ties = ties + excluded.ties, both_bad = both_bad + excluded.both_bad"
)
# The pairs the vote orders (a < b by id): the winner against each other
# finished answer; for a tie or "both bad", every pair ties. Two answers the
# vote did not choose between (a third one won) are not a pair of it.
_COUNT_PAIRS = (
    "INSERT INTO board_pairs (user, day, blind, a, b, a_wins, b_wins, ties) "
    "SELECT w.who, f.day, c.blind, s.model, t.model, f.choice = CAST(s.slot AS TEXT), "
    "f.choice = CAST(t.slot AS TEXT), f.choice IN ('tie', 'both_bad') "
    "FROM feedback f JOIN comparisons c ON c.id = f.comparison "
    "JOIN comparison_slots s ON s.comparison = c.id "
    f"JOIN comparison_slots t ON t.comparison = c.id AND s.model < t.model {_BOTH} "
    "WHERE f.user = ?1 AND f.id = ?2 AND f.request = ?3 "
    "AND s.state = 'done' AND t.state = 'done' "
    "AND (f.choice IN ('tie', 'both_bad') "
    "OR f.choice IN (CAST(s.slot AS TEXT), CAST(t.slot AS TEXT))) "
    "ON CONFLICT (user, day, blind, a, b) DO UPDATE SET a_wins = a_wins + excluded.a_wins, "
    "b_wins = b_wins + excluded.b_wins, ties = ties + excluded.ties"
)
_VOTE_STATE = (
    "SELECT EXISTS (SELECT 1 FROM feedback WHERE user = ?1 AND id = ?2) AS voted, "
    "(SELECT state FROM comparison_slots WHERE comparison = ?2 AND slot = ?3) AS chosen, "
    "(SELECT COUNT(*) FROM comparison_slots WHERE comparison = ?2 AND state = 'done') AS done, "
    "(SELECT COUNT(*) FROM comparison_slots WHERE comparison = ?2 AND state = 'answering') "
    "AS answering "
    "FROM comparisons WHERE id = ?2 AND user = ?1"
)


def vote_statements(
    user: str, chosen: Vote, now_s: float, request_id: str
) -> list[tuple[str, list[Any]]]:
    now_ms = int(now_s * 1000)
    slot = int(chosen.choice) if chosen.choice.isdigit() else None
    this = [user, chosen.comparison, request_id, ACCOUNT]
    return [
        (_VOTE, [user, chosen.comparison, chosen.choice, day_of(now_s), now_ms, request_id, slot]),
        (_COUNT_VOTE, this),
        (_COUNT_PAIRS, this),
    ]


async def vote(
    db: Database, user: str, chosen: Vote, now_s: float, request_id: str
) -> dict[str, Any]:
    """Keeps the user's vote on their comparison, counted on the
    leaderboard: the vote and the comparison it revealed. Raises
    ``NotFound`` (no such comparison of theirs), ``AlreadyVoted``,
    ``AnswerUnfinished`` or ``BadRequest`` (no such slot)."""
    # The comparison, as the vote reveals it, read in the same batch (one
    # round trip); a refused vote's reads go unused.
    reads = [(sql, [user, chosen.comparison]) for sql in (_VOTED, _SLOTS)]
    written, *_, head, slots = await db.batch(
        [*vote_statements(user, chosen, now_s, request_id), *reads]
    )
    if not written:
        await _vote_refused(db, user, chosen)
    return _voted(head[0], slots, chosen.comparison)


async def _vote_refused(db: Database, user: str, chosen: Vote) -> None:
    slot = int(chosen.choice) if chosen.choice.isdigit() else None
    rows = (await db.batch([(_VOTE_STATE, [user, chosen.comparison, slot])]))[0]
    if not rows:
        raise NotFound(public="No such comparison.", detail="vote on another's or no comparison")
    state = rows[0]
    if state["voted"]:
        raise AlreadyVoted()
    if slot is not None and state["chosen"] is None:
        raise BadRequest(public="choice must be a slot of the comparison.")
    # An answer still under way may finish in a moment: say when to retry.
    wait = 1 if state["answering"] else None
    raise AnswerUnfinished(
        detail=f"chosen {state['chosen']}, {state['done']} done", retry_after=wait
    )


_VOTED = (
    "SELECT c.id, c.blind, c.conversation, c.created, f.choice, f.seq, f.created AS voted, "
    "f.updated FROM comparisons c JOIN feedback f ON f.user = c.user AND f.id = c.id "
    "WHERE c.id = ?2 AND c.user = ?1"
)
_SLOTS = (
    "SELECT s.slot, s.model, s.state, s.ttft_ms, s.tokens_per_s, s.prompt_tokens, "
    "s.completion_tokens, s.cost_usd, s.finish_reason, s.error FROM comparison_slots s "
    "JOIN comparisons c ON c.id = s.comparison WHERE c.id = ?2 AND c.user = ?1 ORDER BY s.slot"
)


def _voted(row: Mapping[str, Any], slots: list[dict[str, Any]], cid: str) -> dict[str, Any]:
    item = {
        "kind": "vote",
        "comparison": cid,
        "choice": choice_json(row["choice"]),
        "conversation": row["conversation"],
        "seq": row["seq"],
        "created": row["voted"],
        "updated": row["updated"],
    }
    return {"feedback": item, "comparison": comparison_json(row, slots)}


# A rating replaces the answer's earlier one: the earlier one leaves its
# model's day first (the user's row and the account's), the new one joins
# it (the day it was first given).
_RATED = "SELECT 1 AS found FROM feedback WHERE user = ?1 AND id = ?2"
_UNCOUNT_RATING = (
    "UPDATE board_models SET up = up - (f.rating = 'up'), down = down - (f.rating = 'down') "
    "FROM feedback f WHERE f.user = ?1 AND f.id = ?2 AND f.model IS NOT NULL "
    "AND board_models.user IN (f.user, ?3) AND board_models.day = f.day "
    "AND board_models.model = f.model"
)
_RATE = (
    "INSERT INTO feedback (user, id, seq, kind, conversation, node, model, rating, tags, text, "
    "day, created, updated, request) "
    f"VALUES (?1, ?2, {_NEXT_SEQ}, 'rating', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?10, ?11) "
    "ON CONFLICT (user, id) DO UPDATE SET seq = excluded.seq, model = excluded.model, "
    "rating = excluded.rating, tags = excluded.tags, text = excluded.text, "
    "updated = excluded.updated, request = excluded.request "
    "RETURNING seq, created, updated"
)
_COUNT_RATING = (
    "INSERT INTO board_models (user, day, model, answers, failed, priced, cost_usd, up, down) "
    "SELECT w.who, f.day, f.model, 0, 0, 0, 0, f.rating = 'up', f.rating = 'down' "
    "FROM feedback f JOIN (SELECT ?1 AS who UNION ALL SELECT ?3) w "
    "WHERE f.user = ?1 AND f.id = ?2 AND f.model IS NOT NULL "
    "ON CONFLICT (user, day, model) DO UPDATE SET up = up + excluded.up, "
    "down = down + excluded.down"
)


def rate_statements(
    user: str, given: Rating, now_s: float, request_id: str
) -> list[tuple[str, list[Any]]]:
    now_ms = int(now_s * 1000)
    tags = json.dumps(list(given.tags))
    row = [
        *(user, given.id, given.conversation, given.node, given.model, given.rating, tags),
        *(given.text, day_of(now_s), now_ms, request_id),
    ]
    key = [user, given.id, ACCOUNT]
    return [
        (_RATED, [user, given.id]),
        (_UNCOUNT_RATING, key),
        (_RATE, row),
        (_COUNT_RATING, key),
    ]


async def rate(
    db: Database, user: str, given: Rating, now_s: float, request_id: str
) -> tuple[dict[str, Any], bool]:
    """Keeps the user's rating of one answer, replacing an earlier one:
    the rating as listed, and whether it is new."""
    earlier, _, written, _ = await db.batch(rate_statements(user, given, now_s, request_id))
    kept = written[0]
    item = {
        "kind": "rating",
        "conversation": given.conversation,
        "node": given.node,
        "model": given.model,
        "rating": given.rating,
        "tags": list(given.tags),
        "text": given.text,
        "seq": kept["seq"],
        "created": kept["created"],
        "updated": kept["updated"],
    }
    return item, not earlier


_COLUMNS = (
    "kind, comparison, choice, conversation, node, model, rating, tags, text, seq, created, updated"
)
_LIST = (
    f"SELECT {_COLUMNS} FROM feedback WHERE user = ?1 AND seq > ?2 AND seq < ?3{{conversation}} "
    "ORDER BY seq DESC LIMIT ?4"
)
_TOP = "SELECT COALESCE(MAX(seq), 0) AS seq FROM feedback WHERE user = ?1"


def item_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """One piece of feedback as ``GET /api/feedback`` lists it."""
    common = {"seq": row["seq"], "created": row["created"], "updated": row["updated"]}
    if row["kind"] == "vote":
        return {
            "kind": "vote",
            "comparison": row["comparison"],
            "choice": choice_json(row["choice"]),
            "conversation": row["conversation"],
            **common,
        }
    return {
        "kind": "rating",
        "conversation": row["conversation"],
        "node": row["node"],
        "model": row["model"],
        "rating": row["rating"],
        "tags": json.loads(row["tags"] or "[]"),
        "text": row["text"],
        **common,
    }


async def list_page(db: Database, user: str, query: Mapping[str, str]) -> dict[str, Any]:
    """The user's feedback, newest write first: ``since`` (what changed
    after that seq), ``before`` (the previous page's ``next``), ``limit``,
    ``conversation`` (only that conversation's)."""
    for name in query:
        if name not in ("since", "before", "limit", "conversation"):
            raise BadRequest(public="The list takes since, before, limit and conversation only.")
    limit = whole_param(query, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    since, before = seq_window(query)
    params: list[Any] = [user, since, before, limit + 1]
    conversation = query.get("conversation")
    if conversation is not None:
        if not is_client_id(conversation):
            raise BadRequest(public=f"conversation must be a conversation id: {CLIENT_ID_RULE}.")
        params.append(conversation)
    sql = _LIST.format(conversation="" if conversation is None else " AND conversation = ?5")
    rows, top = await db.batch([(sql, params), (_TOP, [user])])
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "feedback": [item_json(row) for row in rows],
        "seq": top[0]["seq"],
        "next": rows[-1]["seq"] if more else None,
    }


_EVERYTHING = f"SELECT {_COLUMNS} FROM feedback WHERE user = ?1 ORDER BY seq"
_COMPARISONS = (
    "SELECT c.id, c.blind, c.conversation, c.created, "
    "(SELECT f.choice FROM feedback f WHERE f.user = c.user AND f.id = c.id) AS choice "
    "FROM comparisons c WHERE c.user = ?1 ORDER BY c.created"
)
_ALL_SLOTS = (
    "SELECT s.comparison, s.slot, s.model, s.state, s.ttft_ms, s.tokens_per_s, s.prompt_tokens, "
    "s.completion_tokens, s.cost_usd, s.finish_reason, s.error FROM comparison_slots s "
    "JOIN comparisons c ON c.id = s.comparison WHERE c.user = ?1 ORDER BY s.comparison, s.slot"
)


async def export(db: Database, user: str) -> dict[str, Any]:
    """Everything the server keeps of the user's feedback: ``{"feedback":
    [...], "comparisons": [...]}``, every comparison's models named (the
    user's own data, blind or not)."""
    items, heads, slots = await db.batch(
        [(_EVERYTHING, [user]), (_COMPARISONS, [user]), (_ALL_SLOTS, [user])]
    )
    by_comparison: dict[str, list[dict[str, Any]]] = {}
    for row in slots:
        by_comparison.setdefault(row["comparison"], []).append(row)
    comparisons = []
    for head in heads:
        shown = comparison_json({**head, "blind": 0}, by_comparison.get(head["id"], []))
        comparisons.append({**shown, "blind": bool(head["blind"])})
    return {"feedback": [item_json(row) for row in items], "comparisons": comparisons}


# Everything of the user's, and the leaderboard's counts of it: taken out
# of the account's counts first, then deleted.
_VOTES_KEY = ("day", "blind", "model")
_PAIRS_KEY = ("day", "blind", "a", "b")
_MODELS_KEY = ("day", "model")


def _uncount(table: str, key: tuple[str, ...], counts: tuple[str, ...]) -> str:
    minus = ", ".join(f"{name} = {table}.{name} - u.{name}" for name in counts)
    same = " AND ".join(f"{table}.{name} = u.{name}" for name in key)
    return (
        f"UPDATE {table} SET {minus} FROM {table} u "
        f"WHERE u.user = ?1 AND {table}.user = ?2 AND {same}"
    )


_ERASE = (
    _uncount("board_votes", _VOTES_KEY, ("votes", "wins", "losses", "ties", "both_bad")),
    _uncount("board_pairs", _PAIRS_KEY, ("a_wins", "b_wins", "ties")),
    _uncount(
        "board_models", _MODELS_KEY, ("answers", "failed", "priced", "cost_usd", "up", "down")
    ),
    "DELETE FROM comparison_slots WHERE comparison IN (SELECT id FROM comparisons WHERE user = ?1)",
    "DELETE FROM comparisons WHERE user = ?1",
    "DELETE FROM feedback WHERE user = ?1",
    "DELETE FROM board_votes WHERE user = ?1",
    "DELETE FROM board_pairs WHERE user = ?1",
    "DELETE FROM board_models WHERE user = ?1",
)


def erase_statements(user: str) -> Sequence[tuple[str, list[Any]]]:
    """The statements that delete all the user's comparisons and feedback,
    and every count the leaderboard holds of them (to run in one
    transaction with the rest of "Delete everything")."""
    return [(sql, [user, ACCOUNT] if "?2" in sql else [user]) for sql in _ERASE]


async def erase(db: Database, user: str) -> None:
    await db.batch(list(erase_statements(user)))
