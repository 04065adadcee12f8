"""Micro-benchmark of UpstreamReader: CPU per upstream chunk.

Feeds a realistic 2,000-token GLM stream - one event per chunk, the way
Workers AI delivers tokens: 400 reasoning tokens, 1,600 answer tokens mixing
English and Chinese, OpenAI chunk objects with id/model/created fields, usage
on the last chunks and a closing [DONE] - and prints microseconds per chunk.
The same bytes cut into 100-byte chunks show the cost of events that straddle
chunks (counted per event).
Also times the SSE writer's ``token()`` on the same texts, the other per-token
cost of /chat.

    .venv/bin/python bench/reader_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
    from edgechat import sse
    from edgechat.upstream import UpstreamReader

    chunks = glm_stream()
    texts: list[str] = []

    # The same bytes cut every 100 bytes, so events straddle chunks (slow path).
    joined = b"".join(chunks)
    ragged = [joined[i : i + 100] for i in range(0, len(joined), 100)]

    def read(stream: list[bytes]) -> None:
        reader = UpstreamReader()
        feed = reader.feed
        for chunk in stream:
            feed(chunk)
        reader.finish()
        assert reader.saw_done
        assert reader.usage is not None

    reader = UpstreamReader()
    for chunk in chunks:
        texts.extend(delta.text for delta in reader.feed(chunk))
    assert len(texts) == TOKENS, len(texts)

    def write_stream() -> None:
        token = sse.token
        for text in texts:
            token(text)

    runs: list[tuple[str, Callable[[], None], int, str]] = [
        ("UpstreamReader.feed", lambda: read(chunks), len(chunks), "chunk"),
        ("  … cut every 100 B", lambda: read(ragged), len(chunks), "event"),
        ("sse.token", write_stream, len(texts), "token"),
    ]
    for name, run, count, unit in runs:
        samples = []
        for _ in range(rounds):
            start = time.perf_counter_ns()
            run()
            samples.append((time.perf_counter_ns() - start) / count / 1000)
        print(
            f"{name:20} {count} {unit}s: {min(samples):.2f} µs/{unit} best, "
            f"{statistics.median(samples):.2f} µs/{unit} median "
            f"(Python {sys.version.split()[0]})"
        )


if __name__ == "__main__":
    main()
