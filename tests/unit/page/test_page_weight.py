"""The chat page's first load (what the empty page needs) stays within its
40 KB gzipped budget, and the features it does not show are not in it: they
are loaded at their first use (static/js/on-demand.js). Sizes are counted by
bench/page_weight.py, the same code `npm run bench:page` reports with."""

from __future__ import annotations

from bench import page_weight

JS = page_weight.STATIC / "js"


def first_load() -> list:
    return [
        page_weight.STATIC / "index.html",
        page_weight.STATIC / "app.css",
        *page_weight.graph(JS / "app.js"),
    ]


def test_the_first_load_is_within_40_kb_gzipped() -> None:
    assert page_weight.BUDGET == 40 * 1024
    total = sum(page_weight.gz(path) for path in first_load())
    assert total <= page_weight.BUDGET, f"{total:,} B gzipped"


def test_the_features_the_empty_page_does_not_show_load_at_their_first_use() -> None:
    first = first_load()
    names = {path.name for path in first}
    # Each feature's own module, fetched with import("./x.js") or onDemand("./x.js").
    entries = {"dictation.js", "speech.js", "search-dialog.js", "import-export.js", "render.js"}
    # What only those import.
    behind = {"search.js", "transfer.js"}
    assert not names & (entries | behind), names & (entries | behind)
    assert {path.name for path in page_weight.features(first)} >= entries


def test_index_html_preloads_the_first_load_and_nothing_loaded_later() -> None:
    html = (page_weight.STATIC / "index.html").read_text(encoding="utf-8")
    preloaded = set(page_weight.re.findall(r'<link rel="modulepreload" href="/js/([^"]+)">', html))
    first = {path.name for path in page_weight.graph(JS / "app.js")} - {"app.js"}
    assert preloaded == first
