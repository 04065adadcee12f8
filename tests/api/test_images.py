"""Images in the conversation, over HTTP: what a model that sees receives
(the emulator's vision models say what arrived, read from the images' own
headers), and every rule an image must keep."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.api.checks import GLM, assert_done, assert_error, post_chat
from tests.api.conftest import ClientFactory, Server, ServerPool
from tests.kit.images import BROKEN, data_url, gif, jpeg, png, webp

KIMI = "@cf/moonshotai/kimi-k2.6"
TOKEN = "test-token-images"
MAX_IMAGE_BYTES = 4096
BY = "\u00d7"  # the multiplication sign the emulator writes sizes with


def image(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def text(words: str) -> dict[str, Any]:
    return {"type": "text", "text": words}


def ask(*parts: dict[str, Any], model: str = "kimi") -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": list(parts)}]}


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(
        {
            "MODELS": "glm,kimi,llama",
            "MAX_IMAGES": "3",
            "MAX_IMAGE_BYTES": str(MAX_IMAGE_BYTES),
            "API_TOKEN": TOKEN,
            "CACHE_MODE": "off",
        },
        rate_limited=False,
    )


@pytest.fixture
def http(server: Server, new_client: ClientFactory) -> httpx.Client:
    return new_client(server.url)


AUTH = {"authorization": f"Bearer {TOKEN}"}


def test_png_jpeg_and_webp_arrive_intact(server: Server, http: httpx.Client) -> None:
    chat = post_chat(
        http,
        ask(
            text("What is in these?"),
            image(data_url(png(64, 48), "image/png")),
            image(data_url(jpeg(1568, 1176), "image/jpeg")),
            image(data_url(webp(300, 200), "image/webp")),
        ),
        headers=AUTH,
    )
    assert_done(chat.events, KIMI)
    answer = chat.events.text()
    assert (
        f"I see 3 images: image/png 64{BY}48, image/jpeg 1568{BY}1176, image/webp 300{BY}200."
        in answer
    )
    (call,) = server.ai.wait_for_calls(1)
    sent = call["inputs"]["messages"][-1]["content"]
    assert [part["type"] for part in sent] == ["text", "image_url", "image_url", "image_url"]
    assert sent[1]["image_url"]["url"] == data_url(png(64, 48), "image/png")


def test_an_image_earlier_in_the_conversation_is_sent_again(
    server: Server, http: httpx.Client
) -> None:
    earlier = data_url(gif(10, 20), "image/gif")
    body = {
        "model": "kimi",
        "messages": [
            {"role": "user", "content": [text("Look"), image(earlier)]},
            {"role": "assistant", "content": "A small picture."},
            {"role": "user", "content": "How tall is it?"},
        ],
    }
    chat = post_chat(http, body, headers=AUTH)
    assert f"I see 1 image: image/gif 10{BY}20." in chat.events.text()
    (call,) = server.ai.wait_for_calls(1)
    messages = call["inputs"]["messages"]
    assert messages[1]["content"][1]["image_url"]["url"] == earlier
    assert messages[-1]["content"] == "How tall is it?"


def test_the_openai_api_takes_images_too(server: Server) -> None:
    with openai.OpenAI(base_url=server.url + "/v1", api_key=TOKEN, max_retries=0) as client:
        answer = client.chat.completions.create(
            model="kimi",
            messages=[
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "Describe"},
                        {
                            "type": "image_url",
                            "image_url": {"url": data_url(png(8, 8), "image/png")},
                        },
                    ],
                }
            ],
        )
    assert f"I see 1 image: image/png 8{BY}8." in (answer.choices[0].message.content or "")
    assert answer.usage is not None
    assert answer.usage.prompt_tokens > 0


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        (
            [text("x"), image(data_url(png(4, 4), "image/jpeg"))],
            "messages[0].content[1] is not a image/jpeg image: its bytes say otherwise.",
        ),
        (
            [
                text("x"),
                image(data_url(b"\x89PNG\r\n\x1a\n" + bytes(MAX_IMAGE_BYTES), "image/png")),
            ],
            f"messages[0].content[1] is an image larger than {MAX_IMAGE_BYTES} bytes.",
        ),
        (
            [text("x"), image("https://example.com/cat.png")],
            "messages[0].content[1].image_url.url must be a data: URL; edgechat never fetches "
            "an image from a URL.",
        ),
        (
            [text("x"), image("data:image/svg+xml;base64,PHN2Zz4=")],
            "messages[0].content[1].image_url.url must be data:<type>;base64,<data> with a type "
            "of image/png, image/jpeg, image/webp, image/gif.",
        ),
        (
            [image(data_url(png(2, 2), "image/png")) for _ in range(4)],
            "The conversation has more than 3 images.",
        ),
    ],
    ids=["wrong-magic-bytes", "oversize", "remote-url", "svg", "too-many"],
)
def test_each_rule_is_named_and_nothing_is_echoed(
    server: Server, http: httpx.Client, parts: list[dict[str, Any]], message: str
) -> None:
    chat = post_chat(http, ask(*parts), headers=AUTH)
    assert_error(chat.response, 400, "invalid_request", "example.com", "PHN2Zz4")
    assert chat.response.json()["error"]["message"] == message
    assert server.ai.calls() == []


def test_the_issues_png_without_ihdr_is_a_400_and_the_model_is_never_called(
    server: Server, http: httpx.Client
) -> None:
    # The right signature, no header: Kimi refused it (5006) and the client
    # got a 502. Now edgechat refuses it itself.
    url = "data:image/png;base64,iVBORw0KGgoLoP4="
    for route in ("/chat", "/v1/chat/completions"):
        response = http.post(route, json=ask(text("x"), image(url)), headers=AUTH)
        assert response.status_code == 400, response.text
        assert response.json()["error"]["message"] == (
            "messages[0].content[1] is not a whole image/png image: its header is broken or "
            "cut short."
        )
    assert server.ai.calls() == []


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_header_never_reaches_the_model(
    server: Server, http: httpx.Client, name: str
) -> None:
    data, kind = BROKEN[name]
    chat = post_chat(http, ask(text("x"), image(data_url(data, kind))), headers=AUTH)
    assert_error(chat.response, 400, "invalid_request")
    assert "header is broken" in chat.response.json()["error"]["message"]
    assert server.ai.calls() == []


def test_an_image_of_absurd_size_is_refused(server: Server, http: httpx.Client) -> None:
    chat = post_chat(http, ask(text("x"), image(data_url(jpeg(20_000, 10), "image/jpeg"))),
                     headers=AUTH)  # fmt: skip
    assert_error(chat.response, 400, "invalid_request")
    assert chat.response.json()["error"]["message"] == (
        "messages[0].content[1] must be an image of 1 to 16384 pixels on each side."
    )
    assert server.ai.calls() == []


def test_an_image_for_a_model_that_cannot_see(server: Server, http: httpx.Client) -> None:
    chat = post_chat(
        http, ask(text("x"), image(data_url(png(2, 2), "image/png")), model="glm"), headers=AUTH
    )
    assert_error(chat.response, 400, "invalid_request")
    assert chat.response.json()["error"]["message"] == (
        f"Images need a model that can see; {GLM} cannot, and of this deployment's models "
        "these can: kimi."
    )
    assert server.ai.calls() == []


def test_the_fallback_chain_skips_models_that_cannot_see(
    servers: ServerPool, new_client: ClientFactory
) -> None:
    server = servers.get({"MODELS": "glm,kimi,llama", "FALLBACK_CHAIN": "kimi,glm,llama"})
    server.ai.script({"match": {"model": KIMI}, "error": "3040: Capacity temporarily exceeded"})
    chat = post_chat(
        new_client(server.url), ask(text("x"), image(data_url(png(2, 2), "image/png")))
    )
    assert_error(chat.response, 503, "model_busy")
    assert [call["model"] for call in server.ai.calls()] == [KIMI]


def test_text_alone_keeps_the_text_cap(server: Server, http: httpx.Client) -> None:
    body = ask(text("y" * 70_000))
    response = http.post("/chat", json=body, headers=AUTH)
    assert_error(response, 413, "payload_too_large")
