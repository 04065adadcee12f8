#!/usr/bin/env bash
# Runs the black-box suite against edgechat under real `wrangler dev` (workerd),
# with AI bound to the Workers AI emulator worker. workerd downloads its Pyodide
# bundle when a Python Worker starts, so this needs internet; without it the
# script stops at once with one clear message and a non-zero status.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"

emulator_port=${EMULATOR_PORT:-8788}
worker_port=${PORT:-8787}
logs=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -- "-$pid" 2>/dev/null || true; done
  rm -rf "$logs"
}
trap cleanup EXIT

# Waits until a log shows "Ready on", the process exits, or 60 s pass.
wait_ready() {
  local log=$1 pid=$2
  for _ in $(seq 1 600); do
    grep -q "Ready on" "$log" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

setsid wrangler dev -c tools/emulator/wrangler.toml --port "$emulator_port" \
  --inspector-port 0 --var EDGECHAT_AI_DELAY_MS:0 >"$logs/emulator.log" 2>&1 &
pids+=($!)
if ! wait_ready "$logs/emulator.log" "${pids[0]}"; then
  cat "$logs/emulator.log" >&2
  echo "test:wrangler: the emulator worker did not start under wrangler dev" >&2
  exit 1
fi

setsid wrangler dev -c tests/fixtures/wrangler-dev/wrangler.toml --port "$worker_port" \
  --inspector-port 0 >"$logs/worker.log" 2>&1 &
pids+=($!)
if ! wait_ready "$logs/worker.log" "${pids[1]}"; then
  if grep -q "Pyodide bundle" "$logs/worker.log"; then
    echo "test:wrangler: wrangler dev cannot start a Python Worker here: workerd" \
         "downloads its Pyodide bundle at start and the download failed (no internet)." \
         "Use 'npm test' (the offline runner) instead." >&2
    exit 3
  fi
  cat "$logs/worker.log" >&2
  echo "test:wrangler: edgechat did not start under wrangler dev" >&2
  exit 1
fi

EDGECHAT_BASE_URL="http://127.0.0.1:$worker_port" \
EDGECHAT_AI_CONTROL_URL="http://127.0.0.1:$emulator_port" \
  .venv/bin/pytest tests/api "$@"
