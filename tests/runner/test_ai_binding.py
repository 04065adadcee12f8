"""`env.AI` as the Python Worker sees it in the runner: the emulator, or the
real Workers AI REST API (here a local fake of it) when credentials are set."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import httpx
import pytest

from tests.conftest import PROBE_CONFIG
from tests.harness import ROOT, EmulatorControl, Runner, start_runner
from tests.kit.sse import parse

GLM = "@cf/zai-org/glm-4.7-flash"
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"
# Python sees a JS error as "<ErrorName>: <message>"; the message starts with the code.
USAGE = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
BINDING_ERROR = re.compile(r"^(?:\w+: )?(\d{4}): ")


def call_ai(runner: Runner, model: str, inputs: dict[str, Any]) -> httpx.Response:
    body = json.dumps({"model": model, "inputs": inputs})
    return httpx.post(runner.base_url + "/ai", content=body, timeout=15)


def data_lines(body: str) -> list[str]:
    return [line[len("data: ") :] for line in body.split("\n") if line.startswith("data: ")]


def test_streamed_glm_answer_reaches_python_in_the_openai_wire_format(probe: Runner) -> None:
    messages = [{"role": "user", "content": "What is the edge?"}]
    response = call_ai(probe, GLM, {"messages": messages, "stream": True})
    assert response.status_code == 200
    events = data_lines(response.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    kinds = [
        "reasoning"
        if c.get("choices", [{}])[0].get("delta", {}).get("reasoning_content")
        else "content"
        if c.get("choices", [{}])[0].get("delta", {}).get("content")
        else "other"
        for c in chunks
    ]
    assert "reasoning" in kinds
    assert "content" in kinds
    assert kinds.index("reasoning") < kinds.index("content")
    # The closing native chunk counts what was streamed: one token per delta
    # chunk (all but the finish chunk and this one), and the prompt's 4 tokens
    # plus 2 for the message framing.
    completion = len(chunks) - 2
    assert chunks[-1] == {
        "response": "",
        "usage": {
            "prompt_tokens": 6,
            "completion_tokens": completion,
            "total_tokens": 6 + completion,
        },
    }
    answer = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c.get("choices")
    )
    assert "emulator" in answer
    assert "What is the edge?" in answer


def test_non_stream_llama_answer_is_a_native_object(probe: Runner) -> None:
    messages = [{"role": "user", "content": "hi"}]
    response = call_ai(probe, LLAMA, {"messages": messages})
    assert response.status_code == 200
    result = response.json()
    assert set(result) >= {"response", "usage"}
    assert LLAMA in result["response"]


def test_binding_errors_reach_python_with_their_code(probe: Runner) -> None:
    response = call_ai(probe, "@cf/made-up/model", {"prompt": "x"})
    assert response.status_code == 502
    assert BINDING_ERROR.match(response.json()["error"]).group(1) == "5007"


def test_script_and_call_log_seams_work_through_python(
    probe: Runner, probe_ai: EmulatorControl
) -> None:
    probe_ai.script({"match": {"model": GLM, "contains": "busy"}, "error": "3040: out of capacity"})
    inputs = {"messages": [{"role": "user", "content": "are you busy?"}], "stream": True}
    response = call_ai(probe, GLM, inputs)
    assert BINDING_ERROR.match(response.json()["error"]).group(1) == "3040"
    (call,) = probe_ai.wait_for_calls(1)
    # The Python dict crossed the seam as a plain object, not a proxy.
    assert call["model"] == GLM
    assert call["inputs"] == inputs
    assert call["stream"] is True
    assert call["error"].startswith("3040:")


STREAMED = [
    json.dumps({"choices": [{"index": 0, "delta": {"content": "Hello from"}}]}),
    json.dumps({"choices": [{"index": 0, "delta": {"content": " the REST API"}}]}),
    json.dumps({"response": "", "usage": USAGE}),
    "[DONE]",
]


class FakeWorkersAI(BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["content-length"])
        body = json.loads(self.rfile.read(length))
        FakeWorkersAI.seen.append(
            {"path": self.path, "auth": self.headers["authorization"], "body": body}
        )
        if body.get("stream"):
            # The REST API streams the same SSE bytes the binding does.
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            for event in STREAMED:
                self.wfile.write(f"data: {event}\n\n".encode())
                self.wfile.flush()
            return
        payload = json.dumps({"success": True, "result": {"response": "from the fake API"}})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(payload.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeWorkersAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    FakeWorkersAI.seen.clear()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_credentials_switch_ai_to_the_rest_api(fake_api: str) -> None:
    env = {
        "CLOUDFLARE_ACCOUNT_ID": "acct123",
        "CLOUDFLARE_API_TOKEN": "tok-456",
        "EDGECHAT_AI_BASE_URL": fake_api,
    }
    with start_runner(PROBE_CONFIG, env=env) as runner:
        response = call_ai(runner, LLAMA, {"prompt": "hello"})
    assert response.status_code == 200
    assert response.json() == {"response": "from the fake API"}
    (request,) = FakeWorkersAI.seen
    assert request["path"] == f"/accounts/acct123/ai/run/{LLAMA}"
    assert request["auth"] == "Bearer tok-456"
    assert request["body"] == {"prompt": "hello"}


def test_chat_streams_from_the_rest_api_when_credentials_are_set(fake_api: str) -> None:
    env = {
        "CLOUDFLARE_ACCOUNT_ID": "acct123",
        "CLOUDFLARE_API_TOKEN": "tok-456",
        "EDGECHAT_AI_BASE_URL": fake_api,
    }
    body = {"messages": [{"role": "user", "content": "hi"}]}
    with start_runner(ROOT / "wrangler.toml", env=env) as runner:
        response = httpx.post(runner.base_url + "/chat", json=body, timeout=15)
    assert response.status_code == 200
    parsed = parse(response.content)
    assert parsed.names == ["meta"] + ["message"] * len(STREAMED) + ["done"]
    # The REST API's bytes reach the client as they came.
    assert "".join(f"data: {event}\n\n" for event in STREAMED) in response.text
    assert parsed.text() == "Hello from the REST API"
    assert parsed.saw_done_marker
    assert parsed.final.data["usage"] == USAGE
    (request,) = FakeWorkersAI.seen
    assert request["path"] == "/accounts/acct123/ai/run/@cf/zai-org/glm-4.7-flash"
    assert request["body"]["stream"] is True
    assert request["body"]["messages"][-1] == {"role": "user", "content": "hi"}
