"""The leaderboard's query for ``--votes`` votes (100,000 by default),
measured on wrangler's local D1 (miniflare's, through ``getPlatformProxy``,
offline): its time and D1's ``meta.rows_read``, one user's board and
everyone's (an admin's), beside what reading the votes themselves would
read; and the rows D1 writes for one comparison's statements.

The fill is the Worker's own statements (``comparisons.create``,
``comparisons.record``, ``store.vote``, ``store.rate``), run by CPython's
SQLite straight into the local D1's database file: miniflare takes about
4 ms a statement, and 100,000 votes are over a million statements (an
hour), while the file is the same SQLite either way. The queries then run
on local D1 itself (``bench/leaderboard_d1.mjs``). ``--users`` users over
``--days`` UTC days; a third of the comparisons are of three models, half
are blind, 3 % of the answers fail; votes follow fixed strengths.

    PATH=$PWD/node_modules/.bin:$PATH .venv/bin/python bench/leaderboard.py \\
        [--votes N] [--users N] [--days N] [--ratings N] [--runs N] [--day-index]

``--day-index`` adds an index on ``day`` to each count table first (an
alternative the account's rows make unneeded).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from edgechat.answer.framing import Outcome  # noqa: E402
from edgechat.core.faults import UpstreamBusy  # noqa: E402
from edgechat.core.models import Model, find  # noqa: E402
from edgechat.feedback import comparisons, leaderboard, store  # noqa: E402
from edgechat.users.usage import usage_days  # noqa: E402

MODELS = [m for m in (find("glm"), find("kimi"), find("llama")) if m is not None]
# The strengths the simulated voters prefer by, and each model's pace.
STRENGTH = {"glm": 1.0, "kimi": 1.4, "llama": 0.55}
TTFT_MS = {"glm": 450.0, "kimi": 900.0, "llama": 250.0}
TOKENS_PER_S = {"glm": 60.0, "kimi": 35.0, "llama": 110.0}
NOW = 1_796_860_800.0  # a UTC midnight; the fill's days end the day before
COUNTS = ("board_votes", "board_pairs", "board_models")


class FileDb:
    """``ports.Database`` over one SQLite connection, one transaction for the
    whole fill (D1's binding convention: ``?NNN`` by position)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection
        self.statements = 0

    async def batch(self, statements: list[tuple[str, list[Any]]]) -> list[list[dict[str, Any]]]:
        results = []
        for sql, params in statements:
            bound: Any = {str(k): v for k, v in enumerate(params, 1)} if "?1" in sql else params
            cursor = self.connection.execute(sql, bound)
            names = [d[0] for d in cursor.description or ()]
            results.append([dict(zip(names, row, strict=True)) for row in cursor.fetchall()])
            self.statements += 1
        return results


def outcome(draw: random.Random, model: Model) -> Outcome:
    if draw.random() < 0.03:
        return Outcome(model=model, error=UpstreamBusy(detail="bench"))
    tokens = draw.randint(80, 900)
    ttft = TTFT_MS[model.alias] * draw.lognormvariate(0, 0.35)
    pace = TOKENS_PER_S[model.alias] * draw.lognormvariate(0, 0.2)
    done = Outcome(
        model=model,
        usage={"prompt_tokens": 300, "completion_tokens": tokens, "total_tokens": 300 + tokens},
        finish_reason="stop",
        ttft_ms=round(ttft, 1),
    )
    done.ended_ms = round(ttft + 1000 * tokens / pace, 1)
    return done


def choice(draw: random.Random, slots: list[tuple[int, Model]]) -> str:
    roll = draw.random()
    if roll < 0.10:
        return "tie"
    if roll < 0.15:
        return "both_bad"
    weights = [STRENGTH[m.alias] for _, m in slots]
    return str(draw.choices([k for k, _ in slots], weights)[0])


async def fill(db: FileDb, args: argparse.Namespace) -> None:
    draw = random.Random(39)
    users = [f"key:user{k}" for k in range(args.users)]
    started = time.monotonic()
    votes, n = 0, -1
    while votes < args.votes:
        n += 1
        user = draw.choice(users)
        at = NOW - 1 - draw.randrange(args.days * 86_400)
        asked = comparisons.Asked(
            tuple(draw.sample(MODELS, 3 if draw.random() < 1 / 3 else 2)), draw.random() < 0.5
        )
        made = await comparisons.create(db, user, asked, int(at * 1000), answering=f"r{n}")
        rows = await db.batch(
            [("SELECT slot, model FROM comparison_slots WHERE comparison = ?1", [made["id"]])]
        )
        slots = []
        for row in rows[0]:
            model = find(row["model"])
            assert model is not None
            end = comparisons.ended(outcome(draw, model))
            await comparisons.record(db, user, made["id"], row["slot"], f"r{n}", end, at + 30)
            if end.done:
                slots.append((row["slot"], model))
        # A comparison with fewer than two finished answers gets no vote.
        if len(slots) >= 2:
            vote = store.Vote(made["id"], choice(draw, slots))
            await store.vote(db, user, vote, at + 60, f"v{n}")
            votes += 1
            if votes % 10_000 == 0:
                rate = votes / (time.monotonic() - started)
                print(f"  {votes} votes ({rate:.0f}/s)", file=sys.stderr)
    for n in range(args.ratings):
        model = draw.choice(MODELS)
        up = draw.random() < STRENGTH[model.alias] / 2
        rating = store.Rating(f"c{n}", "n1", "up" if up else "down", model.id)
        at = NOW - 1 - draw.randrange(args.days * 86_400)
        await store.rate(db, draw.choice(users), rating, at, f"g{n}")


def node(*argv: str) -> Any:
    script = ROOT / "bench" / "leaderboard_d1.mjs"
    done = subprocess.run(
        ["node", str(script), *argv], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"leaderboard_d1.mjs {argv[0]} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# What reading the votes themselves takes (not the Worker's way): the pairs
# of everyone's votes since a day, from the votes and their slots.
FROM_VOTES = (
    "SELECT c.blind, s.model AS a, t.model AS b, SUM(f.choice = CAST(s.slot AS TEXT)) AS a_wins, "
    "SUM(f.choice = CAST(t.slot AS TEXT)) AS b_wins, SUM(f.choice IN ('tie', 'both_bad')) AS ties "
    "FROM feedback f JOIN comparisons c ON c.id = f.comparison "
    "JOIN comparison_slots s ON s.comparison = c.id "
    "JOIN comparison_slots t ON t.comparison = c.id AND s.model < t.model "
    "WHERE f.kind = 'vote' AND f.day >= ?1 AND s.state = 'done' AND t.state = 'done' "
    "AND (f.choice IN ('tie', 'both_bad') "
    "OR f.choice IN (CAST(s.slot AS TEXT), CAST(t.slot AS TEXT))) "
    "GROUP BY c.blind, s.model, t.model"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--votes", type=int, default=100_000)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--ratings", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--day-index", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="edgechat-bench-d1-") as folder:
        file = node("create", folder)["file"]
        connection = sqlite3.connect(file, isolation_level=None)
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        for path in sorted((ROOT / "migrations").glob("*.sql")):
            connection.executescript(path.read_text())
        if args.day_index:
            for table in COUNTS:
                connection.execute(f"CREATE INDEX {table}_by_day ON {table} (day)")
        print(
            f"filling: {args.votes} votes, {args.users} users, {args.days} days",
            file=sys.stderr,
        )
        db = FileDb(connection)
        started = time.monotonic()
        connection.execute("BEGIN")
        asyncio.run(fill(db, args))
        connection.execute("COMMIT")
        filled_s = time.monotonic() - started
        sizes = {
            table: connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
            for table in ("feedback", "comparisons", "comparison_slots", *COUNTS)
        }
        votes = connection.execute("SELECT COUNT(*) FROM feedback WHERE kind = 'vote'").fetchone()[
            0
        ]
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.close()
        first30 = usage_days(NOW - 1, args.days)[0]
        first7 = usage_days(NOW - 1, 7)[0]
        one = "key:user0"
        batches = [
            {
                "name": f"one user's board, {args.days} days",
                "statements": leaderboard.statements(first30, one),
            },
            {
                "name": f"everyone's board, {args.days} days",
                "statements": leaderboard.statements(first30, None),
                "keep_rows": True,
            },
            {
                "name": "everyone's board, 7 days",
                "statements": leaderboard.statements(first7, None),
            },
            {
                "name": f"from the votes themselves, {args.days} days (pairs only)",
                "statements": [(FROM_VOTES, [first30])],
            },
        ]
        spec = Path(folder) / "spec.json"
        spec.write_text(json.dumps({"runs": args.runs, "batches": batches}))
        measured = node("query", folder, str(spec))
        # One more comparison's writes, as the Worker sends them, on D1.
        writes = write_batches()
        spec.write_text(json.dumps({"runs": 1, "batches": writes}))
        written = node("query", folder, str(spec))
    report(args, filled_s, db.statements, sizes, votes, measured, written)


def write_batches() -> list[dict[str, Any]]:
    """A comparison of two, both answers kept and its vote, as D1 batches:
    their statements as the Worker makes them (a recording Database)."""

    class Recording:
        def __init__(self) -> None:
            self.batches: list[list[tuple[str, list[Any]]]] = []

        async def batch(
            self, statements: list[tuple[str, list[Any]]]
        ) -> list[list[dict[str, Any]]]:
            self.batches.append(statements)
            return [[{"seq": 1, "created": 0, "updated": 0}] for _ in statements]

    recording = Recording()
    asked = comparisons.Asked((MODELS[0], MODELS[1]), blind=True)
    made = asyncio.run(
        comparisons.create(recording, "key:bench", asked, int(NOW * 1000), answering="w")
    )
    cid = made["id"]
    ends = []
    for slot, model in enumerate(MODELS[:2]):
        done = Outcome(
            model=model,
            usage={"prompt_tokens": 9, "completion_tokens": 99, "total_tokens": 108},
            ttft_ms=300.0,
        )
        done.ended_ms = 2000.0
        ends.append(
            comparisons.record_statements(
                "key:bench", cid, slot, "w", comparisons.ended(done), NOW + 5
            )
        )
    vote = store.vote_statements("key:bench", store.Vote(cid, "0"), NOW + 9, "wv")
    rating = store.rate_statements(
        "key:bench", store.Rating("c", "n", "up", MODELS[0].id), NOW, "wr"
    )
    return [
        {"name": "make a comparison of two", "statements": recording.batches[0]},
        {"name": "keep an answer's outcome", "statements": ends[0]},
        {"name": "keep the other answer's", "statements": ends[1]},
        {"name": "keep a vote", "statements": vote},
        {"name": "keep a rating", "statements": rating},
    ]


def report(
    args: argparse.Namespace,
    filled_s: float,
    statements: int,
    sizes: dict[str, int],
    votes: int,
    measured: list[dict[str, Any]],
    written: list[dict[str, Any]],
) -> None:
    print(f"filled in {filled_s:.0f} s: {statements} statements; {votes} votes; rows: {sizes}")
    print(f"{'query (local D1)':60} {'median ms':>9} {'D1 ms':>7} {'rows read':>10} {'rows':>6}")
    for batch in measured:
        median = statistics.median(batch["ms"])
        read = sum(s["rows_read"] for s in batch["statements"])
        sql_ms = sum(s["duration"] for s in batch["statements"])
        rows = sum(s["rows"] for s in batch["statements"])
        print(f"{batch['name']:60} {median:9.1f} {sql_ms:7.1f} {read:10d} {rows:6d}")
        if batch.get("rows"):
            started = time.perf_counter()
            for _ in range(20):
                leaderboard.from_results(batch["rows"])
            each = (time.perf_counter() - started) / 20 * 1000
            print(f"{'  its assembly and fit in Python (CPython)':60} {each:9.2f}")
    print(f"{'writes (local D1)':60} {'rows written':>12}")
    for batch in written:
        wrote = sum(s["rows_written"] for s in batch["statements"])
        print(f"{batch['name']:60} {wrote:12d}")
    print(
        json.dumps(
            {"votes": votes, "users": args.users, "days": args.days, "day_index": args.day_index}
        )
    )


if __name__ == "__main__":
    main()
