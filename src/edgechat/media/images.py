"""Images in a conversation: the rules an image part must keep.

A user message may carry ``{"type": "image_url", "image_url": {"url":
"data:image/<png|jpeg|webp|gif>;base64,…"}}`` parts. Only data URLs: the
Worker never fetches a URL a client names. The declared type must be what the
image's first bytes say it is, its header must be whole (PNG's IHDR, JPEG's
frame header, WebP's VP8/VP8L/VP8X, GIF's logical screen), it must be 1 to
``MAX_IMAGE_SIDE`` pixels on each side, and at most ``MAX_IMAGE_BYTES``
decoded. A model given a broken header refuses the call (binding code 5006);
edgechat refuses it first, with a rule the client can read. Checking costs
one regular-expression pass over the base64 text and the decoding of the few
slices the header takes (for a JPEG, 4 bytes per segment before its frame
header, however long they are): the image itself is never decoded
(``bench/json_body.py`` measures both). Every refusal names the rule and
never repeats the input.
"""

from __future__ import annotations

import base64
import binascii
import re
import zlib
from typing import Any, Protocol

from edgechat.core.errors import BadRequest

__all__ = [
    "IMAGE_TYPES",
    "MAX_IMAGE_SIDE",
    "ImagePart",
    "check_image_bytes",
    "check_image_part",
    "data_url_size",
]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/webp", "image/gif")

_DATA_URL = re.compile(
    r"data:(image/(?:png|jpeg|webp|gif));base64,([A-Za-z0-9+/]*={0,2})", re.ASCII
)
_DETAILS = ("auto", "low", "high")


# Wider or taller than this is refused: no model reads such an image at its
# size (they scale to around 1,500 px), and a header claiming more is most
# likely broken or crafted.
MAX_IMAGE_SIDE = 16_384


class ImagePart(dict[str, Any]):
    """A checked ``image_url`` part: the dict is exactly what the model is
    sent; the attributes are what its header says, for later steps (a token
    estimate) and never sent."""

    __slots__ = ("height", "kind", "width")

    def __init__(self, kind: str, width: int, height: int, part: dict[str, Any]) -> None:
        super().__init__(part)
        self.kind = kind
        self.width = width
        self.height = height


class _Base64:
    """Random access to the bytes of base64 text without decoding all of it:
    4 characters are exactly 3 bytes, so any slice that starts and ends on a
    multiple of 4 decodes on its own."""

    __slots__ = ("_text", "size")

    def __init__(self, text: str, size: int) -> None:
        self._text = text
        self.size = size

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset``; fewer at the end."""
        if offset < 0 or offset >= self.size or length <= 0:
            return b""
        first = offset // 3
        last = -(-(offset + length) // 3)
        try:
            chunk = base64.b64decode(self._text[first * 4 : last * 4])
        except (binascii.Error, ValueError):
            return b""
        skip = offset - first * 3
        return chunk[skip : skip + length]


# The formats' own specifications (tools/emulator/images.mjs reads the same
# fields for the emulator's vision models):
#   PNG   https://www.w3.org/TR/png-3/ (5.2 signature, 11.2.1 IHDR)
#   JPEG  ITU T.81, B.1.1 markers, B.2.2 frame header
#   WebP  https://developers.google.com/speed/webp/docs/riff_container
#   GIF   https://www.w3.org/Graphics/GIF/spec-gif89a.txt (17, 18)
_MAGIC = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF8",
    "image/webp": b"RIFF",
}

Size = tuple[int, int]


class _Source(Protocol):
    """What a header is read from: base64 text (``_Base64``) or bytes (``_Bytes``)."""

    size: int

    def read(self, offset: int, length: int) -> bytes: ...


# Bit depths each PNG colour type allows (11.2.1, table 11.1).
_PNG_DEPTHS = {0: (1, 2, 4, 8, 16), 2: (8, 16), 3: (1, 2, 4, 8), 4: (8, 16), 6: (8, 16)}


def _png(source: _Source) -> Size | None:
    # The signature, then IHDR: length 13, type, 13 bytes of fields, CRC.
    b = source.read(8, 25)
    if len(b) < 25 or b[:8] != b"\x00\x00\x00\x0dIHDR":
        return None
    if int.from_bytes(b[21:25]) != zlib.crc32(b[4:21]):
        return None
    width, height = int.from_bytes(b[8:12]), int.from_bytes(b[12:16])
    depth, colour, compression, filtering, interlace = b[16:21]
    if depth not in _PNG_DEPTHS.get(colour, ()) or compression or filtering or interlace > 1:
        return None
    return width, height


# Segments a JPEG may have before its frame header (APPn, DQT, DHT, COM...);
# real files have a dozen at most. A walk longer than this is refused.
_JPEG_SEGMENTS = 256


def _jpeg(source: _Source) -> Size | None:
    # Marker segments from after SOI to the first SOFn; each APPn (EXIF, ICC)
    # may be up to 64 KiB, so only each segment's first 4 bytes are decoded.
    at = 2
    for _ in range(_JPEG_SEGMENTS):
        b = source.read(at, 4)
        if len(b) < 2 or b[0] != 0xFF:
            return None
        marker = b[1]
        if marker == 0xFF:  # a fill byte before the marker
            at += 1
            continue
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # TEM, RSTn: no length
            at += 2
            continue
        if marker in (0xD8, 0xD9, 0xDA) or len(b) < 4:  # SOI again, EOI or scan data first
            return None
        length = int.from_bytes(b[2:4])
        if at + 2 + length > source.size:
            return None  # cut short
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            # SOFn: precision, height, width, component count, 3 bytes per component.
            frame = source.read(at + 4, 6)
            if len(frame) < 6 or frame[5] == 0 or length != 8 + 3 * frame[5]:
                return None
            return int.from_bytes(frame[3:5]), int.from_bytes(frame[1:3])
        if length < 2:
            return None
        at += 2 + length
    return None


def _webp(source: _Source) -> Size | None:
    b = source.read(0, 30)
    if len(b) < 20:
        return None
    riff_size = int.from_bytes(b[4:8], "little")
    chunk_size = int.from_bytes(b[16:20], "little")
    # The file is as long as RIFF says, and its first chunk fits in it.
    if riff_size + 8 > source.size or 12 + chunk_size > riff_size:
        return None
    fourcc, data = b[12:16], b[20:]
    if fourcc == b"VP8 ":
        # Frame tag (bit 0 clear: a key frame), start code, 14-bit sizes.
        if len(data) < 10 or data[0] & 1 or data[3:6] != b"\x9d\x01\x2a":
            return None
        width = int.from_bytes(data[6:8], "little") & 0x3FFF
        height = int.from_bytes(data[8:10], "little") & 0x3FFF
        return width, height
    if fourcc == b"VP8L":
        # Signature, then width - 1 and height - 1 in 14 bits each, alpha, version 0.
        if len(data) < 5 or data[0] != 0x2F:
            return None
        bits = int.from_bytes(data[1:5], "little")
        if bits >> 29:
            return None
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if fourcc == b"VP8X":
        # Flags, 3 reserved bytes, canvas width - 1 and height - 1 in 24 bits each.
        if chunk_size != 10 or len(data) < 10:
            return None
        return int.from_bytes(data[4:7], "little") + 1, int.from_bytes(data[7:10], "little") + 1
    return None


def _gif(source: _Source) -> Size | None:
    # Signature and version, the logical screen (13 bytes), the global colour
    # table if it has one, then a block: extension, image or trailer.
    b = source.read(0, 13)
    if len(b) < 13 or b[3:6] not in (b"87a", b"89a"):
        return None
    packed = b[10]
    table = 3 << ((packed & 7) + 1) if packed & 0x80 else 0
    if source.read(13 + table, 1) not in (b"\x21", b"\x2c", b"\x3b"):
        return None
    return int.from_bytes(b[6:8], "little"), int.from_bytes(b[8:10], "little")


_HEADERS = {"image/png": _png, "image/jpeg": _jpeg, "image/webp": _webp, "image/gif": _gif}


def data_url_size(limit_bytes: int) -> int:
    """The length of the longest data URL an image of ``limit_bytes`` takes."""
    return len("data:image/webp;base64,") + 4 * -(-limit_bytes // 3)


def check_image_part(part: Any, where: str, max_image_bytes: int) -> ImagePart:
    """An ``image_url`` part as the models read it, or ``BadRequest``."""
    image = part.get("image_url") if type(part) is dict else None
    if type(image) is not dict or not part.keys() <= {"type", "image_url"}:
        raise BadRequest(
            public=f'{where} must be {{"type": "image_url", "image_url": {{"url": "data:..."}}}}.'
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
    width, height = _dimensions(_Base64(data, size), kind, where)
    return ImagePart(kind, width, height, {"type": "image_url", "image_url": dict(image)})


def check_image_bytes(data: bytes, kind: str, where: str) -> Size:
    """An image's own bytes (an upload, ``history.files``) held to the same
    rules as a data URL's, but its size: its width and height, or ``BadRequest``."""
    if kind not in IMAGE_TYPES:
        raise BadRequest(public=f"{where} must be one of {', '.join(IMAGE_TYPES)}.")
    return _dimensions(_Bytes(data), kind, where)


class _Bytes:
    """Bytes in hand, read as ``_Base64`` reads its text."""

    __slots__ = ("_data", "size")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.size = len(data)

    def read(self, offset: int, length: int) -> bytes:
        if offset < 0 or length <= 0:
            return b""
        return self._data[offset : offset + length]


def _dimensions(source: _Source, kind: str, where: str) -> Size:
    """What the image's header says of its size, once its first bytes
    are its type's and the header is whole; else ``BadRequest``."""
    head = source.read(0, 12)
    if not head.startswith(_MAGIC[kind]) or (kind == "image/webp" and head[8:12] != b"WEBP"):
        raise BadRequest(public=f"{where} is not a {kind} image: its bytes say otherwise.")
    dimensions = _HEADERS[kind](source)
    if dimensions is None:
        raise BadRequest(
            public=f"{where} is not a whole {kind} image: its header is broken or cut short."
        )
    width, height = dimensions
    if not (0 < width <= MAX_IMAGE_SIDE and 0 < height <= MAX_IMAGE_SIDE):
        raise BadRequest(
            public=f"{where} must be an image of 1 to {MAX_IMAGE_SIDE} pixels on each side."
        )
    return width, height
