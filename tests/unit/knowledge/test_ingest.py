"""``knowledge.ingest``: a document converted, chunked, embedded and
upserted; a run that fails midway leaves it for the next, which counts
nothing twice; a document that can never be read leaves nothing behind."""

from __future__ import annotations

from edgechat.core.ids import owner_tag
from edgechat.knowledge import ingest, store
from tests.unit.knowledge.kit import ANN, Embedder, World, paragraphs, run


def test_a_document_is_ingested_in_one_run_with_its_metadata() -> None:
    world = World()
    bid = world.base()
    did = world.add(bid, paragraphs(60))
    record = run(ingest.run(world.work, did))
    doc = world.document(did)
    assert record["state"] == doc["state"] == "ready"
    assert doc["chunks"] == doc["embedded"] == world.chunk_rows(did) > ingest.BATCH
    assert doc["lease"] == 0
    assert sorted(world.vectors.vectors) == sorted(f"{did}:{n}" for n in range(doc["chunks"]))
    metadata = world.vectors.vectors[f"{did}:3"]["metadata"]
    assert metadata == {
        "kind": "chunk",
        "owner": owner_tag(ANN),
        "base": bid,
        "document": did,
        "chunk": 3,
    }
    assert len(world.embed.calls) == -(-doc["chunks"] // ingest.BATCH)


def test_a_failure_midway_is_taken_up_by_the_next_run_and_counted_once() -> None:
    world = World()
    world.embed = Embedder(fail_at=(2,))
    bid = world.base()
    did = world.add(bid, paragraphs(60))
    first = run(ingest.run(world.work, did))
    doc = world.document(did)
    assert first["state"] == doc["state"] == "embedding"
    assert doc["embedded"] == ingest.BATCH
    assert doc["lease"] == 0  # let go at once: the next look resumes it
    assert "Interrupted" in doc["error"]
    chunks = doc["chunks"]
    second = run(ingest.run(world.work, did))
    doc = world.document(did)
    assert second["state"] == doc["state"] == "ready"
    assert doc["chunks"] == chunks == world.chunk_rows(did) == len(world.vectors.vectors)
    upserted = [
        i for call in world.vectors.calls if call["method"] == "upsert" for i in call["ids"]
    ]
    assert len(upserted) == chunks  # the failed batch was never upserted


def test_a_run_holding_the_lease_keeps_others_out() -> None:
    world = World()
    did = world.add(world.base(), paragraphs(3))
    held = "UPDATE knowledge_documents SET lease = ?2 WHERE id = ?1"
    run(world.db.batch([(held, [did, 10**15])]))
    assert run(ingest.run(world.work, did)) == {"document": did, "skipped": True}
    assert world.embed.calls == []


def test_a_long_document_lets_go_after_its_batches_and_goes_on_next_time() -> None:
    world = World(max_chunks=1_000)
    did = world.add(world.base(), paragraphs(400))
    first = run(ingest.run(world.work, did))
    assert first["state"] == "embedding"
    assert world.document(did)["embedded"] == ingest.BATCH * ingest.BATCHES_PER_RUN
    assert world.document(did)["lease"] == 0
    assert run(ingest.run(world.work, did))["state"] == "ready"


def _nothing_left(world: World, did: str) -> None:
    doc = world.document(did)
    assert doc["state"] == "failed"
    assert (doc["chunks"], doc["embedded"], world.chunk_rows(did)) == (0, 0, 0)
    assert world.vectors.vectors == {}
    assert world.blobs.objects == {}


def test_a_document_the_converter_cannot_read_fails_and_leaves_nothing() -> None:
    world = World(markdown=lambda name, kind, data: {"format": "error", "error": "scan"})
    did = world.add(world.base(), "%PDF-", name="scan.pdf", kind="application/pdf")
    record = run(ingest.run(world.work, did))
    assert record["state"] == "failed"
    assert "scan.pdf could not be read" in world.document(did)["error"]
    _nothing_left(world, did)


def test_a_document_over_the_chunks_limit_fails_and_is_not_counted() -> None:
    world = World(max_chunks=5)
    did = world.add(world.base(), paragraphs(30))
    run(ingest.run(world.work, did))
    assert "max_knowledge_chunks (5)" in world.document(did)["error"]
    _nothing_left(world, did)
    # A failed document counts for nothing: a small one fits.
    small = world.add(world.base(bid="c" * 24), "One line.", did="e" * 24)
    assert run(ingest.run(world.work, small))["state"] == "ready"


def test_a_document_that_keeps_failing_is_given_up_with_nothing_left() -> None:
    world = World()
    world.embed = Embedder(fail_at=tuple(range(1, 10)))
    did = world.add(world.base(), paragraphs(3))
    # The first run cut the chunks (progress); then MAX_ATTEMPTS runs without any.
    states = [run(ingest.run(world.work, did))["state"] for _ in range(ingest.MAX_ATTEMPTS + 1)]
    assert states == ["embedding"] * ingest.MAX_ATTEMPTS + ["failed"]
    assert "tried 3 times" in world.document(did)["error"]
    _nothing_left(world, did)


def test_a_document_deleted_during_a_run_takes_the_new_vectors_with_it() -> None:
    world = World()
    did = world.add(world.base(), paragraphs(30))
    embed = world.embed

    async def deleting(texts: list[str]) -> list[list[float]]:
        await world.db.batch(store.forget_document(ANN, did))
        return await embed(texts)

    work = world.work
    work = ingest.Ingestion(
        work.db, work.blobs, work.vectors, work.ai, deleting, work.rules, work.clock
    )
    assert run(ingest.run(work, did))["state"] == "lost"
    assert world.vectors.vectors == {}


def test_an_unexpected_failure_is_a_run_without_progress_too() -> None:
    world = World()
    did = world.add(world.base(), paragraphs(3))

    async def broken(texts: list[str]) -> list[list[float]]:
        raise RuntimeError("a bug")

    work = world.work
    work = ingest.Ingestion(
        work.db, work.blobs, work.vectors, work.ai, broken, work.rules, work.clock
    )
    records = [run(ingest.run(work, did)) for _ in range(ingest.MAX_ATTEMPTS + 1)]
    assert records[0]["error"] == "RuntimeError: a bug"
    assert records[-1]["state"] == "failed"
    _nothing_left(world, did)
