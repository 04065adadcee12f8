#!/usr/bin/env bash
# Checks wrangler.toml's [vars] with the Worker's own settings parser before a
# deploy; exits 2 with a message naming the variable and the rule on a bad
# value. Arguments go to scripts/check_config.py (--config FILE, --env NAME).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PYTHONPATH="$root/src" exec "$root/.venv/bin/python" "$root/scripts/check_config.py" "$@"
