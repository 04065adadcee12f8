"""What ``auto``'s routing costs per request: ``routing.choose`` by the
default rules, beside ``request.inputs`` (the messages built for the model,
on every request) in the same process, alternating, for the questions each
rule catches and the longest question the default limits allow.

    .venv/bin/python bench/routing_cost.py [--rounds N]   # CPython
    node bench/routing_cost.mjs [--rounds N]              # the same, in Pyodide
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

if sys.platform != "emscripten":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from edgechat.answer.routing import choose
from edgechat.config.routes import DEFAULT_ROUTES
from edgechat.config.settings import DEFAULT_SYSTEM_PROMPT
from edgechat.core.models import AUTO, CATALOG
from edgechat.core.requests import ChatRequest, Message

ALLOWED = ("auto", *(model.alias for model in CATALOG))
CALLS = 500
PROSE = "The harbour town grew around its fish market, and its people kept boats. "


def question(*turns: str) -> ChatRequest:
    messages = tuple(
        Message("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(turns)
    )
    return ChatRequest(messages, AUTO, None, 1024, None)


CASES = {
    "short question": question("What is the capital of France?"),
    "code": question("Why does this fail?\n```python\nprint(1/0)\n```"),
    "reasoning": question("Prove that the square root of two is irrational."),
    # MAX_MESSAGE_CHARS of prose in each of 4 turns (MAX_TOTAL_CHARS): no
    # rule's words in it, so every pattern reads all of the last question.
    "longest allowed": question(*((PROSE * 110)[:8000] for _ in range(4))),
}


def per_call_us(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        work()
    return (time.perf_counter() - start) / CALLS * 1e6


def run(rounds: int) -> None:
    version = sys.version.split()[0]
    where = "Pyodide" if sys.platform == "emscripten" else "CPython"
    print(f"µs per request, median of {rounds} rounds of {CALLS} calls ({where} {version})")
    print("| question | routed to | choose | request.inputs | ratio |")
    print("|---|---|---:|---:|---:|")
    for name, request in CASES.items():
        routed = choose(request, DEFAULT_ROUTES, ALLOWED)
        assert routed.route is not None
        routing: list[float] = []
        inputs: list[float] = []
        for _ in range(rounds):
            routing.append(per_call_us(lambda r=request: choose(r, DEFAULT_ROUTES, ALLOWED)))
            inputs.append(per_call_us(lambda r=routed: r.inputs(r.model, DEFAULT_SYSTEM_PROMPT)))
        a, b = statistics.median(routing), statistics.median(inputs)
        print(f"| {name} | {routed.route.model} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    run(parser.parse_args().rounds)
