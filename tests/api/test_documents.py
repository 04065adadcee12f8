"""Documents over HTTP, against the runner and the emulator's ``toMarkdown``:
each type the tests build (PDF, DOCX, XLSX, CSV, HTML, TXT, Markdown) reaches
the model as its text inside markers, on ``/chat`` and through the official
``openai`` client on ``/v1``; bad files are 400s naming the rule that call
nothing; a failed conversion names the file."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.api.checks import (
    GLM,
    assert_done,
    assert_error,
    calls_before_a_later_request,
    post_chat,
)
from tests.api.conftest import ClientFactory, Server, ServerPool, openai_client, token_client
from tests.harness import EmulatorControl
from tests.kit.documents import DOCX, PDF, XLSX, docx, file_part, pdf, xlsx, zip_bomb_docx

TOKEN = "test-token-documents-3c"
SETTINGS = {"API_TOKEN": TOKEN, "CACHE_MODE": "off", "MAX_DOCUMENT_TOKENS": "200"}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SETTINGS, rate_limited=False)


@pytest.fixture
def client(server: Server, new_client: ClientFactory) -> httpx.Client:
    return token_client(new_client, server, TOKEN)


def ask(*parts: dict[str, Any], text: str = "What does it say?") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": text}, *parts]}]}


def model_calls(ai: EmulatorControl, count: int) -> list[dict[str, Any]]:
    return [c for c in ai.wait_for_calls(count) if c["model"] != "toMarkdown"]


def sent_text(ai: EmulatorControl) -> str:
    calls = ai.wait_for_calls(2)
    (call,) = [c for c in calls if c["model"] == GLM]
    return str(call["inputs"]["messages"][-1]["content"])


CONVERTED = [
    (
        file_part("report.pdf", PDF, pdf(["Quarterly report", "Revenue grew (12%)"], ["Page two"])),
        "## Page 1\n\nQuarterly report\nRevenue grew (12%)\n\n## Page 2\n\nPage two",
    ),
    (
        file_part("plain.pdf", PDF, pdf(["Uncompressed text layer"], compress=False)),
        "## Page 1\n\nUncompressed text layer",
    ),
    (
        file_part("notes.docx", DOCX, docx("Meeting notes", "Decided: ship <it> & test")),
        "Meeting notes\n\nDecided: ship <it> & test",
    ),
    (
        file_part("fruit.xlsx", XLSX, xlsx([["fruit", "count"], ["apple", "3"]], sheet="Stock")),
        "## Stock\n\n| fruit | count |\n| --- | --- |\n| apple | 3 |",
    ),
    (
        file_part("fruit.csv", "text/csv", b'fruit,note\napple,"red, round"\n'),
        "| fruit | note |\n| --- | --- |\n| apple | red, round |",
    ),
    (
        file_part(
            "page.html", "text/html", b"<h1>Title</h1><p>Body &amp; more</p><script>x()</script>"
        ),
        "# Title\n\nBody & more",
    ),
]


@pytest.mark.parametrize(
    ("part", "text"), CONVERTED, ids=["pdf", "pdf-plain", "docx", "xlsx", "csv", "html"]
)
def test_each_converted_type_reaches_the_model_as_its_text(
    server: Server, client: httpx.Client, part: dict[str, Any], text: str
) -> None:
    server.ai.reset()
    chat = post_chat(client, ask(part))
    assert_done(chat.events, GLM)
    name = part["file"]["filename"]
    (conversion,) = [c for c in server.ai.wait_for_calls(2) if c["model"] == "toMarkdown"]
    assert conversion["inputs"]["files"][0]["name"] == name
    assert f'<document name="{name}">\n{text}\n</document>\n\nWhat does it say?' in sent_text(
        server.ai
    )


@pytest.mark.parametrize(
    ("name", "kind", "data"),
    [
        ("a.txt", "text/plain", "纯文本 and text".encode()),
        ("a.md", "text/markdown", b"# Head\n\nBody"),
    ],
)
def test_text_and_markdown_are_read_without_a_conversion(
    server: Server, client: httpx.Client, name: str, kind: str, data: bytes
) -> None:
    server.ai.reset()
    assert_done(post_chat(client, ask(file_part(name, kind, data))).events, GLM)
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == GLM
    assert data.decode() in call["inputs"]["messages"][-1]["content"]


BAD = [
    (file_part("fake.pdf", PDF, b"not a pdf at all"), "is not a PDF: its bytes say otherwise."),
    (file_part("locked.pdf", PDF, pdf(["x"], encrypt=True)), "is an encrypted PDF"),
    (file_part("cut.pdf", PDF, pdf(["x"])[:-30]), "is not a whole PDF"),
    (file_part("bomb.docx", DOCX, zip_bomb_docx()), "refused as a zip bomb."),
    (file_part("x.docx", DOCX, b"PK\x03\x04garbage"), "is not a whole DOCX file"),
    (file_part("audio.txt", "text/plain", b"\x00\x01\x02"), "must be UTF-8 text."),
]


@pytest.mark.parametrize(
    ("part", "rule"), BAD, ids=["type", "encrypted", "cut", "bomb", "corrupt", "binary"]
)
def test_a_bad_file_is_a_400_naming_the_rule_that_calls_nothing(
    server: Server, client: httpx.Client, part: dict[str, Any], rule: str
) -> None:
    server.ai.reset()
    chat = post_chat(client, ask(part, text="marker-doc-Q1"))
    assert_error(chat.response, 400, "invalid_request", "marker-doc-Q1")
    message = chat.response.json()["error"]["message"]
    assert message.startswith("messages[0].content[1] ")
    assert rule in message
    assert calls_before_a_later_request(server.ai, client) == []


def test_too_many_tokens_is_refused_naming_the_limit(server: Server, client: httpx.Client) -> None:
    server.ai.reset()
    long = " ".join(f"word{i}" for i in range(400)).encode()
    chat = post_chat(client, ask(file_part("long.csv", "text/csv", long)))
    assert_error(chat.response, 400, "invalid_request")
    # The emulator counts the converted table's tokens: the words and its pipes.
    message = chat.response.json()["error"]["message"]
    found = re.fullmatch(
        r"The documents are about (\d+) tokens; this deployment takes at most 200 "
        r"\(MAX_DOCUMENT_TOKENS\)\.",
        message,
    )
    assert found is not None, message
    assert int(found.group(1)) > 400, message
    assert [c["model"] for c in server.ai.wait_for_calls(1)] == ["toMarkdown"]


def test_a_failed_conversion_names_the_file_and_a_binding_error_maps(
    server: Server, client: httpx.Client
) -> None:
    server.ai.reset()
    # The emulator's converter reads the bytes: a PDF whose stream is cut
    # before its end is an "error" result, as the real service answers one.
    broken = pdf(["x"]).replace(b"endstream", b"endstrea_")
    chat = post_chat(client, ask(file_part("broken.pdf", PDF, broken)))
    assert_error(chat.response, 400, "invalid_request")
    assert chat.response.json()["error"]["message"] == (
        "messages[0].content[1] could not be read: the converter failed on it."
    )
    server.ai.script({"match": {"model": "toMarkdown"}, "error": "3040: out of capacity"})
    chat = post_chat(client, ask(file_part("a.pdf", PDF, pdf(["x"]))))
    assert_error(chat.response, 503, "model_busy")


@pytest.fixture
def v1(server: Server) -> Iterator[openai.OpenAI]:
    with openai_client(server, TOKEN) as made:
        yield made


def test_the_openai_client_sends_a_file_part(server: Server, v1: openai.OpenAI) -> None:
    server.ai.reset()
    part = file_part("notes.docx", DOCX, docx("Budget approved"))
    answer = v1.chat.completions.create(
        model="glm",
        messages=[{"role": "user", "content": [{"type": "text", "text": "Summary?"}, part]}],  # type: ignore[list-item]
    )
    assert answer.choices[0].message.content
    assert "Budget approved\n</document>\n\nSummary?" in sent_text(server.ai)
    with pytest.raises(openai.BadRequestError) as caught:
        v1.chat.completions.create(
            model="glm",
            messages=[
                {"role": "user", "content": [file_part("x.pdf", PDF, b"nope")]}  # type: ignore[list-item]
            ],
        )
    assert "is not a PDF" in json.dumps(caught.value.body)


def test_the_page_learns_a_documents_tokens_before_sending_it(
    server: Server, client: httpx.Client
) -> None:
    server.ai.reset()
    data = xlsx([["fruit", "count"], ["apple", "3"]])
    response = client.post("/api/documents", json=file_part("fruit.xlsx", XLSX, data))
    assert response.status_code == 200
    assert response.json() == {
        "name": "fruit.xlsx",
        "type": XLSX,
        "bytes": len(data),
        "tokens": response.json()["tokens"],
    }
    assert response.json()["tokens"] > 0
    (call,) = server.ai.wait_for_calls(1)
    assert call["model"] == "toMarkdown"
    assert call["results"][0]["tokens"] == response.json()["tokens"]
    bad = client.post("/api/documents", json=file_part("x.pdf", PDF, b"no"))
    assert_error(bad, 400, "invalid_request")
    assert bad.json()["error"]["message"] == "file is not a PDF: its bytes say otherwise."
    assert client.get("/api/documents").status_code == 405
