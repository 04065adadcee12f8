from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgechat.core.errors import BadRequest, PayloadTooLarge
from edgechat.core.json_body import MAX_SAFE_INTEGER, loads, nested_deeper_than

NAMES = frozenset(("messages", "content", "tools", "function", "description", "parameters"))
CONTENT = "messages[0].content"
TOO_DEEP = "The request body nests arrays and objects deeper than 32 levels."
OUT_OF_RANGE = (
    "The request body has a number out of range: integers must be within 2^53 - 1 of zero, "
    "and decimals finite."
)


def read(body: bytes | str, *, max_depth: int = 32, max_text_bytes: int = 1 << 20) -> Any:
    raw = body.encode() if isinstance(body, str) else body
    return loads(raw, max_depth=max_depth, max_text_bytes=max_text_bytes, names=NAMES)


def refused(body: bytes | str, **kwargs: int) -> str:
    with pytest.raises(BadRequest) as caught:
        read(body, **kwargs)
    assert caught.value.status == 400
    return caught.value.to_json()["error"]["message"]


def nested(depth: int, inner: str = "1") -> str:
    """``depth`` levels, arrays and objects in turn, around ``inner``."""
    text = inner
    for level in range(depth):
        text = f"[{text}]" if level % 2 else f'{{"a": {text}}}'
    return text


def depth_of(value: Any) -> int:
    """The nesting of a parsed value, the way a recursive reader counts it."""
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


# --- nesting ---------------------------------------------------------------------


def test_nesting_up_to_the_limit_is_read() -> None:
    assert depth_of(read(nested(32))) == 32
    assert depth_of(read("[" * 32 + "]" * 32)) == 32


@pytest.mark.parametrize(
    "body",
    [
        nested(33),
        "[" * 33 + "]" * 33,
        "{" * 8000,
        "[" * 8000,  # the body that ended the isolate
        '{"messages": ' + "[" * 40,  # never closed
        "[" * 20 + "]" * 20 + "[" * 33,  # deep after shallow
        "[" * 30 + "}" * 2 + "[" * 40,  # closers of the wrong kind still close
    ],
)
def test_deeper_than_the_limit_is_refused_before_parsing(body: str) -> None:
    assert refused(body) == TOO_DEEP


def test_the_limit_is_the_callers() -> None:
    assert refused(nested(5), max_depth=4) == (
        "The request body nests arrays and objects deeper than 4 levels."
    )
    assert read(nested(4), max_depth=4)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 5000,
        "{[" * 3000,
        '\\"' + "[" * 100,  # an escaped quote does not end the string
        "\\\\" + "[" * 100,
        "data:image/png;base64," + "[" * 100,
    ],
)
def test_brackets_inside_strings_do_not_count(text: str) -> None:
    body = json.dumps({"messages": [{"content": text}]})
    assert read(body)["messages"][0]["content"] == text


def test_brackets_after_an_escaped_backslash_count() -> None:
    # "\\" ends with an escaped backslash: the quote after it closes the string.
    body = '["a\\\\", ' + "[" * 40 + "]" * 40 + "]"
    assert refused(body) == TOO_DEEP


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,AAAA",
        "data:image/png;base64,AA\\/A",  # an encoder that escapes slashes
        'data:\\"',  # not stepped over whole: its first quote is escaped
        "data:\\\\",  # nor this: its backslash escapes a backslash
        "data:\\u005b",
    ],
)
def test_nesting_after_a_data_url_is_counted(url: str) -> None:
    deep = "[" * 40 + "]" * 40
    assert refused(f'{{"url": "{url}", "x": {deep}}}') == TOO_DEEP
    assert read(f'{{"url": "{url}", "x": [[1]]}}')["x"] == [[1]]


def test_a_data_url_in_a_key_or_an_escaped_one_is_still_read_right() -> None:
    assert read('{"data:x": [[1]]}') == {"data:x": [[1]]}
    body = '["x\\"data:", ' + "[" * 40 + "]" * 40 + "]"
    assert refused(body) == TOO_DEEP


@settings(max_examples=300)
@given(
    value=st.recursive(
        st.none()
        | st.integers(-10, 10)
        | st.text(alphabet='[]{}"\\/data:imgpn;b64,\u00e9\U0001f600 ', max_size=12),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.text(alphabet='[]{}"\\ad:', max_size=4), inner, max_size=3)
        ),
        max_leaves=30,
    ),
    limit=st.integers(1, 12),
    ascii_only=st.booleans(),
)
def test_the_count_is_the_nesting_a_parser_sees(value: Any, limit: int, ascii_only: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert nested_deeper_than(text.encode(), limit) is (depth_of(value) > limit)


def test_text_beyond_the_cap_besides_data_urls_is_413() -> None:
    image = '"data:image/png;base64,' + "A" * 4000 + '"'
    body = f'{{"a": [{image}, {image}], "b": "{"x" * 100}"}}'
    assert read(body, max_text_bytes=200)
    with pytest.raises(PayloadTooLarge) as caught:
        read(f'{{"a": [{image}], "b": "{"x" * 300}"}}', max_text_bytes=200)
    assert caught.value.to_json()["error"]["message"] == (
        "The request body is larger than 200 bytes."
    )


# --- numbers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "number",
    [
        str(MAX_SAFE_INTEGER),
        str(-MAX_SAFE_INTEGER),
        "1e308",
        "-1.7976931348623157e308",
        "1e-400",  # underflows to 0.0: a value, not an overflow
        "0.12345678901234567890123",
        "1234567890123456.5",
    ],
)
def test_numbers_javascript_holds_are_read(number: str) -> None:
    assert read(f'{{"n": {number}}}')["n"] == json.loads(number)


@pytest.mark.parametrize(
    "number",
    [
        str(MAX_SAFE_INTEGER + 1),
        str(-MAX_SAFE_INTEGER - 1),
        str(2**63),
        "9" * 5000,
        "1e309",
        "-1e400",
        "9" * 400 + ".0",
    ],
)
def test_numbers_javascript_cannot_hold_are_refused(number: str) -> None:
    assert refused(f'{{"x": [1, {{"n": {number}}}]}}') == OUT_OF_RANGE


def test_digits_in_strings_are_text() -> None:
    assert read('{"n": "12345678901234567890e999"}') == {"n": "12345678901234567890e999"}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_constants_that_are_not_json_are_refused(constant: str) -> None:
    assert refused(f'{{"n": {constant}}}') == "The request body is not valid JSON."


def test_bytes_that_are_not_utf8_are_refused() -> None:
    assert refused(b'{"a": "\xff"}') == "The request body is not valid UTF-8."


# --- lone surrogates -------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('{"messages": [{"content": "a\\ud800"}]}', f"{CONTENT} is not valid Unicode text."),
        ('{"messages": [{"content": "\\uDFFF"}]}', f"{CONTENT} is not valid Unicode text."),
        (
            '{"tools": [{"function": {"description": "\\udbff!"}}]}',
            "tools[0].function.description is not valid Unicode text.",
        ),
        # Under a key edgechat does not know, the path stops: no client text in it.
        (
            '{"tools": [{"function": {"parameters": {"SECRET": ["\\ud83d"]}}}]}',
            "tools[0].function.parameters holds text that is not valid Unicode.",
        ),
        (
            '{"tools": [{"function": {"\\ud800": 1}}]}',
            "tools[0].function has a field name that is not valid Unicode.",
        ),
        ('{"\\ud800": 1}', "The request body has a field name that is not valid Unicode."),
        ('["\\ud800"]', "The request body holds text that is not valid Unicode."),
        ('"\\ude00\\ud83d"', "The request body holds text that is not valid Unicode."),
    ],
)
def test_a_lone_surrogate_is_refused_where_it_is(body: str, message: str) -> None:
    assert refused(body) == message
    assert "SECRET" not in message


@pytest.mark.parametrize(
    "body",
    [
        '{"messages": [{"content": "\\ud83d\\ude00"}]}',  # a pair is one character
        '{"messages": [{"content": "\\\\ud800"}]}',  # an escaped backslash, then text
        '{"messages": [{"content": "\\u00e9 \\u4f60"}]}',
    ],
)
def test_paired_and_look_alike_escapes_are_text(body: str) -> None:
    assert read(body) == json.loads(body)
