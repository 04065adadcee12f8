"""The conversation's name for Workers AI's prompt cache (``affinity``)."""

from __future__ import annotations

import re

from edgechat.answer.affinity import HEADER, options_with, session_of
from edgechat.core.models import CATALOG
from edgechat.core.requests import ChatRequest, Message

GLM = CATALOG[0]


def chat(*turns: tuple[str, str], session: str | None = None) -> ChatRequest:
    messages = tuple(Message(role, content) for role, content in turns)  # type: ignore[arg-type]
    return ChatRequest(messages, GLM, None, 256, None, session=session)


FIRST = (("user", "What is prefix caching?"),)
LATER = (*FIRST, ("assistant", "Reusing a prompt's start."), ("user", "Why?"))


def test_a_named_conversation_keeps_its_session_as_it_grows() -> None:
    first = session_of("key:ann", chat(*FIRST, session="c-1"))
    assert re.fullmatch(r"ec-[0-9a-f]{32}", first)
    assert session_of("key:ann", chat(*LATER, session="c-1")) == first
    assert session_of("key:ann", chat(*LATER, session="c-2")) != first


def test_an_unnamed_conversation_is_named_by_its_first_messages() -> None:
    first = session_of("key:ann", chat(*FIRST))
    assert session_of("key:ann", chat(*LATER)) == first
    system = (("system", "Be brief."), *FIRST)
    assert session_of("key:ann", chat(*system)) != first
    assert session_of("key:ann", chat(("user", "Another question"))) != first
    # A name and the same text as first messages are not the same session.
    assert session_of("key:ann", chat(*FIRST, session="What is prefix caching?")) != first


def test_the_same_name_from_two_users_is_two_sessions() -> None:
    assert session_of("key:ann", chat(*FIRST, session="c-1")) != session_of(
        "key:bo", chat(*FIRST, session="c-1")
    )
    assert session_of("key:ann", chat(*FIRST)) != session_of("key:bo", chat(*FIRST))


def test_the_header_is_added_to_the_options_they_had() -> None:
    options = {"gateway": {"id": "g"}, "extraHeaders": {"x-other": "1"}}
    added = options_with(options, "ec-1")
    assert added == {"gateway": {"id": "g"}, "extraHeaders": {"x-other": "1", HEADER: "ec-1"}}
    assert options == {"gateway": {"id": "g"}, "extraHeaders": {"x-other": "1"}}
    assert options_with({}, "ec-2") == {"extraHeaders": {HEADER: "ec-2"}}
