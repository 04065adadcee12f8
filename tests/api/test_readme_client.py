"""The documented Python client (httpx + httpx-sse) works against edgechat: the
reading loop is taken from docs/api/chat.md as it stands, only its URL pointed
at the server under test, and run as written."""

from __future__ import annotations

import ast
import contextlib
import io
import re
from typing import Any

import pytest

from tests.api.checks import (
    GLM,
)
from tests.harness import ROOT, EmulatorControl
from tests.kit.upstream import openai_chunk

README_URL = "http://127.0.0.1:8787"


CHAT_PAGE = ROOT / "docs" / "api" / "chat.md"


def readme_client() -> str:
    """The Python block of the docs' ``POST /chat`` page."""
    page = CHAT_PAGE.read_text()
    match = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert match, "no Python example on docs/api/chat.md"
    code = match.group(1)
    assert "iter_sse" in code, code
    assert code.count(f"{README_URL}/chat") == 1, code
    return code


def run_readme_client(base_url: str) -> str:
    """Runs the documented loop against ``base_url``; returns what it printed."""
    code = readme_client().replace(README_URL, base_url)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, str(CHAT_PAGE), "exec"), {"__name__": "readme"})
    return printed.getvalue()


def split_output(printed: str) -> tuple[str, str, dict[str, Any]]:
    """(answer text, closing event name, its data) from the loop's output."""
    match = re.fullmatch(r"(.*)\n (done|error) (\{.*\})\n", printed, re.DOTALL)
    assert match, f"unexpected output: {printed!r}"
    return match.group(1), match.group(2), ast.literal_eval(match.group(3))


@pytest.mark.parametrize("wire_format", ["openai", "native"])
def test_the_readme_client_prints_the_answer_then_done(
    edgechat_url: str, ai: EmulatorControl, wire_format: str
) -> None:
    answer = "Hello from the edge, 你好 🌏"
    ai.script({"reply": {"content": answer, "reasoning": "not printed", "format": wire_format}})
    text, closing, data = split_output(run_readme_client(edgechat_url))
    assert text == answer
    assert closing == "done"
    assert data["model"] == GLM
    assert data["finish_reason"] in ("stop", None)
    assert set(data["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}


def test_the_readme_client_prints_the_text_so_far_then_error(
    edgechat_url: str, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "chunks": [
                openai_chunk(content="Half an "),
                openai_chunk(content="answer"),
                {"error": "3040: busy"},
            ]
        }
    )
    text, closing, data = split_output(run_readme_client(edgechat_url))
    assert text == "Half an answer"
    assert closing == "error"
    assert data["code"] == "upstream_error"  # the break carries no reason
    assert data["retryable"] is True
