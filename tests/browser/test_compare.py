"""Compare mode and feedback in the page: two or three models answer one question
side by side (columns; tabs on a phone), a vote keeps the chosen answer as the
one shown (after a reload too), blind mode names the models only after the
vote, one failing answer leaves the vote to the others, a refused comparison
asks no model, one Stop stops every stream; 👍/👎 with a reason is kept."""

from __future__ import annotations

import json
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import LLAMA, Chat
from tests.browser.test_accessibility import AXE, axe_violations
from tests.harness import EmulatorControl

KIMI = "@cf/moonshotai/kimi-k2.6"


def compare_mode(chat: Chat) -> Any:
    """Turns compare mode on; the bar of models."""
    chat.button("Compare models").click()
    bar = chat.page.get_by_role("group", name="Compare 2 or 3 models")
    expect(bar).to_be_visible()
    return bar


def comparison(chat: Chat) -> Any:
    return chat.page.get_by_role("region", name="Comparison")


def column(chat: Chat, name: str) -> Any:
    return comparison(chat).get_by_role("group", name=name, exact=True)


def wait_answers(chat: Chat) -> None:
    expect(chat.button("Send")).to_be_visible()
    expect(comparison(chat).locator("article[aria-busy=true]")).to_have_count(0)


def test_two_models_stream_side_by_side_and_the_vote_keeps_the_chosen_answer(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    bar = compare_mode(chat)
    expect(bar.get_by_role("checkbox", name="GLM 4.7 Flash")).to_be_checked()
    expect(bar.get_by_role("checkbox", name="Kimi K2.6")).to_be_checked()
    expect(bar.get_by_role("checkbox", name="Llama 3.1 8B")).not_to_be_checked()
    # The picker's one model does not apply while comparing.
    expect(chat.model_picker()).to_be_disabled()

    chat.hold_chat_events()
    with page.expect_response("**/api/comparisons") as created:
        chat.send("Which is faster?")
    assert created.value.status == 201
    assert created.value.request.post_data_json == {"models": ["glm", "kimi"], "blind": False}
    glm, kimi = column(chat, "Answer 1: GLM 4.7 Flash"), column(chat, "Answer 2: Kimi K2.6")
    # Both stream at once: each is busy before either has ended.
    expect(glm.get_by_role("article")).to_have_attribute("aria-busy", "true")
    expect(kimi.get_by_role("article")).to_have_attribute("aria-busy", "true")
    expect(chat.button("Stop")).to_have_count(1)
    chat.release_events(8)
    chat.release_all_events()
    wait_answers(chat)
    # Side by side: the same row, the second to the right.
    left, right = glm.bounding_box(), kimi.bounding_box()
    assert left
    assert right
    assert abs(left["y"] - right["y"]) < 2
    assert right["x"] > left["x"] + left["width"]
    expect(glm.locator(".answer")).to_contain_text("glm-4.7-flash")
    expect(kimi.locator(".answer")).to_contain_text("kimi-k2.6")
    for col in (glm, kimi):
        expect(col.locator(".stats")).to_contain_text("ms first token")
        expect(col.locator(".stats")).to_contain_text("tokens")
        expect(col.locator(".stats")).to_contain_text("$")
    calls = ai.wait_for_calls(2)
    assert sorted(c["model"] for c in calls) == [
        "@cf/moonshotai/kimi-k2.6",
        "@cf/zai-org/glm-4.7-flash",
    ]

    with page.expect_response("**/api/feedback") as voted:
        kimi.get_by_role("button", name="This one is better (answer 2)").click()
    assert voted.value.status == 201
    choice = voted.value.request.post_data_json
    assert choice["choice"] == 1
    assert isinstance(choice["comparison"], str)
    expect(kimi.get_by_text("Chosen")).to_be_visible()
    expect(comparison(chat).get_by_role("status")).to_contain_text(
        "Vote counted: answer 2 is better."
    )
    expect(page.get_by_role("button", name="Tie")).to_have_count(0)

    # The chosen answer is the conversation's, the other its other version.
    page.reload()
    answer = chat.last_answer()
    expect(answer.locator(".answer")).to_contain_text("kimi-k2.6")
    expect(answer.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    answer.get_by_role("button", name="Previous version").click()
    expect(chat.last_answer().locator(".answer")).to_contain_text("glm-4.7-flash")


def test_blind_mode_names_the_models_only_after_the_vote(chat: Chat, ai: EmulatorControl) -> None:
    page = chat.page
    # The same words from each, so only the page could tell them apart.
    ai.script({"reply": {"content": "Both say this."}})
    bar = compare_mode(chat)
    bar.get_by_role("checkbox", name="Blind").check()
    with page.expect_response("**/api/comparisons") as created:
        chat.send("Who are you?")
    assert created.value.request.post_data_json["blind"] is True
    wait_answers(chat)
    panel = comparison(chat)
    expect(column(chat, "Answer 1")).to_be_visible()
    expect(column(chat, "Answer 2")).to_be_visible()
    for name in ("GLM", "Kimi", "glm", "kimi"):
        expect(panel).not_to_contain_text(name)
    expect(panel.locator(".stats").first).to_contain_text("tokens")

    with page.expect_response("**/api/feedback") as voted:
        panel.get_by_role("button", name="Tie").click()
    assert voted.value.request.post_data_json["choice"] == "tie"
    heads = panel.get_by_role("heading", level=3)
    expect(heads).to_have_count(2)
    expect(panel.get_by_role("status")).to_contain_text("The answers were")
    names = [h.split(": ", 1)[1] for h in heads.all_inner_texts()]
    assert sorted(names) == ["GLM 4.7 Flash", "Kimi K2.6"]
    # Each answer's stats line names its model now, and the answers keep them:
    # a tie keeps the first column's as the one shown.
    expect(panel.locator(".stats", has_text="GLM 4.7 Flash")).to_have_count(1)
    page.reload()
    expect(chat.last_answer().locator(".stats")).to_contain_text(names[0])


STORED_STATS = """() => {
  const out = [];
  const walk = (node) => {
    for (const next of node.next || []) {
      if (next.stats) out.push(next.stats);
      walk(next);
    }
  };
  for (const c of JSON.parse(localStorage.getItem("edgechat.conversations.v2") || "[]")) walk(c);
  return out;
}"""


def test_a_comparison_left_unvoted_is_offered_its_vote_after_a_reload(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    bar = compare_mode(chat)
    bar.get_by_role("checkbox", name="Blind").check()
    with page.expect_response("**/api/comparisons") as created:
        chat.send("Who are you?")
    cid = created.value.json()["id"]
    wait_answers(chat)
    # The stored answers know their comparison, and a blind one's name no
    # model and no cost before the vote.
    stored = page.evaluate(STORED_STATS)
    assert sorted(s["comparison"]["slot"] for s in stored) == [0, 1]
    for stats in stored:
        assert stats["comparison"] == {
            "id": cid,
            "slot": stats["comparison"]["slot"],
            "blind": True,
        }
        assert stats.get("model") is None
        assert stats.get("cost_usd") is None

    with page.expect_response(f"**/api/comparisons/{cid}") as asked:
        page.reload()
    assert asked.value.status == 200
    panel = comparison(chat)
    # Still blind: the columns by number, the stats lines without names.
    first, second = column(chat, "Answer 1"), column(chat, "Answer 2")
    expect(second).to_be_visible()
    for name in ("GLM", "Kimi"):
        expect(panel.locator(".stats", has_text=name)).to_have_count(0)
    # The model's own words say which (the emulator's answer names it):
    # blind keeps edgechat's words from naming it, not the model's.
    chosen = (
        "kimi-k2.6" if "kimi-k2.6" in second.locator(".answer").inner_text() else "glm-4.7-flash"
    )
    label = {"kimi-k2.6": "Kimi K2.6", "glm-4.7-flash": "GLM 4.7 Flash"}[chosen]
    expect(first.locator(".answer")).not_to_contain_text(chosen)
    # Away to a new chat and back: the comparison is drawn again, its vote still offered.
    chat.button("New chat").click()
    expect(panel).to_have_count(0)
    sidebar = page.get_by_role("navigation", name="Conversations")
    sidebar.get_by_role("button", name="Who are you?", exact=True).click()
    expect(second.get_by_role("button", name="This one is better (answer 2)")).to_be_visible()

    with page.expect_response("**/api/feedback") as voted:
        second.get_by_role("button", name="This one is better (answer 2)").click()
    assert voted.value.status == 201
    assert voted.value.request.post_data_json == {"comparison": cid, "choice": 1}
    named = column(chat, f"Answer 2: {label}")
    expect(named.get_by_text("Chosen")).to_be_visible()
    expect(named.locator(".stats")).to_contain_text(label)
    expect(panel.get_by_role("status")).to_contain_text("The answers were")
    expect(page.get_by_role("button", name="Tie")).to_have_count(0)

    # The chosen answer is the conversation's now, its model named; the vote
    # is not offered again.
    page.reload()
    answer = chat.last_answer()
    expect(answer.locator(".answer")).to_contain_text(chosen)
    expect(answer.locator(".stats")).to_contain_text(label)
    expect(answer.get_by_role("group", name="Version 2 of 2")).to_be_visible()
    expect(page.get_by_role("button", name="This one is better (answer 1)")).to_have_count(0)
    assert all(s.get("model") for s in page.evaluate(STORED_STATS))


def test_a_comparison_the_server_does_not_give_back_is_shown_as_versions(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    compare_mode(chat)
    chat.send("Whose is this?")
    wait_answers(chat)
    # Another user's comparison (an imported conversation), or one deleted: 404.
    body = {"error": {"code": "not_found", "message": "Not found."}}
    page.route(
        "**/api/comparisons/*",
        lambda route: route.fulfill(
            status=404, content_type="application/json", body=json.dumps(body)
        ),
    )
    with page.expect_response("**/api/comparisons/*") as asked:
        page.reload()
    assert asked.value.status == 404
    answer = chat.last_answer()
    expect(answer.get_by_role("group", name="Version 1 of 2")).to_be_visible()
    expect(comparison(chat)).to_have_count(0)
    expect(page.get_by_role("button", name="Tie")).to_have_count(0)


def test_a_phone_shows_the_answers_as_tabs(new_chat: Any, ai: EmulatorControl) -> None:
    chat: Chat = new_chat(viewport={"width": 360, "height": 740}).open()
    page = chat.page
    compare_mode(chat)
    chat.send("Short answers please")
    wait_answers(chat)
    tabs = page.get_by_role("tablist", name="Answers").get_by_role("tab")
    expect(tabs).to_have_count(2)
    expect(tabs.first).to_have_attribute("aria-selected", "true")
    first = page.get_by_role("tabpanel", name="Answer 1: GLM 4.7 Flash")
    expect(first).to_be_visible()
    expect(page.get_by_role("tabpanel")).to_have_count(1)  # the other one is hidden
    # The keyboard: arrows move between the tabs and show each one's answer.
    tabs.first.focus()
    page.keyboard.press("ArrowRight")
    expect(tabs.last).to_be_focused()
    expect(tabs.last).to_have_attribute("aria-selected", "true")
    second = page.get_by_role("tabpanel", name="Answer 2: Kimi K2.6")
    expect(second).to_be_visible()
    expect(second.locator(".answer")).to_contain_text("kimi-k2.6")
    page.keyboard.press("Home")
    expect(tabs.first).to_be_focused()
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    # Voting from a tab.
    page.keyboard.press("End")
    page.get_by_role("button", name="This one is better (answer 2)").click()
    expect(page.get_by_role("tabpanel").get_by_text("Chosen")).to_be_visible()


def test_one_failing_answer_shows_its_error_and_the_others_can_still_be_voted_on(
    chat: Chat, ai: EmulatorControl
) -> None:
    ai.script({"match": {"model": LLAMA}, "error": "3040: Capacity temporarily exceeded"})
    bar = compare_mode(chat)
    bar.get_by_role("checkbox", name="Llama 3.1 8B").check()
    # Three is the most: the others wait.
    chat.send("Three at once")
    wait_answers(chat)
    failed = column(chat, "Answer 3: Llama 3.1 8B")
    expect(failed.get_by_role("alert")).to_be_visible()
    expect(failed.get_by_role("button", name="This one is better (answer 3)")).to_have_count(0)
    for k, model in ((1, "glm-4.7-flash"), (2, "kimi-k2.6")):
        expect(comparison(chat).locator(".answer").nth(k - 1)).to_contain_text(model)
        expect(
            chat.page.get_by_role("button", name=f"This one is better (answer {k})")
        ).to_be_visible()
    with chat.page.expect_response("**/api/feedback") as voted:
        chat.page.get_by_role("button", name="This one is better (answer 1)").click()
    assert voted.value.status == 201
    expect(column(chat, "Answer 1: GLM 4.7 Flash").get_by_text("Chosen")).to_be_visible()


def test_a_refused_comparison_says_why_and_asks_no_model(chat: Chat, ai: EmulatorControl) -> None:
    page = chat.page
    body = {"error": {"code": "budget_exhausted", "message": "Budget used up."}}
    page.route(
        "**/api/comparisons",
        lambda route: route.fulfill(
            status=429, content_type="application/json", body=json.dumps(body)
        ),
    )
    compare_mode(chat)
    chat.send("Too expensive")
    expect(page.get_by_role("alert")).to_contain_text("Your daily budget is used up.")
    expect(chat.composer()).to_have_value("Too expensive")
    expect(chat.button("Send")).to_be_visible()
    assert not [u for u in chat.log.requests if "/chat" in u]
    assert ai.calls() == []


def test_one_stop_stops_every_stream(chat: Chat, ai: EmulatorControl) -> None:
    ai.script({"chunks": [{"stall": True}]})
    compare_mode(chat)
    chat.send("Take your time")
    expect(comparison(chat).locator("article[aria-busy=true]")).to_have_count(2)
    chat.button("Stop").click()
    wait_answers(chat)
    expect(comparison(chat).get_by_text("Stopped")).to_have_count(2)
    # Nothing finished: nothing to vote on.
    expect(comparison(chat).get_by_role("status")).to_contain_text("nothing to vote on")


def test_a_thumbs_down_with_a_reason_is_kept_after_a_reload(
    chat: Chat, ai: EmulatorControl
) -> None:
    page = chat.page
    answer = chat.ask("Rate me")
    good, bad = (
        answer.get_by_role("button", name="Good answer"),
        answer.get_by_role("button", name="Bad answer"),
    )
    expect(good).to_have_attribute("aria-pressed", "false")
    with page.expect_response("**/api/feedback") as rated:
        bad.click()
    first = rated.value.request.post_data_json
    assert first["rating"] == "down"
    assert first["model"] == "@cf/zai-org/glm-4.7-flash"
    assert first["conversation"]
    assert first["node"].startswith("n")
    expect(answer.get_by_role("button", name="Bad answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    form = answer.get_by_role("form", name="Bad answer")
    reasons = form.get_by_role("group", name="What was wrong? (optional)")
    expect(reasons.get_by_role("checkbox", name="Inaccurate")).to_be_focused()
    # An anonymous page offers no free text: the server keeps none it cannot give back.
    expect(form.get_by_role("textbox")).to_have_count(0)
    reasons.get_by_role("checkbox", name="Incomplete").check()
    with page.expect_response("**/api/feedback") as again:
        form.get_by_role("button", name="Send").click()
    assert again.value.status == 200
    assert again.value.request.post_data_json["tags"] == ["incomplete"]
    assert again.value.request.post_data_json["node"] == first["node"]
    expect(form).to_have_count(0)
    expect(answer.locator(".rated")).to_have_text("Incomplete")

    page.reload()
    answer = chat.last_answer()
    expect(answer.get_by_role("button", name="Bad answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(answer.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "false"
    )
    expect(answer.locator(".rated")).to_have_text("Incomplete")
    # A 👍 replaces it.
    answer.get_by_role("button", name="Good answer").click()
    expect(answer.get_by_role("button", name="Good answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(answer.locator(".rated")).to_have_count(0)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize(
    "viewport",
    [{"width": 1280, "height": 800}, {"width": 360, "height": 740}],
    ids=["desktop", "phone"],
)
def test_axe_finds_no_violation_with_a_comparison_and_a_rating_on_screen(
    new_chat: Any, ai: EmulatorControl, scheme: str, viewport: dict[str, int]
) -> None:
    assert AXE.is_file(), "axe-core is a devDependency: run scripts/setup.sh"
    chat: Chat = new_chat(color_scheme=scheme, viewport=viewport).open()
    answer = chat.ask("First a plain answer")
    answer.get_by_role("button", name="Bad answer").click()
    expect(answer.get_by_role("form", name="Bad answer")).to_be_visible()
    bar = compare_mode(chat)
    bar.get_by_role("checkbox", name="Llama 3.1 8B").check()
    ai.script({"match": {"model": LLAMA}, "error": "3040: Capacity temporarily exceeded"})
    chat.send("Now three")
    wait_answers(chat)
    expect(chat.page.get_by_role("button", name="Tie")).to_be_visible()
    assert axe_violations(chat) == []
    assert chat.csp_violations() == []
