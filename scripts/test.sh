#!/usr/bin/env bash
# Everything `npm test` checks: lint and types (Python, then JavaScript with
# biome), the JavaScript tests (tools and the page's modules), the docs site
# built strictly, then the Python suite (unit tests on CPython; the platform, the API and the page over HTTP
# against `npm start`: real wrangler dev on workerd). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

echo "== lint and types"
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy

echo "== the package's layers (import-linter, [tool.importlinter] in pyproject.toml)"
PYTHONPATH=src .venv/bin/lint-imports --no-cache

echo "== JavaScript lint and format (biome, biome.jsonc)"
biome ci .

echo "== the page's libraries: static/vendor/ is what the pinned packages make"
node scripts/vendor.mjs --check

echo "== JavaScript: tools and the page's modules (node --test)"
node --test 'tests/js/*.test.mjs'

echo "== the docs site (mkdocs build --strict: no broken link or anchor, no page outside the nav)"
site="$(mktemp -d)"
trap 'rm -rf "$site"' EXIT
# Not --quiet: mkdocs then stops counting warnings, and --strict passes anything.
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --site-dir "$site"

echo "== Python suite (pytest)"
# pytest exits 5 when it collected nothing: that fails here like any error.
.venv/bin/pytest "$@"
