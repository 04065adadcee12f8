"""The README stays short and its links reach the docs: mkdocs checks the links
inside docs/ (mkdocs build --strict in npm test), but the README is outside it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


def test_the_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 250


def test_every_relative_link_in_the_readme_reaches_a_file() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [link for link in links if not re.match(r"[a-z]+:|#", link)]
    assert local, "the README links into docs/"
    missing = [link for link in local if not (ROOT / link.split("#", 1)[0]).is_file()]
    assert missing == []
