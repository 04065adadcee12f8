"""What reading a request body safely costs, on CPython (Pyodide is some 3-5x
slower): the nesting scan and the other checks of ``json_body.loads`` beyond
``json.loads`` itself, and the image header read, on a 64 KB conversation,
a 64 KB body built to make the scan work hardest, and a 12 MB body of three
3 MiB images. The median of 21 runs, in milliseconds.

    .venv/bin/python bench/json_body.py
"""

from __future__ import annotations

import base64
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from edgechat.apis.openai_body import parse_openai_request  # noqa: E402
from edgechat.core import json_body  # noqa: E402
from edgechat.core.errors import BadRequest  # noqa: E402
from edgechat.core.requests import Limits  # noqa: E402
from edgechat.media import images  # noqa: E402
from tests.kit.images import jpeg, png  # noqa: E402

ALLOWED = ("glm", "kimi", "llama")
NAMES = frozenset(("messages", "content"))


def median_ms(work: Callable[[], object], runs: int = 21) -> float:
    # The median, not the best: a 12 MB body's best run depends on where the
    # allocator found memory, the median on the work.
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def conversation_64k() -> bytes:
    # Within every limit: 40 turns, 31,500 characters, half of them CJK (3
    # bytes each in UTF-8), with brackets, quotes and escapes in the text.
    rng = random.Random(1)
    words = ["edge", "你好世界", "模型流式", "worker", "é", "[x]", '"q"', "\\n", "{}"]
    messages = []
    for turn in range(40):
        text = ""
        while len(text) < 780:
            text += rng.choice(words) + " "
        messages.append({"role": "assistant" if turn % 2 else "user", "content": text})
    messages.append({"role": "user", "content": "And so?"})
    return json.dumps({"messages": messages}, ensure_ascii=False).encode()


def worst_64k() -> bytes:
    # Nearly every byte is structure: arrays, objects, escapes and short strings.
    filler = '[], "\\"", {"a": [1]}, ' * 2600
    head = '{"messages": [{"role": "user", "content": "hi"}], "metadata": ['
    return (head + filler + "0]}").encode()


def image(size: int, kind: str) -> str:
    head = jpeg(4032, 3024, exif_bytes=200_000) if kind == "image/jpeg" else png(640, 480)
    data = head + os.urandom(size - len(head))
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


def images_12mb() -> bytes:
    parts = [{"type": "text", "text": "What is on these?"}]
    for kind in ("image/jpeg", "image/png", "image/jpeg"):
        parts.append({"type": "image_url", "image_url": {"url": image(3 << 20, kind)}})
    return json.dumps({"model": "kimi", "messages": [{"role": "user", "content": parts}]}).encode()


def no_constant(_name: str) -> None:
    raise ValueError("not JSON")


def validated(body: bytes, limits: Limits) -> object:
    try:
        return parse_openai_request(body, limits, ALLOWED, "glm")
    except BadRequest:
        return None


def main() -> int:
    limits = Limits()
    bodies = {
        "64 KB conversation": conversation_64k(),
        "64 KB of structure": worst_64k(),
        "12 MB, three images": images_12mb(),
    }
    print(
        f"{'body':<22}{'bytes':>12}{'scan':>9}{'before':>9}{'now':>9}{'added':>9}{'validate':>10}"
    )
    for name, body in bodies.items():
        scan = median_ms(lambda b=body: json_body.nested_deeper_than(b, 32))
        before = median_ms(lambda b=body: json.loads(b.decode("utf-8"), parse_constant=no_constant))
        now = median_ms(
            lambda b=body: json_body.loads(
                b, max_depth=32, max_text_bytes=limits.max_body_bytes, names=NAMES
            )
        )
        validate = median_ms(lambda b=body: validated(b, limits), runs=5)
        print(
            f"{name:<22}{len(body):>12,}{scan:>9.3f}{before:>9.3f}{now:>9.3f}{now - before:>9.3f}"
            f"{validate:>10.3f}"
        )
    print(
        "scan: the nesting count alone (nested_deeper_than); before: UTF-8 and json.loads, as "
        "validation read a body before json_body;\nnow: json_body.loads (the same, the scan, "
        "numbers, surrogates); added: now - before; validate: the whole /v1 validation now"
    )

    print(f"\n{'image header (3 MiB)':<34}{'header':>9}{'whole check':>13}{'regex':>9}")
    pattern = re.compile(r"data:(image/(?:png|jpeg|webp|gif));base64,([A-Za-z0-9+/]*={0,2})")
    for kind, label in (("image/png", "PNG"), ("image/jpeg", "JPEG, 200 KB of EXIF first")):
        url = image(3 << 20, kind)
        data = url.split(",", 1)[1]
        size = len(data) * 3 // 4 - data.count("=")
        read = images._HEADERS[kind]
        header = median_ms(lambda d=data, s=size, r=read: r(images._Base64(d, s)), runs=201)
        part = {"type": "image_url", "image_url": {"url": url}}
        whole = median_ms(lambda p=part: images.check_image_part(p, "x", 4 << 20))
        regex = median_ms(lambda u=url: pattern.fullmatch(u))
        print(f"{label:<34}{header:>9.4f}{whole:>13.3f}{regex:>9.3f}")
    print("header: reading the header from the base64 (the slices it decodes); whole check:")
    print("check_image_part, whose cost is the one regex pass over the base64 (regex)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
