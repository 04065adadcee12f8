"""Checks a wrangler config's ``[vars]`` with the Worker's own settings parser.

Run before ``wrangler deploy`` (``scripts/check-config.sh``): a bad value stops
the deploy with the message the Worker would log on its first request, which
names the variable and the rule and never a value. Secrets (``wrangler secret
put``) are not in the file and are not checked here.

    PYTHONPATH=src .venv/bin/python scripts/check_config.py [--config FILE] [--env NAME]

Exit status: 0 when the settings parse, 2 on a bad value, 1 when the file
cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path

from edgechat.config.settings import Settings

BAD_VALUE = 2


def vars_of(config: Mapping[str, object], env: str | None) -> tuple[Mapping[str, object], str]:
    """The ``[vars]`` a deploy uploads, and where they are in the file.

    ``vars`` is not inherited: a deploy with ``--env`` uses that environment's
    table alone (https://developers.cloudflare.com/workers/wrangler/configuration/#non-inheritable-keys).
    """
    where = "[vars]"
    if env is not None:
        envs = config.get("env")
        config = envs.get(env, {}) if isinstance(envs, dict) else {}
        where = f"[env.{env}.vars]"
    table = config.get("vars", {})
    return (table if isinstance(table, dict) else {}), where


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="wrangler.toml", type=Path)
    parser.add_argument("--env", help="the wrangler environment to deploy")
    parser.add_argument(
        "--sources", help="where the [vars] came from, for the message (local runs merge several)"
    )
    args = parser.parse_args(argv)
    try:
        text = args.config.read_text(encoding="utf-8")
        config = json.loads(text) if args.config.suffix == ".json" else tomllib.loads(text)
    except (OSError, ValueError) as exc:
        print(f"check-config: cannot read {args.config}: {exc}", file=sys.stderr)
        return 1
    values, where = vars_of(config, args.env)
    try:
        Settings.from_mapping(values)
    except ValueError as exc:
        sources = args.sources or f"{args.config} {where}"
        print(f"check-config: bad configuration ({sources}): {exc}", file=sys.stderr)
        return BAD_VALUE
    return 0


if __name__ == "__main__":
    sys.exit(main())
