"""Builds workerd's development Pyodide bundle from the pinned npm ``pyodide``.

workerd serves a Python Worker offline when its ``python_workers_development``
flag is on and ``pyodide_dev.capnp.bin`` lies in the folder named by
``--pyodide-bundle-disk-cache-dir``. workerd looks in memory, then on disk,
then downloads; a released bundle found on disk is checked against a sha256
compiled into the binary, but the ``dev`` bundle is never downloaded and has
no checksum (workerd ``src/workerd/server/pyodide.c++``, ``fetchPyodideBundle``;
``src/workerd/api/pyodide/pyodide.c++``, ``getPythonBundleName``).

The bundle is a Cap'n Proto ``Bundle`` of three internal modules, which the
runtime's own ``emscriptenSetup`` (compiled into the binary) imports:

- ``pyodideRuntime-internal:pyodide.asm``: ``pyodide.asm.mjs`` with the text
  replacements workerd's build applies (``src/pyodide/helpers.bzl``), so that
  Emscripten goes through the runtime's wrappers instead of ``eval``,
  ``WebAssembly.Module`` and ``Date.now``;
- ``pyodideRuntime-internal:pyodide.asm.wasm``;
- ``pyodideRuntime-internal:python_stdlib.zip``.

It is written with pycapnp (the Cap'n Proto library itself, from PyPI) and a
schema of our own with workerd's field ordinals (``bundle.capnp``): a
hand-written encoder would be a second implementation of Cap'n Proto's layout
rules to get wrong. The Pyodide version must be the one the pinned workerd
maps its dev flag to; when the two drift this stops with one message naming
both.

Usage: build_pyodide_bundle.py --workerd BIN --pyodide DIR --out DIR
Prints the bundle's path; does nothing when the inputs are unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import mmap
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUNDLE_NAME = "pyodide_dev.capnp.bin"

# What `import { … } from "pyodide-internal:builtin_wrappers"` gives the glue:
# the runtime's replacements for the globals Emscripten would use. These are
# the names the pinned binary's builtin_wrappers exports (checked below).
WRAPPERS = (
    "addEventListener",
    "getRandomValues",
    "location",
    "monotonicDateNow",
    "newWasmModule",
    "patchedLoadLibData",
    "wasmInstantiate",
)
PRELUDE = "import { " + ", ".join(WRAPPERS) + ' } from "pyodide-internal:builtin_wrappers";\n'

_NO_EVAL = (
    "(() => {throw new Error('Emscripten tried to eval code, which Python Workers do not"
    " allow')})()"
)

# (text in pyodide.asm.mjs, its replacement, how many times it must occur).
# The same edits as workerd's build for Pyodide 314 (src/pyodide/helpers.bzl,
# _REPLACEMENTS_COMMON and _REPLACEMENTS_COMMON_314), less two that no longer
# apply: Pyodide 314.0.6 has no ``_PyEM_CountFuncParams``, and the November
# 2026 binaries export no ``reportUndefinedSymbolsPatched``. A count that does not
# match means the npm package changed shape: stop rather than ship a glue
# that escapes the runtime's wrappers.
REPLACEMENTS: tuple[tuple[str, str, int], ...] = (
    ("new WebAssembly.Module", "newWasmModule", -1),
    ("WebAssembly.instantiate", "wasmInstantiate", -1),
    ("Date.now", "monotonicDateNow", -1),
    ("crypto.getRandomValues(", "getRandomValues(Module, ", 1),
    ("eval(func)", _NO_EVAL, -1),
    ("eval(data)", _NO_EVAL, -1),
    ("eval(UTF8ToString(ptr))", _NO_EVAL, -1),
    (
        "function loadLibData(){",
        "function loadLibData(){"
        "var libData = patchedLoadLibData(Module, libName, flags.rpath);"
        "return flags.loadAsync ? Promise.resolve(libData) : libData;}"
        "function unusedLoadLibData(){",
        1,
    ),
    # Keeps a dynamic library's memory base stable across a memory snapshot.
    ("getMemory(", "Module.getMemoryPatched(Module, libName, ", 1),
    (
        "export default _createPyodideModule;",
        PRELUDE + "export default _createPyodideModule; export { _createPyodideModule };",
        1,
    ),
)


class BundleError(Exception):
    pass


def patched_glue(source: str) -> str:
    for old, new, expected in REPLACEMENTS:
        found = source.count(old)
        if found == 0 or (expected > 0 and found != expected):
            raise BundleError(
                f"pyodide.asm.mjs has {found} of {old!r} where workerd's build expects "
                f"{'some' if expected < 0 else expected}: this pyodide package is not the "
                "shape this builder knows"
            )
        source = source.replace(old, new)
    return source


def dev_pyodide_version(workerd: Path) -> str:
    """The Pyodide release the binary's dev flag stands for.

    The binary embeds its table of Python releases (pyodide_extra.capnp's
    ``releases``); the development entry's flag name is followed by the real
    Pyodide version it maps to."""
    with workerd.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        at = data.find(b"pythonWorkersDevPyodide\0")
        if at < 0:
            raise BundleError(f"{workerd} has no development Pyodide release")
        match = re.compile(rb"\0(\d+\.\d+\.\d+(?:a\d+)?)\0").search(data, at, at + 256)
        if match is None:
            raise BundleError(f"{workerd}: the development release names no Pyodide version")
        missing = [name for name in WRAPPERS if data.find(f"export function {name}(".encode()) < 0]
        missing = [n for n in missing if data.find(f"export const {n} ".encode()) < 0]
        if missing:
            raise BundleError(f"{workerd}'s builtin_wrappers lacks {', '.join(missing)}")
        return match.group(1).decode()


def write_bundle(pyodide: Path, out: Path) -> None:
    import capnp  # type: ignore[import-untyped]  # pycapnp has no type hints

    capnp.remove_import_hook()
    schema = capnp.load(str(HERE / "bundle.capnp"))
    modules = [
        {
            "name": "pyodideRuntime-internal:pyodide.asm",
            "src": patched_glue((pyodide / "pyodide.asm.mjs").read_text()).encode(),
            "type": "internal",
        },
        {
            "name": "pyodideRuntime-internal:pyodide.asm.wasm",
            "wasm": (pyodide / "pyodide.asm.wasm").read_bytes(),
            "type": "internal",
        },
        {
            "name": "pyodideRuntime-internal:python_stdlib.zip",
            "data": (pyodide / "python_stdlib.zip").read_bytes(),
            "type": "internal",
        },
    ]
    bundle = schema.Bundle.new_message(modules=modules)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(bundle.to_bytes())
    tmp.replace(out)


def inputs_digest(workerd: Path, pyodide: Path) -> str:
    h = hashlib.sha256()
    stat = workerd.stat()
    h.update(f"{workerd.resolve()} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    for name in ("package.json", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip"):
        h.update(hashlib.sha256((pyodide / name).read_bytes()).digest())
    h.update(Path(__file__).read_bytes())
    h.update((HERE / "bundle.capnp").read_bytes())
    return h.hexdigest()


def build(workerd: Path, pyodide: Path, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    bundle = out_dir / BUNDLE_NAME
    stamp = out_dir / "stamp.json"
    digest = inputs_digest(workerd, pyodide)
    if bundle.exists() and stamp.exists() and json.loads(stamp.read_text()).get("inputs") == digest:
        return bundle
    npm_version = json.loads((pyodide / "package.json").read_text())["version"]
    wanted = dev_pyodide_version(workerd)
    if npm_version != wanted:
        raise BundleError(
            f"workerd at {workerd} maps its development Python to Pyodide {wanted}, but the "
            f"pinned npm pyodide is {npm_version}: pin pyodide {wanted} in package.json "
            "(or a workerd whose dev flag maps to it)"
        )
    write_bundle(pyodide, bundle)
    stamp.write_text(json.dumps({"inputs": digest, "pyodide": npm_version}) + "\n")
    return bundle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workerd", type=Path, required=True)
    parser.add_argument("--pyodide", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    try:
        print(build(args.workerd, args.pyodide, args.out))
    except BundleError as err:
        print(f"pyodide bundle: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
