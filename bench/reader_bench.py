"""Micro-benchmark of UpstreamReader: CPU per upstream chunk.

Feeds a realistic 2,000-token GLM stream - one event per chunk, the way
Workers AI delivers tokens: 400 reasoning tokens, 1,600 answer tokens mixing
English and Chinese, OpenAI chunk objects with id/model/created fields, usage
on the last chunks and a closing [DONE] - and prints microseconds per chunk.
The same bytes cut into 100-byte chunks show the cost of events that straddle
chunks (counted per event).
With ``--against CHECKOUT`` the same runs are made with another revision's
reader in a second process, alternating, and the ratios printed.

    .venv/bin/python bench/reader_bench.py [--rounds N] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOKENS = 2000
# Workers AI sends compact JSON, as its streamed chunks show.
COMPACT: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}
REASONING_TOKENS = 400
WORDS = (
    "The", " edge", " runs", " close", " to", " users", ",", " so", " latency", " stays",
    " low", ".", " 你好", "\uff0c", "世界", "。", " Streaming", " tokens", " one", " by", " one",
    " keeps", " the", " page", " alive", " 🙂", "\n\n", " `code`", " \"quoted\"", " back\\slash",
)  # fmt: skip


def glm_stream() -> list[bytes]:
    """One chunk per event, as the binding delivers them."""
    chunks: list[bytes] = []
    prompt_tokens = 37
    for i in range(TOKENS):
        word = WORDS[i % len(WORDS)]
        key = "reasoning_content" if i < REASONING_TOKENS else "content"
        event: dict[str, Any] = {
            "id": "chatcmpl-8f3c2a9e0b1d4c7a",
            "object": "chat.completion.chunk",
            "created": 1_790_000_000,
            "model": "@cf/zai-org/glm-4.7-flash",
            "choices": [{"index": 0, "delta": {key: word}, "finish_reason": None}],
        }
        if i >= TOKENS - 3:
            event["usage"] = {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": i + 1,
                "total_tokens": prompt_tokens + i + 1,
            }
        if i == TOKENS - 1:
            event["choices"][0]["finish_reason"] = "stop"
        chunks.append(b"data: " + json.dumps(event, **COMPACT).encode() + b"\n\n")
    chunks.append(b'data: {"response":"","usage":{"prompt_tokens":37,"completion_tokens":2000,'
                  b'"total_tokens":2037}}\n\n')  # fmt: skip
    chunks.append(b"data: [DONE]\n\n")
    return chunks


def measure(src: Path, rounds: int) -> dict[str, float]:
    """Median microseconds per unit of each run, with the reader under ``src``."""
    sys.path.insert(0, str(src))
    from edgechat.answer.upstream import UpstreamReader

    chunks = glm_stream()
    # The same bytes cut every 100 bytes, so events straddle chunks.
    joined = b"".join(chunks)
    ragged = [joined[i : i + 100] for i in range(0, len(joined), 100)]

    def read(stream: list[bytes]) -> None:
        reader = UpstreamReader()
        feed = reader.feed
        texts = 0
        for chunk in stream:
            texts += len(feed(chunk))
        texts += len(reader.finish())
        assert reader.saw_done
        assert reader.usage is not None
        assert texts >= TOKENS, texts

    runs: list[tuple[str, Callable[[], None]]] = [
        ("UpstreamReader.feed, µs/chunk", lambda: read(chunks)),
        ("  … cut every 100 B, µs/event", lambda: read(ragged)),
    ]
    medians = {}
    for name, run in runs:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            run()
            samples.append((time.perf_counter_ns() - start) / len(chunks) / 1000)
        medians[name] = statistics.median(samples)
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--against", type=Path, help="another checkout to compare with")
    parser.add_argument("--src", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src is not None:  # a child run: print the medians as JSON
        print(json.dumps(measure(args.src, args.rounds)))
        return
    here = Path(__file__).resolve().parent.parent / "src"
    sides = {"this": here} | ({"against": args.against / "src"} if args.against else {})
    results: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
    for _ in range(5):  # alternating, so both see the same machine
        for side, src in sides.items():
            cmd = [sys.executable, __file__, "--src", str(src), "--rounds", str(args.rounds)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results[side].append(json.loads(out))
    for name in results["this"][0]:
        this = statistics.median(r[name] for r in results["this"])
        line = f"{name:32} this {this:.2f}"
        if "against" in results:
            other = statistics.median(r[name] for r in results["against"])
            line += f"   against {other:.2f}   ratio {this / other:.2f}x"
        print(line + f"   (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
