"""Which conversation a request belongs to, told to Workers AI so that its
prompt cache can serve the conversation's history.

Workers AI reuses a prompt's computed prefix only on the model instance that
holds it; requests that carry the same ``x-session-affinity`` go to the same
instance, and the tokens read from the cache are billed at the model's
cached rate. The binding takes the header in ``AI.run``'s options, as
``extraHeaders``
(https://developers.cloudflare.com/workers-ai/features/prompt-caching/,
"Workers AI binding").

A conversation is named by its client - ``/chat``'s ``conversation`` (the
page's conversation id), the OpenAI API's ``user`` - or else by its first
messages (the system prompt and the first question stay the same for the
whole conversation). The name is hashed with the user's id: one user's name
never lands in another's session, and nothing a client wrote is sent on.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from edgechat.core.requests import ChatRequest

__all__ = ["HEADER", "MAX_CONVERSATION_CHARS", "options_with", "session_of"]

HEADER = "x-session-affinity"
# The longest conversation name a client may send (``conversation``, ``user``).
MAX_CONVERSATION_CHARS = 128


def session_of(user_id: str, request: ChatRequest) -> str:
    """The affinity value of ``request``'s conversation: ``ec-`` and 32 hex
    digits of a SHA-256 over the user and the conversation's name, or its
    messages up to the first user message."""
    digest = hashlib.sha256(user_id.encode())
    if request.session is not None:
        digest.update(b"\0name\0" + request.session.encode("utf-8", "surrogatepass"))
    else:
        digest.update(b"\0first\0")
        for message in request.messages:
            head = [message.role, message.content]
            digest.update(json.dumps(head, ensure_ascii=False).encode("utf-8", "surrogatepass"))
            if message.role == "user":
                break
    return "ec-" + digest.hexdigest()[:32]


def options_with(options: dict[str, Any], session: str) -> dict[str, Any]:
    """``AI.run``'s ``options`` with the session's affinity header added."""
    headers = {**options.get("extraHeaders", {}), HEADER: session}
    return {**options, "extraHeaders": headers}
