"""Knowledge bases on workerd (``npm start``: local D1 and R2, the
emulator's Vectorize and bge-m3 answering at once):

- ingestion throughput: documents of several sizes added to a base and
  polled until ready (each look at the progress also resumes a run that let
  go of its lease), in chunks per second from the upload to ``ready``;
- retrieval's cost before the first token: ``/chat`` time to ``meta`` and
  to the first token for one question asked with ``knowledge`` and without,
  alternating, side by side (medians and their ratio), and the server's own
  ``knowledge_ms`` (the base read, the question embedded, the index asked,
  the chunks read) from its log lines.

    .venv/bin/python bench/knowledge.py [--rounds N]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.harness import ROOT, chat_first_bytes, config_without_rate_limiter, start_runner

TOKEN = "bench-token-4f0a9c2e7d1b6583"
VARS = f"API_KEYS=bench:{TOKEN}\nCACHE_MODE=off\n"


def document(paragraphs: int, name: str) -> dict[str, object]:
    text = "\n\n".join(
        f"Section {k}. The boiler of model {k} holds between 1.{k % 9} and 2 bar when cold; "
        f"its valve {k} is on the left, and the filter is changed every {k % 12 + 1} months."
        for k in range(paragraphs)
    )
    data = base64.b64encode(text.encode()).decode()
    return {
        "type": "file",
        "file": {"filename": name, "file_data": f"data:text/markdown;base64,{data}"},
    }


def ingest(client: httpx.Client, bid: str, paragraphs: int) -> tuple[int, float]:
    """Chunks and seconds from the upload to ``ready``."""
    start = time.perf_counter()
    added = client.post(f"/api/knowledge/{bid}/documents", json=document(paragraphs, "m.md"))
    assert added.status_code == 202, added.text
    did = added.json()["id"]
    while True:
        docs = client.get(f"/api/knowledge/{bid}/documents").json()["documents"]
        found = next(d for d in docs if d["id"] == did)
        if found["state"] == "ready":
            return int(found["chunks"]), time.perf_counter() - start
        assert found["state"] != "failed", found
        time.sleep(0.02)


def first_bytes(client: httpx.Client, bid: str | None, n: int) -> tuple[float, float]:
    body: dict[str, object] = {
        "messages": [{"role": "user", "content": f"Which side is valve {n % 40} on?"}],
        "model": "glm",
    }
    if bid is not None:
        body["knowledge"] = bid
    return chat_first_bytes(client, body)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as folder:
        vars_file = Path(folder) / "bench.vars"
        vars_file.write_text(VARS)
        env = {"EDGECHAT_AI_DELAY_MS": "0"}
        with start_runner(config_without_rate_limiter(), vars_file=vars_file, env=env) as runner:
            headers = {"authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=runner.base_url, headers=headers, timeout=60) as client:
                bid = client.post("/api/knowledge", json={"name": "bench"}).json()["id"]
                print(f"Ingestion ({ROOT.name}, default chunk of 400 tokens, 60 overlapping)")
                print("| document | chunks | seconds to ready | chunks/s |")
                print("|---|---:|---:|---:|")
                ingest(client, bid, 20)  # warm the isolate
                for paragraphs in (100, 400, 1600):
                    chunks, seconds = ingest(client, bid, paragraphs)
                    print(
                        f"| {paragraphs} paragraphs | {chunks} | {seconds:.2f} | "
                        f"{chunks / seconds:.0f} |"
                    )
                time.sleep(1)  # the index's lag
                times: dict[str, list[tuple[float, float]]] = {"with": [], "without": []}
                for n in range(5):
                    first_bytes(client, bid, n)
                    first_bytes(client, None, n)
                for n in range(rounds):
                    for kind in ("with", "without") if n % 2 else ("without", "with"):
                        times[kind].append(first_bytes(client, bid if kind == "with" else None, n))
            records = [
                json.loads(line)
                for line in runner.log_text().splitlines()
                if line.startswith("{") and '"knowledge_ms"' in line
            ]
    meta = {k: statistics.median(t[0] for t in v) for k, v in times.items()}
    token = {k: statistics.median(t[1] for t in v) for k, v in times.items()}
    server = statistics.median(r["knowledge_ms"] for r in records[-rounds:])
    print()
    print(f"/chat, ms, median of {rounds} answers each, alternating")
    print("| | without knowledge | with knowledge | added | ratio |")
    print("|---|---:|---:|---:|---:|")
    for label, values in (("meta", meta), ("first token", token)):
        without, with_ = values["without"], values["with"]
        print(
            f"| {label} | {without:.1f} | {with_:.1f} | {with_ - without:+.1f} | "
            f"{with_ / without:.2f} |"
        )
    print(f"| server's knowledge_ms (log) | | {server:.1f} | | |")


if __name__ == "__main__":
    main()
