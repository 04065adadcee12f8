"""An answer from the semantic cache in the page: it says so under the
answer (how similar, and which question), after a reload too; "Ask fresh"
asks again past the caches, as a new version of the answer; axe finds
nothing wrong with it on screen.

The ``/chat`` replies are served by the test (``page.route``): what the page
makes of ``done.cached`` is the page's, whatever runner answered."""

from __future__ import annotations

from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat, done, meta
from tests.browser.test_accessibility import axe_violations
from tests.kit.upstream import openai_chunk

SIMILAR = {"kind": "similar", "score": 0.9617, "question": "How do I keep sourdough alive?"}


def serve(chat: Chat, seen: list[dict[str, str]]) -> None:
    """The first /chat is answered from the semantic cache, any later one by the model."""

    def answer(route: Any) -> None:
        seen.append(dict(route.request.headers))
        kept = len(seen) == 1
        body = "".join(
            (
                meta(),
                openai_chunk(content="Kept answer." if kept else "Fresh answer."),
                done(**({"cached": SIMILAR, "cost_usd": 0} if kept else {})),
            )
        )
        route.fulfill(status=200, content_type="text/event-stream; charset=utf-8", body=body)

    chat.page.route("**/chat", answer)


def test_an_answer_from_a_similar_question_says_so_and_asks_fresh(chat: Chat) -> None:
    seen: list[dict[str, str]] = []
    serve(chat, seen)
    answer = chat.ask("how to keep my sourdough alive")
    note = answer.locator(".similar")
    expect(note).to_contain_text("answered from a similar question (0.96)")
    expect(note.locator("q")).to_have_text("How do I keep sourdough alive?")
    assert "cache-control" not in seen[0]
    assert axe_violations(chat) == []

    fresh = answer.get_by_role("button", name="Ask fresh")
    expect(fresh).to_be_visible()
    fresh.click()
    chat.wait_idle()
    assert seen[1].get("cache-control") == "no-cache"
    answer = chat.last_answer()
    expect(answer.locator(".answer")).to_have_text("Fresh answer.")
    expect(answer.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    expect(answer.locator(".similar")).to_have_count(0)

    # The kept answer is still its first version, and says so after a reload.
    chat.page.reload()
    answer = chat.last_answer()
    answer.get_by_role("button", name="Previous version").click()
    expect(answer.locator(".answer")).to_have_text("Kept answer.")
    expect(answer.locator(".similar")).to_contain_text("(0.96)")


def test_the_usage_page_shows_what_similar_questions_saved(new_chat: Any) -> None:
    tab: Chat = new_chat()

    def with_hits(route: Any) -> None:
        reply = route.fetch()
        body = reply.json()
        body["similar"] = {"hits": 3, "saved_usd": 0.0123, "saved_neurons": 1118}
        route.fulfill(response=reply, json=body)

    tab.page.route("**/api/usage*", with_hits)
    tab.page.goto(tab.url + "/usage")
    section = tab.page.get_by_role("region", name="Answered from similar questions")
    expect(section).to_contain_text("3 questions answered from a similar question's kept answer")
    expect(section).to_contain_text("1,118 Neurons")
    assert axe_violations(tab) == []
