"""The semantic cache on workerd (``npm start``, the Workers AI emulator and
the emulated Vectorize): what its lookup adds before a miss's first byte,
and what a hit saves. One runner with ``SEMANTIC_CACHE=user``:

1. **Miss, the model answering at once** (the race's worst case: every
   lookup loses): ``/chat``'s time to ``meta`` and to the first token for
   new questions that take part (temperature 1, so embedded and looked up)
   and that do not (temperature 1.5, over ``SEMANTIC_CACHE_MAX_TEMPERATURE``),
   alternating.
2. **Hit, the model taking ``--model-ms`` before its first byte** (a real
   model's time to first token): the first token and the whole answer for
   a question kept earlier, against new questions the model answers.

    .venv/bin/python bench/similar_first_byte.py [--rounds N] [--model-ms MS]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.harness import ROOT, config_without_rate_limiter, start_runner

TOKEN = "bench-token-similar-6a1f93c0d2e4b875"
VARS = f"API_KEYS=bench:{TOKEN}\nSEMANTIC_CACHE=user\nCACHE_MODE=off\n"
GLM = "@cf/zai-org/glm-4.7-flash"


def timed(client: httpx.Client, text: str, temperature: float) -> tuple[float, float, float, bool]:
    """Milliseconds to ``meta``, to the first model event and to ``done``;
    whether the answer was a similar question's."""
    body = {"messages": [{"role": "user", "content": text}], "temperature": temperature}
    start = time.perf_counter()
    meta = token = end = 0.0
    similar = False
    with client.stream("POST", "/chat", json=body) as response:
        assert response.status_code == 200, response.read()
        event = ""
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
                if event == "meta":
                    meta = time.perf_counter()
            elif line.startswith("data:"):
                if not token and not event and '"choices"' in line:
                    token = time.perf_counter()
                if event == "done":
                    end = time.perf_counter()
                    cached = json.loads(line[5:]).get("cached")
                    similar = isinstance(cached, dict)
            elif not line:
                event = ""
    return (meta - start) * 1e3, (token - start) * 1e3, (end - start) * 1e3, similar


def new_question() -> str:
    """A question near no other: words of its own."""
    words = " ".join(uuid.uuid4().hex[i : i + 6] for i in range(0, 24, 6))
    return f"Tell me about {words}"


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--model-ms", type=int, default=800)
    options = parser.parse_args()
    rounds = options.rounds
    with tempfile.TemporaryDirectory() as folder:
        vars_file = Path(folder) / "bench.vars"
        vars_file.write_text(VARS)
        script = Path(folder) / "script.json"
        script.write_text(json.dumps({"rules": []}))
        env = {
            "EDGECHAT_AI_DELAY_MS": "0",
            "EDGECHAT_AI_SCRIPT": str(script),
            "EDGECHAT_AI_LOG": str(Path(folder) / "calls.jsonl"),
        }
        with start_runner(config_without_rate_limiter(), vars_file=vars_file, env=env) as runner:
            headers = {"authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=runner.base_url, headers=headers, timeout=60) as client:
                for _ in range(5):  # warm the isolate
                    timed(client, new_question(), 1.0)
                    timed(client, new_question(), 1.5)
                miss: dict[str, list[tuple[float, float, float, bool]]] = {"on": [], "off": []}
                for n in range(rounds):
                    for kind in ("on", "off") if n % 2 else ("off", "on"):
                        miss[kind].append(
                            timed(client, new_question(), 1.0 if kind == "on" else 1.5)
                        )
                assert not any(r[3] for r in miss["on"]), "a new question hit"
                # The chat model now takes --model-ms before its first byte.
                rule = {"match": {"model": GLM}, "delay_ms": options.model_ms}
                script.write_text(json.dumps({"rules": [rule]}))
                kept = new_question()
                timed(client, kept, 1.0)
                deadline = time.monotonic() + 30
                while not timed(client, kept, 1.0)[3]:
                    assert time.monotonic() < deadline, "the answer was never kept"
                hit: dict[str, list[tuple[float, float, float, bool]]] = {"hit": [], "miss": []}
                for n in range(rounds):
                    for kind in ("hit", "miss") if n % 2 else ("miss", "hit"):
                        text = kept if kind == "hit" else new_question()
                        hit[kind].append(timed(client, text, 1.0))
                assert all(r[3] for r in hit["hit"]), "a kept question missed"
    print(f"ms, median of {rounds} answers each, alternating, in workerd ({ROOT.name})")
    print()
    print("| miss, model at once | meta | first token | done |")
    print("|---|---:|---:|---:|")
    for kind, label in (("off", "not taking part (temperature 1.5)"), ("on", "looked up, missed")):
        rows = miss[kind]
        print(
            f"| {label} | {median([r[0] for r in rows]):.1f} | "
            f"{median([r[1] for r in rows]):.1f} | {median([r[2] for r in rows]):.1f} |"
        )
    added = median([r[1] for r in miss["on"]]) - median([r[1] for r in miss["off"]])
    print(f"| added by the lookup | | {added:+.1f} | |")
    print()
    print(f"| model {options.model_ms} ms to its first byte | meta | first token | done |")
    print("|---|---:|---:|---:|")
    for kind, label in (("miss", "new question (the model answers)"), ("hit", "kept question")):
        rows = hit[kind]
        print(
            f"| {label} | {median([r[0] for r in rows]):.1f} | "
            f"{median([r[1] for r in rows]):.1f} | {median([r[2] for r in rows]):.1f} |"
        )
    saved = median([r[1] for r in hit["miss"]]) - median([r[1] for r in hit["hit"]])
    print(f"| saved by a hit (first token) | | {saved:.1f} | |")


if __name__ == "__main__":
    main()
