"""What a question is, once validated: the limits it was held to, its
messages, and the model call it asks for. ``apis``' body rules make these from
request bodies; everything after it reads them. Nothing here parses or checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from edgechat.core.models import EmbeddingModel, Model, WireFormat

__all__ = [
    "MAX_COMPARED",
    "MIN_COMPARED",
    "PARAMS",
    "ChatRequest",
    "EmbeddingsRequest",
    "Limits",
    "Message",
    "OpenAIRequest",
    "Param",
    "Role",
    "Route",
    "Slot",
]

Role = Literal["system", "user", "assistant", "tool"]

_NOTHING: Mapping[str, Any] = MappingProxyType({})

# Deeper JSON than this is refused before it is parsed; the ceiling keeps an
# operator's MAX_JSON_DEPTH far below what the interpreter's stack takes.
JSON_DEPTH_CEILING = 64


@dataclass(frozen=True, slots=True)
class Limits:
    """The request limits, each a ``[vars]`` entry of its upper-case name
    (``config.settings``) and a field of ``GET /api/limits`` (``to_json``)."""

    max_body_bytes: int = 65_536
    max_messages: int = 50
    max_message_chars: int = 8_000
    max_total_chars: int = 32_000
    default_output_tokens: int = 1_024
    max_output_tokens: int = 4_096
    # Images per request (the whole conversation) and each one's decoded size.
    max_images: int = 4
    max_image_bytes: int = 3 << 20
    # Nesting of arrays and objects in a JSON body.
    max_json_depth: int = 32
    # Documents per request (the whole conversation), each one's decoded
    # size, and their tokens together once converted.
    max_documents: int = 2
    max_document_bytes: int = 2 << 20
    max_document_tokens: int = 32_000
    # Characters one request may have read aloud (/api/speech).
    max_speech_chars: int = 2_000
    # Audio to transcribe: its bytes, and (read from a WAV's header, and
    # where the page stops recording) its seconds.
    max_audio_bytes: int = 4 << 20
    max_audio_seconds: int = 120
    # Each user's conversations on the server (history.store, the DB binding):
    # how many live ones, their stored JSON together, one conversation's
    # body (PUT /api/conversations/<id>), live share links, a link's days.
    max_conversations: int = 1_000
    max_history_bytes: int = 50 << 20
    max_conversation_bytes: int = 1 << 20
    # A batch of writes (POST /api/conversations): its body and how many.
    max_batch_bytes: int = 4 << 20
    max_batch_conversations: int = 50
    max_shares: int = 100
    max_share_days: int = 365
    # Each user's images on the server (files.py, the FILES bucket): one
    # image's bytes, all of theirs together and how many (a share link's
    # copies count as theirs), and the most one share link copies (each
    # copy is two R2 operations of the request that makes the link).
    max_file_bytes: int = 3 << 20
    max_files_bytes: int = 200 << 20
    max_files: int = 2_000
    max_share_images: int = 20
    # A rating's text (POST /api/feedback), in characters.
    max_feedback_chars: int = 500
    # Each user's knowledge bases (knowledge.store): how many bases, their
    # documents and chunks together, the documents' bytes together, and one
    # upload's document (decoded).
    max_knowledge_bases: int = 20
    max_knowledge_documents: int = 200
    max_knowledge_chunks: int = 10_000
    max_knowledge_bytes: int = 100 << 20
    max_knowledge_document_bytes: int = 4 << 20

    def __post_init__(self) -> None:
        for name, value in self.to_json().items():
            if type(value) is not int or value < 1:
                raise ValueError(f"Limits.{name} must be a positive integer")
        if self.default_output_tokens > self.max_output_tokens:
            raise ValueError("Limits.default_output_tokens must not exceed max_output_tokens")
        if self.max_json_depth > JSON_DEPTH_CEILING:
            raise ValueError(f"Limits.max_json_depth must be at most {JSON_DEPTH_CEILING}")

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


class Param(NamedTuple):
    """A generation parameter of the OpenAI API that edgechat passes on as it is."""

    name: str
    # Whether Llama's native format reads it (else only GLM and Kimi do).
    native: bool
    # Whether the providers' OpenAI-compatible APIs are sent it.
    providers: bool


# The one list of them; apis.openai_body checks each one's value.
PARAMS = (
    Param("top_p", native=True, providers=True),
    Param("stop", native=False, providers=True),
    Param("seed", native=True, providers=True),
    Param("response_format", native=False, providers=True),
    Param("tools", native=False, providers=True),
    Param("tool_choice", native=False, providers=True),
    Param("reasoning_effort", native=False, providers=False),
    Param("frequency_penalty", native=True, providers=True),
    Param("presence_penalty", native=True, providers=True),
)
_OPENAI_ONLY = tuple(p.name for p in PARAMS if not p.native)


@dataclass(frozen=True, slots=True)
class DocumentFile:
    """A checked file part: its name, type and bytes, and where it was."""

    where: str
    name: str
    kind: str
    data: bytes
    url_chars: int


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    # What else the OpenAI API's message carries, sent to the model as it is:
    # ``tool_calls`` (assistant), ``tool_call_id`` (tool), ``name``.
    extra: Mapping[str, Any] = field(default=_NOTHING)
    # A user message with images: its text and image parts in their order
    # (``content`` is then the text alone, for limits, logs and moderation).
    parts: tuple[dict[str, Any], ...] = ()
    # An assistant turn's thinking (``reasoning_content``), as the model sent it.
    reasoning: str = ""
    # A user message's documents as sent (``media.documents``), and once
    # converted their text, which the model reads before the message's own.
    documents: tuple[DocumentFile, ...] = ()
    attached: str = ""

    def wire(self, thinks: bool = False) -> dict[str, Any]:
        """The message as a model takes it; its thinking only for a model
        that ``thinks`` (the others would refuse the field)."""
        content: Any = list(self.parts) if self.parts else self.content
        if self.attached:
            if self.parts:
                content = [{"type": "text", "text": self.attached}, *content]
            else:
                content = f"{self.attached}\n\n{self.content}".rstrip()
        wired = {"role": self.role, "content": content, **self.extra}
        if thinks and self.reasoning:
            wired["reasoning_content"] = self.reasoning
        return wired


@dataclass(frozen=True, slots=True)
class Route:
    """Why ``auto`` chose the model it did (``answer.routing``): the
    chosen model's alias and the rule's reason."""

    model: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"model": self.model, "reason": self.reason}


# How many models one comparison asks.
MIN_COMPARED = 2
MAX_COMPARED = 3


@dataclass(frozen=True, slots=True)
class Slot:
    """One answer of a comparison (``feedback.comparisons``): the
    comparison's id and the slot's number; ``named``: the model the body
    named (None: none), which must be the slot's; ``blind``: its model is
    hidden until the vote (known once the slot is claimed)."""

    comparison: str
    index: int
    named: Model | None = None
    blind: bool = False


@dataclass(frozen=True, slots=True)
class ChatRequest:
    messages: tuple[Message, ...]
    model: Model
    temperature: float | None
    max_tokens: int
    reasoning: bool | None
    # The OpenAI API's further generation parameters (``PARAMS``),
    # validated, sent to the model as they are.
    params: Mapping[str, Any] = field(default=_NOTHING)
    # /chat conversations go under the operator's SYSTEM_PROMPT; OpenAI API
    # callers bring their own system messages.
    server_prompt: bool = True
    # A preset's system prompt, in place of the operator's SYSTEM_PROMPT.
    preset_prompt: str | None = None
    # The conversation's name as the client gave it (/chat's conversation,
    # the OpenAI API's user), for Workers AI's session affinity (affinity.py).
    session: str | None = None
    # Where the question named ``auto``: the model routing chose, and why.
    route: Route | None = None
    # A comparison's answer: its model answers or none does (no fallback, no
    # cached answer), so that the comparison measures that model.
    slot: Slot | None = None
    # Whether the semantic cache may answer it (``answer.similar``): /chat's
    # questions, and the OpenAI API's that ask for it.
    semantic_cache: bool = False
    # The knowledge base the question is asked of (/chat's knowledge, the
    # OpenAI API's edgechat.knowledge): its passages are attached once
    # retrieved (knowledge.retrieve).
    knowledge: str | None = None

    def unfit(self, model: Model) -> str | None:
        """Why ``model`` cannot take this request (a parameter it does not
        read, images it cannot see), or None. Fallback skips such models;
        asking for one is a 400."""
        if not model.vision and any(m.parts for m in self.messages):
            return "images"
        if model.wire_format is WireFormat.NATIVE:
            for name in _OPENAI_ONLY:
                if name in self.params:
                    return name
        if not model.tools and ("tools" in self.params or self.has_tool_turns()):
            return "tools"
        return None

    def has_tool_turns(self) -> bool:
        return any(m.role == "tool" or "tool_calls" in m.extra for m in self.messages)

    def inputs(self, model: Model, system_prompt: str) -> dict[str, Any]:
        """What the binding is sent for ``model`` (a fallback switches shape
        with the model): the conversation as chat messages, under
        ``system_prompt`` for ``/chat``, and the generation parameters."""
        prompt = self.preset_prompt or system_prompt
        messages = [{"role": "system", "content": prompt}] if self.server_prompt else []
        messages += [m.wire(model.thinks) for m in self.messages]
        inputs: dict[str, Any] = {"messages": messages, "stream": True}
        if model.wire_format is WireFormat.OPENAI:
            inputs["max_completion_tokens"] = self.max_tokens
            if self.reasoning is False:
                inputs["chat_template_kwargs"] = {"enable_thinking": False}
        else:
            inputs["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            inputs["temperature"] = self.temperature
        # Checked against the model (``unfit``); a fallback model that could
        # not read one of them is skipped.
        inputs.update(self.params)
        return inputs


@dataclass(frozen=True, slots=True)
class OpenAIRequest:
    """A ``/v1/chat/completions`` body: the chat request and how to answer it."""

    chat: ChatRequest
    stream: bool
    include_usage: bool
    # edgechat's extension ``{"edgechat": {"compare_with": [...]}}``: the
    # models that answer too, each a choice of one completion beside
    # ``chat.model``'s (a comparison, ``feedback.comparisons``).
    compare_with: tuple[Model, ...] = ()


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    """A ``/v1/embeddings`` body: the texts to embed and how to encode the vectors."""

    model: EmbeddingModel
    texts: tuple[str, ...]
    # "float" (JSON numbers) or "base64" (little-endian float32 bytes).
    encoding_format: str
