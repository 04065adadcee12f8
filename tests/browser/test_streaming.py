"""The answer streams into the page, in both of the model's shapes; Stop and
Esc abort it; the keyboard works."""

from __future__ import annotations

import itertools

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import GLM, LLAMA, AnswerState, Chat
from tests.harness import EmulatorControl
from tests.kit.sse import deltas, parse
from tests.kit.upstream import native_chunk, native_end, openai_chunk, openai_end


def _paced(events: list[str], gap_ms: int) -> list[object]:
    """The model's events with a pause before each, so each reaches the page on its own."""
    chunks: list[object] = []
    for event in events:
        chunks += [{"delay_ms": gap_ms}, event]
    return chunks


def test_a_question_streams_into_the_page_token_by_token(chat: Chat, ai: EmulatorControl) -> None:
    words = ["Streaming", " arrives", " one", " piece", " at", " a", " time."]
    events = [openai_chunk(content=word) for word in words]
    ai.script(
        {
            "match": {"contains": "stream"},
            "chunks": [*_paced(events, 250), *openai_end(completion_tokens=len(words))],
        }
    )
    chat.record_answers()
    chat.send("Please stream an answer")

    # The user's message is shown at once, and the page says it is working.
    expect(chat.page.get_by_role("article", name="You")).to_have_text("Please stream an answer")
    expect(chat.button("Stop")).to_be_visible()
    expect(chat.button("Send")).to_be_hidden()
    answer = chat.last_answer()
    expect(answer).to_have_attribute("aria-busy", "true")
    chat.wait_idle()

    # What the reader saw while the answer grew: piece after piece, each
    # adding to the last, then the whole answer once the stream was done.
    full = "".join(words)
    states = chat.answer_states()
    seen = [state.answer for state in states if state.busy and state.answer]
    seen = [text for text, _ in itertools.groupby(seen)]
    assert len([text for text in seen if text != full]) >= 3, f"expected partial answers: {seen}"
    for earlier, later in itertools.pairwise(seen):
        assert later.startswith(earlier), seen
    assert states[-1].answer == full
    assert not states[-1].busy

    expect(chat.button("Stop")).to_be_hidden()
    expect(answer).not_to_have_class("streaming")
    # After the answer: the model, time to first token, speed, tokens and cost.
    stats = answer.locator(".stats")
    expect(stats).to_contain_text("GLM 4.7 Flash")
    expect(stats).to_contain_text("ms first token")
    expect(stats).to_contain_text("tok/s")
    expect(stats).to_contain_text("tokens")
    expect(stats).to_contain_text("$")


@pytest.mark.parametrize(
    ("alias", "model", "label", "events", "end"),
    [
        pytest.param(
            "glm",
            GLM,
            "GLM 4.7 Flash",
            [
                openai_chunk(reasoning="Clouds now,"),
                openai_chunk(reasoning=" rain later."),
                openai_chunk(content="Take"),
                openai_chunk(content=" an umbrella."),
            ],
            openai_end(completion_tokens=4),
            id="glm-openai-chunks-reasoning-then-content",
        ),
        pytest.param(
            "llama",
            LLAMA,
            "Llama 3.1 8B",
            [native_chunk("Take"), native_chunk(" an"), native_chunk(" umbrella.")],
            native_end(completion_tokens=3),
            id="llama-native-response",
        ),
    ],
)
def test_each_upstream_shape_streams_reasoning_and_answer_into_the_page(
    chat: Chat,
    ai: EmulatorControl,
    alias: str,
    model: str,
    label: str,
    events: list[str],
    end: list[str],
) -> None:
    ai.script({"match": {"model": model}, "chunks": [*_paced(events, 200), *end]})
    chat.model_picker().select_option(alias)
    chat.record_answers()
    answer = chat.ask("Do I need an umbrella?")

    thinks = model == GLM
    reasoning = "Clouds now, rain later." if thinks else ""
    expect(answer.locator(".answer")).to_have_text("Take an umbrella.")
    expect(answer.locator(".stats")).to_contain_text(label)
    expect(answer.get_by_role("alert")).to_have_count(0)
    if thinks:
        expect(answer.locator("details.reasoning")).to_be_visible()
        answer.locator("summary").click()
        expect(answer.locator(".reasoning-body")).to_have_text(reasoning)
    else:
        expect(answer.locator("details.reasoning")).to_be_hidden()

    # While it streamed, the page showed the text as it came: nothing but
    # what had arrived, in order, the first piece on its own, and the
    # reasoning whole before any of the answer.
    shown = [(s.reasoning, s.answer) for s in chat.answer_states() if s.busy]
    shown = [state for state, _ in itertools.groupby(shown) if state != ("", "")]
    arrived = list(itertools.accumulate(_deltas(events), _joined))
    assert shown == [state for state in arrived if state in shown], shown
    assert arrived[0] in shown, shown
    if thinks:
        assert (reasoning, "") in shown, shown


def _deltas(events: list[str]) -> list[tuple[str, str]]:
    """The (reasoning, answer) text of each event, read as the page reads it."""
    return [deltas(event.data) for event in parse("".join(events).encode()).model_events]


def _joined(a: tuple[str, str], b: tuple[str, str]) -> tuple[str, str]:
    return a[0] + b[0], a[1] + b[1]


def test_stop_keeps_the_partial_answer_and_aborts_the_model_call(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "match": {"contains": "long"},
            "chunks": [openai_chunk(content="The beginning"), {"stall": True}],
        }
    )
    chat.send("Tell me something long")
    answer = chat.last_answer()
    expect(answer.locator(".answer")).to_have_text("The beginning")
    expect(answer).to_have_attribute("aria-busy", "true")
    assert ai.calls() == []  # the model call is still running

    chat.button("Stop").click()
    expect(answer.get_by_text("Stopped", exact=True)).to_be_visible()
    expect(answer.locator(".answer")).to_have_text("The beginning")
    expect(chat.button("Send")).to_be_visible()

    # A stalled model's call ends only when the abort reaches it (otherwise
    # the server's 30 s idle deadline would end it): wait for that.
    calls = ai.wait_for_calls(1)
    assert len(calls) == 1
    assert calls[0]["aborted"] is True

    # Stopped stays stopped, also after a reload.
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
    calls = ai.wait_for_calls(1)
    assert len(calls) == 1
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
    events = [
        openai_chunk(reasoning="Let me think about the sky."),
        openai_chunk(content="The sky is blue"),
        openai_chunk(content=" because of Rayleigh scattering."),
    ]
    ai.script({"chunks": [*_paced(events, 300), *openai_end()]})
    chat.record_answers()
    chat.send("Why is the sky blue?")
    chat.wait_idle()

    # While it streamed: "Thinking…" over the collapsed reasoning until the
    # answer began, then "Reasoning" over it, still collapsed.
    states = chat.answer_states()
    thought = "Let me think about the sky."
    thinking = AnswerState(True, True, False, "Thinking…", thought, "")
    answering = AnswerState(True, True, False, "Reasoning", thought, "The sky is blue")
    assert thinking in states, states
    assert answering in states, states
    assert states.index(thinking) < states.index(answering)

    answer = chat.last_answer()
    reasoning = answer.locator("details.reasoning")
    expect(reasoning.locator("summary")).to_have_text("Reasoning")
    expect(reasoning).not_to_have_attribute("open", "")
    expect(answer.get_by_text(thought)).to_be_hidden()
    reasoning.locator("summary").click()
    expect(answer.get_by_text(thought)).to_be_visible()
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
    ai.script({"chunks": [*chunks, *openai_end()]})
    log = chat.page.locator("#messages")
    at_bottom = "e => e.scrollHeight - e.scrollTop - e.clientHeight < 48"

    chat.send("Write a long answer")
    expect(chat.last_answer()).to_contain_text("Line 25")
    assert log.evaluate(at_bottom)
    # The reader scrolls up: the page leaves the view where it is.
    log.evaluate("e => { e.scrollTop = 0; e.dispatchEvent(new Event('scroll')); }")
    chat.wait_idle()
    assert log.evaluate("e => e.scrollTop") == 0
