"""`env.AI` as the Python Worker sees it under ``npm start``: the Workers AI
emulator, bound in-process by the launcher (with credentials it is wrangler's
remote binding to the real service, which these tests never call)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from tests.harness import EmulatorControl, Runner

GLM = "@cf/zai-org/glm-4.7-flash"
LLAMA = "@cf/meta/llama-3.1-8b-instruct-fp8"
# Python sees a JS error as "<ErrorName>: <message>"; the message starts with the code.
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
