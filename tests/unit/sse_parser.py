"""A strict Server-Sent Events parser for tests, after the WHATWG algorithm.

Lines end at CRLF, CR or LF and nowhere else; a blank line dispatches the
event. Strict on top of the standard: unknown fields, a missing ``event``
line, an unterminated last line and data without a final blank line are
assertion errors, so a framing slip in our writer cannot go unnoticed.
"""

from __future__ import annotations

import re

_LINE_END = re.compile(r"\r\n|\r|\n")


def parse_stream(data: bytes) -> tuple[list[tuple[str, str]], int]:
    """Events as (name, data) and the number of comment lines."""
    text = data.decode("utf-8")  # strict: our output must be valid UTF-8
    lines = _LINE_END.split(text)
    assert lines[-1] == "", "stream ends inside a line"
    events: list[tuple[str, str]] = []
    comments = 0
    name: str | None = None
    buffer: list[str] | None = None
    for line in lines[:-1]:
        if not line:
            if buffer is not None:
                assert name is not None, "event without an event: line"
                events.append((name, "\n".join(buffer)))
            name, buffer = None, None
            continue
        if line.startswith(":"):
            comments += 1
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            assert name is None, "two event: lines in one event"
            name = value
        elif field == "data":
            buffer = [*(buffer or []), value]
        else:
            raise AssertionError(f"unexpected SSE field {field!r}")
    assert buffer is None, "data without the closing blank line"
    return events, comments
