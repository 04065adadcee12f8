"""What naming a conversation for the prompt cache costs per request, on
CPython: ``affinity.session_of`` plus ``affinity.options_with``, beside
``request.inputs`` (the messages built for the model, on every request) in
the same process, alternating, for conversations of 2, 20 and 50 messages
of 400 characters, with the conversation named (``/chat``'s
``conversation``) and unnamed (its first messages hashed).

    .venv/bin/python bench/affinity_cost.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from edgechat.answer.affinity import options_with, session_of
from edgechat.config.settings import DEFAULT_SYSTEM_PROMPT
from edgechat.core.models import CATALOG
from edgechat.core.requests import ChatRequest, Message

TEXT = ("The edge runs close to users, so latency stays low. 你好世界。" * 8)[:400]
CALLS = 2000


def conversation(messages: int, name: str | None) -> ChatRequest:
    turns = tuple(
        Message("user" if n % 2 == 0 else "assistant", f"{n} {TEXT}") for n in range(messages)
    )
    return ChatRequest(turns, CATALOG[0], None, 1024, None, session=name)


SYSTEM = DEFAULT_SYSTEM_PROMPT
OPTIONS = {"gateway": {"id": "gw"}}


def named_call(request: ChatRequest) -> object:
    return options_with(OPTIONS, session_of("key:ci", request))


def per_call_us(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(CALLS):
        work()
    return (time.perf_counter() - start) / CALLS * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    rounds = parser.parse_args().rounds
    version = sys.version.split()[0]
    print(f"µs per request, median of {rounds} rounds of {CALLS} calls (Python {version})")
    print("| messages | conversation | affinity | request.inputs | ratio |")
    print("|---:|---|---:|---:|---:|")
    for messages in (2, 20, 50):
        for name in ("6f1c2d3e-9a8b-4c7d-8e6f-5a4b3c2d1e0f", None):
            request = conversation(messages, name)
            affinity, inputs = [], []
            for _ in range(rounds):
                affinity.append(per_call_us(lambda r=request: named_call(r)))
                inputs.append(per_call_us(lambda r=request: r.inputs(CATALOG[0], SYSTEM)))
            a, i = statistics.median(affinity), statistics.median(inputs)
            kind = "named" if name else "unnamed"
            print(f"| {messages} | {kind} | {a:.2f} | {i:.2f} | {a / i:.2f} |")


if __name__ == "__main__":
    main()
