"""mkdocs hooks for edgechat's docs (mkdocs.yml, ``hooks:``).

- ``<!-- configuration-reference -->`` in a page becomes the table of every
  setting, rendered from ``edgechat.config.variables.VARIABLES``: the reference stays
  what the code reads.
- ``static/openapi.json`` (what the Worker serves) joins the site as
  ``api/openapi.json``, for the OpenAPI reference page.
- Mermaid comes from the pinned npm package, so the theme loads no copy of
  its own from a CDN.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from edgechat.config.variables import VARIABLES, Variable  # noqa: E402

MARKER = "<!-- configuration-reference -->"
OPENAPI = ROOT / "static" / "openapi.json"
MERMAID = ROOT / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "api/openapi.json", abs_src_path=str(OPENAPI)))
    if not MERMAID.is_file():
        raise FileNotFoundError(f"{MERMAID} is missing: run npm run setup first")
    files.append(
        File.generated(config, "assets/javascripts/mermaid.min.js", abs_src_path=str(MERMAID))
    )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, configuration_reference())


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(variable: Variable) -> str:
    name = f"`{variable.name}`" + (" (secret)" if variable.secret else "")
    if variable.default is None:
        default = "none"
    elif variable.name == "SYSTEM_PROMPT":
        default = f"“{variable.default}”"
    else:
        default = f"`{variable.default}`"
    return f"| {name} | {_cell(default)} | {_cell(variable.rule)} |"


def configuration_reference() -> str:
    """The settings by topic, in the registry's order."""
    topics: dict[str, list[Variable]] = {}
    for variable in VARIABLES:
        topics.setdefault(variable.topic, []).append(variable)
    parts = []
    for topic, variables in topics.items():
        parts.append(f"### {topic}\n")
        if any(v.per_provider for v in variables):
            parts.append(
                "`<NAME>` is a provider's name from `PROVIDERS` in upper case: "
                "`ZHIPU_API_KEY` for `zhipu`.\n"
            )
        parts.append("| variable | default | rule |\n|---|---|---|")
        parts.extend(_row(v) for v in variables)
        parts.append("")
    return "\n".join(parts)
