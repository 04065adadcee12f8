"""Tiny images for every test suite, built byte by byte: a complete PNG, and
JPEG, WebP and GIF files whose headers (what the emulator and edgechat read)
are real. ``data_url`` wraps any of them the way a client sends them."""

from __future__ import annotations

import base64
import struct
import zlib

__all__ = ["data_url", "gif", "jpeg", "png", "webp"]


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


def jpeg(width: int, height: int) -> bytes:
    """SOI, a JFIF APP0, a baseline frame header (SOF0) and EOI."""
    app0 = b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
    frame = struct.pack(">BHHB", 8, height, width, 1) + b"\x01\x11\x00"
    return b"\xff\xd8" + _segment(0xE0, app0) + _segment(0xC0, frame) + b"\xff\xd9"


def webp(width: int, height: int) -> bytes:
    """A RIFF/WEBP file with a VP8X header (the extended format)."""
    vp8x = (
        b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    )
    chunk = b"VP8X" + struct.pack("<I", len(vp8x)) + vp8x
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x00\x00\x00;"


def data_url(data: bytes, kind: str) -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"
