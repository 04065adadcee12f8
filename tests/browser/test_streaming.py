"""The answer streams into the page; Stop and Esc abort it; the keyboard works."""

from __future__ import annotations

import itertools
import time

from playwright.sync_api import expect

from tests.browser.conftest import Chat, openai_chunk, openai_finish
from tests.harness import EmulatorControl


def _slow_answer(words: list[str], gap_ms: int) -> list[object]:
    chunks: list[object] = []
    for word in words:
        chunks += [openai_chunk(content=word), {"delay_ms": gap_ms}]
    return chunks + openai_finish(completion_tokens=len(words))


def test_a_question_streams_into_the_page_token_by_token(chat: Chat, ai: EmulatorControl) -> None:
    words = ["Streaming", " arrives", " one", " piece", " at", " a", " time."]
    ai.script({"match": {"contains": "stream"}, "chunks": _slow_answer(words, 250)})
    chat.send("Please stream an answer")

    # The user's message is shown at once, and the page says it is working.
    expect(chat.page.get_by_role("article", name="You")).to_have_text("Please stream an answer")
    expect(chat.button("Stop")).to_be_visible()
    expect(chat.button("Send")).to_be_hidden()
    answer = chat.last_answer()
    expect(answer).to_have_attribute("aria-busy", "true")

    # Sample what the reader sees while the answer grows.
    seen: list[str] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        text = answer.locator(".answer").inner_text().strip()
        if text and (not seen or seen[-1] != text):
            seen.append(text)
        if answer.get_attribute("aria-busy") == "false":
            break
        chat.page.wait_for_timeout(40)

    full = "".join(words)
    assert seen[-1] == full
    partial = [s for s in seen if s != full]
    assert len(partial) >= 3, f"expected intermediate states, saw {seen}"
    for earlier, later in itertools.pairwise(seen):
        assert later.startswith(earlier), seen

    chat.wait_idle()
    expect(chat.button("Stop")).to_be_hidden()
    expect(answer).not_to_have_class("streaming")
    # After the answer: the model, time to first token, speed, tokens and cost.
    stats = answer.locator(".stats")
    expect(stats).to_contain_text("GLM 4.7 Flash")
    expect(stats).to_contain_text("ms first token")
    expect(stats).to_contain_text("tok/s")
    expect(stats).to_contain_text("tokens")
    expect(stats).to_contain_text("$")


def test_stop_keeps_the_partial_answer_and_aborts_the_model_call(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "match": {"contains": "long"},
            "chunks": [openai_chunk(content="The beginning"), {"delay_ms": 50}, {"stall": True}],
        }
    )
    chat.send("Tell me something long")
    answer = chat.last_answer()
    expect(answer).to_contain_text("The beginning")
    assert ai.calls() == []  # the model call is still running

    chat.button("Stop").click()
    stopped_at = time.monotonic()
    expect(answer.get_by_text("Stopped", exact=True)).to_be_visible()
    expect(answer.locator(".answer")).to_have_text("The beginning")
    expect(chat.button("Send")).to_be_visible()

    calls = ai.wait_for_calls(1, timeout=2.0)
    assert time.monotonic() - stopped_at < 2.5
    assert len(calls) == 1
    assert calls[0]["aborted"] is True

    # Stopped stays stopped, also after a reload.
    chat.page.wait_for_timeout(300)
    expect(answer.locator(".answer")).to_have_text("The beginning")
    chat.page.reload()
    expect(chat.last_answer().locator(".answer")).to_have_text("The beginning")
    expect(chat.last_answer().get_by_text("Stopped", exact=True)).to_be_visible()


def test_escape_stops_the_answer(chat: Chat, ai: EmulatorControl) -> None:
    ai.script({"chunks": [openai_chunk(content="Half an answer"), {"stall": True}]})
    chat.send("Go")
    expect(chat.last_answer()).to_contain_text("Half an answer")
    chat.page.keyboard.press("Escape")
    expect(chat.last_answer().get_by_text("Stopped", exact=True)).to_be_visible()
    calls = ai.wait_for_calls(1, timeout=2.0)
    assert calls
    assert calls[0]["aborted"] is True


def test_enter_sends_shift_enter_adds_a_line_and_the_input_grows(
    chat: Chat, ai: EmulatorControl
) -> None:
    box = chat.composer()
    one_line = box.bounding_box()
    assert one_line is not None
    box.click()
    box.type("first line")
    box.press("Shift+Enter")
    box.type("second line")
    box.press("Shift+Enter")
    box.type("third line")
    expect(box).to_have_value("first line\nsecond line\nthird line")
    grown = box.bounding_box()
    assert grown is not None
    assert grown["height"] > one_line["height"] + 20
    assert ai.calls() == []

    box.press("Enter")
    expect(chat.page.get_by_role("article", name="You")).to_have_text(
        "first line\nsecond line\nthird line"
    )
    expect(box).to_have_value("")
    chat.wait_idle()
    calls = ai.wait_for_calls(1)
    assert calls[0]["inputs"]["messages"][-1]["content"] == "first line\nsecond line\nthird line"


def test_reasoning_is_shown_apart_and_collapsed_while_the_answer_streams(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "chunks": [
                openai_chunk(reasoning_content="Let me think about the sky."),
                {"delay_ms": 1500},
                openai_chunk(content="The sky is blue"),
                {"delay_ms": 1500},
                openai_chunk(content=" because of Rayleigh scattering."),
                *openai_finish(),
            ]
        }
    )
    chat.send("Why is the sky blue?")
    answer = chat.last_answer()
    reasoning = answer.locator("details.reasoning")
    expect(reasoning).to_be_visible()
    expect(reasoning.locator("summary")).to_have_text("Thinking…")
    expect(reasoning).not_to_have_attribute("open", "")
    expect(answer.get_by_text("Let me think about the sky.")).to_be_hidden()
    expect(answer.locator(".answer")).to_have_text("The sky is blue")
    chat.wait_idle()
    expect(reasoning.locator("summary")).to_have_text("Reasoning")
    reasoning.locator("summary").click()
    expect(answer.get_by_text("Let me think about the sky.")).to_be_visible()
    expect(answer.locator(".answer")).to_have_text(
        "The sky is blue because of Rayleigh scattering."
    )


def test_the_think_switch_asks_the_model_not_to_reason(chat: Chat, ai: EmulatorControl) -> None:
    switch = chat.page.get_by_role("checkbox", name="Think")
    expect(switch).to_be_checked()
    switch.uncheck()
    chat.ask("Quick answer please")
    call = ai.wait_for_calls(1)[0]
    assert call["inputs"].get("chat_template_kwargs") == {"enable_thinking": False}
    chat.page.reload()
    expect(chat.page.get_by_role("checkbox", name="Think")).not_to_be_checked()


def test_the_view_follows_the_answer_unless_the_reader_scrolled_up(
    chat: Chat, ai: EmulatorControl
) -> None:
    lines = [f"Line {n} of a long answer.\n\n" for n in range(60)]
    chunks: list[object] = []
    for line in lines:
        chunks += [openai_chunk(content=line), {"delay_ms": 40}]
    ai.script({"chunks": [*chunks, *openai_finish()]})
    log = chat.page.locator("#messages")
    at_bottom = "e => e.scrollHeight - e.scrollTop - e.clientHeight < 48"

    chat.send("Write a long answer")
    expect(chat.last_answer()).to_contain_text("Line 25")
    assert log.evaluate(at_bottom)
    # The reader scrolls up: the page leaves the view where it is.
    log.evaluate("e => { e.scrollTop = 0; e.dispatchEvent(new Event('scroll')); }")
    chat.wait_idle()
    assert log.evaluate("e => e.scrollTop") == 0
