"""A comparison's body rules, its order when blind, and what an answer's
outcome keeps."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from edgechat.answer.framing import Outcome
from edgechat.core.errors import BadRequest
from edgechat.core.faults import UpstreamBusy
from edgechat.feedback.comparisons import Asked, Ended, ended, parse, shown_order
from tests.unit.fakes import model, usage

ALLOWED = ("auto", "glm", "kimi", "llama")
GLM, KIMI, LLAMA = model("glm"), model("kimi"), model("llama")


def test_a_comparison_names_two_or_three_models_by_alias_or_id() -> None:
    asked = parse({"models": ["glm", KIMI.id]}, ALLOWED)
    assert asked == Asked((GLM, KIMI), blind=False, conversation=None)
    asked = parse(
        {"models": ["glm", "kimi", "llama"], "blind": True, "conversation": "c-1"}, ALLOWED
    )
    assert asked == Asked((GLM, KIMI, LLAMA), blind=True, conversation="c-1")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "models must list 2 to 3 of GET /api/models' models."),
        ({"models": "glm,kimi"}, "models must list 2 to 3 of GET /api/models' models."),
        (
            {"models": ["glm", "kimi", "llama", "glm"]},
            "models must list 2 to 3 of GET /api/models' models.",
        ),
        (
            {"models": ["auto", "glm"]},
            "models[0] must be another of GET /api/models' models (not auto).",
        ),
        (
            {"models": ["glm", GLM.id]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        (
            {"models": ["glm", 7]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        (
            {"models": ["glm", "glm-5.3"]},
            "models[1] must be another of GET /api/models' models (not auto).",
        ),
        ({"models": ["glm", "kimi"], "blind": 1}, "blind must be true or false."),
        (
            {"models": ["glm", "kimi"], "conversation": "a/b"},
            "conversation must be a conversation id: 1 to 100 letters, digits, '.', '_' or '-'.",
        ),
        (
            {"models": ["glm", "kimi"], "model": "glm"},
            "A comparison takes models, blind, conversation only.",
        ),
    ],
)
def test_a_malformed_comparison_names_the_field(body: dict[str, Any], message: str) -> None:
    with pytest.raises(BadRequest) as refused:
        parse(body, ALLOWED)
    assert refused.value.public_message == message


def test_an_open_comparison_keeps_its_order_and_a_blind_one_is_shuffled_evenly() -> None:
    asked = Asked((GLM, KIMI, LLAMA))
    assert all(shown_order(asked) == (GLM, KIMI, LLAMA) for _ in range(20))
    blind = Asked((GLM, KIMI, LLAMA), blind=True)
    seen = Counter(shown_order(blind) for _ in range(6000))
    assert len(seen) == 6  # every order
    assert all(800 < count < 1200 for count in seen.values()), seen


def test_a_finished_answer_keeps_what_it_measured() -> None:
    outcome = Outcome(model=GLM, usage=usage(20, 50), finish_reason="stop", ttft_ms=300.0)
    outcome.ended_ms = 2300.0
    assert ended(outcome) == Ended(
        True,
        ttft_ms=300.0,
        tokens_per_s=25.0,
        prompt_tokens=20,
        completion_tokens=50,
        cost_usd=outcome.cost_usd(),
        finish_reason="stop",
    )


def test_a_failed_answer_keeps_its_code_and_a_left_one_says_so() -> None:
    failed = Outcome(model=GLM, error=UpstreamBusy(detail="3040"))
    assert ended(failed) == Ended(False, error="model_busy")
    gone = Outcome(model=GLM, usage=usage(1, 1), client_gone=True)
    assert ended(gone) == Ended(False, error="client_closed")
