from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests.harness import ROOT, EmulatorControl, Runner, VectorsLog, start_runner
from tests.kit.conformance import serving

PROBE_CONFIG = ROOT / "tests" / "fixtures" / "probe" / "wrangler.toml"

# Property tests check what comes out, never how fast: Hypothesis's default
# 200 ms deadline per example is a timed assertion that a busy machine fails.
settings.register_profile("edgechat", deadline=None)
settings.load_profile("edgechat")


@pytest.fixture(scope="session")
def probe_ai(tmp_path_factory: pytest.TempPathFactory) -> EmulatorControl:
    folder = tmp_path_factory.mktemp("probe-ai")
    return EmulatorControl(folder / "script.json", folder / "calls.jsonl")


@pytest.fixture(scope="session")
def probe_vectors(tmp_path_factory: pytest.TempPathFactory) -> VectorsLog:
    return VectorsLog(tmp_path_factory.mktemp("probe-vectors") / "vectors.jsonl")


@pytest.fixture(scope="session")
def probe_runner(
    tmp_path_factory: pytest.TempPathFactory, probe_ai: EmulatorControl, probe_vectors: VectorsLog
) -> Iterator[Runner]:
    """`npm start` serving the test-only probe Worker (tests of the platform and of `npm start`)."""
    vars_file = tmp_path_factory.mktemp("probe-vars") / "test.vars"
    vars_file.write_text('OVERRIDDEN="from --vars"\nSECRET_TOKEN=s3cret\n')
    env = {
        "EDGECHAT_AI_SCRIPT": str(probe_ai.script_path),
        "EDGECHAT_AI_LOG": str(probe_ai.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
        "EDGECHAT_VECTORS_LOG": str(probe_vectors.log_path),
    }
    with start_runner(PROBE_CONFIG, vars_file=vars_file, env=env) as runner:
        yield runner


@pytest.fixture
def probe(probe_runner: Runner, probe_ai: EmulatorControl) -> Runner:
    probe_ai.reset()
    return probe_runner


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    for item in items:
        if Path(str(item.fspath)).is_relative_to(ROOT / "tests" / "unit"):
            continue
        item.add_marker(pytest.mark.runner)


@pytest.fixture(scope="session")
def ai_control(tmp_path_factory: pytest.TempPathFactory) -> EmulatorControl:
    folder = tmp_path_factory.mktemp("edgechat-ai")
    control_url = os.environ.get("EDGECHAT_AI_CONTROL_URL")
    return EmulatorControl(folder / "script.json", folder / "calls.jsonl", control_url)


@pytest.fixture(scope="session")
def vectors_log(tmp_path_factory: pytest.TempPathFactory) -> VectorsLog:
    return VectorsLog(tmp_path_factory.mktemp("edgechat-vectors") / "vectors.jsonl")


@pytest.fixture(scope="session")
def edgechat_url(ai_control: EmulatorControl, vectors_log: VectorsLog) -> Iterator[str]:
    """Base URL of edgechat under test: ``EDGECHAT_BASE_URL``, or `npm start` on workerd."""
    external = os.environ.get("EDGECHAT_BASE_URL")
    if external:
        yield serving(external.rstrip("/"))
        return
    env = {
        "EDGECHAT_AI_SCRIPT": str(ai_control.script_path),
        "EDGECHAT_AI_LOG": str(ai_control.log_path),
        "EDGECHAT_AI_DELAY_MS": "0",
        "EDGECHAT_VECTORS_LOG": str(vectors_log.log_path),
    }
    with start_runner(ROOT / "wrangler.toml", env=env) as runner:
        yield serving(runner.base_url)


@pytest.fixture
def ai(ai_control: EmulatorControl) -> EmulatorControl:
    """The Workers AI emulator behind edgechat, reset for each test."""
    ai_control.reset()
    return ai_control


@pytest.fixture
def vectors(vectors_log: VectorsLog) -> VectorsLog:
    """The log of the emulated Vectorize index behind edgechat (VECTORS), reset for each test."""
    vectors_log.reset()
    return vectors_log
