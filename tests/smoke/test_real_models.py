"""Opt-in smoke test against the real Workers AI: one short answer per model.

It calls real models and is billed to the account, so it runs only when asked:
set CLOUDFLARE_ACCOUNT_ID, CLOUDFLARE_API_TOKEN and EDGECHAT_REAL_MODELS=1.
Everywhere else (CI included) it is reported as skipped, with that reason.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest

from tests.harness import ROOT, start_runner
from tests.kit.sse import SSEParser

CREDENTIALS = ("CLOUDFLARE_ACCOUNT_ID", "CLOUDFLARE_API_TOKEN")

pytestmark = pytest.mark.skipif(
    os.environ.get("EDGECHAT_REAL_MODELS") != "1" or not all(map(os.environ.get, CREDENTIALS)),
    reason="real-model smoke test: set CLOUDFLARE_ACCOUNT_ID, CLOUDFLARE_API_TOKEN "
    "and EDGECHAT_REAL_MODELS=1 to call the real Workers AI (billed)",
)


@pytest.fixture(scope="module")
def real_edgechat() -> Iterator[str]:
    env = {name: os.environ[name] for name in CREDENTIALS}
    with start_runner(ROOT / "wrangler.toml", env=env) as runner:
        yield runner.base_url


@pytest.mark.parametrize("model", ["glm", "llama"])
def test_a_real_model_answers_with_its_own_events_and_done(real_edgechat: str, model: str) -> None:
    body = {
        "messages": [{"role": "user", "content": "Reply with the single word: pong"}],
        "model": model,
        "max_tokens": 256,
    }
    # The one parser every suite uses, strict about edgechat's own events and
    # taking the model's as Workers AI sends them.
    parser = SSEParser(errors="replace")
    with httpx.stream("POST", real_edgechat + "/chat", json=body, timeout=120) as response:
        assert response.status_code == 200
        for chunk in response.iter_bytes():
            parser.feed(chunk)
    parsed = parser.close()
    assert parsed.meta["model"].startswith("@cf/")
    assert parsed.final.name == "done", parsed.final
    assert parsed.text() or parsed.reasoning(), "the model said nothing"
    usage = parsed.final.data["usage"]
    assert isinstance(usage, dict)
    assert usage["completion_tokens"] > 0
