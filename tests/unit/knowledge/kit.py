"""What the knowledge tests share: the project's migrations in SQLite, the
stores as fakes, an embedder that counts and can fail, and a document
added the way the route adds one."""

from __future__ import annotations

import asyncio
import hashlib
import math
from pathlib import Path
from typing import Any

from edgechat.core.faults import UpstreamBusy
from edgechat.knowledge import ingest, store
from tests.unit.fakes import FakeAi, FakeBlobs, FakeDb, FakeVectors

MIGRATIONS = Path(__file__).resolve().parents[3] / "migrations"
QUOTA = store.Quota(bases=2, documents=3, chunks=100, bytes=50_000)
ANN, BOB = "key:ann", "key:bob"


def run[T](work: Any) -> T:
    return asyncio.run(work)  # type: ignore[no-any-return]


def migrated() -> FakeDb:
    db = FakeDb()
    for path in sorted(MIGRATIONS.glob("*.sql")):
        db.connection.executescript(path.read_text())
    return db


def vector_of(text: str) -> list[float]:
    """A unit vector from the text's words (same words, same vector)."""
    values = [0.0] * 8
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,?").encode()).digest()
        values[digest[0] % 8] += 1.0
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class Embedder:
    """``ingest.Embed``: counts its calls; ``fail_at``: the calls (from 1) that fail."""

    def __init__(self, fail_at: tuple[int, ...] = ()) -> None:
        self.calls: list[list[str]] = []
        self.fail_at = fail_at

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(texts)
        if len(self.calls) in self.fail_at:
            raise UpstreamBusy(detail="3040 (scripted)")
        return [vector_of(text) for text in texts]


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class World:
    """The stores and an ingestion over them."""

    def __init__(self, *, chunk_tokens: int = 50, max_chunks: int = 100, **ai: Any) -> None:
        self.db = migrated()
        self.blobs = FakeBlobs()
        self.vectors = FakeVectors()
        self.ai = FakeAi({}, **ai)
        self.embed = Embedder()
        self.clock = Clock()
        self.rules = ingest.Rules(chunk_tokens, 10, max_chunks)

    @property
    def work(self) -> ingest.Ingestion:
        return ingest.Ingestion(
            self.db, self.blobs, self.vectors, self.ai, self.embed, self.rules, self.clock
        )

    def base(self, user: str = ANN, name: str = "Manuals", bid: str = "b" * 24) -> str:
        run(store.create_base(self.db, user, bid, name, QUOTA, 1))
        return bid

    def add(
        self,
        bid: str,
        text: str,
        user: str = ANN,
        did: str = "d" * 24,
        name: str = "notes.md",
        kind: str = "text/markdown",
    ) -> str:
        data = text.encode()
        run(store.add_document(self.db, user, bid, did, name, kind, len(data), QUOTA, 2))
        run(self.blobs.put(store.object_key(user, did), data, kind))
        return did

    def document(self, did: str) -> dict[str, Any]:
        rows = run(self.db.batch([("SELECT * FROM knowledge_documents WHERE id = ?1", [did])]))
        return dict(rows[0][0])

    def chunk_rows(self, did: str) -> int:
        sql = "SELECT COUNT(*) AS n FROM knowledge_chunks WHERE document = ?1"
        return int(run(self.db.batch([(sql, [did])]))[0][0]["n"])


def paragraphs(n: int) -> str:
    return "\n\n".join(
        f"Section {k}: the boiler of model {k} holds 1.{k % 9} bar when cold." for k in range(n)
    )
