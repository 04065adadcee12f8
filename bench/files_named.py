"""What the ``json_each`` queries of files.py cost a user with many
conversations on the server, on CPython's SQLite (D1 is SQLite; D1's own
round trip and its row-read billing are not in these figures): the
project's migrations, one user with ``--conversations`` conversations of
``--messages`` messages of 400 characters, each question naming one image
(all uploaded), and 20 other users alike. Side by side in one process,
alternating, the median of ``--rounds``:

- ``named_by``: the ids one conversation names (before its delete);
- ``forget_unnamed``: which of two ids no live conversation names (after a
  delete: every conversation of the user's is read with ``json_each``);
- ``sweep`` with and without a candidate: retention's old unnamed images
  (listing conversations with ``HISTORY_RETENTION_DAYS`` runs it);
- ``list``: the plain list query of the same user's conversations
  (``history.list_page``'s), as the baseline.

    .venv/bin/python bench/files_named.py [--conversations N] [--messages N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from edgechat.history import files  # noqa: E402
from edgechat.history import store as history  # noqa: E402
from edgechat.history.conversations import check_conversation  # noqa: E402
from tests.unit.fakes import FakeDb  # noqa: E402

TEXT = ("The edge runs close to users, so latency stays low. " * 10)[:400]
OTHER_USERS = 20


def conversation(cid: str, messages: int) -> dict[str, object]:
    nodes = []
    for k in range(messages):
        node: dict[str, object] = {
            "parent": k - 1 if k else None,
            "role": "user" if k % 2 == 0 else "assistant",
            "content": TEXT,
        }
        if k % 2 == 0:
            node["images"] = [{"id": f"{cid}-{k}", "type": "image/png", "width": 4, "height": 3}]
        nodes.append(node)
    return check_conversation({"id": cid, "title": "t", "updated": 1, "nodes": nodes})


def filled(conversations: int, messages: int) -> FakeDb:
    db = FakeDb()
    for path in sorted((ROOT / "migrations").glob("*.sql")):
        db.connection.executescript(path.read_text())
    quota = history.Quota(conversations=10**6, bytes=1 << 40)
    create = history.Precondition(create=True)
    rows = []
    for user in ["ann", *(f"other-{n}" for n in range(OTHER_USERS))]:
        for c in range(conversations):
            cid = f"c{c}"
            body = conversation(cid, messages)
            asyncio.run(history.put(db, user, cid, body, create, quota, 1000))
            for k in range(0, messages, 2):
                key = files.own_key(user, f"{cid}-{k}")
                rows.append((key, user, f"{cid}-{k}", None, "image/png", 4, 3, 70, 1000))
    db.connection.executemany("INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    return db


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    db = filled(args.conversations, args.messages)
    sql = db.connection
    ids = json.dumps(["c0-0", "c1-0"])
    # A named image uploaded before the cutoff (2000): a candidate the
    # query must check against every conversation.
    sql.execute("UPDATE files SET created = 0 WHERE key = ?", (files.own_key("ann", "c0-0"),))
    cases: dict[str, Callable[[], object]] = {
        "list": lambda: sql.execute(
            "SELECT id, version, seq, title, updated FROM conversations "
            "WHERE user = ? AND body IS NOT NULL ORDER BY seq DESC LIMIT 50",
            ("ann",),
        ).fetchall(),
        "named_by": lambda: sql.execute(files._NAMED_BY, {"1": "ann", "2": "c7"}).fetchall(),
        "forget_unnamed": lambda: sql.execute(files._UNNAMED, {"1": "ann", "2": ids}).fetchall(),
        "sweep, a candidate": lambda: sql.execute(
            files._UNNAMED_BEFORE, {"1": 2000, "2": "ann"}
        ).fetchall(),
        "sweep, none": lambda: sql.execute(files._UNNAMED_BEFORE, {"1": 0, "2": "ann"}).fetchall(),
    }
    timings: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.rounds):
        for name, case in cases.items():
            started = time.perf_counter()
            case()
            timings[name].append((time.perf_counter() - started) * 1000)
    images = args.conversations * ((args.messages + 1) // 2)
    print(
        f"one user of {args.conversations} conversations x {args.messages} messages "
        f"({images} images named), {OTHER_USERS} other users alike; "
        f"SQLite {sqlite3_version()}, median of {args.rounds}"
    )
    base = statistics.median(timings["list"])
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"  {name:20} {median:8.3f} ms  {median / base:7.1f}x list")


def sqlite3_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


if __name__ == "__main__":
    main()
