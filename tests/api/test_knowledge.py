"""Knowledge bases over HTTP against the runner's local D1 (``DB``), R2
(``FILES``) and the emulator's Vectorize (``VECTORS``): a document added,
ingested after the reply and asked with cited sources; deletion of its
vectors, rows and original; another user trying every route with the
first user's ids; the failures (unconvertible, empty, over a limit, a
failure midway that resumes without counting twice); the limits in
``/api/limits``; My data.

Every Vectorize call the runner makes is read from the emulator's log
(``server.vectors``): each query must carry the owner filter.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from tests.api.checks import assert_error, log_record, post_chat
from tests.api.conftest import ClientFactory, Server, ServerPool, openai_client, token_client
from tests.api.test_embeddings import bge_row, once
from tests.api.test_retention import run_scheduled
from tests.harness import VectorsLog
from tests.kit.documents import DOCX, XLSX, docx, file_part, pdf, xlsx

ANN = "ann-token-5d0e3b8a1f6c2947"
BOB = "bob-token-e2a9c47f10b65d38"
BGE = "@cf/baai/bge-m3"
LIMITS = {
    "MAX_KNOWLEDGE_BASES": 3,
    "MAX_KNOWLEDGE_DOCUMENTS": 4,
    "MAX_KNOWLEDGE_CHUNKS": 60,
    "MAX_KNOWLEDGE_BYTES": 60_000,
    "MAX_KNOWLEDGE_DOCUMENT_BYTES": 30_000,
}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    variables = {
        "API_KEYS": f"ann:{ANN},bob:{BOB}",
        "ADMINS": "ann",
        "KNOWLEDGE_CHUNK_TOKENS": "50",
        "KNOWLEDGE_CHUNK_OVERLAP": "10",
        **{name: str(value) for name, value in LIMITS.items()},
    }
    # Every request of a user shares their rate-limit bucket: none here.
    return servers.get(variables, rate_limited=False)


@pytest.fixture
def vectors(server: Server, ann: httpx.Client) -> VectorsLog:
    """The index's log from here on: after the users' data of earlier tests
    was deleted (a test asks for it after ``ann`` and ``bob``)."""
    server.vectors.reset()
    return server.vectors


def emptied(client: httpx.Client) -> httpx.Client:
    wiped = client.delete("/api/my-data", headers={"if-match": "*"})
    assert wiped.status_code == 204, wiped.text
    return client


@pytest.fixture
def ann(new_client: ClientFactory, server: Server) -> httpx.Client:
    return emptied(token_client(new_client, server, ANN))


@pytest.fixture
def bob(new_client: ClientFactory, server: Server) -> httpx.Client:
    return emptied(token_client(new_client, server, BOB))


def manual(paragraphs: int = 30) -> str:
    body = "\n\n".join(
        f"Section {k}. The boiler pressure of model {k} is between 1.{k % 9} and 2 bar "
        "when the system is cold, and the valve is on the left."
        for k in range(paragraphs)
    )
    return body + "\n\nThe secret ingredient of grandmother's soup is smoked cardamom."


def markdown(text: str, name: str = "manual.md") -> dict[str, Any]:
    return file_part(name, "text/markdown", text.encode())


def make_base(client: httpx.Client, name: str = "Manuals") -> str:
    made = client.post("/api/knowledge", json={"name": name})
    assert made.status_code == 201, made.text
    assert made.json()["name"] == name
    return str(made.json()["id"])


def add(client: httpx.Client, bid: str, part: dict[str, Any]) -> httpx.Response:
    return client.post(f"/api/knowledge/{bid}/documents", json=part)


def documents(client: httpx.Client, bid: str) -> list[dict[str, Any]]:
    listed = client.get(f"/api/knowledge/{bid}/documents")
    assert listed.status_code == 200, listed.text
    return list(listed.json()["documents"])


def settled(client: httpx.Client, bid: str, did: str, timeout: float = 20.0) -> dict[str, Any]:
    """The document once ready or failed (each look resumes a stalled ingestion)."""
    deadline = time.monotonic() + timeout
    while True:
        found = next(d for d in documents(client, bid) if d["id"] == did)
        if found["state"] in ("ready", "failed"):
            return found
        assert time.monotonic() < deadline, f"still {found['state']}: {found}"
        time.sleep(0.1)


def ingested(client: httpx.Client, bid: str, part: dict[str, Any]) -> dict[str, Any]:
    added = add(client, bid, part)
    assert added.status_code == 202, added.text
    assert added.json()["state"] == "pending"
    done = settled(client, bid, added.json()["id"])
    assert done["state"] == "ready", done
    return done


def test_a_question_gets_an_answer_citing_the_passages(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    doc = ingested(ann, bid, markdown(manual()))
    assert doc["chunks"] == doc["embedded"] > 16  # more than one batch
    vectors.wait_until_applied()
    server.ai.script(
        {"match": {"contains": "secret ingredient"}, "reply": {"content": "Smoked cardamom [1]."}}
    )
    question = "What is the secret ingredient of grandmother's soup?"
    counted = bge_row(ann, ANN)["requests"]
    chat = post_chat(ann, {"messages": [{"role": "user", "content": question}], "knowledge": bid})
    assert chat.response.status_code == 200, chat.body[:300]
    done = chat.events.final
    assert done.name == "done", done.data
    assert chat.events.text() == "Smoked cardamom [1]."
    sources = done.data["sources"]
    assert sources, done.data
    assert [s["n"] for s in sources] == list(range(1, len(sources) + 1))
    assert {s["name"] for s in sources} == {"manual.md"}
    assert all(s["document"] == doc["id"] and s["base"] == bid for s in sources)
    assert any("cardamom" in s["text"] for s in sources), sources
    # The model read the passages, numbered as the sources are.
    call = next(c for c in server.ai.calls() if c["model"] != BGE)
    prompt = call["inputs"]["messages"][-1]["content"]
    for source in sources:
        assert f'<source id="{source["n"]}" document="manual.md">' in prompt
        assert source["text"] in prompt
    assert prompt.rstrip().endswith(question)
    # The question was embedded, and the index asked with the owner's filter.
    queries = vectors.calls("query")
    assert len(queries) == 1
    assert queries[0]["filter"]["base"] == bid
    assert queries[0]["filter"]["kind"] == "chunk"
    assert queries[0]["filter"]["owner"]
    # The question's embedding is paid for beside the answer.
    row = once(lambda: bge_row(ann, ANN), lambda r: r["requests"] > counted)
    assert row["requests"] == counted + 1


def test_deleting_a_document_or_a_base_removes_its_vectors_rows_and_original(
    ann: httpx.Client, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    first = ingested(ann, bid, markdown(manual(8), "a.md"))
    second = ingested(ann, bid, markdown(manual(4), "b.md"))
    assert ann.get(f"/api/knowledge/{bid}/documents/{first['id']}").content == manual(8).encode()
    gone = ann.delete(f"/api/knowledge/{bid}/documents/{first['id']}")
    assert gone.status_code == 204, gone.text
    deleted = [i for c in vectors.calls("deleteByIds") for i in c["ids"]]
    assert sorted(deleted) == sorted(f"{first['id']}:{n}" for n in range(first["chunks"]))
    assert [d["id"] for d in documents(ann, bid)] == [second["id"]]
    assert_error(ann.get(f"/api/knowledge/{bid}/documents/{first['id']}"), 404, "not_found")
    base = ann.get(f"/api/knowledge/{bid}").json()
    assert (base["documents"], base["chunks"]) == (1, second["chunks"])

    assert ann.delete(f"/api/knowledge/{bid}").status_code == 204
    deleted = [i for c in vectors.calls("deleteByIds") for i in c["ids"]]
    assert {f"{second['id']}:{n}" for n in range(second["chunks"])} <= set(deleted)
    assert_error(ann.get(f"/api/knowledge/{bid}"), 404, "not_found")
    assert ann.get("/api/knowledge").json()["bases"] == []


def test_another_user_gets_404_on_every_route_and_queries_carry_the_owner(
    ann: httpx.Client, bob: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    doc = ingested(ann, bid, markdown(manual(6)))
    vectors.wait_until_applied()
    base, one = f"/api/knowledge/{bid}", f"/api/knowledge/{bid}/documents/{doc['id']}"
    assert bob.get("/api/knowledge").json()["bases"] == []
    for method, path, body in (
        ("GET", base, None),
        ("DELETE", base, None),
        ("GET", base + "/documents", None),
        ("POST", base + "/documents", markdown("Bob's notes.")),
        ("GET", one, None),
        ("DELETE", one, None),
    ):
        assert_error(bob.request(method, path, json=body), 404, "not_found")
    # Sharing is an admin's, and then only of their own base.
    assert_error(bob.patch(base, json={"shared": True}), 403, "admin_required")
    asked = post_chat(
        bob, {"messages": [{"role": "user", "content": "What pressure?"}], "knowledge": bid}
    )
    assert_error(asked.response, 404, "not_found")
    # Bob's own question over his own base: his owner, never Ann's.
    mine = make_base(bob, "Bob's")
    ingested(bob, mine, markdown("Bob keeps his bicycle in the shed."))
    vectors.wait_until_applied()
    post_chat(bob, {"messages": [{"role": "user", "content": "Where?"}], "knowledge": mine})
    post_chat(ann, {"messages": [{"role": "user", "content": "Pressure?"}], "knowledge": bid})
    queries = vectors.calls("query")
    assert len(queries) == 2
    owners = [q["filter"]["owner"] for q in queries]
    assert owners[0] != owners[1]
    assert [q["filter"]["base"] for q in queries] == [mine, bid]
    assert all(q["filter"]["kind"] == "chunk" for q in queries)
    # Ann's document is whole.
    assert documents(ann, bid)[0]["state"] == "ready"


def test_an_admin_shares_a_base_that_others_may_ask_but_not_change(
    ann: httpx.Client, bob: httpx.Client, vectors: VectorsLog
) -> None:
    bid = make_base(ann, "Handbook")
    ingested(ann, bid, markdown(manual(3)))
    vectors.wait_until_applied()
    shared = ann.patch(f"/api/knowledge/{bid}", json={"shared": True})
    assert shared.status_code == 200, shared.text
    assert shared.json()["shared"] is True
    listed = bob.get("/api/knowledge").json()["bases"]
    assert [(b["id"], b["mine"], b["shared"]) for b in listed] == [(bid, False, True)]
    asked = post_chat(
        bob, {"messages": [{"role": "user", "content": "Pressure?"}], "knowledge": bid}
    )
    assert asked.events.final.data["sources"]
    assert_error(bob.delete(f"/api/knowledge/{bid}"), 404, "not_found")
    assert_error(add(bob, bid, markdown("mine now")), 404, "not_found")
    query = vectors.calls("query")[-1]
    assert query["filter"]["base"] == bid
    assert query["filter"]["owner"]


def test_documents_that_cannot_be_read_fail_clearly_and_leave_nothing(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    broken = add(ann, bid, file_part("x.pdf", "application/pdf", b"%PDF-1.7 not a pdf"))
    assert_error(broken, 400, "invalid_request")
    assert "not a whole PDF" in broken.json()["error"]["message"]
    empty = add(ann, bid, markdown("  \n\n "))
    assert_error(empty, 400, "invalid_request")
    assert "has no text" in empty.json()["error"]["message"]
    # The converter cannot read this one: failed, with the reason, nothing left.
    server.ai.script(
        {
            "match": {"model": "toMarkdown"},
            "json": [{"name": "scan.pdf", "format": "error", "error": "no text layer"}],
        }
    )
    added = add(ann, bid, file_part("scan.pdf", "application/pdf", pdf(["Hello"])))
    assert added.status_code == 202, added.text
    failed = settled(ann, bid, added.json()["id"])
    assert failed["state"] == "failed"
    assert "could not be read" in failed["error"]
    assert failed["chunks"] == 0
    assert_error(ann.get(f"/api/knowledge/{bid}/documents/{failed['id']}"), 404, "not_found")
    assert not vectors.calls("upsert")


def test_limits_refuse_clearly_and_are_named_in_api_limits(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    limits = ann.get("/api/limits").json()
    for name, value in LIMITS.items():
        assert limits[name.lower()] == value
    bases = [make_base(ann, f"B{k}") for k in range(3)]
    assert_error(
        ann.post("/api/knowledge", json={"name": "one more"}),
        409,
        "too_many_knowledge_bases",
    )
    too_big = markdown("word " * 7000)
    refused = add(ann, bases[0], too_big)
    assert_error(refused, 400, "invalid_request")
    assert "MAX_KNOWLEDGE_DOCUMENT_BYTES" in refused.json()["error"]["message"]
    # Over the chunks: failed with the reason, nothing left, not counted.
    over = add(ann, bases[0], markdown(manual(150)))
    assert over.status_code == 202
    failed = settled(ann, bases[0], over.json()["id"])
    assert failed["state"] == "failed"
    assert "max_knowledge_chunks" in failed["error"]
    assert not vectors.calls("upsert")
    for k in range(4):
        ingested(ann, bases[1], markdown(f"Note {k} about the garden."))
    refused = add(ann, bases[1], markdown("a fifth"))
    assert_error(refused, 409, "too_many_knowledge_documents")
    assert refused.json()["error"]["limit"] == "max_knowledge_documents"


def test_a_failure_midway_resumes_and_counts_the_chunks_once(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    counted = bge_row(ann, ANN)["requests"]
    # The first embedding call fails: the chunks are stored, none embedded.
    server.ai.script({"match": {"model": BGE}, "times": 1, "error": "3040: Capacity exceeded"})
    added = add(ann, bid, markdown(manual(30)))
    assert added.status_code == 202
    did = added.json()["id"]
    done = settled(ann, bid, did)
    assert done["state"] == "ready", done
    assert done["embedded"] == done["chunks"]
    embeds = [c for c in server.ai.calls() if c["model"] == BGE]
    assert len(embeds) >= 3  # the failed one, then each batch
    upserted = [i for c in vectors.calls("upsert") for i in c["ids"]]
    assert sorted(set(upserted)) == sorted(f"{did}:{n}" for n in range(done["chunks"]))
    assert len(upserted) == done["chunks"]  # each once: the failed batch was never upserted
    base = ann.get(f"/api/knowledge/{bid}").json()
    assert base["chunks"] == done["chunks"]
    # Each embedding call that answered is paid for once, by its user.
    batches = -(-done["chunks"] // 16)
    assert len(embeds) == batches + 1
    row = once(lambda: bge_row(ann, ANN), lambda r: r["requests"] >= counted + batches)
    assert row["requests"] == counted + batches
    assert row["prompt_tokens"] > 0


def test_my_data_exports_the_bases_and_delete_everything_removes_them(
    ann: httpx.Client, vectors: VectorsLog
) -> None:
    bid = make_base(ann, "Mine")
    doc = ingested(ann, bid, markdown(manual(3)))
    mine = ann.get("/api/my-data").json()
    assert mine["knowledge"] == [
        {
            "id": bid,
            "name": "Mine",
            "shared": False,
            "created": mine["knowledge"][0]["created"],
            "documents": [
                {
                    "id": doc["id"],
                    "name": "manual.md",
                    "type": "text/markdown",
                    "bytes": doc["bytes"],
                    "state": "ready",
                    "chunks": doc["chunks"],
                    "created": doc["created"],
                }
            ],
        }
    ]
    emptied(ann)
    deleted = [i for c in vectors.calls("deleteByIds") for i in c["ids"]]
    assert sorted(deleted) == sorted(f"{doc['id']}:{n}" for n in range(doc["chunks"]))
    assert ann.get("/api/knowledge").json()["bases"] == []
    assert_error(ann.get(f"/api/knowledge/{bid}/documents/{doc['id']}"), 404, "not_found")


def test_the_openai_api_asks_a_base_through_the_edgechat_extension(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    ingested(ann, bid, markdown(manual(6)))
    vectors.wait_until_applied()
    question = [{"role": "user", "content": "What pressure does the boiler hold?"}]
    extension = {"edgechat": {"knowledge": bid}}
    with openai_client(server, ANN) as client:
        completion = client.chat.completions.create(
            model="glm",
            messages=question,
            extra_body=extension,  # type: ignore[arg-type]
        )
        sources = (completion.model_extra or {})["edgechat"]["sources"]
        assert sources
        assert sources[0]["name"] == "manual.md"
        stream = client.chat.completions.create(
            model="glm",
            messages=question,
            stream=True,
            extra_body=extension,  # type: ignore[arg-type]
        )
        last = list(stream)[-1]
        assert last.choices == []
        assert (last.model_extra or {})["edgechat"]["sources"] == sources
        response = client.responses.create(
            model="glm", input="What pressure does the boiler hold?", extra_body=extension
        )
        assert (response.model_extra or {})["edgechat"]["sources"] == sources
    prompts = [c for c in server.ai.calls() if c["model"] != BGE]
    assert len(prompts) == 3
    assert all('<source id="1"' in c["inputs"]["messages"][-1]["content"] for c in prompts)
    assert all(q["filter"]["base"] == bid for q in vectors.queries())
    refused = ann.post(
        "/v1/responses",
        json={
            "model": "glm",
            "input": "Hi",
            "tools": [{"type": "file_search", "vector_store_ids": [bid]}],
        },
    )
    assert refused.status_code == 400
    assert "edgechat" in refused.json()["error"]["message"]


def test_documents_that_to_markdown_converts_are_asked_like_any(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    kinds = (
        ("notice.pdf", "application/pdf", pdf(["The fire exit is behind the kitchen."])),
        ("rules.docx", DOCX, docx("Visitors sign the blue book at reception.")),
        ("stock.xlsx", XLSX, xlsx([["item", "count"], ["lanterns", "12"]])),
    )
    for name, kind, data in kinds:
        ingested(ann, bid, file_part(name, kind, data))
    converted = [c for c in server.ai.calls() if c["model"] == "toMarkdown"]
    assert len(converted) == 3
    vectors.wait_until_applied()
    asked = post_chat(
        ann,
        {"messages": [{"role": "user", "content": "Where is the fire exit?"}], "knowledge": bid},
    )
    sources = asked.events.final.data["sources"]
    assert sources[0]["name"] == "notice.pdf"
    assert "behind the kitchen" in sources[0]["text"]


def test_the_hourly_run_takes_up_an_ingestion_nobody_looks_at(
    ann: httpx.Client, server: Server, vectors: VectorsLog
) -> None:
    bid = make_base(ann)
    server.ai.script({"match": {"model": BGE}, "times": 1, "error": "3040: Capacity exceeded"})
    added = add(ann, bid, markdown(manual(4)))
    did = added.json()["id"]
    # The upload's run stopped at its first embedding; nobody looks at the documents.
    stopped = log_record(server, event="knowledge_ingest", document=did)
    assert stopped["state"] == "embedding"
    ran = run_scheduled(server)
    (resumed,) = ran["knowledge"]
    assert (resumed["document"], resumed["state"]) == (did, "ready")
    # Ready before this look could have started a run of its own.
    assert documents(ann, bid)[0]["state"] == "ready"
