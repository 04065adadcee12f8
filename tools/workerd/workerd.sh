#!/usr/bin/env bash
# The workerd that wrangler runs in local development (MINIFLARE_WORKERD_PATH,
# set by tools/workerd/dev.mjs): the pinned npm binary, told where the
# locally built Pyodide bundle lies (EDGECHAT_PYODIDE_BUNDLE_DIR), and
# whether to save or restore a memory snapshot (below).
#
# `wrangler dev` starts two workerd processes: its reload proxy, which owns
# the port wrangler prints, and the one that runs the Workers (the one given
# an inspector). The proxy forwards each request with a fetch it never
# cancels, so a client that goes away is never seen by the Worker (wrangler's
# templates/startDevWorker/ProxyWorker.ts, `processQueue`). For the Workers'
# process, then, this wrapper also
# - listens on EDGECHAT_ENTRY_ADDR (host:port) instead of a port of its own
#   choosing, so clients can talk to workerd's own front door (miniflare's
#   entry Worker: assets, CF-Connecting-IP from the TCP peer) directly;
# - copies workerd's control messages ({"event":"listen",...}, one JSON per
#   line on --control-fd) to EDGECHAT_WORKERD_EVENTS, so the launcher learns
#   the port it got.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
bin="$here/node_modules/@cloudflare/workerd-linux-64/bin/workerd"
[[ "${1:-}" == "serve" ]] || exec "$bin" "$@"
shift

runs_workers=0
for arg in "$@"; do
  [[ "$arg" == --inspector-addr=* ]] && runs_workers=1
done
args=(serve --pyodide-bundle-disk-cache-dir "${EDGECHAT_PYODIDE_BUNDLE_DIR:-$here/.cache/pyodide-bundle}")
# The Python Workers' memory snapshot: what to do about it is read from the
# file EDGECHAT_PYTHON_SNAPSHOT_PLAN names, at each start ("load <file>",
# "save <folder>", or nothing: dev.mjs empties it when the Worker's files
# change, so a reload never restores the old code).
plan=""
if [[ $runs_workers == 1 && -n "${EDGECHAT_PYTHON_SNAPSHOT_PLAN:-}" && -f "$EDGECHAT_PYTHON_SNAPSHOT_PLAN" ]]; then
  plan=$(<"$EDGECHAT_PYTHON_SNAPSHOT_PLAN")
fi
case "$plan" in
  "save "*) args+=(--python-save-snapshot --python-snapshot-dir "${plan#save }") ;;
  "load "*)
    file="${plan#load }"
    if [[ -f "$file" ]]; then
      args+=(--python-load-snapshot "$(basename "$file")" --python-snapshot-dir "$(dirname "$file")")
    fi
    ;;
esac
for arg in "$@"; do
  if [[ $runs_workers == 1 && -n "${EDGECHAT_ENTRY_ADDR:-}" && "$arg" == --socket-addr=entry=* ]]; then
    arg="--socket-addr=entry=$EDGECHAT_ENTRY_ADDR"
  fi
  args+=("$arg")
done

if [[ $runs_workers == 1 && -n "${EDGECHAT_WORKERD_EVENTS:-}" ]]; then
  # fd 3 is the control pipe to miniflare; keep it as fd 4 and put a copier in
  # between that writes each message to the file before miniflare gets it:
  # wrangler prints "Ready on" once miniflare has the listen message, and the
  # launcher reads the port from the file then. (tee writes to its standard
  # output first, so the file could still lack the line: coreutils tee.c.)
  exec 4>&3
  exec "$bin" "${args[@]}" 3> >(
    while IFS= read -r line || [[ -n $line ]]; do
      printf '%s\n' "$line" >>"$EDGECHAT_WORKERD_EVENTS"
      printf '%s\n' "$line" >&4
    done
  )
fi
exec "$bin" "${args[@]}"
