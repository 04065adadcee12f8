#!/usr/bin/env bash
# The workerd wrangler runs in local development (MINIFLARE_WORKERD_PATH):
# the pinned npm binary, told where the locally built Pyodide bundle lies.
# EDGECHAT_PYODIDE_BUNDLE_DIR is set by tools/workerd/dev.mjs.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin="$here/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
if [[ "${1:-}" == "serve" ]]; then
  shift
  exec "$bin" serve --pyodide-bundle-disk-cache-dir "${EDGECHAT_PYODIDE_BUNDLE_DIR:-$here/.cache/pyodide-bundle}" "$@"
fi
exec "$bin" "$@"
