"""The answer streams into the page, in both of the model's shapes; Stop and
Esc abort it; the keyboard works.

The streaming tests hold the stream in the page and let it through one event
at a time (``Chat.hold_chat_events``), so they look at the page between two
events of the model instead of racing a paced stream with the clock.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import GLM, LLAMA, Chat
from tests.harness import EmulatorControl
from tests.kit.upstream import native_chunk, native_end, openai_chunk, openai_end


def test_a_question_streams_into_the_page_token_by_token(chat: Chat, ai: EmulatorControl) -> None:
    words = ["Streaming", " arrives", " one", " piece", " at", " a", " time."]
    events = [openai_chunk(content=word) for word in words]
    ai.script(
        {
            "match": {"contains": "stream"},
            "chunks": [*events, *openai_end(completion_tokens=len(words))],
        }
    )
    chat.hold_chat_events()
    chat.send("Please stream an answer")

    # The user's message is shown at once, and the page says it is working.
    expect(chat.page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "Please stream an answer"
    )
    expect(chat.button("Stop")).to_be_visible()
    expect(chat.button("Send")).to_be_hidden()
    answer = chat.last_answer()
    expect(answer).to_have_attribute("aria-busy", "true")

    # Each piece is shown as soon as it arrives, added to what came before.
    chat.release_events()  # meta
    for count in range(1, len(words) + 1):
        chat.release_events()
        expect(answer.locator(".answer")).to_have_text("".join(words[:count]))
        expect(answer).to_have_attribute("aria-busy", "true")
    chat.release_all_events()
    chat.wait_idle()

    expect(answer.locator(".answer")).to_have_text("".join(words))
    expect(chat.button("Stop")).to_be_hidden()
    expect(answer).not_to_have_class("streaming")
    # After the answer: the model, time to first token, speed, tokens and cost.
    stats = answer.locator(".stats")
    expect(stats).to_contain_text("GLM 4.7 Flash")
    expect(stats).to_contain_text("ms first token")
    expect(stats).to_contain_text("tok/s")
    expect(stats).to_contain_text("tokens")
    expect(stats).to_contain_text("$")


REASONING = "Clouds now, rain later."


@pytest.mark.parametrize(
    ("alias", "model", "label", "steps", "end"),
    [
        pytest.param(
            "glm",
            GLM,
            "GLM 4.7 Flash",
            # (the model's event, the reasoning shown after it, the answer shown after it)
            [
                (openai_chunk(reasoning="Clouds now,"), "Clouds now,", ""),
                (openai_chunk(reasoning=" rain later."), REASONING, ""),
                (openai_chunk(content="Take"), REASONING, "Take"),
                (openai_chunk(content=" an umbrella."), REASONING, "Take an umbrella."),
            ],
            openai_end(completion_tokens=4),
            id="glm-openai-chunks-reasoning-then-content",
        ),
        pytest.param(
            "llama",
            LLAMA,
            "Llama 3.1 8B",
            [
                (native_chunk("Take"), "", "Take"),
                (native_chunk(" an"), "", "Take an"),
                (native_chunk(" umbrella."), "", "Take an umbrella."),
            ],
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
    steps: list[tuple[str, str, str]],
    end: list[str],
) -> None:
    ai.script({"match": {"model": model}, "chunks": [event for event, _, _ in steps] + end})
    chat.model_picker().select_option(alias)
    chat.hold_chat_events()
    chat.send("Do I need an umbrella?")
    answer = chat.last_answer()
    reasoning = answer.locator("details.reasoning")

    chat.release_events()  # meta
    for _, thought, text in steps:
        chat.release_events()
        expect(answer.locator(".reasoning-body")).to_have_text(thought)
        expect(answer.locator(".answer")).to_have_text(text)
        if thought:
            expect(reasoning).to_be_visible()
            expect(reasoning.locator("summary")).to_have_text("Reasoning" if text else "Thinking…")
        else:
            expect(reasoning).to_be_hidden()
        expect(answer).to_have_attribute("aria-busy", "true")
    chat.release_all_events()
    chat.wait_idle()

    expect(answer.locator(".answer")).to_have_text("Take an umbrella.")
    expect(answer.locator(".stats")).to_contain_text(label)
    expect(answer.get_by_role("alert")).to_have_count(0)
    if model == GLM:
        reasoning.locator("summary").click()
        expect(answer.get_by_text(REASONING)).to_be_visible()
    else:
        expect(reasoning).to_be_hidden()


# After its first words, a model that goes on streaming chunks without text
# (one every 100 ms, for a minute): the server learns that the page let go
# when it next writes to it (workerd notices a client gone only then), so a
# stalled model would hold the call until the idle deadline.
NO_MORE_TEXT: list[object] = [
    part for _ in range(600) for part in ({"delay_ms": 100}, openai_chunk())
]


def test_stop_keeps_the_partial_answer_and_aborts_the_model_call(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script(
        {
            "match": {"contains": "long"},
            "chunks": [openai_chunk(content="The beginning"), *NO_MORE_TEXT],
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

    # The model's call ends only when the abort reaches it (else it would
    # stream on for a minute): wait for that.
    calls = ai.wait_for_calls(1)
    assert len(calls) == 1
    assert calls[0]["aborted"] is True

    # Stopped stays stopped, also after a reload.
    chat.page.reload()
    expect(chat.last_answer().locator(".answer")).to_have_text("The beginning")
    expect(chat.last_answer().get_by_text("Stopped", exact=True)).to_be_visible()


def test_escape_stops_the_answer(chat: Chat, ai: EmulatorControl) -> None:
    ai.script({"chunks": [openai_chunk(content="Half an answer"), *NO_MORE_TEXT]})
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
    expect(chat.page.get_by_role("article", name="You").locator(".bubble")).to_have_text(
        "first line\nsecond line\nthird line"
    )
    expect(box).to_have_value("")
    chat.wait_idle()
    calls = ai.wait_for_calls(1)
    assert calls[0]["inputs"]["messages"][-1]["content"] == "first line\nsecond line\nthird line"


def test_reasoning_is_shown_apart_and_collapsed_while_the_answer_streams(
    chat: Chat, ai: EmulatorControl
) -> None:
    thought = "Let me think about the sky."
    ai.script(
        {
            "chunks": [
                openai_chunk(reasoning=thought),
                openai_chunk(content="The sky is blue"),
                openai_chunk(content=" because of Rayleigh scattering."),
                *openai_end(),
            ]
        }
    )
    chat.hold_chat_events()
    chat.send("Why is the sky blue?")
    answer = chat.last_answer()
    reasoning = answer.locator("details.reasoning")

    chat.release_events(2)  # meta, the reasoning
    expect(reasoning).to_be_visible()
    expect(reasoning.locator("summary")).to_have_text("Thinking…")
    expect(reasoning).not_to_have_attribute("open", "")
    expect(answer.get_by_text(thought)).to_be_hidden()
    chat.release_events()
    expect(answer.locator(".answer")).to_have_text("The sky is blue")
    expect(reasoning.locator("summary")).to_have_text("Reasoning")
    expect(answer.get_by_text(thought)).to_be_hidden()
    chat.release_all_events()
    chat.wait_idle()

    expect(reasoning.locator("summary")).to_have_text("Reasoning")
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
    ai.script({"chunks": [*(openai_chunk(content=line) for line in lines), *openai_end()]})
    log = chat.page.locator("#messages")
    at_bottom = "e => e.scrollHeight - e.scrollTop - e.clientHeight < 48"

    chat.hold_chat_events()
    chat.send("Write a long answer")
    chat.release_events(1 + 30)  # meta, lines 0 to 29
    expect(chat.last_answer()).to_contain_text("Line 29")
    assert log.evaluate(at_bottom)
    # The reader scrolls up: the page leaves the view where it is while the
    # rest of the answer arrives.
    log.evaluate("e => { e.scrollTop = 0; e.dispatchEvent(new Event('scroll')); }")
    chat.release_all_events()
    chat.wait_idle()
    expect(chat.last_answer()).to_contain_text("Line 59")
    assert log.evaluate("e => e.scrollTop") == 0


@pytest.mark.parametrize(
    ("last", "tag"),
    # A heading is shifted down two levels on the page (## is h4)
    [("Some words", "p"), ("- one\n- two", "ul"), ("> quoted", "blockquote"), ("## Title", "h4")],
)
def test_the_cursor_follows_the_last_block_while_streaming_and_goes_at_the_end(
    chat: Chat, ai: EmulatorControl, last: str, tag: str
) -> None:
    ai.script(
        {
            "chunks": [
                openai_chunk(content="First paragraph.\n\n"),
                openai_chunk(content=last),
                *openai_end(completion_tokens=4),
            ]
        }
    )
    chat.hold_chat_events()
    chat.send("Write two blocks")
    chat.release_events(3)  # meta and both pieces
    answer = chat.last_answer().locator(".answer")
    block = answer.locator(f":scope > {tag}").last
    expect(block).to_be_visible()
    expect(answer.locator(":scope > :last-child")).to_have_js_property("tagName", tag.upper())
    # The cursor is the block's ::after; a retried check, since the answer's
    # blocks are rendered again as text arrives (a block read while it is
    # being replaced has no style at all).
    expect(block).to_have_css("content", '""', pseudo="after")
    expect(answer.locator(":scope > p").first).to_have_css("content", "none", pseudo="after")
    chat.release_all_events()
    chat.wait_idle()
    expect(block).to_have_css("content", "none", pseudo="after")
