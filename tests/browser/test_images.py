"""Images on the page: attached with the button, pasted or dropped; made
smaller in the browser before they are sent; kept in IndexedDB across a
reload; a model that cannot see is named and a switch offered. The emulator's
vision models say the type and pixel size of each image they got, read from
its bytes, so the tests read the page's encoding from the answer."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from playwright.sync_api import expect

from tests.browser.conftest import Chat
from tests.harness import EmulatorControl
from tests.kit.images import png

KIMI = "@cf/moonshotai/kimi-k2.6"
TIMES = "\u00d7"  # the multiplication sign of "1568×523"  # noqa: RUF003
WIDE = png(3000, 1000)  # over 1,568 px on the long side: the page downscales it

# A paste or a drop as the browser delivers them: a DataTransfer holding Files.
DELIVER = """([how, data, name, count]) => {
  const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
  const files = new DataTransfer();
  for (let k = 0; k < count; k++) files.items.add(new File([bytes], name, { type: "image/png" }));
  const input = document.getElementById("input");
  const options = { bubbles: true, cancelable: true };
  if (how === "paste") {
    input.dispatchEvent(new ClipboardEvent("paste", { ...options, clipboardData: files }));
    return;
  }
  for (const type of ["dragenter", "dragover", "drop"])
    input.dispatchEvent(new DragEvent(type, { ...options, dataTransfer: files }));
}"""


def deliver(
    chat: Chat, how: str, data: bytes = WIDE, name: str = "wide.png", count: int = 1
) -> None:
    chat.page.evaluate(DELIVER, [how, base64.b64encode(data).decode(), name, count])


def attach(chat: Chat, *files: tuple[str, bytes]) -> None:
    with chat.page.expect_file_chooser() as chooser:
        chat.button("Attach images or documents").click()
    chooser.value.set_files(
        files=[{"name": name, "mimeType": "image/png", "buffer": data} for name, data in files]
    )


def previews(chat: Chat) -> Any:
    return chat.page.get_by_role("list", name="Attach images or documents").get_by_role("img")


def seen_size(answer: Any) -> tuple[int, int]:
    """The pixel size the vision model read from the one image it got."""
    text = answer.inner_text()
    match = re.search(rf"I see 1 image: image/jpeg (\d+){TIMES}(\d+)\.", text)
    assert match, text
    return int(match.group(1)), int(match.group(2))


def assert_downscaled(size: tuple[int, int]) -> None:
    width, height = size
    assert max(width, height) <= 1568
    assert abs(width / height - 3) < 0.01  # 3000 by 1000 keeps its aspect


def test_an_attached_image_is_downscaled_sent_as_a_part_kept_and_sent_again(
    chat: Chat, ai: EmulatorControl
) -> None:
    chat.model_picker().select_option("kimi")
    attach(chat, ("wide.png", WIDE))
    expect(previews(chat)).to_have_count(1)
    expect(previews(chat).first).to_have_accessible_name(re.compile(rf"^Image 1, \d+{TIMES}\d+$"))
    answer = chat.ask("What is in it?")
    size = seen_size(answer)
    assert_downscaled(size)
    expect(previews(chat)).to_have_count(0)

    (call,) = [c for c in ai.calls() if c["model"] == KIMI]
    question = call["inputs"]["messages"][-1]
    assert question["role"] == "user"
    assert [p["type"] for p in question["content"]] == ["text", "image_url"]
    assert question["content"][0]["text"] == "What is in it?"
    assert question["content"][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")

    # localStorage keeps the image's id only; the bytes are in IndexedDB.
    saved = chat.page.evaluate("localStorage.getItem('edgechat.conversations.v2')")
    assert "data:image" not in saved
    (image,) = json.loads(saved)[0]["next"][0]["images"]
    assert (image["width"], image["height"], image["type"]) == (*size, "image/jpeg")

    chat.page.reload()
    thumb = chat.page.get_by_role("article", name="You").get_by_role(
        "img", name=f"Image 1, {size[0]}{TIMES}{size[1]}"
    )
    expect(thumb).to_have_js_property("naturalWidth", size[0])
    # The image goes again with the history.
    chat.model_picker().select_option("kimi")
    assert seen_size(chat.ask("And now?")) == size
    assert chat.csp_violations() == []


def test_a_pasted_image_is_attached(chat: Chat) -> None:
    chat.model_picker().select_option("kimi")
    deliver(chat, "paste")
    expect(previews(chat)).to_have_count(1)
    assert_downscaled(seen_size(chat.ask("Pasted")))


def test_a_dropped_image_is_attached_and_a_preview_can_be_removed(chat: Chat) -> None:
    chat.model_picker().select_option("kimi")
    deliver(chat, "drop", count=2)
    expect(previews(chat)).to_have_count(2)
    chat.button("Remove image 2").click()
    expect(previews(chat)).to_have_count(1)
    expect(chat.composer()).to_be_focused()
    assert_downscaled(seen_size(chat.ask("Dropped")))


def test_a_model_that_cannot_see_is_named_and_a_switch_offered(chat: Chat) -> None:
    expect(chat.model_picker()).to_have_value("glm")
    attach(chat, ("wide.png", WIDE))
    alert = chat.page.get_by_role("alert")
    expect(alert).to_contain_text("GLM 4.7 Flash cannot see images.")
    # Not sent: the server would refuse it.
    chat.send("What is in it?")
    expect(alert).to_be_visible()
    expect(chat.page.get_by_role("article", name="You")).to_have_count(0)

    chat.button("Switch to Kimi K2.6").click()
    expect(chat.model_picker()).to_have_value("kimi")
    expect(alert).to_be_hidden()
    expect(chat.composer()).to_have_value("What is in it?")
    chat.composer().press("Enter")
    chat.wait_idle()
    assert_downscaled(seen_size(chat.last_answer()))


def test_too_many_images_and_one_too_large_are_refused_by_the_limits(
    new_chat: Any,
) -> None:
    chat: Chat = new_chat()

    def small_images(route: Any) -> None:
        limits = route.fetch().json()
        route.fulfill(json={**limits, "max_images": 2, "max_image_bytes": 4000})

    chat.page.route("**/api/limits", small_images)
    chat.open()
    chat.model_picker().select_option("kimi")
    tiny = png(40, 30)
    attach(chat, ("a.png", tiny), ("b.png", tiny), ("c.png", tiny))
    alert = chat.page.get_by_role("alert")
    expect(alert).to_have_text("At most 2 images per message.")
    expect(previews(chat)).to_have_count(2)
    chat.button("Remove image 1").click()
    expect(alert).to_be_hidden()
    attach(chat, ("big.png", WIDE))
    expect(alert).to_have_text("big.png is too large, even made smaller.")
    expect(previews(chat)).to_have_count(1)
