"""The official ``openai`` client from npm against /v1: the scenarios of
``clients/openai_node.mjs`` (a whole answer, a stream with usage, a tool-call
round trip, errors as the client's exception classes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.api.checks import GLM, LLAMA
from tests.api.conftest import Server, ServerPool
from tests.api.test_openai import SETTINGS, TOKEN, TOOL_CALL_CHUNKS
from tests.kit.upstream import openai_chunk

SCRIPT = Path(__file__).parent / "clients" / "openai_node.mjs"


def run_client(script: Path, server: Server) -> Any:
    """Runs a client script of ``clients/`` against ``server``'s /v1; returns
    the JSON it printed of what it saw."""
    node = shutil.which("node")
    assert node is not None
    done = subprocess.run(
        [node, str(script)],
        env={**os.environ, "EDGECHAT_V1_URL": server.url + "/v1", "EDGECHAT_V1_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_npm_client_reads_every_shape(servers: ServerPool) -> None:
    server = servers.get(SETTINGS, rate_limited=False)
    server.ai.script(
        {
            "match": {"model": GLM, "contains": "node weather"},
            "times": 1,
            "chunks": TOOL_CALL_CHUNKS,
        },
        {"match": {"model": GLM, "contains": "node weather"}, "reply": {"content": "21 degrees."}},
        {
            "match": {"contains": "node break"},
            "chunks": [
                openai_chunk(content="Half"),
                {"error": "3040: Capacity temporarily exceeded"},
            ],
        },
    )
    seen = run_client(SCRIPT, server)
    assert seen["models"] == ["auto", GLM, "@cf/moonshotai/kimi-k2.6", LLAMA, "@cf/baai/bge-m3"]
    assert "Hello from node" in seen["whole"]["content"]
    assert seen["whole"]["finish"] == "stop"
    assert seen["whole"]["usage"]["total_tokens"] > 0
    assert seen["stream"]["everyChunkHasChoices"] is True
    assert seen["stream"]["text"].endswith("«Hello from node»")
    assert seen["stream"]["lastChoices"] == []
    assert seen["stream"]["lastUsage"]["completion_tokens"] > 0
    assert seen["toolCall"] == {
        "finish": "tool_calls",
        "id": "call_w1",
        "name": "get_weather",
        "arguments": '{"city": "Zürich", "unit": "c"}',
    }
    assert seen["toolAnswer"] == "21 degrees."
    errors = seen["errors"]
    assert errors["notFound"] == {
        "class": "NotFoundError",
        "status": 404,
        "code": "model_not_found",
    }
    assert errors["badRequest"] == {
        "class": "BadRequestError",
        "status": 400,
        "code": "invalid_request",
    }
    assert errors["auth"] == {"class": "AuthenticationError", "status": 401, "code": "unauthorized"}
    assert errors["midStream"]["class"] == "APIError"
    # A stream that breaks part way carries no reason (see test_chat_stream).
    assert errors["midStream"]["code"] == "upstream_error"
