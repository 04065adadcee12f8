"""Every API body's field names: what each body may hold, and together the
names a refusal may quote (``json_body`` names only these, so an error never
repeats a key the client made up).
"""

from __future__ import annotations

from edgechat.core.requests import PARAMS

__all__ = [
    "CHAT_FIELDS",
    "EMBEDDING_FIELDS",
    "FIELD_NAMES",
    "OPENAI_FIELDS",
    "OPENAI_MESSAGE_FIELDS",
    "OPENAI_MESSAGE_FIELD_NAMES",
    "RESPONSES_FIELDS",
]


# POST /chat.
CHAT_FIELDS = (
    "messages",
    "model",
    "temperature",
    "max_tokens",
    "reasoning",
    "preset",
    "conversation",
    "knowledge",
)


# POST /v1/chat/completions: the body, and each message.
OPENAI_FIELDS = (
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    *(param.name for param in PARAMS),
    "n",
    "user",
    # edgechat's own: {"compare_with": [models]} (apis.openai_body).
    "edgechat",
    # Accepted and not acted on: they change nothing about the answer.
    "parallel_tool_calls",
    "store",
    "metadata",
)


OPENAI_MESSAGE_FIELD_NAMES = (
    "role",
    "content",
    "name",
    "tool_calls",
    "tool_call_id",
    "reasoning_content",
)


OPENAI_MESSAGE_FIELDS = frozenset(OPENAI_MESSAGE_FIELD_NAMES)


# POST /v1/responses.
RESPONSES_FIELDS = (
    "model",
    "input",
    "instructions",
    "stream",
    "max_output_tokens",
    "temperature",
    "top_p",
    "tools",
    "tool_choice",
    "text",
    "reasoning",
    "user",
    "store",
    "metadata",
    "parallel_tool_calls",
    # edgechat's own: {"knowledge": "<base id>"} (apis.responses_body).
    "edgechat",
    # Accepted and not acted on: extra output (logprobs, encrypted
    # reasoning) and context truncation are the hosted service's.
    "include",
    "truncation",
    "previous_response_id",
)


# POST /v1/embeddings.
EMBEDDING_FIELDS = ("model", "input", "encoding_format", "dimensions", "user")


# Every field name the validators above know, in any position: a refusal
# for a lone surrogate names its path through these and stops at any other
# key (a JSON schema's own properties), so it never repeats client text.
FIELD_NAMES = frozenset(
    (
        *CHAT_FIELDS,
        *OPENAI_FIELDS,
        *OPENAI_MESSAGE_FIELDS,
        *EMBEDDING_FIELDS,
        *RESPONSES_FIELDS,
        "call_id",
        "name",
        "output",
        "format",
        "schema",
        "effort",
        "type",
        "text",
        "image_url",
        "url",
        "file",
        "filename",
        "file_data",
        "detail",
        "id",
        "function",
        "arguments",
        "description",
        "parameters",
        "include_usage",
        "json_schema",
        "compare_with",
        # POST /api/comparisons and POST /api/feedback (feedback.comparisons,
        # feedback.store), read by the same JSON rules.
        *("models", "blind", "comparison", "choice", "node", "rating", "tags"),
    )
)
