"""Weight of the chat page: HTML + CSS + JavaScript in static/, gzipped.

The budget is 44 KB gzipped in total, the code highlighter included, so the
page stays quick to load on a phone: 40 KB when the page was one script, and
4 KB more since it is split into modules by concept, each compressed alone
(the same code as one file is 2.8 KB smaller; docs/PERFORMANCE.md). Each file is
compressed on its own, as it is served; the script exits with status 1 when
the total is over the budget.

    npm run bench:page        (this, then bench/page_render.py)
    .venv/bin/python bench/page_weight.py
"""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"
BUDGET = 44 * 1024
KINDS = (".html", ".css", ".js", ".mjs")


def main() -> int:
    files = sorted(p for p in STATIC.rglob("*") if p.is_file() and p.suffix in KINDS)
    total_raw = total_gz = 0
    print(f"{'file':<28}{'bytes':>9}{'gzipped':>10}")
    for path in files:
        data = path.read_bytes()
        packed = len(gzip.compress(data, compresslevel=9, mtime=0))
        total_raw += len(data)
        total_gz += packed
        print(f"{path.relative_to(STATIC).as_posix():<28}{len(data):>9,}{packed:>10,}")
    verdict = "within" if total_gz <= BUDGET else "OVER"
    print(f"{'total':<28}{total_raw:>9,}{total_gz:>10,}")
    print(
        f"page weight: {total_gz / 1024:.1f} KB gzipped (HTML+CSS+JS, {len(files)} files), "
        f"{verdict} the {BUDGET // 1024} KB budget"
    )
    return 0 if total_gz <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
