"""Tiny images for every test suite, built byte by byte: a complete PNG, and
JPEG, WebP and GIF files whose headers (what the emulator and edgechat read)
are real. ``data_url`` wraps any of them the way a client sends them;
``BROKEN`` are files with the right first bytes and a broken header."""

from __future__ import annotations

import base64
import struct
import zlib

__all__ = ["BROKEN", "data_url", "gif", "jpeg", "png", "webp"]


def _chunk(kind: bytes, data: bytes) -> bytes:
    body = kind + data
    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))


def png(width: int, height: int) -> bytes:
    """A valid grey 8-bit PNG of the given size (black pixels)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = bytes(height * (width + 1))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(rows))
        + _chunk(b"IEND", b"")
    )


def _segment(marker: int, data: bytes) -> bytes:
    return b"\xff" + bytes([marker]) + struct.pack(">H", len(data) + 2) + data


def jpeg(width: int, height: int, *, exif_bytes: int = 0, frame: int = 0xC0) -> bytes:
    """SOI, a JFIF APP0, ``exif_bytes`` of APP1 segments (at most 64 KiB
    each, as a camera's EXIF and thumbnail are), a frame header (SOF0, or
    ``frame``: 0xC2 is progressive) and EOI."""
    app0 = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    apps = b""
    while exif_bytes > 0:
        size = min(exif_bytes, 65_533)
        apps += _segment(0xE1, b"\xe1" * size)
        exif_bytes -= size
    header = struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + _segment(0xE0, app0) + apps + _segment(frame, header) + b"\xff\xd9"


def webp(width: int, height: int, kind: str = "VP8X") -> bytes:
    """A RIFF/WEBP file whose first chunk is ``kind``: VP8X (the extended
    format's canvas), VP8L (lossless) or "VP8 " (lossy, a key frame)."""
    if kind == "VP8X":
        data = b"\x00" * 4 + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    elif kind == "VP8L":
        bits = (width - 1) | (height - 1) << 14
        data = b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 4
    else:
        data = b"\x10\x02\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 4
    chunk = kind.encode().ljust(4) + struct.pack("<I", len(data)) + data
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def gif(width: int, height: int, *, colours: int = 0) -> bytes:
    """The logical screen, a global colour table of ``colours`` (a power of
    two, 2 to 256) if any, and the trailer."""
    if colours:
        packed = 0x80 | (colours.bit_length() - 2)
        table = bytes(3 * colours)
    else:
        packed, table = 0, b""
    return b"GIF89a" + struct.pack("<HHBBB", width, height, packed, 0, 0) + table + b";"


def data_url(data: bytes, kind: str) -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


# Right magic bytes, broken header: each is a 400 from edgechat (images.py),
# and a model given one refuses it (binding code 5006).
BROKEN: dict[str, tuple[bytes, str]] = {
    # The body: a PNG signature and three stray bytes, no IHDR.
    "png-no-ihdr": (base64.b64decode("iVBORw0KGgoLoP4="), "image/png"),
    "png-bad-crc": (png(4, 4)[:29] + b"\x00\x00\x00\x00" + png(4, 4)[33:], "image/png"),
    "png-idat-first": (png(4, 4)[:12] + b"IDAT" + png(4, 4)[16:], "image/png"),
    "jpeg-no-frame": (b"\xff\xd8" + _segment(0xE0, b"JFIF\x00") + b"\xff\xd9", "image/jpeg"),
    "jpeg-scan-first": (b"\xff\xd8" + _segment(0xDA, b"\x00" * 8) + b"\xff\xd9", "image/jpeg"),
    "jpeg-cut-in-exif": (jpeg(8, 8, exif_bytes=5000)[:3000], "image/jpeg"),
    "webp-cut-short": (webp(8, 8)[:-4], "image/webp"),
    "webp-vp8-no-start-code": (
        webp(8, 8, "VP8 ").replace(b"\x9d\x01\x2a", b"\x00" * 3),
        "image/webp",
    ),
    "webp-unknown-chunk": (webp(8, 8).replace(b"VP8X", b"ALPH"), "image/webp"),
    "gif-no-block": (gif(8, 8)[:-1], "image/gif"),
    "gif-cut-in-colour-table": (gif(8, 8, colours=256)[:100], "image/gif"),
}
