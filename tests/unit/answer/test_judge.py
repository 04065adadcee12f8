"""The judge of a shadow trial (``judge``): its prompt and its bound, the
strict reading of its answer, and A/B read back to the two models."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgechat.answer import judge
from edgechat.answer.judge import CLIP_BYTES, JUDGE_PROMPT, Order, Verdict


@pytest.mark.parametrize(
    ("text", "word"),
    [("A", "A"), ("B", "B"), ("TIE", "TIE"), (" A\n", "A"), ("\nTIE \n", "TIE")],
)
def test_the_judge_s_answer_is_exactly_one_word(text: str, word: str) -> None:
    assert judge.parse(text) == word


@pytest.mark.parametrize(
    "text",
    [
        "",
        "a",  # the word asked for is upper-case
        "tie",
        "A.",
        "A or B",
        "Answer A",
        "**A**",
        "AB",
        "I think B is better.",
        "B\nbecause it is shorter",
        "TIE!",
        "C",
    ],
)
def test_anything_else_is_no_verdict(text: str) -> None:
    assert judge.parse(text) is None
    assert Order(challenger_first=True).verdict(text) is None
    assert Order(challenger_first=False).verdict(text) is None


@pytest.mark.parametrize(
    ("challenger_first", "word", "verdict"),
    [
        (True, "A", Verdict.CHALLENGER),
        (True, "B", Verdict.PRIMARY),
        (False, "A", Verdict.PRIMARY),
        (False, "B", Verdict.CHALLENGER),
        (True, "TIE", Verdict.TIE),
        (False, "TIE", Verdict.TIE),
    ],
)
def test_a_and_b_are_read_back_to_the_models(
    challenger_first: bool, word: str, verdict: Verdict
) -> None:
    assert Order(challenger_first).verdict(word) is verdict


@pytest.mark.parametrize("challenger_first", [True, False])
def test_the_prompt_shows_the_answers_in_the_order_drawn(challenger_first: bool) -> None:
    prompt = Order(challenger_first).prompt("User: hi", "PRIMARY-TEXT", "CHALLENGER-TEXT")
    a = prompt.index("<answer_a>\n") + len("<answer_a>\n")
    b = prompt.index("<answer_b>\n") + len("<answer_b>\n")
    first, second = ("CHALLENGER", "PRIMARY") if challenger_first else ("PRIMARY", "CHALLENGER")
    assert prompt[a:].startswith(f"{first}-TEXT\n</answer_a>")
    assert prompt[b:].startswith(f"{second}-TEXT\n</answer_b>")
    assert "<conversation>\nUser: hi\n</conversation>" in prompt
    assert prompt.endswith(
        "Reply with exactly one word: A if answer A is better, "
        "B if answer B is better, TIE if neither is. Write nothing else."
    )


def test_the_conversation_is_its_turns_by_role() -> None:
    turns = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "天气?"},
    ]
    assert judge.conversation_text(turns) == "User: Hi\n\nAssistant: Hello\n\nUser: 天气?"


def test_long_parts_are_cut_to_their_bytes_at_whole_characters() -> None:
    # The conversation keeps its end (the question), an answer its start.
    conversation = "old " * 5_000 + "the question"
    answer = "天" * 3_000 + "end"  # 9,003 bytes
    prompt = Order(challenger_first=True).prompt(conversation, answer, "short")
    said = prompt.split("<conversation>\n")[1].split("\n</conversation>")[0]
    assert said.startswith("[…]")
    assert said.endswith("the question")
    assert len(said.encode()) <= CLIP_BYTES
    shown = prompt.split("<answer_b>\n")[1].split("\n</answer_b>")[0]
    assert shown.endswith("[…]")
    assert set(shown.removesuffix("[…]")) == {"天"}
    assert CLIP_BYTES - 3 <= len(shown.encode()) <= CLIP_BYTES


def test_the_longest_prompt_stays_within_the_tokens_reserved_for_it() -> None:
    # A token is at least one byte for the catalog's byte-level tokenizers:
    # the longest prompt's bytes, plus the chat template's few tokens, are
    # within MAX_PROMPT_TOKENS.
    longest = Order(challenger_first=False).prompt("x" * 99_999, "y" * 99_999, "z" * 99_999)
    template = len(JUDGE_PROMPT.format(conversation="", a="", b="").encode())
    assert len(longest.encode()) <= template + 3 * CLIP_BYTES
    assert len(longest.encode()) + 100 <= judge.MAX_PROMPT_TOKENS


def test_the_operator_docs_quote_the_prompt_as_it_is() -> None:
    page = Path(__file__).parents[3] / "docs" / "operating" / "shadow.md"
    assert f"```text\n{JUDGE_PROMPT}\n```" in page.read_text(encoding="utf-8")
