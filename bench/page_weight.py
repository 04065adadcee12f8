"""Weight of the chat page, gzipped: its first load, and what loads later.

The first load is what the empty page needs: index.html, app.css and every
module app.js imports, statically, down the graph. Its budget is 40 KB
gzipped (issue 20), so the page stays quick to load on a phone. The rest is listed
with its size, by when it loads:

- after the first paint: the answer renderer (js/render.js and what it imports
  statically: markdown-it, highlight.js with the common languages);
- on demand, at its first use: the page's features the empty page does not
  show (dictation, read aloud, search, export and import: each module the
  first load imports with `import("./x.js")`, with what it alone imports);
- on demand: KaTeX (its script, stylesheet and fonts) when an answer has
  math, the diagram frame and Mermaid when one has a diagram, and each other
  highlight.js language when a fence names it.

Each file is compressed on its own, as it is served (fonts are woff2, already
compressed: their bytes as they are). The script exits with status 1 when
the first load is over its budget, or when static/vendor/ is missing (run
`npm run setup`).

    npm run bench:page        (this, then bench/page_render.py)
    .venv/bin/python bench/page_weight.py
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "static"
BUDGET = 40 * 1024
STATIC_IMPORT = re.compile(r"""^\s*import\s+(?:[^'"]*?\sfrom\s+)?["']([^"']+)["']""", re.M)
# `import("./x.js")`, or `onDemand("./x.js")` (static/js/on-demand.js, which
# imports the path it is given at the first use).
DYNAMIC_IMPORT = re.compile(r"""(?:import|onDemand)\(\s*["']([^"'$`]+)["']\s*\)""")
# `stylesheet("../x.css")` (static/js/dom.js): a stylesheet that comes with the module adding it.
STYLESHEET = re.compile(r"""\bstylesheet\(\s*["']([^"']+\.css)["']\s*\)""")


def gz(path: Path) -> int:
    data = path.read_bytes()
    if path.suffix == ".woff2":
        return len(data)
    return len(gzip.compress(data, compresslevel=9, mtime=0))


def graph(entry: Path) -> list[Path]:
    """`entry` and every module it imports statically, transitively."""
    seen: list[Path] = []
    todo = [entry]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_file():
            continue
        seen.append(path)
        text = path.read_text(encoding="utf-8")
        for spec in STATIC_IMPORT.findall(text):
            if spec.startswith("."):
                todo.append((path.parent / spec).resolve())
    return seen


def features(first: list[Path]) -> list[Path]:
    """The page's own modules that the first load imports on demand
    (`import("./x.js")`, `onDemand("./x.js")`)."""
    found = {
        (path.parent / spec).resolve()
        for path in first
        for spec in DYNAMIC_IMPORT.findall(path.read_text(encoding="utf-8"))
        if spec.startswith(".")
    }
    return sorted(p for p in found if p.is_file() and p not in first)


def row(name: str, raw: int, packed: int) -> None:
    print(f"  {name:<40}{raw:>11,}{packed:>10,}")


def section(title: str, paths: list[Path]) -> int:
    print(title)
    total_raw = total_gz = 0
    for path in paths:
        raw, packed = path.stat().st_size, gz(path)
        total_raw += raw
        total_gz += packed
        row(path.relative_to(STATIC).as_posix(), raw, packed)
    row("total", total_raw, total_gz)
    return total_gz


def main() -> int:
    vendor = STATIC / "vendor"
    if not (vendor / "STAMP").is_file():
        print("static/vendor/ is missing: run `npm run setup`", file=sys.stderr)
        return 1
    print(f"  {'file':<40}{'bytes':>11}{'gzipped':>10}")
    first = [STATIC / "index.html", STATIC / "app.css", *sorted(graph(STATIC / "js" / "app.js"))]
    first_gz = section("first load (the empty page)", first)

    renderer = [p for p in sorted(graph(STATIC / "js" / "render.js")) if p not in first]
    after_paint = section("after the first paint (the answer renderer)", renderer)

    for feature in features(first):
        if feature.name == "render.js":
            continue
        pieces = [p for p in sorted(graph(feature)) if p not in first]
        sheets = {
            (path.parent / sheet).resolve()
            for path in pieces
            for sheet in STYLESHEET.findall(path.read_text(encoding="utf-8"))
        }
        pieces += sorted(sheets)
        section(f"on demand: js/{feature.name} at its first use", pieces)

    katex = [
        STATIC / "js" / "math.js",
        vendor / "katex" / "katex.js",
        vendor / "katex" / "katex.css",
    ]
    section("on demand: math (KaTeX)", katex)
    fonts = sorted((vendor / "katex" / "fonts").glob("*.woff2"))
    font_bytes = sum(p.stat().st_size for p in fonts)
    print(
        f"  {len(fonts)} woff2 fonts, {font_bytes:,} bytes in all; a page fetches only the"
        " faces its formulas use"
    )
    diagrams = [
        STATIC / "js" / "diagram.js",
        STATIC / "diagram.html",
        STATIC / "js" / "diagram-frame.js",
        vendor / "mermaid" / "mermaid.min.js",
    ]
    section("on demand: diagrams (Mermaid, in the sandboxed frame)", diagrams)
    languages = sorted(
        p for p in (vendor / "highlight").glob("*.js") if p.name not in ("common.js", "index.js")
    )
    sizes = sorted(gz(p) for p in languages)
    print("on demand: other highlight.js languages")
    index = vendor / "highlight" / "index.js"
    row("highlight/index.js (names and aliases)", index.stat().st_size, gz(index))
    print(
        f"  {len(languages)} languages, one module each: median {sizes[len(sizes) // 2]:,} bytes"
        f" gzipped, largest {sizes[-1]:,}"
    )

    verdict = "within" if first_gz <= BUDGET else "OVER"
    print(
        f"page weight: first load {first_gz / 1024:.1f} KB gzipped ({len(first)} files),"
        f" {verdict} the {BUDGET // 1024} KB budget;"
        f" the renderer after the first paint {after_paint / 1024:.1f} KB"
    )
    return 0 if first_gz <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
