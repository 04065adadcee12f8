"""The development Pyodide bundle's builder (tools/workerd/build_pyodide_bundle.py):
the edits it makes to Pyodide's glue, the version it reads from a workerd
binary, and the one message when the two disagree."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

from tests.harness import ROOT

SPEC = importlib.util.spec_from_file_location(
    "build_pyodide_bundle", ROOT / "tools" / "workerd" / "build_pyodide_bundle.py"
)
assert SPEC is not None
assert SPEC.loader is not None
builder: ModuleType = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(builder)

PYODIDE = ROOT / "node_modules" / "pyodide"
WORKERD = ROOT / "node_modules" / "@cloudflare" / "workerd-linux-64" / "bin" / "workerd"


def fake_workerd(folder: Path, version: str) -> Path:
    """A file shaped like the binary where it matters: the releases table's
    development entry and the wrappers the glue imports."""
    exports = b"".join(b"export function %s() {}\n" % name.encode() for name in builder.WRAPPERS)
    binary = folder / "workerd"
    binary.write_bytes(
        b"\0prelude\0pythonWorkersDevPyodide\0" + version.encode() + b"\0sha256-x\0" + exports
    )
    return binary


def fake_pyodide(folder: Path, version: str) -> Path:
    folder.mkdir()
    (folder / "package.json").write_text(json.dumps({"version": version}))
    glue = (PYODIDE / "pyodide.asm.mjs").read_text()
    (folder / "pyodide.asm.mjs").write_text(glue)
    for name in ("pyodide.asm.wasm", "python_stdlib.zip"):
        (folder / name).write_bytes(b"stand-in")
    return folder


def test_the_pinned_workerd_maps_its_dev_flag_to_the_pinned_pyodide() -> None:
    pinned = json.loads((PYODIDE / "package.json").read_text())["version"]
    assert builder.dev_pyodide_version(WORKERD) == pinned


def test_the_glue_goes_through_the_runtimes_wrappers() -> None:
    glue = builder.patched_glue((PYODIDE / "pyodide.asm.mjs").read_text())
    assert 'from "pyodide-internal:builtin_wrappers"' in glue
    assert "export { _createPyodideModule }" in glue
    assert "new WebAssembly.Module" not in glue
    assert "eval(func)" not in glue
    assert "Date.now" not in glue


def test_a_glue_of_another_shape_is_refused() -> None:
    with pytest.raises(builder.BundleError, match="not the shape this builder knows"):
        builder.patched_glue("export default _createPyodideModule;")


def test_drift_is_one_message_naming_both_versions(tmp_path: Path) -> None:
    workerd = fake_workerd(tmp_path, "314.0.9")
    pyodide = fake_pyodide(tmp_path / "pyodide", "314.0.6")
    with pytest.raises(builder.BundleError) as refused:
        builder.build(workerd, pyodide, tmp_path / "out")
    assert "314.0.9" in str(refused.value)
    assert "314.0.6" in str(refused.value)
    assert not (tmp_path / "out" / builder.BUNDLE_NAME).exists()


def test_a_bundle_is_built_once_for_the_same_inputs(tmp_path: Path) -> None:
    workerd = fake_workerd(tmp_path, "314.0.6")
    pyodide = fake_pyodide(tmp_path / "pyodide", "314.0.6")
    bundle = builder.build(workerd, pyodide, tmp_path / "out")
    built = bundle.stat().st_mtime_ns
    assert builder.build(workerd, pyodide, tmp_path / "out") == bundle
    assert bundle.stat().st_mtime_ns == built
    (pyodide / "python_stdlib.zip").write_bytes(b"another stand-in")
    builder.build(workerd, pyodide, tmp_path / "out")
    assert bundle.stat().st_mtime_ns != built
