"""Reading the MP3s the emulator's text-to-speech makes: the ID3v2.3 tag
(the text it spoke, its language) and the MPEG audio frames after it, each
header checked and walked by its own frame length (ISO/IEC 11172-3, 2.4.2.3)."""

from __future__ import annotations

from dataclasses import dataclass

# MPEG-1 Layer III bit rates (kbit/s) by index, and sampling rates (Hz).
_BITRATES = (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320)
_RATES = (44_100, 48_000, 32_000)


@dataclass(frozen=True)
class Mp3:
    text: str
    lang: str
    frames: int
    seconds: float


def read_mp3(data: bytes) -> Mp3:
    assert data[:3] == b"ID3", "no ID3v2 tag"
    size = (data[6] << 21) | (data[7] << 14) | (data[8] << 7) | data[9]
    tags: dict[str, bytes] = {}
    at = 10
    while at < 10 + size:
        name, length = data[at : at + 4].decode(), int.from_bytes(data[at + 4 : at + 8])
        tags[name] = data[at + 10 : at + 10 + length]
        at += 10 + length
    description, _, text = tags["TXXX"][1:].partition(b"\0")
    assert description == b"edgechat-emulator"
    frames, samples, rate = 0, 0, 0
    while at < len(data):
        header = int.from_bytes(data[at : at + 4])
        assert header >> 21 == 0x7FF, f"no frame sync at byte {at}"
        assert (header >> 19) & 3 == 3, "not MPEG-1"
        assert (header >> 17) & 3 == 1, "not Layer III"
        bitrate = _BITRATES[(header >> 12) & 15] * 1000
        rate = _RATES[(header >> 10) & 3]
        length = 144 * bitrate // rate + ((header >> 9) & 1)
        frames, samples, at = frames + 1, samples + 1152, at + length
    assert at == len(data), "the last frame is cut short"
    return Mp3(text.decode(), tags["TLAN"][1:].decode(), frames, samples / rate if rate else 0.0)


def wav(seconds: float, rate: int = 16_000) -> bytes:
    """A mono 16-bit PCM WAV of silence, ``seconds`` long (RIFF, "fmt ", "data")."""
    samples = bytes(2 * round(seconds * rate))
    fmt = (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + rate.to_bytes(4, "little")
    fmt += (2 * rate).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
    chunks = b"fmt " + len(fmt).to_bytes(4, "little") + fmt
    chunks += b"data" + len(samples).to_bytes(4, "little") + samples
    return b"RIFF" + (4 + len(chunks)).to_bytes(4, "little") + b"WAVE" + chunks


def emulated_transcript(data: bytes, kind: str) -> str:
    """What the emulator's Whisper says of these bytes."""
    import hashlib

    digest = hashlib.sha256(data).hexdigest()[:8]
    return f"Emulated transcript of {len(data)} bytes of {kind} audio, sha-256 {digest}."
