"""Micro-benchmark of the OpenAI API's stream framing on CPython: the CPU
``ChunkFraming`` (``/v1/chat/completions``) and ``ResponseEvents``
(``/v1/responses``) spend on one 2,000-token GLM answer, forwarded in
batches of events as the delivery hands them over (``--batch`` events
each: 5 is a 100 ms batch at 20 ms per token, 50 a 1 s batch).

The answer is what the emulator streams, as Workers AI does: compact JSON,
the model's own id and name, the running usage in every chunk, then the
binding's usage chunk and [DONE]. With ``--against CHECKOUT`` the same runs
are made with another revision's ``src`` in a second process, alternating,
and the ratios printed (a revision without ``responses`` measures only
Chat Completions).

    .venv/bin/python bench/framing_bench.py [--rounds N] [--batch N] [--against CHECKOUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

TOKENS = 2000
ROOT = Path(__file__).resolve().parent.parent
COMPACT: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":")}
WORDS = (" The", " edge", " runs", " close", " to", " users", " 你好", "世界", "。", ' "q"')


def answer() -> list[bytes]:
    events = []
    for n in range(1, TOKENS + 1):
        kind = "reasoning_content" if n <= 400 else "content"
        body = {
            "id": "chatcmpl-9f3e",
            "object": "chat.completion.chunk",
            "created": 1_800_000_000,
            "model": "zai-org/GLM-4.7-Flash",
            "choices": [{"index": 0, "delta": {kind: WORDS[n % len(WORDS)]}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": 12 + n},
        }
        events.append(b"data: " + json.dumps(body, **COMPACT).encode() + b"\n\n")
    usage = {"prompt_tokens": 12, "completion_tokens": TOKENS, "total_tokens": 12 + TOKENS}
    events.append(b"data: " + json.dumps({"response": "", "usage": usage}, **COMPACT).encode())
    events[-1] += b"\n\ndata: [DONE]\n\n"
    return events


def measure(rounds: int, batch: int) -> dict[str, float]:
    """Microseconds per answer (the least of the rounds), per framing this revision has."""
    from edgechat.apis import openai as openai_api
    from edgechat.core.models import find

    model = find("glm")
    assert model is not None
    events = answer()
    batches = [b"".join(events[i : i + batch]) for i in range(0, len(events), batch)]
    framings: dict[str, Any] = {
        "chat.completions": lambda: openai_api.ChunkFraming(
            "r", model, 4096, include_usage=True, created=1
        )
    }
    try:
        from edgechat.apis import responses

        framings["responses"] = lambda: responses.ResponseEvents("r", model, 4096, created=1)
    except ImportError:
        pass
    results = {}
    for name, make in framings.items():
        times = []
        for _ in range(rounds):
            framing = make()
            started = time.perf_counter()
            out = framing.first_words(model, batches[0])
            for data in batches[1:]:
                out = framing.feed(data)
            times.append(time.perf_counter() - started)
            assert out is not None
        # The least: the run least disturbed by the machine's other work.
        results[name] = min(times) * 1e6
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--against")
    parser.add_argument("--src", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.src:
        sys.path.insert(0, args.src)
        print(json.dumps(measure(args.rounds, args.batch)))
        return
    runs: dict[str, list[dict[str, float]]] = {"now": [], "before": []}
    for _ in range(3):
        for which, root in (("now", ROOT), ("before", Path(args.against or ""))):
            if which == "before" and not args.against:
                continue
            command = [sys.executable, __file__, "--src", str(root / "src")]
            command += ["--rounds", str(args.rounds), "--batch", str(args.batch)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[which].append(json.loads(done.stdout))
    print(f"{TOKENS}-token GLM answer in batches of {args.batch} events, CPython, µs per answer:")
    for name in runs["now"][0]:
        now = statistics.median(r[name] for r in runs["now"])
        line = f"  {name:<18} {now:9.0f} µs"
        befores = [r[name] for r in runs["before"] if name in r]
        if befores:
            before = statistics.median(befores)
            line += f"   before {before:9.0f} µs   {now / before:5.2f}x"
        print(line)


if __name__ == "__main__":
    main()
