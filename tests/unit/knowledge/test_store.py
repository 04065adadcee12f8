"""``knowledge.store``: each user's bases and documents, the limits held in
the writes, another user's base never told apart from a missing one."""

from __future__ import annotations

import pytest

from edgechat.core.errors import KnowledgeFull, NotFound, TooManyBases, TooManyDocuments
from edgechat.knowledge import ingest, store
from tests.unit.knowledge.kit import ANN, BOB, QUOTA, World, run


def test_bases_are_their_owners_and_limited() -> None:
    world = World()
    first = world.base(bid="a" * 24)
    world.base(bid="b" * 24)
    with pytest.raises(TooManyBases) as refused:
        world.base(bid="c" * 24)
    assert refused.value.limit == QUOTA.bases
    assert [b["id"] for b in run(store.list_bases(world.db, ANN))] == [first, "b" * 24]
    assert run(store.list_bases(world.db, BOB)) == []
    with pytest.raises(NotFound):
        run(store.base_for_reader(world.db, BOB, first))
    with pytest.raises(NotFound):
        run(store.base_for_owner(world.db, BOB, first))


def test_a_shared_base_is_listed_and_read_by_all_and_changed_by_its_owner_alone() -> None:
    world = World()
    bid = world.base()
    run(store.share_base(world.db, ANN, bid, True))
    listed = run(store.list_bases(world.db, BOB))
    assert [(b["id"], b["mine"], b["shared"]) for b in listed] == [(bid, False, True)]
    assert run(store.base_for_reader(world.db, BOB, bid))["user"] == ANN
    with pytest.raises(NotFound):
        run(store.base_for_owner(world.db, BOB, bid))
    with pytest.raises(NotFound):
        run(store.share_base(world.db, BOB, bid, False))


def test_documents_are_held_to_the_count_and_the_bytes() -> None:
    world = World()
    bid = world.base()
    for k in range(3):
        world.add(bid, "x" * 10, did=f"{k}" * 24)
    with pytest.raises(TooManyDocuments):
        world.add(bid, "one more", did="9" * 24)
    # A failed document counts for nothing.
    failed = "UPDATE knowledge_documents SET state = 'failed' WHERE id = ?1"
    run(world.db.batch([(failed, ["0" * 24])]))
    with pytest.raises(KnowledgeFull) as refused:
        world.add(bid, "y" * QUOTA.bytes, did="8" * 24)
    assert refused.value.limit == QUOTA.bytes
    world.add(bid, "fits", did="7" * 24)


def test_no_document_goes_into_another_users_base() -> None:
    world = World()
    bid = world.base()
    with pytest.raises(NotFound):
        world.add(bid, "mine now", user=BOB)


def test_my_data_lists_the_bases_with_their_documents_and_erase_takes_all() -> None:
    world = World()
    bid = world.base()
    did = world.add(bid, "A line of notes.")
    run(ingest.run(world.work, did))
    exported = run(store.export(world.db, ANN))
    assert [b["id"] for b in exported] == [bid]
    assert [(d["id"], d["state"], d["chunks"]) for d in exported[0]["documents"]] == [
        (did, "ready", 1)
    ]
    docs = run(store.all_documents(world.db, ANN))
    assert store.vector_ids(docs) == [f"{did}:0"]
    run(world.db.batch(store.erase_statements(ANN)))
    assert run(store.export(world.db, ANN)) == []
    assert world.chunk_rows(did) == 0
