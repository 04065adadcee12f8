#!/usr/bin/env bash
# Installs everything edgechat needs to run and test offline, from the package
# registries only: Node packages (wrangler, pyodide, a Node 26 binary), a Python
# virtualenv with the dev tools, and the vendored `workers` SDK in
# python_modules/ (what `pywrangler sync` would produce; it needs a download
# of CPython that does not work offline). Re-running is cheap: each step is
# skipped while its inputs are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."

quiet=0
browser=0
for arg in "$@"; do
  case "$arg" in
    --quiet) quiet=1 ;;
    --with-browser) browser=1 ;;  # also Chromium, for the browser tests
    *) echo "setup: unknown option $arg" >&2; exit 2 ;;
  esac
done
say() { [[ $quiet == 1 ]] || echo "setup: $*"; }
# This machine's pip configuration names package folders that may not exist;
# pip warns about each one on every call. Those lines are noise here.
pip_quiet() { "$@" 2> >(grep -v "^WARNING: Location '.*' is ignored" >&2); }

stamp_ok() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }
digest() { cat "$@" 2>/dev/null | sha256sum | cut -d' ' -f1; }

# --- Node packages -----------------------------------------------------------
node_inputs=$(digest package.json package-lock.json)
if ! stamp_ok node_modules/.edgechat-stamp "$node_inputs"; then
  say "installing Node packages"
  if [[ -f package-lock.json ]]; then
    npm_install=(npm ci)
  else
    npm_install=(npm install)
  fi
  if [[ $quiet == 1 ]]; then
    "${npm_install[@]}" --no-audit --no-fund --loglevel=error >/dev/null
  else
    "${npm_install[@]}" --no-audit --no-fund --loglevel=error
  fi
  echo "$node_inputs" > node_modules/.edgechat-stamp
fi

# --- The page's libraries ---------------------------------------------------------
# static/vendor/ (not committed): markdown-it, highlight.js, KaTeX and Mermaid
# from the pinned packages just installed, built by scripts/vendor.mjs whenever
# it or their versions change (it checks that itself).
node_bin=node_modules/.bin/node
[[ -x $node_bin ]] || node_bin=node
if [[ $quiet == 1 ]]; then
  "$node_bin" scripts/vendor.mjs --if-needed >/dev/null
else
  "$node_bin" scripts/vendor.mjs --if-needed
fi

# --- Python virtualenv ---------------------------------------------------------
# Host tests run on CPython 3.12 (3.13 also works); never a downloaded Python.
find_python() {
  local candidate
  for candidate in "${EDGECHAT_PYTHON:-}" python3.12 python3.13 \
      "$(pyenv root 2>/dev/null)/versions/"3.12*/bin/python \
      "$(pyenv root 2>/dev/null)/versions/"3.13*/bin/python; do
    [[ -n "$candidate" ]] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(not (3, 12) <= sys.version_info[:2] < (3, 14))' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  echo "setup: no CPython 3.12 or 3.13 found (set EDGECHAT_PYTHON)" >&2
  return 1
}

py_inputs=$(digest pyproject.toml)
if ! stamp_ok .venv/.edgechat-stamp "$py_inputs"; then
  python=$(find_python)
  say "creating .venv with $("$python" --version)"
  rm -rf .venv
  "$python" -m venv .venv
  pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade 'pip>=25.1'
  pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check --group dev
  echo "$py_inputs" > .venv/.edgechat-stamp
fi

# --- workerd's Pyodide bundle ---------------------------------------------------
# `npm start` and the tests run the Worker on the pinned workerd, offline: it
# loads Python from a development bundle built here from the pinned npm
# pyodide (tools/workerd/build_pyodide_bundle.py; skipped while its inputs are
# unchanged; stops with one message when workerd and pyodide disagree).
say "checking workerd's Pyodide bundle"
.venv/bin/python tools/workerd/build_pyodide_bundle.py \
  --workerd node_modules/@cloudflare/workerd-linux-64/bin/workerd \
  --pyodide node_modules/pyodide --out .cache/pyodide-bundle >/dev/null

# --- Vendored Worker packages ----------------------------------------------------
# The runtime stopped shipping the `workers` SDK on 2026-04-21; wrangler uploads
# python_modules/ next to src/ and workerd puts it on sys.path.
if ! stamp_ok python_modules/.edgechat-stamp "$py_inputs"; then
  say "vendoring Worker packages into python_modules/"
  rm -rf python_modules
  pip_quiet .venv/bin/python -m pip install --quiet --disable-pip-version-check \
    --no-deps --no-compile --target python_modules --group worker
  # Install metadata and the CPython-only .pth loader are not part of a Worker bundle.
  rm -rf python_modules/*.dist-info python_modules/bin python_modules/*.pth
  echo "$py_inputs" > python_modules/.edgechat-stamp
fi

# --- Chromium for the browser tests ---------------------------------------------
# tests/browser drive Debian's Chromium through Playwright (never a browser
# download). Installed when missing and we are root; otherwise say how.
if [[ $browser == 1 && ! -x /usr/bin/chromium ]]; then
  if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    say "installing Debian's chromium for the browser tests"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "setup: /usr/bin/chromium is missing; the browser tests (tests/browser) need it:" \
         "run 'sudo apt-get install chromium'. Until then they are skipped (failed under CI=true)." >&2
  fi
fi

say "ready"
