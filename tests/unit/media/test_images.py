from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgechat.core.errors import BadRequest
from edgechat.media.images import MAX_IMAGE_SIDE, ImagePart, _Base64, check_image_part
from tests.kit.images import BROKEN, data_url, gif, jpeg, png, webp

WHERE = "messages[0].content[1]"


def part(data: bytes, kind: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": data_url(data, kind)}}


def check(data: bytes, kind: str) -> ImagePart:
    return check_image_part(part(data, kind), WHERE, 4 << 20)


def refused(data: bytes, kind: str) -> str:
    with pytest.raises(BadRequest) as caught:
        check(data, kind)
    return caught.value.to_json()["error"]["message"]


@pytest.mark.parametrize(
    ("data", "kind", "size"),
    [
        (png(64, 48), "image/png", (64, 48)),
        (jpeg(1568, 1176), "image/jpeg", (1568, 1176)),
        # A camera's EXIF and thumbnail before the frame header: 200 KB of APP1.
        (jpeg(4032, 3024, exif_bytes=200_000), "image/jpeg", (4032, 3024)),
        (jpeg(7, 9, frame=0xC2), "image/jpeg", (7, 9)),  # progressive
        (webp(300, 200), "image/webp", (300, 200)),
        (webp(301, 201, "VP8L"), "image/webp", (301, 201)),
        (webp(302, 202, "VP8 "), "image/webp", (302, 202)),
        (gif(10, 20), "image/gif", (10, 20)),
        (gif(10, 20, colours=256), "image/gif", (10, 20)),
        (png(MAX_IMAGE_SIDE, 1), "image/png", (MAX_IMAGE_SIDE, 1)),
    ],
)
def test_a_whole_header_gives_the_size_and_the_part_is_unchanged(
    data: bytes, kind: str, size: tuple[int, int]
) -> None:
    checked = check(data, kind)
    assert (checked.kind, checked.width, checked.height) == (kind, *size)
    # What the model is sent is the part as it came, nothing added.
    assert checked == part(data, kind)
    assert json.loads(json.dumps(checked)) == part(data, kind)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_the_right_first_bytes_and_a_broken_header_are_refused(name: str) -> None:
    data, kind = BROKEN[name]
    assert refused(data, kind) == (
        f"{WHERE} is not a whole {kind} image: its header is broken or cut short."
    )


def test_the_issues_png_is_refused() -> None:
    url = "data:image/png;base64,iVBORw0KGgoLoP4="
    with pytest.raises(BadRequest) as caught:
        check_image_part({"type": "image_url", "image_url": {"url": url}}, WHERE, 1 << 20)
    assert "header is broken" in caught.value.to_json()["error"]["message"]


def test_a_jpeg_whose_segments_never_reach_a_frame_header_is_refused() -> None:
    comments = b"".join(b"\xff\xfe\x00\x03x" for _ in range(300))
    assert "header is broken" in refused(b"\xff\xd8" + comments + jpeg(8, 8)[2:], "image/jpeg")


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (png(0, 4), "image/png"),
        (png(MAX_IMAGE_SIDE + 1, 1), "image/png"),
        (jpeg(8, 0), "image/jpeg"),  # height 0: "defined later" (DNL), which models do not read
        (jpeg(MAX_IMAGE_SIDE + 1, 8), "image/jpeg"),
        (webp(MAX_IMAGE_SIDE + 1, 8), "image/webp"),
        (webp(8, 1 << 24), "image/webp"),
        (gif(0, 0), "image/gif"),
        (gif(65535, 1), "image/gif"),
    ],
)
def test_absurd_dimensions_are_refused(data: bytes, kind: str) -> None:
    assert refused(data, kind) == (
        f"{WHERE} must be an image of 1 to {MAX_IMAGE_SIDE} pixels on each side."
    )


def test_the_declared_type_must_be_the_bytes_type() -> None:
    assert refused(png(4, 4), "image/jpeg") == (
        f"{WHERE} is not a image/jpeg image: its bytes say otherwise."
    )
    assert refused(b"RIFF\x00\x00\x00\x00WAVE", "image/webp") == (
        f"{WHERE} is not a image/webp image: its bytes say otherwise."
    )


@given(data=st.binary(max_size=40), offset=st.integers(-2, 45), length=st.integers(0, 45))
def test_any_slice_of_base64_decodes_alone(data: bytes, offset: int, length: int) -> None:
    source = _Base64(base64.b64encode(data).decode(), len(data))
    expected = data[offset : offset + length] if offset >= 0 else b""
    assert source.read(offset, length) == expected
