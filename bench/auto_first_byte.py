"""What ``auto`` adds before the first byte, on workerd (``npm start``, the
Workers AI emulator answering at once): ``/chat`` time to ``meta`` and to
the first token for a short question asked of ``auto`` and of ``glm`` (the
model auto chooses for it), alternating, in one runner. Two runners: one
without budgets (routing alone) and one with ``USER_DAILY_USD`` (routing
first reads the day's spend from local D1).

    .venv/bin/python bench/auto_first_byte.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.harness import ROOT, chat_first_bytes, config_without_rate_limiter, start_runner

TOKEN = "bench-token-4f0a9c2e7d1b6583"
VARS = f"API_KEYS=bench:{TOKEN}\nMODELS=auto,glm,kimi,llama\nCACHE_MODE=off\n"


def first_bytes(client: httpx.Client, model: str, n: int) -> tuple[float, float]:
    """Milliseconds to the ``meta`` event and to the first model event."""
    body = {"messages": [{"role": "user", "content": f"What time is it? {n}"}], "model": model}
    return chat_first_bytes(client, body)


def run(label: str, extra: str, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        vars_file = Path(folder) / "bench.vars"
        vars_file.write_text(VARS + extra)
        env = {"EDGECHAT_AI_DELAY_MS": "0"}
        with start_runner(config_without_rate_limiter(), vars_file=vars_file, env=env) as runner:
            headers = {"authorization": f"Bearer {TOKEN}"}
            with httpx.Client(base_url=runner.base_url, headers=headers, timeout=30) as client:
                times: dict[str, list[tuple[float, float]]] = {"auto": [], "glm": []}
                for n in range(5):  # warm the isolate
                    first_bytes(client, "auto", n)
                    first_bytes(client, "glm", n)
                for n in range(rounds):
                    for model in ("auto", "glm") if n % 2 else ("glm", "auto"):
                        times[model].append(first_bytes(client, model, n))
        meta = {m: statistics.median(t[0] for t in v) for m, v in times.items()}
        token = {m: statistics.median(t[1] for t in v) for m, v in times.items()}
        print(
            f"| {label} | {meta['glm']:.1f} | {meta['auto']:.1f} | "
            f"{meta['auto'] - meta['glm']:+.1f} | {token['glm']:.1f} | {token['auto']:.1f} | "
            f"{token['auto'] - token['glm']:+.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=60)
    rounds = parser.parse_args().rounds
    print(f"ms, median of {rounds} answers each, auto and glm alternating ({ROOT.name})")
    print("| runner | meta: glm | meta: auto | added | first token: glm | auto | added |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    run("no budget (routing alone)", "", rounds)
    run("USER_DAILY_USD (spend read first)", "USER_DAILY_USD=100\n", rounds)


if __name__ == "__main__":
    main()
