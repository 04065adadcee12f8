"""Images in a conversation: the rules an image part must keep.

A user message may carry ``{"type": "image_url", "image_url": {"url":
"data:image/<png|jpeg|webp|gif>;base64,…"}}`` parts. Only data URLs: the
Worker never fetches a URL a client names. The declared type must be what the
image's first bytes say it is, and each image is at most ``MAX_IMAGE_BYTES``
decoded. Checking costs one regular-expression pass over the base64 text and
the decoding of its first 16 characters: the image itself is never decoded.
Every refusal names the rule and never repeats the input.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from edgechat.errors import BadRequest

__all__ = ["IMAGE_TYPES", "check_image_part", "data_url_size"]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")

_DATA_URL = re.compile(
    r"data:(image/(?:png|jpeg|webp|gif));base64,([A-Za-z0-9+/]*={0,2})", re.ASCII
)
_DETAILS = ("auto", "low", "high")


def _is(kind: str, head: bytes) -> bool:
    if kind == "image/png":
        return head.startswith(b"\x89PNG\r\n\x1a\n")
    if kind == "image/jpeg":
        return head.startswith(b"\xff\xd8\xff")
    if kind == "image/gif":
        return head.startswith((b"GIF87a", b"GIF89a"))
    return head.startswith(b"RIFF") and head[8:12] == b"WEBP"


def data_url_size(limit_bytes: int) -> int:
    """The length of the longest data URL an image of ``limit_bytes`` takes."""
    return len("data:image/webp;base64,") + 4 * -(-limit_bytes // 3)


def check_image_part(part: Any, where: str, max_image_bytes: int) -> dict[str, Any]:
    """An ``image_url`` part as the models read it, or ``BadRequest``."""
    image = part.get("image_url") if type(part) is dict else None
    if type(image) is not dict or not part.keys() <= {"type", "image_url"}:
        raise BadRequest(
            public=f'{where} must be {{"type": "image_url", "image_url": {{"url": "data:…"}}}}.'
        )
    url = image.get("url")
    detail = image.get("detail")
    if not image.keys() <= {"url", "detail"} or (detail is not None and detail not in _DETAILS):
        raise BadRequest(
            public=f"{where}.image_url takes url and detail ({', '.join(_DETAILS)}) only."
        )
    if type(url) is not str or not url.startswith("data:"):
        raise BadRequest(
            public=f"{where}.image_url.url must be a data: URL; edgechat never fetches an image "
            "from a URL."
        )
    match = _DATA_URL.fullmatch(url)
    if match is None or len(match.group(2)) % 4:
        raise BadRequest(
            public=f"{where}.image_url.url must be data:<type>;base64,<data> with a type of "
            f"{', '.join(IMAGE_TYPES)}."
        )
    kind, data = match.groups()
    size = len(data) * 3 // 4 - data.count("=")
    if size > max_image_bytes:
        raise BadRequest(public=f"{where} is an image larger than {max_image_bytes} bytes.")
    try:
        head = base64.b64decode(data[:16])
    except (binascii.Error, ValueError):
        head = b""
    if not _is(kind, head):
        raise BadRequest(public=f"{where} is not a {kind} image: its bytes say otherwise.")
    return {"type": "image_url", "image_url": dict(image)}
