"""The answering model's whole stream, kept while it goes by: what the
response cache stores and the output check reads."""

from __future__ import annotations

__all__ = ["MAX_RECORDED_BYTES", "Recording"]

# The most of a stream kept; an answer longer than this is not stored.
MAX_RECORDED_BYTES = 1 << 20


class Recording:
    __slots__ = ("_parts", "_size")

    def __init__(self, wanted: bool) -> None:
        # None: not kept (not wanted, or longer than MAX_RECORDED_BYTES).
        self._parts: list[bytes] | None = [] if wanted else None
        self._size = 0

    def add(self, data: bytes) -> None:
        if self._parts is None:
            return
        self._size += len(data)
        if self._size > MAX_RECORDED_BYTES:
            self._parts = None
        else:
            self._parts.append(data)

    def restart(self) -> None:
        """What a failed model sent is no part of the answer to keep."""
        if self._parts is not None:
            self._parts = []
        self._size = 0

    def body(self) -> bytes | None:
        """Everything kept so far, or None when it is not kept."""
        return None if self._parts is None else b"".join(self._parts)
