"""``auto``'s choice by the default rules and by budget, and its refusals."""

from __future__ import annotations

import dataclasses

import pytest

from edgechat.answer.routing import baseline, choose, estimate_tokens
from edgechat.config.routes import DEFAULT_ROUTES, parse_routes
from edgechat.core.errors import BadRequest, PayloadTooLarge
from edgechat.core.models import AUTO, CATALOG
from edgechat.core.requests import ChatRequest, Message, Route
from tests.unit.fakes import chat_request, model

EVERY = ("auto", *(m.alias for m in CATALOG))
IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}


def ask(text: str, **kwargs: object) -> ChatRequest:
    return chat_request(AUTO, messages=(("user", text),), **kwargs)  # type: ignore[arg-type]


def routed(request: ChatRequest, allowed: tuple[str, ...] = EVERY, percent: float = 0) -> Route:
    chosen = choose(request, DEFAULT_ROUTES, allowed, percent)
    assert chosen.route is not None
    assert chosen.model.alias == chosen.route.model
    return chosen.route


LONG_PLAIN = "Tell me about the history of the harbour town and its people. " * 8


def test_a_short_plain_question_goes_to_the_cheapest_free_model() -> None:
    assert routed(ask("What is the capital of France?")) == Route("glm", "short question")


def test_a_long_plain_question_goes_to_the_otherwise_rule() -> None:
    assert routed(ask(LONG_PLAIN)) == Route("glm", "general question")


def test_a_conversation_with_an_earlier_answer_is_not_short() -> None:
    request = chat_request(
        AUTO, messages=(("user", "Hi"), ("assistant", "Hello!"), ("user", "And then?"))
    )
    assert routed(request).reason == "general question"


@pytest.mark.parametrize(
    "text",
    [
        "```\nprint(1)\n```",
        "def f(x):\n    return x",
        "Why does my Python script crash?",
        "Write a regex for dates",
    ],
)
def test_code_goes_to_the_code_model(text: str) -> None:
    assert routed(ask(text)) == Route("kimi-code", "code")


@pytest.mark.parametrize("text", ["Prove that there are infinitely many primes.", "Solve x+1=2"])
def test_a_reasoning_request_goes_to_the_strongest(text: str) -> None:
    assert routed(ask(text)) == Route("glm-5.3", "reasoning")


def test_asking_to_think_is_a_reasoning_request() -> None:
    assert routed(ask("Hello there", reasoning=True)) == Route("glm-5.3", "reasoning")


def test_images_go_to_a_model_that_sees() -> None:
    request = ChatRequest(
        messages=(Message("user", "What is this?", parts=({"type": "text", "text": "x"}, IMAGE)),),
        model=AUTO,
        temperature=None,
        max_tokens=100,
        reasoning=None,
    )
    assert routed(request) == Route("kimi", "images")
    assert routed(request, ("auto", "glm", "glm-5.3-flash")) == Route("glm-5.3-flash", "images")
    with pytest.raises(BadRequest) as refused:
        choose(request, DEFAULT_ROUTES, ("auto", "glm", "llama"))
    assert "none of this deployment's models takes images" in refused.value.public_message


def test_a_long_conversation_goes_to_a_long_context_model() -> None:
    big = dataclasses.replace(
        ask("x"), messages=tuple(Message("user", "x" * 8000) for _ in range(60))
    )
    assert estimate_tokens(big) == 120_000
    assert routed(big) == Route("glm-5.3-flash", "long conversation")
    # Within GLM 4.7 Flash's window but over the rules' threshold: the rule
    # still prefers the long-context model.
    assert routed(big, ("auto", "glm", "glm-5.3-flash")).model == "glm-5.3-flash"


def test_nothing_with_room_is_a_413_naming_the_size() -> None:
    big = dataclasses.replace(
        ask("x"), messages=tuple(Message("user", "x" * 8000) for _ in range(80))
    )
    with pytest.raises(PayloadTooLarge) as refused:
        choose(big, DEFAULT_ROUTES, ("auto", "glm", "llama"))
    assert "about 160256 tokens with the answer" in refused.value.public_message


def test_a_rule_none_of_whose_models_is_allowed_is_passed_over() -> None:
    # No Kimi, no GLM 5.3: short code falls to the next rule that holds.
    assert routed(ask("def f(): pass"), ("auto", "glm", "llama")) == Route("glm", "short question")
    assert routed(ask("def f(): pass\n" + LONG_PLAIN), ("auto", "glm", "llama")) == Route(
        "glm", "general question"
    )


def test_past_a_budget_tier_the_choice_is_held_to_the_tiers_models() -> None:
    code = ask("def f(): pass")
    assert routed(code, percent=49.9) == Route("kimi-code", "code")
    assert routed(code, percent=50) == Route("glm", "code; 50% of budget spent")
    assert routed(code, percent=85) == Route("glm", "code; 80% of budget spent")
    # A choice inside the tier stays, and says the tier applied.
    assert routed(ask("Hi"), percent=90) == Route("glm", "short question; 80% of budget spent")


def test_a_tier_whose_models_cannot_take_the_request_passes_the_rule_over() -> None:
    routes = parse_routes('{"budget": [{"at": 50, "use": ["llama"]}]}')
    tools = dataclasses.replace(ask("Hi"), params={"tools": [{"type": "function"}]})
    chosen = choose(tools, routes, EVERY, 60)
    # Llama reads no tools: no rule's model is inside the tier, so the
    # cheapest model that fits answers.
    assert chosen.route == Route("glm", "cheapest that fits")


def test_a_named_model_is_not_routed() -> None:
    request = chat_request(model("kimi"))
    assert choose(request, DEFAULT_ROUTES, EVERY) is request


def test_the_baseline_is_the_default_model_or_the_otherwise_rules_first() -> None:
    assert baseline(DEFAULT_ROUTES, "kimi", EVERY) == model("kimi")
    assert baseline(DEFAULT_ROUTES, "auto", EVERY) == model("glm")
    assert baseline(DEFAULT_ROUTES, "auto", ("auto", "llama")) == model("llama")
