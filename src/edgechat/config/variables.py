"""Every ``[vars]`` entry and secret the Worker reads: its name, its default as
an operator writes it, and its rule. The docs' configuration reference is
rendered from ``VARIABLES`` (``docs/hooks/edgechat.py``), and a unit test
holds it to what ``Settings.from_vars`` reads and to ``Settings()``'s
defaults, so the reference stays true by construction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from edgechat.config.providers import BUILTIN
from edgechat.config.routes import DEFAULT_ROUTES, routes_json
from edgechat.config.settings import DEFAULT_SYSTEM_PROMPT

__all__ = ["VARIABLES", "Variable"]


@dataclass(frozen=True, slots=True)
class Variable:
    """One setting as an operator sees it.

    ``default`` is what acts when the variable is unset, written as an
    operator would write it (``None``: unset means none, or off). A name
    with ``<NAME>`` is a pattern: one variable per provider that
    ``PROVIDERS`` names (``ZHIPU_BASE_URL`` for ``zhipu``).
    """

    name: str
    default: str | None
    rule: str
    topic: str
    secret: bool = False

    @property
    def per_provider(self) -> bool:
        return "<NAME>" in self.name


def _builtin(index: int) -> str:
    return "; ".join(f"{name}: {entry[index]}" for name, entry in BUILTIN.items())


_MODELS = "Models and prompt"


_LIMITS = "Request limits"


_MEDIA = "Images, documents and audio"


_HISTORY = "Conversations on the server"


_FEEDBACK = "Comparisons and feedback"


_KNOWLEDGE = "Knowledge bases"


_TIME = "Deadlines"


_WHO = "Who may ask"


_BUDGET = "Budgets"


_ALERTS = "Spend alerts"


_ANSWERS = "Caching, gateway and counting"


_SHADOW = "Shadow trials"


_SAFETY = "Moderation"


_MORE = "Presets, providers and logs"


VARIABLES: tuple[Variable, ...] = (
    Variable(
        "SYSTEM_PROMPT",
        DEFAULT_SYSTEM_PROMPT,
        "the server's system prompt for /chat (not a secret, not a security control)",
        _MODELS,
    ),
    Variable(
        "MODELS",
        "glm,kimi,llama",
        "the models clients may ask for (aliases or ids); auto lets AUTO_ROUTES choose",
        _MODELS,
    ),
    Variable("DEFAULT_MODEL", "glm", "used when a request names none; one of MODELS", _MODELS),
    Variable(
        "AUTO_ROUTES",
        json.dumps(routes_json(DEFAULT_ROUTES), separators=(",", ":")),
        "auto's rules, a JSON object (docs: Choosing the model): rules tried in order, each "
        "{if: images|long|code|reasoning|short, use: [models], reason}; otherwise {use, "
        "reason}; short_chars; long_tokens; budget tiers [{at: percent, use: [models]}]. "
        "Keys left out keep their defaults",
        _MODELS,
    ),
    Variable(
        "FALLBACK_CHAIN",
        "glm,llama",
        "tried in order when a model fails before its first token; only models in MODELS "
        "(unset: the default chain minus models MODELS leaves out)",
        _MODELS,
    ),
    Variable(
        "MAX_BODY_BYTES",
        "65536",
        "a request body's bytes (64 KiB; 413 beyond, also for chunked bodies)",
        _LIMITS,
    ),
    Variable("MAX_MESSAGES", "50", "messages per request", _LIMITS),
    Variable("MAX_MESSAGE_CHARS", "8000", "characters per message", _LIMITS),
    Variable("MAX_TOTAL_CHARS", "32000", "characters over all messages", _LIMITS),
    Variable(
        "DEFAULT_OUTPUT_TOKENS",
        "1024",
        "the output token cap when a request sets none; at most MAX_OUTPUT_TOKENS",
        _LIMITS,
    ),
    Variable("MAX_OUTPUT_TOKENS", "4096", "the most output tokens a request may ask", _LIMITS),
    Variable(
        "MAX_JSON_DEPTH",
        "32",
        "how deep a JSON body may nest arrays and objects (at most 64: Pyodide's stack is small)",
        _LIMITS,
    ),
    Variable(
        "MAX_IMAGES",
        "4",
        "images per conversation (each also 1 to 16,384 px a side, with a whole header)",
        _MEDIA,
    ),
    Variable("MAX_IMAGE_BYTES", "3145728", "each image's decoded size (3 MiB)", _MEDIA),
    Variable("MAX_DOCUMENTS", "2", "documents per conversation", _MEDIA),
    Variable("MAX_DOCUMENT_BYTES", "2097152", "each document's decoded size (2 MiB)", _MEDIA),
    Variable(
        "MAX_DOCUMENT_TOKENS", "32000", "the documents' tokens together, once converted", _MEDIA
    ),
    Variable(
        "MAX_SPEECH_CHARS", "2000", "characters one /api/speech request may have read aloud", _MEDIA
    ),
    Variable("MAX_AUDIO_BYTES", "4194304", "audio to transcribe: its bytes (4 MiB)", _MEDIA),
    Variable(
        "MAX_AUDIO_SECONDS",
        "120",
        "audio to transcribe: its length (a WAV's by its header; the page records no longer)",
        _MEDIA,
    ),
    Variable("MAX_CONVERSATIONS", "1000", "each user's live conversations", _HISTORY),
    Variable(
        "MAX_HISTORY_BYTES", "52428800", "each user's stored JSON together (50 MiB)", _HISTORY
    ),
    Variable(
        "MAX_CONVERSATION_BYTES",
        "1048576",
        "one PUT body, or one conversation of a batch (1 MiB)",
        _HISTORY,
    ),
    Variable(
        "MAX_BATCH_BYTES",
        "4194304",
        "a batch write's body (POST /api/conversations; 4 MiB)",
        _HISTORY,
    ),
    Variable("MAX_BATCH_CONVERSATIONS", "50", "the conversations one batch write holds", _HISTORY),
    Variable("MAX_SHARES", "100", "each user's live share links", _HISTORY),
    Variable("MAX_SHARE_DAYS", "365", "the longest a share link lives, in days", _HISTORY),
    Variable("MAX_FILE_BYTES", "3145728", "one image upload to the FILES bucket (3 MiB)", _HISTORY),
    Variable(
        "MAX_FILES",
        "2000",
        "each user's images on the server, share links' copies included",
        _HISTORY,
    ),
    Variable(
        "MAX_FILES_BYTES",
        "209715200",
        "those images' bytes together, copies included (200 MiB)",
        _HISTORY,
    ),
    Variable("MAX_SHARE_IMAGES", "20", "the images one share link copies", _HISTORY),
    Variable(
        "MAX_FEEDBACK_CHARS",
        "500",
        "the characters of a rating's text (POST /api/feedback)",
        _FEEDBACK,
    ),
    Variable("MAX_KNOWLEDGE_BASES", "20", "each user's knowledge bases", _KNOWLEDGE),
    Variable(
        "MAX_KNOWLEDGE_DOCUMENTS",
        "200",
        "each user's documents in all their knowledge bases (failed ones not counted)",
        _KNOWLEDGE,
    ),
    Variable(
        "MAX_KNOWLEDGE_CHUNKS",
        "10000",
        "each user's chunks in all their knowledge bases (each is one vector)",
        _KNOWLEDGE,
    ),
    Variable(
        "MAX_KNOWLEDGE_BYTES",
        "104857600",
        "each user's documents' bytes together, as uploaded (100 MiB)",
        _KNOWLEDGE,
    ),
    Variable(
        "MAX_KNOWLEDGE_DOCUMENT_BYTES",
        "4194304",
        "one document added to a knowledge base, decoded (4 MiB)",
        _KNOWLEDGE,
    ),
    Variable(
        "KNOWLEDGE_CHUNK_TOKENS",
        "400",
        "a chunk's estimated tokens, 50 to 2000",
        _KNOWLEDGE,
    ),
    Variable(
        "KNOWLEDGE_CHUNK_OVERLAP",
        "60",
        "tokens a chunk repeats of the one before, under half a chunk (0: none)",
        _KNOWLEDGE,
    ),
    Variable(
        "KNOWLEDGE_TOP_K",
        "8",
        "the nearest chunks a question asks the index for, 1 to 50",
        _KNOWLEDGE,
    ),
    Variable(
        "KNOWLEDGE_CONTEXT_TOKENS",
        "2000",
        "the most tokens of passages a question's prompt takes (at least one chunk)",
        _KNOWLEDGE,
    ),
    Variable(
        "HISTORY_RETENTION_DAYS",
        None,
        "days a conversation on the server lives after its last write (unset: for ever)",
        _HISTORY,
    ),
    Variable(
        "FIRST_TOKEN_TIMEOUT_S",
        "60",
        "seconds for each model's first token (then the next model is asked); "
        "at most TOTAL_TIMEOUT_S",
        _TIME,
    ),
    Variable(
        "IDLE_TIMEOUT_S",
        "30",
        "seconds of silence mid-answer before it ends with an error; at most TOTAL_TIMEOUT_S",
        _TIME,
    ),
    Variable("TOTAL_TIMEOUT_S", "300", "seconds for the whole answer", _TIME),
    Variable(
        "HEARTBEAT_S", "15", "seconds between `: ping` comments while the model is silent", _TIME
    ),
    Variable(
        "ALLOWED_ORIGINS",
        None,
        "other sites whose pages may call /chat: a comma list of origins, never *",
        _WHO,
    ),
    Variable(
        "API_TOKEN",
        None,
        "the key named api_token, at least 16 characters; /v1 answers 403 api_disabled "
        "without any key",
        _WHO,
        secret=True,
    ),
    Variable(
        "API_KEYS",
        None,
        "named keys, name:token,name:token (a name of letters, digits and _ . @ -; a token of "
        "at least 16 characters); each is a user; with any key set, /chat, /api/usage and "
        "/api/me need one (unless Access is set), /v1 always",
        _WHO,
        secret=True,
    ),
    Variable(
        "ACCESS_TEAM_DOMAIN",
        None,
        "Cloudflare Access: <team>.cloudflareaccess.com; with ACCESS_AUD, every request needs "
        "a valid Access token or a key",
        _WHO,
    ),
    Variable(
        "ACCESS_AUD", None, "the Access application's AUD tag; set with ACCESS_TEAM_DOMAIN", _WHO
    ),
    Variable("ADMINS", None, "emails or key names that are admins", _WHO),
    Variable(
        "USER_DAILY_USD",
        None,
        "each user's daily budget in US dollars at list price (cost_usd)",
        _BUDGET,
    ),
    Variable(
        "USER_DAILY_NEURONS",
        None,
        "each user's daily budget in Neurons (Workers AI answers only)",
        _BUDGET,
    ),
    Variable(
        "KEY_DAILY_USD",
        None,
        "named keys' own daily budgets in US dollars, in place of USER_DAILY_USD: "
        "name:amount pairs, comma-separated; name:none lifts the key's limit",
        _BUDGET,
    ),
    Variable(
        "KEY_DAILY_NEURONS",
        None,
        "the same in Neurons, in place of USER_DAILY_NEURONS",
        _BUDGET,
    ),
    Variable(
        "DAILY_NEURON_LIMIT",
        None,
        "the account's Workers AI Neurons a day (10000 on a Free account: the free allocation)",
        _BUDGET,
    ),
    Variable(
        "SHADOW_MODEL",
        None,
        "the challenger: a model of the catalog (alias or id, in MODELS or not) that sampled "
        "answers are also asked of after the reply; its answers are never shown",
        _SHADOW,
    ),
    Variable(
        "SHADOW_RATE",
        "0",
        "the share of answers also asked of SHADOW_MODEL, a number from 0 to 1 (0.05: one in "
        "twenty); 0 turns the trials off; above 0 it needs SHADOW_MODEL and SHADOW_DAILY_USD",
        _SHADOW,
    ),
    Variable(
        "SHADOW_DAILY_USD",
        None,
        "the most the trials (challenger and judge) may spend a UTC day, in US dollars at list "
        "price; required with SHADOW_RATE (no default: the operator names the ceiling)",
        _SHADOW,
    ),
    Variable(
        "SHADOW_JUDGE",
        "glm",
        "the model that compares the two answers and says A, B or TIE (alias or id)",
        _SHADOW,
    ),
    Variable(
        "ALERT_WEBHOOK",
        None,
        "where spend alerts are posted (a Slack or Discord incoming webhook, or any URL taking "
        "JSON): https:// only (http:// for a server on loopback); unset: no alerts",
        _ALERTS,
        secret=True,
    ),
    Variable(
        "ALERT_AT",
        "50,80,100",
        "the percents of each daily limit (DAILY_NEURON_LIMIT, each user's budget) that send an "
        "alert, once each per day: whole numbers from 1 to 100, ascending, each once",
        _ALERTS,
    ),
    Variable(
        "ALERT_FORMAT",
        "auto",
        "the alerts' payload: slack ({text}), discord ({content}), json (edgechat's fields), or "
        "auto: slack for hooks.slack.com, discord for discord.com/api/webhooks/, else json",
        _ALERTS,
    ),
    Variable(
        "CACHE_MODE",
        "deterministic",
        "the response cache: off, deterministic (temperature 0 or a seed), all",
        _ANSWERS,
    ),
    Variable("CACHE_TTL_S", "86400", "seconds a cached answer lives (at least 60)", _ANSWERS),
    Variable("AI_GATEWAY_ID", None, "send every model call through this AI Gateway", _ANSWERS),
    Variable(
        "COOLDOWN_MAX_S",
        "3600",
        "the longest a model that answered 3040 is skipped in its isolate (its Retry-After, at "
        "most this); after 3036 or 4006 all Workers AI models are skipped until 00:00 UTC; "
        "0: nothing is skipped, each request asks again",
        _ANSWERS,
    ),
    Variable(
        "USAGE_COUNTING",
        "true",
        "count answers in KV for /api/usage (one KV write per answer); false turns it off",
        _ANSWERS,
    ),
    Variable(
        "SEMANTIC_CACHE",
        "off",
        "answer a question from an earlier similar one's answer (VECTORS and CACHE bound): off; "
        "user (each signed-in user's own answers; anonymous users never); shared (everyone's "
        "answers to everyone: only for a public FAQ, see Caching)",
        _ANSWERS,
    ),
    Variable(
        "SEMANTIC_CACHE_MIN_SCORE",
        "0.92",
        "the least cosine similarity (0 to 1) between two questions for the earlier answer to "
        "be given again; tune it on real bge-m3 (Caching)",
        _ANSWERS,
    ),
    Variable(
        "SEMANTIC_CACHE_MAX_TEMPERATURE",
        "1",
        "questions asking a higher temperature (0 to 2) are never answered from the semantic cache",
        _ANSWERS,
    ),
    Variable(
        "SEMANTIC_CACHE_TTL_S",
        "604800",
        "seconds an answer is kept for similar questions (at least 60)",
        _ANSWERS,
    ),
    Variable("MODERATION", "off", "Llama Guard checks: off, input, input,output", _SAFETY),
    Variable(
        "MODERATION_FAIL",
        "open",
        "a failed check lets the request through (open) or refuses it (closed)",
        _SAFETY,
    ),
    Variable(
        "PRESETS",
        None,
        "the presets a conversation may start from: a JSON array of at most 32 "
        "(name, title, system_prompt, model, temperature, greeting)",
        _MORE,
    ),
    Variable(
        "PROVIDERS",
        None,
        "providers' own OpenAI-compatible APIs tried after the Workers AI chain, in order "
        "(comma list of names: lower-case letters, digits and _)",
        _MORE,
    ),
    Variable(
        "<NAME>_BASE_URL",
        _builtin(0),
        "the provider's API base (/chat/completions is added); https:// only (http:// for a "
        "server on loopback); needed for a name without a built-in default",
        _MORE,
    ),
    Variable(
        "<NAME>_MODEL",
        _builtin(1),
        "the provider's model name; needed for a name without a built-in default",
        _MORE,
    ),
    Variable(
        "<NAME>_API_KEY", None, "the provider's key; a provider without one is skipped", _MORE, True
    ),
    Variable(
        "<NAME>_PRICE_IN",
        None,
        "USD per million input tokens, for cost_usd (else null)",
        _MORE,
    ),
    Variable(
        "<NAME>_PRICE_OUT",
        None,
        "USD per million output tokens, for cost_usd (else null)",
        _MORE,
    ),
    Variable("LOG_PROMPTS", "false", "put the last user message in the request log", _MORE),
)
