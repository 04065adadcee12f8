"""Conversations that follow the user: two browser contexts signed in as one
user (a named key) share their conversations, and edits made on both merge
with both versions kept; a question's image goes with its conversation to
the other device, and into a share link only when "Include images" is
ticked; a third context with no identity opens a share link (read-only),
and sees it gone once revoked. A page without identity says its
conversations stay in the browser; a server that fails keeps the local copy
and says so, then catches up."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import WATCH_CSP, Chat, Relay, next_client_address
from tests.browser.test_compare import compare_mode
from tests.browser.test_images import WIDE, attach, previews
from tests.harness import ROOT, Runner, start_runner

TOKEN = "ann-browser-token-5e1c9a7b3d"
BEARER = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runner]:
    folder = tmp_path_factory.mktemp("sync-site")
    vars_file: Path = folder / "sync.vars"
    vars_file.write_text(f"API_KEYS=ann:{TOKEN}\n")
    env = {"EDGECHAT_AI_DELAY_MS": "0"}
    # --clock-hook: the link-expiry test moves the Worker's clock days ahead
    # (nothing else here depends on the date).
    with start_runner(
        ROOT / "wrangler.toml", vars_file=vars_file, env=env, args=("--clock-hook",)
    ) as runner:
        yield runner


@pytest.fixture(scope="module")
def site(server: Runner) -> str:
    return server.base_url


@pytest.fixture(scope="module")
def clock(server: Runner) -> str:
    assert server.clock_url is not None
    return server.clock_url


@pytest.fixture
def signed_in(browser: Any, new_chat: Any, site: str) -> Iterator[Any]:
    """Opens a tab in a new context signed in as ann (her key in its storage)."""
    relays: list[Relay] = []

    def open_tab() -> Chat:
        relay = Relay(site, next_client_address())
        relays.append(relay)
        context = browser.new_context()
        context.add_init_script(WATCH_CSP)
        context.add_init_script(f"localStorage.setItem('edgechat.token', {TOKEN!r})")
        chat: Chat = new_chat(url=relay.url, context=context)
        return chat.open()

    yield open_tab
    for relay in relays:
        relay.close()


def kept(chat: Chat) -> Any:
    return chat.page.locator("#kept")


def synced(chat: Chat) -> None:
    expect(kept(chat)).to_have_text(
        "Conversations are kept on the server for ann, and in this browser.", timeout=15_000
    )


def server_conversations(site: str) -> list[dict[str, Any]]:
    listed = httpx.get(site + "/api/conversations", params={"bodies": 1}, headers=BEARER)
    return list(listed.json()["conversations"])


def wait_for_server(site: str, condition: Any, what: str, timeout: float = 20.0) -> None:
    """Waits until the server's conversations (read with ann's key) meet ``condition``."""
    deadline = time.monotonic() + timeout
    while not condition(server_conversations(site)):
        assert time.monotonic() < deadline, f"never on the server: {what}"
        time.sleep(0.05)


def holding(*texts: str) -> Any:
    def check(conversations: list[dict[str, Any]]) -> bool:
        present = {n["content"] for c in conversations for n in c["conversation"]["nodes"]}
        return set(texts) <= present

    return check


def versions(article: Any) -> Any:
    return article.get_by_role("group", name="Version", exact=False)


def first_question(site: str, text: str) -> dict[str, Any]:
    """The server's copy of the conversation whose first question is ``text``."""
    (item,) = [
        c for c in server_conversations(site) if c["conversation"]["nodes"][0]["content"] == text
    ]
    return dict(item["conversation"])


def store_down(chat: Chat, pattern: str) -> None:
    """The tab's requests to ``pattern`` fail as a store outage would (until unrouted)."""
    chat.page.route(
        pattern,
        lambda route: route.fulfill(
            status=503,
            content_type="application/json",
            body='{"error":{"code":"store_unavailable","message":"down"}}',
        ),
    )


def ask_with_image(chat: Chat, text: str) -> None:
    chat.page.get_by_role("button", name="New chat").click()
    chat.model_picker().select_option("kimi")
    attach(chat, ("wide.png", WIDE))
    expect(previews(chat)).to_have_count(1)
    chat.ask(text)


def share(chat: Chat, *, with_images: bool = False, days: str | None = None) -> str:
    """The link the page makes of the conversation on screen (living
    ``days``, else the days chosen already)."""
    if days is not None:
        chat.page.get_by_role("combobox", name="Link lives").select_option(days)
    chat.page.get_by_role("checkbox", name="Include images").set_checked(with_images)
    chat.page.get_by_role("button", name="Share a read-only link").click()
    notice = chat.page.locator("#notice")
    expect(notice).to_contain_text("Read-only link", timeout=15_000)
    url = notice.inner_text().rsplit(" ", 1)[-1]
    # The next share says its own link.
    chat.page.evaluate("document.getElementById('notice').textContent = ''")
    return url


def test_two_devices_of_one_user_share_and_merge_conversations(signed_in: Any, site: str) -> None:
    laptop = signed_in()
    synced(laptop)
    laptop.ask("Hello from the laptop")
    # The conversation reaches the server once the answer is done.
    expect(laptop.page.locator("#kept")).to_contain_text("on the server")
    wait_for_server(site, holding("Hello from the laptop"), "the first turn")

    phone = signed_in()
    synced(phone)
    questions = phone.page.get_by_role("article", name="You")
    expect(questions.first).to_contain_text("Hello from the laptop", timeout=15_000)
    expect(phone.answers()).to_have_count(1)

    # Both continue the same conversation, each without the other's turn.
    phone.ask("Follow-up from the phone")
    wait_for_server(site, holding("Follow-up from the phone"), "the phone's turn")
    laptop.ask("Follow-up from the laptop")

    # The laptop merged the phone's turn in: both follow-ups are versions.
    wait_for_server(
        site,
        holding("Follow-up from the phone", "Follow-up from the laptop"),
        "both follow-ups",
    )
    (conversation,) = [c["conversation"] for c in server_conversations(site)]
    follow_ups = [n for n in conversation["nodes"] if n["content"].startswith("Follow-up")]
    assert len({n["parent"] for n in follow_ups}) == 1, "both are versions of one turn"

    laptop_turn = laptop.page.get_by_role("article", name="You").nth(1)
    expect(versions(laptop_turn)).to_have_accessible_name("Version 1 of 2")
    # The phone catches up when it is looked at again.
    phone.page.reload()
    phone.page.locator("#input").wait_for()
    synced(phone)
    phone_turn = phone.page.get_by_role("article", name="You").nth(1)
    expect(versions(phone_turn)).to_be_visible(timeout=15_000)
    expect(versions(phone_turn)).to_contain_text("2")

    # A delete on one device is a tombstone the other applies.
    laptop.page.get_by_role("button", name="Delete", exact=False).first.click()
    wait_for_server(site, lambda conversations: not conversations, "the delete")
    phone.page.reload()
    phone.page.locator("#input").wait_for()
    synced(phone)
    expect(phone.page.get_by_role("article", name="You")).to_have_count(0, timeout=15_000)


def test_a_share_link_opens_read_only_without_identity_and_is_gone_once_revoked(
    signed_in: Any, browser: Any, site: str
) -> None:
    laptop = signed_in()
    synced(laptop)
    laptop.ask("A question worth sharing")
    wait_for_server(site, holding("A question worth sharing"), "the shared turn")
    (item,) = [
        c
        for c in server_conversations(site)
        if c["conversation"]["nodes"][0]["content"] == "A question worth sharing"
    ]
    link = httpx.post(
        site + "/api/shares", json={"conversation": item["id"]}, headers=BEARER
    ).json()

    stranger = browser.new_context()
    try:
        page = stranger.new_page()
        response = page.goto(site + link["url"])
        assert response is not None
        assert response.status == 200
        expect(page.locator("h1")).to_have_text("A question worth sharing")
        expect(page.locator("pre").first).to_have_text("A question worth sharing")
        expect(page.locator("pre")).to_have_count(2)
        # Read-only: no form, no field, no button, no script.
        assert page.locator("form, input, textarea, button, script").count() == 0
        assert httpx.delete(site + f"/api/shares/{link['id']}", headers=BEARER).status_code == 204
        gone = page.goto(site + link["url"])
        assert gone is not None
        assert gone.status == 410
        expect(page.locator("h1")).to_have_text("This link was revoked")
        expect(page.locator("pre")).to_have_count(0)
        expect(page.get_by_text("A question worth sharing")).to_have_count(0)
    finally:
        stranger.close()


def test_an_image_follows_its_conversation_and_goes_into_a_link_only_when_ticked(
    signed_in: Any, browser: Any, site: str
) -> None:
    laptop = signed_in()
    synced(laptop)
    ask_with_image(laptop, "What is in this picture?")
    wait_for_server(site, holding("What is in this picture?"), "the question with its image")
    (image,) = first_question(site, "What is in this picture?")["nodes"][0]["images"]
    assert image["type"] == "image/jpeg"
    assert max(image["width"], image["height"]) == 1568
    # The page sends the image before the conversation that names it.
    kept_image = httpx.get(site + f"/api/files/{image['id']}", headers=BEARER)
    assert kept_image.status_code == 200
    assert kept_image.headers["content-type"] == "image/jpeg"

    # The other device shows it, and sends it to a model again.
    phone = signed_in()
    synced(phone)
    listed = phone.page.get_by_role("navigation", name="Conversations")
    listed.get_by_role("button", name="What is in this picture?", exact=True).click()
    thumb = phone.page.get_by_role("article", name="You").first.get_by_role("img")
    expect(thumb).to_have_attribute("src", re.compile(r"^data:image/jpeg;base64,"), timeout=15_000)
    shown = str(thumb.get_attribute("src")).split(",", 1)[1]
    assert base64.b64decode(shown) == kept_image.content
    phone.model_picker().select_option("kimi")
    again = phone.ask("And what colour is it?")
    expect(again).to_contain_text(
        f"I see 1 image: image/jpeg {image['width']}\u00d7{image['height']}."
    )

    with_images = share(laptop, with_images=True)
    without = share(laptop, with_images=False)
    stranger = browser.new_context()
    try:
        page = stranger.new_page()
        opened = page.goto(with_images)
        assert opened is not None
        assert opened.status == 200
        picture = page.locator("img")
        expect(picture).to_have_count(1)
        page.wait_for_function(
            "() => { const i = document.querySelector('img');"
            " return i.complete && i.naturalWidth > 0; }"
        )
        assert page.evaluate("document.querySelector('img').naturalWidth") == image["width"]
        bare = page.goto(without)
        assert bare is not None
        assert bare.status == 200
        expect(page.locator("pre").first).to_have_text("What is in this picture?")
        expect(page.locator("img")).to_have_count(0)
    finally:
        stranger.close()
    for chat in (laptop, phone):
        assert chat.csp_violations() == []
        assert chat.log.page_errors == []


def test_an_image_the_server_cannot_take_yet_stays_here_and_is_sent_later(
    signed_in: Any, site: str
) -> None:
    laptop = signed_in()
    synced(laptop)
    store_down(laptop, "**/api/files/**")
    ask_with_image(laptop, "A picture while the bucket is down")
    expect(kept(laptop)).to_have_text(
        "The server cannot be reached: conversations are kept in this browser and sent "
        "when it is back.",
        timeout=15_000,
    )
    thumb = laptop.page.get_by_role("article", name="You").last.get_by_role("img")
    expect(thumb).to_have_attribute("src", re.compile(r"^data:image/jpeg;base64,"))
    laptop.page.unroute("**/api/files/**")
    synced(laptop)
    wait_for_server(site, holding("A picture while the bucket is down"), "the retried write", 60)
    (image,) = first_question(site, "A picture while the bucket is down")["nodes"][0]["images"]
    kept_image = httpx.get(site + f"/api/files/{image['id']}", headers=BEARER)
    assert kept_image.status_code == 200
    shown = str(thumb.get_attribute("src")).split(",", 1)[1]
    assert base64.b64decode(shown) == kept_image.content


def test_a_failing_server_keeps_the_local_copy_and_says_so(signed_in: Any, site: str) -> None:
    laptop = signed_in()
    synced(laptop)
    store_down(laptop, "**/api/conversations**")
    laptop.ask("Written while the store is down")
    expect(kept(laptop)).to_have_text(
        "The server cannot be reached: conversations are kept in this browser and sent "
        "when it is back.",
        timeout=15_000,
    )
    # (The user's earlier conversations came with the page: it goes on the current one.)
    expect(laptop.page.get_by_role("article", name="You").last).to_contain_text(
        "Written while the store is down"
    )
    laptop.page.unroute("**/api/conversations**")
    # The page retries by itself; its copy reaches the server.
    synced(laptop)
    wait_for_server(site, holding("Written while the store is down"), "the retried write", 60)


def test_without_identity_the_page_says_conversations_stay_here(chat: Chat) -> None:
    expect(chat.page.locator("#kept")).to_have_text("Conversations are kept in this browser only.")
    chat.ask("Only here")
    assert not any("sync.js" in url for url in chat.log.requests)
    assert not any("/api/conversations" in url for url in chat.log.requests)


def test_share_in_the_page_makes_a_link_of_the_days_chosen(
    signed_in: Any, browser: Any, site: str
) -> None:
    laptop = signed_in()
    synced(laptop)
    laptop.page.get_by_role("button", name="New chat").click()
    laptop.ask("Shared from the page")
    url = share(laptop, days="7")
    assert "/s/" in url
    link_id = url.rsplit("/", 1)[-1]
    (link,) = [
        s
        for s in httpx.get(site + "/api/shares", headers=BEARER).json()["shares"]
        if s["id"] == link_id
    ]
    assert link["expires"] - link["created"] == 7 * 86_400_000
    stranger = browser.new_context()
    try:
        page = stranger.new_page()
        response = page.goto(url)
        assert response is not None
        assert response.status == 200
        expect(page.locator("pre").first).to_have_text("Shared from the page")
    finally:
        stranger.close()


def test_a_first_sync_sends_this_browsers_conversations_in_one_batch(
    browser: Any, new_chat: Any, signed_in: Any, site: str
) -> None:
    # Three conversations this browser held before it was signed in.
    titles = [f"Kept before signing in {k}" for k in range(3)]
    saved = [
        {
            "id": f"before-{k}-{time.monotonic_ns()}",
            "title": title,
            "updated": 1733100000000 + k,
            "pick": 0,
            "next": [{"role": "user", "content": title, "pick": 0, "next": []}],
        }
        for k, title in enumerate(titles)
    ]
    relay = Relay(site, next_client_address())
    context = browser.new_context()
    try:
        context.add_init_script(WATCH_CSP)
        context.add_init_script(
            f"localStorage.setItem('edgechat.token', {TOKEN!r});"
            f"localStorage.setItem('edgechat.conversations.v2', {json.dumps(json.dumps(saved))});"
        )
        sent: list[str] = []
        context.on(
            "request",
            lambda request: (
                "/api/conversations" in request.url
                and request.method != "GET"
                and sent.append(request.method)
            ),
        )
        laptop: Chat = new_chat(url=relay.url, context=context).open()
        synced(laptop)
        wait_for_server(site, holding(*titles), "the three conversations")
        assert sent == ["POST"], "one batch, no PUT of each"

        phone = signed_in()
        synced(phone)
        listed = phone.page.get_by_role("navigation", name="Conversations")
        for title in titles:
            expect(listed.get_by_role("button", name=title, exact=True)).to_be_visible()
    finally:
        relay.close()


def test_my_links_lists_each_link_with_its_expiry_and_revokes_it(
    signed_in: Any, browser: Any, site: str, clock: str
) -> None:
    laptop = signed_in()
    synced(laptop)
    laptop.page.get_by_role("button", name="New chat").click()
    laptop.ask("Shared until it expires")
    url = share(laptop, days="7")

    links = laptop.page.get_by_role("dialog", name="My share links")
    laptop.page.get_by_role("button", name="My links").click()
    expect(links).to_be_visible()
    item = links.get_by_role("listitem").filter(
        has=laptop.page.get_by_role("link", name="Shared until it expires")
    )
    expect(item).to_have_count(1)
    expect(item).to_contain_text("Expires ")
    assert item.get_by_role("link").get_attribute("href") == url

    stranger = browser.new_context()
    try:
        page = stranger.new_page()
        opened = page.goto(url)
        assert opened is not None
        assert opened.status == 200
        # Eight days later the seven-day link has expired, for the stranger
        # and in the list.
        moved = httpx.post(clock, params={"advance_ms": 8 * 86_400_000})
        assert moved.status_code == 200
        expired = page.goto(url)
        assert expired is not None
        assert expired.status == 410
        expect(page.locator("h1")).to_have_text("This link has expired")
        expect(page.get_by_text("Shared until it expires")).to_have_count(0)
        links.get_by_role("button", name="Close").click()
        laptop.page.get_by_role("button", name="My links").click()
        expect(item).to_contain_text("Expired ")

        item.get_by_role("button", name="Revoke the link to Shared until it expires").click()
        expect(links.get_by_role("status")).to_have_text(
            "Revoked: the link to Shared until it expires no longer opens."
        )
        expect(item).to_have_count(0)
        link_id = url.rsplit("/", 1)[-1]
        mine = httpx.get(site + "/api/shares", headers=BEARER).json()["shares"]
        assert link_id not in {s["id"] for s in mine}
    finally:
        stranger.close()
    assert laptop.csp_violations() == []
    assert laptop.log.page_errors == []


# Last in this module: it deletes everything ann has on the server.
def test_my_data_downloads_what_the_server_keeps_deletes_it_all_and_imports_back(
    signed_in: Any, site: str
) -> None:
    laptop = signed_in()
    synced(laptop)
    ask_with_image(laptop, "Kept until I delete my data")
    wait_for_server(site, holding("Kept until I delete my data"), "the conversation")
    (image,) = first_question(site, "Kept until I delete my data")["nodes"][0]["images"]
    assert httpx.get(site + f"/api/files/{image['id']}", headers=BEARER).status_code == 200
    link = share(laptop, with_images=True)
    phone = signed_in()
    synced(phone)

    mine = laptop.page.get_by_role("dialog", name="My data on the server")
    laptop.page.get_by_role("button", name="My data", exact=True).click()
    expect(mine).to_be_visible()
    with laptop.page.expect_download() as info:
        mine.get_by_role("button", name="Download my data").click()
    assert info.value.suggested_filename.startswith("edgechat-my-data-")
    exported = json.loads(Path(info.value.path()).read_text(encoding="utf-8"))
    assert exported["format"] == "edgechat-server"
    titles = {c["title"] for c in exported["conversations"]}
    assert "Kept until I delete my data" in titles
    assert image["id"] in {f["id"] for f in exported["files"]}

    # A rating this browser keeps goes with the server's copy.
    laptop.page.evaluate(
        "localStorage.setItem('edgechat.ratings.v1', JSON.stringify({'c/n': {rating: 'up'}}))"
    )
    mine.get_by_role("button", name="Delete everything…").click()
    expect(mine).to_contain_text("for good")
    mine.get_by_role("button", name="Delete everything", exact=True).click()
    expect(mine.get_by_role("status")).to_have_text(
        "Deleted: the server keeps nothing of yours now."
    )
    assert server_conversations(site) == []
    assert laptop.page.evaluate("localStorage.getItem('edgechat.ratings.v1')") is None
    assert httpx.get(site + f"/api/files/{image['id']}", headers=BEARER).status_code == 404
    assert httpx.get(link).status_code in (404, 410)
    # This browser and the other device delete their copies as they sync.
    listed = laptop.page.get_by_role("navigation", name="Conversations")
    expect(
        listed.get_by_role("button", name="Kept until I delete my data", exact=True)
    ).to_have_count(0, timeout=15_000)
    phone.page.reload()
    phone.page.locator("#input").wait_for()
    synced(phone)
    on_phone = phone.page.get_by_role("navigation", name="Conversations")
    expect(
        on_phone.get_by_role("button", name="Kept until I delete my data", exact=True)
    ).to_have_count(0)

    # The download reads back through "Import chats", and goes to the server again.
    mine.get_by_role("button", name="Close").click()
    with laptop.page.expect_file_chooser() as chooser:
        listed.get_by_role("button", name="Import chats (JSON)…").click()
    chooser.value.set_files(
        files=[
            {
                "name": "my-data.json",
                "mimeType": "application/json",
                "buffer": Path(info.value.path()).read_bytes(),
            }
        ]
    )
    expect(
        listed.get_by_role("button", name="Kept until I delete my data", exact=True)
    ).to_be_visible()
    wait_for_server(site, holding("Kept until I delete my data"), "the imported conversation")
    assert laptop.csp_violations() == []
    assert laptop.log.page_errors == []


def test_a_signed_in_users_rating_and_its_reason_follow_them_to_another_device(
    signed_in: Any, site: str
) -> None:
    laptop: Chat = signed_in()
    synced(laptop)
    answer = laptop.ask("Rate me everywhere")
    wait_for_server(site, holding("Rate me everywhere"), "the conversation")
    answer.get_by_role("button", name="Bad answer").click()
    form = answer.get_by_role("form", name="Bad answer")
    form.get_by_role("checkbox", name="Slow").check()
    # A signed-in user may say more, within the server's limit.
    words = form.get_by_role("textbox", name="Tell us more (optional)")
    expect(words).to_have_attribute("maxlength", "500")
    words.fill("It took a while.")
    with laptop.page.expect_response("**/api/feedback") as sent:
        form.get_by_role("button", name="Send").click()
    assert sent.value.status == 200
    assert sent.value.request.post_data_json["text"] == "It took a while."

    phone: Chat = signed_in()
    synced(phone)
    answer = phone.last_answer()
    expect(answer).to_contain_text("Rate me everywhere", timeout=15_000)
    expect(answer.get_by_role("button", name="Bad answer")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(answer.locator(".rated")).to_have_text("Slow")
    answer.get_by_role("button", name="Bad answer").click()
    expect(answer.get_by_role("textbox", name="Tell us more (optional)")).to_have_value(
        "It took a while."
    )


def test_a_comparison_left_unvoted_on_one_device_is_voted_on_another(
    signed_in: Any, site: str
) -> None:
    laptop: Chat = signed_in()
    synced(laptop)
    compare_mode(laptop).get_by_role("checkbox", name="Blind").check()
    laptop.send("Compare me everywhere")
    expect(laptop.button("Send")).to_be_visible(timeout=15_000)

    def compared(conversations: list[dict[str, Any]]) -> bool:
        marks = [
            n["stats"]["comparison"]
            for c in conversations
            for n in c["conversation"]["nodes"]
            if (n.get("stats") or {}).get("comparison")
        ]
        return len(marks) == 2 and all(m.get("blind") is True for m in marks)

    wait_for_server(site, compared, "the comparison's answers, each with its comparison")
    # What sync sent names no model of a blind comparison before its vote.
    for c in server_conversations(site):
        for node in c["conversation"]["nodes"]:
            if (node.get("stats") or {}).get("comparison"):
                assert node["stats"].get("model") is None
                assert node["stats"].get("cost_usd") is None

    phone: Chat = signed_in()
    synced(phone)
    panel = phone.page.get_by_role("region", name="Comparison")
    expect(panel.get_by_role("group", name="Answer 2", exact=True)).to_be_visible(timeout=15_000)
    with phone.page.expect_response("**/api/feedback") as voted:
        panel.get_by_role("button", name="Tie").click()
    assert voted.value.status == 201
    expect(panel.get_by_role("status")).to_contain_text("The answers were")
    expect(panel.get_by_role("heading", level=3, name="Answer 1: ", exact=False)).to_have_count(1)

    # The names are kept now, and follow the conversation back to the server.
    def named(conversations: list[dict[str, Any]]) -> bool:
        stats = [
            n["stats"]
            for c in conversations
            for n in c["conversation"]["nodes"]
            if (n.get("stats") or {}).get("comparison")
        ]
        return len(stats) == 2 and all(s.get("model") for s in stats)

    wait_for_server(site, named, "the comparison's models, named after the vote")
