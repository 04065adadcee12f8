"""Operator settings, read from the Worker's ``[vars]`` and secrets.

Every variable is optional; an empty value counts as unset. A bad value raises
``ValueError`` naming the variable (never echoing a secret or the system
prompt): configuration errors are the operator's. ``npm start`` and
``scripts/check-config.sh`` (run by ``npm run deploy``) stop on them with that
message; at the edge every request gets a generic 500 ``misconfigured`` and
the log gets the message.

The variables, their defaults and their rules are ``variables.VARIABLES``: the
docs' configuration reference is rendered from it, and a unit test holds it
to what ``Settings.from_vars`` reads and to ``Settings()``'s defaults.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from edgechat.config.presets import Preset, parse_presets
from edgechat.config.providers import BUILTIN, NAME, Provider
from edgechat.config.routes import DEFAULT_ROUTES, Routes, parse_routes
from edgechat.core.http import normalize_origin
from edgechat.core.models import AUTO, CATALOG, Model, find
from edgechat.core.requests import JSON_DEPTH_CEILING, Limits
from edgechat.users.budget import Limits as BudgetLimits
from edgechat.users.identity import Access, ApiKey, Rules

__all__ = ["ALERT_FORMATS", "DEFAULT_SYSTEM_PROMPT", "Settings"]


# Deliberately plain: the system prompt is visible to anyone who asks the model
# for it, so it holds no secret and no rule that security depends on.
DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful, friendly assistant. Answer clearly and concisely, "
    "and say so when you are not sure."
)


CACHE_MODES = ("off", "deterministic", "all")


# KV refuses an expirationTtl below 60 s.
MIN_CACHE_TTL_S = 60

# SEMANTIC_CACHE (answer.similar): off; user (each signed-in user's answers
# answer only that user's similar questions); shared (everyone's answer
# everyone's: an operator's public FAQ).
SEMANTIC_CACHE_MODES = ("off", "user", "shared")

# ALERT_FORMAT: auto picks Slack's or Discord's by the webhook's host
# (``alerts.payloads``), else the generic JSON.
ALERT_FORMATS = ("auto", "slack", "discord", "json")
DEFAULT_ALERT_AT = (50, 80, 100)

# A knowledge base's chunk, in tokens (bge-m3 reads up to 8,192; a chunk
# is quoted whole in a prompt), and the nearest chunks a question asks the
# index for (Vectorize returns up to 100 without metadata:
# https://developers.cloudflare.com/vectorize/platform/limits/).
MIN_CHUNK_TOKENS = 50
MAX_CHUNK_TOKENS = 2_000
MAX_TOP_K = 50

_TRUE = frozenset(("1", "true", "yes", "on"))
_FALSE = frozenset(("0", "false", "no", "off"))


@dataclass(frozen=True, slots=True)
class Settings:
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    models: tuple[str, ...] = ("glm", "kimi", "llama")
    default_model: str = "glm"
    fallback_chain: tuple[str, ...] = ("glm", "llama")
    limits: Limits = field(default_factory=Limits)
    first_token_timeout_s: float = 60.0
    idle_timeout_s: float = 30.0
    total_timeout_s: float = 300.0
    heartbeat_s: float = 15.0
    allowed_origins: tuple[str, ...] = ()
    api_token: str | None = field(default=None, repr=False)
    log_prompts: bool = False
    cache_mode: str = "deterministic"
    cache_ttl_s: int = 86_400
    ai_gateway_id: str | None = None
    count_usage: bool = True
    cooldown_max_s: int = 3600
    moderate_input: bool = False
    moderate_output: bool = False
    moderation_fail_closed: bool = False
    providers: tuple[Provider, ...] = ()
    # Who may ask: the keys (API_TOKEN, API_KEYS), Access, ADMINS.
    identity: Rules = field(default_factory=Rules, repr=False)
    budget: BudgetLimits = field(default_factory=BudgetLimits)
    presets: tuple[Preset, ...] = ()
    # Days a conversation on the server lives after its last write (None: for ever).
    history_retention_days: int | None = None
    # ``auto``'s rules (AUTO_ROUTES), where MODELS lists auto.
    routes: Routes = DEFAULT_ROUTES
    # Shadow trials (answer.shadow): the challenger (an alias, in MODELS or
    # not), the share of answers also asked of it, the day's cap on what the
    # trials spend in US dollars, and the judge (an alias).
    shadow_model: str | None = None
    shadow_rate: float = 0.0
    shadow_daily_usd: float | None = None
    shadow_judge: str = "glm"
    # Spend alerts: where they go (a secret: it is the hook's credential),
    # at which percents of each daily limit, in which payload format.
    alert_webhook: str | None = field(default=None, repr=False)
    alert_at: tuple[int, ...] = DEFAULT_ALERT_AT
    alert_format: str = "auto"
    # The semantic cache (answer.similar): its scope, the least cosine score
    # a kept answer is given again at, the highest temperature a question
    # may ask and still be answered from it, and how long an answer is kept.
    semantic_cache: str = "off"
    semantic_min_score: float = 0.92
    semantic_max_temperature: float = 1.0
    semantic_ttl_s: int = 604_800
    # Knowledge bases (knowledge.chunks, knowledge.retrieve): a chunk's
    # tokens and the overlap between two, and what a question takes: the
    # nearest chunks asked of the index, and the tokens of them the prompt holds.
    knowledge_chunk_tokens: int = 400
    knowledge_chunk_overlap: int = 60
    knowledge_top_k: int = 8
    knowledge_context_tokens: int = 2_000

    def __post_init__(self) -> None:
        if self.api_token is not None and "api_token" not in {k.name for k in self.identity.keys}:
            # API_TOKEN is one key, however the settings were made.
            keys = (ApiKey("api_token", self.api_token), *self.identity.keys)
            object.__setattr__(self, "identity", replace(self.identity, keys=keys))
        if not self.models:
            raise ValueError("MODELS must list at least one model")
        for name in self.models:
            model = find(name)
            if name != AUTO.alias and (model is None or model.alias != name):
                raise ValueError(f"MODELS lists an unknown model; known: auto, {_known()}")
        if AUTO.alias in self.models and not self.routes.names() & set(self.models):
            raise ValueError("AUTO_ROUTES names none of MODELS: auto would have nothing to choose")
        if self.default_model not in self.models:
            raise ValueError("DEFAULT_MODEL must be one of MODELS")
        for name in self.fallback_chain:
            if name not in self.models or name == AUTO.alias:
                raise ValueError("FALLBACK_CHAIN may only list MODELS' models (not auto)")
        for var, seconds in (
            ("FIRST_TOKEN_TIMEOUT_S", self.first_token_timeout_s),
            ("IDLE_TIMEOUT_S", self.idle_timeout_s),
            ("TOTAL_TIMEOUT_S", self.total_timeout_s),
            ("HEARTBEAT_S", self.heartbeat_s),
        ):
            if not math.isfinite(seconds) or seconds <= 0:
                raise ValueError(f"{var} must be a positive number of seconds")
        if self.first_token_timeout_s > self.total_timeout_s:
            raise ValueError("FIRST_TOKEN_TIMEOUT_S must not exceed TOTAL_TIMEOUT_S")
        if self.idle_timeout_s > self.total_timeout_s:
            raise ValueError("IDLE_TIMEOUT_S must not exceed TOTAL_TIMEOUT_S")
        if self.cache_mode not in CACHE_MODES:
            raise ValueError(f"CACHE_MODE must be one of {', '.join(CACHE_MODES)}")
        if self.cache_ttl_s < MIN_CACHE_TTL_S:
            raise ValueError(f"CACHE_TTL_S must be at least {MIN_CACHE_TTL_S} seconds")
        for index, preset in enumerate(self.presets):
            if preset.model is not None and preset.model not in self.models:
                raise ValueError(f"PRESETS[{index}].model must be one of MODELS")
        if self.alert_webhook is not None:
            _check_base_url("ALERT_WEBHOOK", self.alert_webhook)
        _check_percents("ALERT_AT", self.alert_at)
        if self.alert_format not in ALERT_FORMATS:
            raise ValueError(f"ALERT_FORMAT must be one of {', '.join(ALERT_FORMATS)}")
        if self.semantic_cache not in SEMANTIC_CACHE_MODES:
            raise ValueError(f"SEMANTIC_CACHE must be one of {', '.join(SEMANTIC_CACHE_MODES)}")
        if self.semantic_ttl_s < MIN_CACHE_TTL_S:
            raise ValueError(f"SEMANTIC_CACHE_TTL_S must be at least {MIN_CACHE_TTL_S} seconds")
        self._check_shadow()
        self._check_knowledge()

    def _check_knowledge(self) -> None:
        if not MIN_CHUNK_TOKENS <= self.knowledge_chunk_tokens <= MAX_CHUNK_TOKENS:
            raise ValueError(
                f"KNOWLEDGE_CHUNK_TOKENS must be from {MIN_CHUNK_TOKENS} to {MAX_CHUNK_TOKENS}"
            )
        if not 0 <= self.knowledge_chunk_overlap < self.knowledge_chunk_tokens // 2:
            raise ValueError(
                "KNOWLEDGE_CHUNK_OVERLAP must be 0 or more and under half of KNOWLEDGE_CHUNK_TOKENS"
            )
        if not 1 <= self.knowledge_top_k <= MAX_TOP_K:
            raise ValueError(f"KNOWLEDGE_TOP_K must be from 1 to {MAX_TOP_K}")
        if self.knowledge_context_tokens < self.knowledge_chunk_tokens:
            raise ValueError(
                "KNOWLEDGE_CONTEXT_TOKENS must be at least KNOWLEDGE_CHUNK_TOKENS (one chunk)"
            )

    def _check_shadow(self) -> None:
        for var, name in (("SHADOW_MODEL", self.shadow_model), ("SHADOW_JUDGE", self.shadow_judge)):
            model = None if name is None else find(name)
            if name is not None and (model is None or model.alias != name):
                raise ValueError(f"{var} names an unknown model; known: {_known()}")
        if not (math.isfinite(self.shadow_rate) and 0 <= self.shadow_rate <= 1):
            raise ValueError(f"SHADOW_RATE {_SHARE_RULE}")
        if self.shadow_rate > 0 and self.shadow_model is None:
            raise ValueError("SHADOW_RATE needs SHADOW_MODEL: the model the sampled answers try")
        if self.shadow_rate > 0 and self.shadow_daily_usd is None:
            # Trials spend money no user asked to spend: the operator names
            # the ceiling, edgechat does not guess one.
            raise ValueError(
                "SHADOW_DAILY_USD is required with SHADOW_MODEL and SHADOW_RATE: "
                "a positive amount of US dollars the trials may spend a UTC day"
            )

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> Settings:
        return cls.from_vars(values.get)

    @classmethod
    def from_vars(cls, get: Callable[[str], object]) -> Settings:
        """Read every variable through ``get`` (e.g. ``lambda k: getattr(env, k, None)``).

        Values are normally strings; numbers and booleans (``[vars]`` may hold
        JSON values) are accepted too.
        """
        defaults = cls()
        models = _models("MODELS", get) or defaults.models
        default_model = _alias("DEFAULT_MODEL", get, auto=True) or defaults.default_model
        chain = _models("FALLBACK_CHAIN", get)
        if chain is None:
            # The default chain, minus models the operator did not allow.
            chain = tuple(name for name in defaults.fallback_chain if name in models)
        base = defaults.limits
        if _int("DEFAULT_OUTPUT_TOKENS", get, base.default_output_tokens) > _int(
            "MAX_OUTPUT_TOKENS", get, base.max_output_tokens
        ):
            raise ValueError("DEFAULT_OUTPUT_TOKENS must not exceed MAX_OUTPUT_TOKENS")
        if _int("MAX_JSON_DEPTH", get, base.max_json_depth) > JSON_DEPTH_CEILING:
            raise ValueError(f"MAX_JSON_DEPTH must be at most {JSON_DEPTH_CEILING}")
        # Each limit is the [vars] entry of its upper-case name.
        limits = Limits(
            **{
                name: _int(name.upper(), get, value)
                for name, value in defaults.limits.to_json().items()
            }
        )
        identity = _identity(get)
        return cls(
            system_prompt=_text("SYSTEM_PROMPT", get) or defaults.system_prompt,
            models=models,
            default_model=default_model,
            fallback_chain=chain,
            limits=limits,
            first_token_timeout_s=_seconds(
                "FIRST_TOKEN_TIMEOUT_S", get, defaults.first_token_timeout_s
            ),
            idle_timeout_s=_seconds("IDLE_TIMEOUT_S", get, defaults.idle_timeout_s),
            total_timeout_s=_seconds("TOTAL_TIMEOUT_S", get, defaults.total_timeout_s),
            heartbeat_s=_seconds("HEARTBEAT_S", get, defaults.heartbeat_s),
            allowed_origins=_origins("ALLOWED_ORIGINS", get),
            api_token=_text("API_TOKEN", get),
            log_prompts=_bool("LOG_PROMPTS", get, defaults.log_prompts),
            cache_mode=(_text("CACHE_MODE", get) or defaults.cache_mode).lower(),
            cache_ttl_s=_int("CACHE_TTL_S", get, defaults.cache_ttl_s),
            ai_gateway_id=_text("AI_GATEWAY_ID", get),
            count_usage=_bool("USAGE_COUNTING", get, defaults.count_usage),
            cooldown_max_s=_whole("COOLDOWN_MAX_S", get, defaults.cooldown_max_s),
            **_moderation("MODERATION", get),
            moderation_fail_closed=_choice("MODERATION_FAIL", get, ("open", "closed")) == "closed",
            providers=_providers("PROVIDERS", get),
            identity=identity,
            budget=BudgetLimits(
                user_usd=_usd("USER_DAILY_USD", get),
                user_neurons=_int("USER_DAILY_NEURONS", get, 0) or None,
                account_neurons=_int("DAILY_NEURON_LIMIT", get, 0) or None,
                key_usd=_key_limits("KEY_DAILY_USD", get, identity.keys, _amount_usd),
                key_neurons=_key_limits("KEY_DAILY_NEURONS", get, identity.keys, _amount_neurons),
            ),
            presets=_presets("PRESETS", get),
            history_retention_days=_int("HISTORY_RETENTION_DAYS", get, 0) or None,
            routes=parse_routes(get("AUTO_ROUTES")),
            shadow_model=_alias("SHADOW_MODEL", get),
            shadow_rate=_share("SHADOW_RATE", get, defaults.shadow_rate),
            shadow_daily_usd=_usd("SHADOW_DAILY_USD", get),
            shadow_judge=_alias("SHADOW_JUDGE", get) or defaults.shadow_judge,
            alert_webhook=_text("ALERT_WEBHOOK", get),
            alert_at=_percents("ALERT_AT", get) or defaults.alert_at,
            alert_format=_choice("ALERT_FORMAT", get, ALERT_FORMATS),
            semantic_cache=_choice("SEMANTIC_CACHE", get, SEMANTIC_CACHE_MODES),
            semantic_min_score=_share(
                "SEMANTIC_CACHE_MIN_SCORE", get, defaults.semantic_min_score, _SCORE_RULE
            ),
            semantic_max_temperature=_number_in(
                "SEMANTIC_CACHE_MAX_TEMPERATURE",
                get,
                defaults.semantic_max_temperature,
                (0, 2),
                "must be a number from 0 to 2 (a temperature)",
            ),
            semantic_ttl_s=_int("SEMANTIC_CACHE_TTL_S", get, defaults.semantic_ttl_s),
            knowledge_chunk_tokens=_int(
                "KNOWLEDGE_CHUNK_TOKENS", get, defaults.knowledge_chunk_tokens
            ),
            knowledge_chunk_overlap=_whole(
                "KNOWLEDGE_CHUNK_OVERLAP", get, defaults.knowledge_chunk_overlap
            ),
            knowledge_top_k=_int("KNOWLEDGE_TOP_K", get, defaults.knowledge_top_k),
            knowledge_context_tokens=_int(
                "KNOWLEDGE_CONTEXT_TOKENS", get, defaults.knowledge_context_tokens
            ),
        )

    def fallbacks_after(self, model: Model) -> tuple[Model, ...]:
        """Models to try, in order, when ``model`` failed fallback-worthily before its first token.

        A model in the chain falls back to the entries after it; any other
        allowed model (say, a paid-only Kimi on the Free plan) to the whole chain.
        """
        chain = self.fallback_chain
        if model.alias in chain:
            chain = chain[chain.index(model.alias) + 1 :]
        found = (find(name) for name in chain if name != model.alias)
        return tuple(entry for entry in found if entry is not None)


def _known() -> str:
    return ", ".join(model.alias for model in CATALOG)


def _text(var: str, get: Callable[[str], object]) -> str | None:
    value = get(var)
    if value is None:
        return None
    if isinstance(value, bool):
        value = "true" if value else "false"
    elif isinstance(value, int | float):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError(f"{var} must be a string")
    return value.strip() or None


def _list(var: str, get: Callable[[str], object]) -> tuple[str, ...] | None:
    text = _text(var, get)
    if text is None:
        return None
    items = tuple(item.strip() for item in text.split(","))
    return tuple(dict.fromkeys(item for item in items if item)) or None


def _alias(var: str, get: Callable[[str], object], *, auto: bool = False) -> str | None:
    """A catalog model's alias; ``auto`` too where ``auto`` (DEFAULT_MODEL)."""
    name = _text(var, get)
    if name is None:
        return None
    if auto and name == AUTO.alias:
        return name
    model = find(name)
    if model is None:
        known = f"auto, {_known()}" if auto else _known()
        raise ValueError(f"{var} names an unknown model; known: {known}")
    return model.alias


def _models(var: str, get: Callable[[str], object]) -> tuple[str, ...] | None:
    names = _list(var, get)
    if names is None:
        return None
    aliases: list[str] = []
    for name in names:
        model = AUTO if name == AUTO.alias else find(name)
        if model is None:
            raise ValueError(f"{var} lists an unknown model; known: auto, {_known()}")
        aliases.append(model.alias)
    return tuple(dict.fromkeys(aliases))


def _int(var: str, get: Callable[[str], object], default: int) -> int:
    text = _text(var, get)
    if text is None:
        return default
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise ValueError(f"{var} must be a positive whole number")
    return number


def _whole(var: str, get: Callable[[str], object], default: int) -> int:
    """A whole number that may be 0."""
    text = _text(var, get)
    if text is None:
        return default
    if not text.isdigit():
        raise ValueError(f"{var} must be a whole number, 0 or more")
    return int(text)


def _seconds(var: str, get: Callable[[str], object], default: float) -> float:
    text = _text(var, get)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{var} must be a positive number of seconds")
    return seconds


def _bool(var: str, get: Callable[[str], object], default: bool) -> bool:
    text = _text(var, get)
    if text is None:
        return default
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise ValueError(f"{var} must be true or false")


def _origins(var: str, get: Callable[[str], object]) -> tuple[str, ...]:
    origins: list[str] = []
    for entry in _list(var, get) or ():
        origin = normalize_origin(entry)
        if origin is None:
            raise ValueError(
                f"{var} must be a comma-separated list of origins like https://chat.example.com"
            )
        origins.append(origin)
    return tuple(dict.fromkeys(origins))


def _choice(var: str, get: Callable[[str], object], choices: tuple[str, ...]) -> str:
    text = (_text(var, get) or choices[0]).lower()
    if text not in choices:
        raise ValueError(f"{var} must be one of {', '.join(choices)}")
    return text


def _moderation(var: str, get: Callable[[str], object]) -> dict[str, bool]:
    parts = {part.lower() for part in _list(var, get) or ("off",)}
    if parts == {"off"}:
        return {"moderate_input": False, "moderate_output": False}
    if parts not in ({"input"}, {"input", "output"}):
        raise ValueError(f"{var} must be off, input, or input,output")
    return {"moderate_input": True, "moderate_output": "output" in parts}


def _providers(var: str, get: Callable[[str], object]) -> tuple[Provider, ...]:
    """The providers named in ``var`` that have a key; one without its key is
    skipped (a deployment may name them all and set keys where it has them)."""
    providers: list[Provider] = []
    for name in dict.fromkeys(item.lower() for item in _list(var, get) or ()):
        if not NAME.fullmatch(name):
            raise ValueError(f"{var} names must be lower-case letters, digits and _")
        prefix = name.upper()
        builtin = BUILTIN.get(name)
        base_url = _text(f"{prefix}_BASE_URL", get) or (builtin[0] if builtin else None)
        model = _text(f"{prefix}_MODEL", get) or (builtin[1] if builtin else None)
        if base_url is None or model is None:
            raise ValueError(f"{var}: {prefix}_BASE_URL and {prefix}_MODEL are needed for {name}")
        _check_base_url(f"{prefix}_BASE_URL", base_url)
        price_in = _price(f"{prefix}_PRICE_IN", get)
        price_out = _price(f"{prefix}_PRICE_OUT", get)
        key = _text(f"{prefix}_API_KEY", get)
        if key is None:
            continue
        providers.append(Provider(name, base_url, model, key, price_in, price_out))
    return tuple(providers)


def _presets(var: str, get: Callable[[str], object]) -> tuple[Preset, ...]:
    """The presets, each naming its model by alias (``MODELS`` holds aliases)."""
    presets = []
    for index, preset in enumerate(parse_presets(get(var))):
        if preset.model is not None and preset.model != AUTO.alias:
            model = find(preset.model)
            if model is None:
                raise ValueError(f"{var}[{index}].model names an unknown model; known: {_known()}")
            preset = dataclasses.replace(preset, model=model.alias)
        presets.append(preset)
    return tuple(presets)


def _check_base_url(var: str, url: str) -> None:
    try:
        parts = urlsplit(url)
        host, scheme = parts.hostname, parts.scheme
    except ValueError:  # "Invalid IPv6 URL": the rule below says what is wanted
        host, scheme = None, ""
    local = host in ("127.0.0.1", "localhost", "::1")
    if not host or scheme not in ("https", "http") or (scheme == "http" and not local):
        # A key (or a webhook's URL, its own credential) sent over plain
        # HTTP could be read on the way: loopback only. Never echoed.
        raise ValueError(f"{var} must be an https:// URL (http:// only for a local server)")


_SHARE_RULE = "must be a number from 0 to 1: the share of answers tried"


_SCORE_RULE = "must be a number from 0 to 1: a cosine similarity"


def _share(
    var: str, get: Callable[[str], object], default: float, rule: str = _SHARE_RULE
) -> float:
    """A share from 0 to 1 (``0.05``: one answer in twenty)."""
    return _number_in(var, get, default, (0, 1), rule)


def _number_in(
    var: str,
    get: Callable[[str], object],
    default: float,
    bounds: tuple[float, float],
    rule: str,
) -> float:
    """A number within ``bounds`` (both included); ``rule`` says which."""
    text = _text(var, get)
    if text is None:
        return default
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and bounds[0] <= number <= bounds[1]):
        raise ValueError(f"{var} {rule}")
    return number


def _percents(var: str, get: Callable[[str], object]) -> tuple[int, ...] | None:
    """A comma list of whole numbers (``Settings`` holds them to their rules)."""
    text = _text(var, get)
    if text is None:
        return None
    percents: list[int] = []
    for number, entry in enumerate(text.split(","), 1):
        entry = entry.strip()
        if not (entry.isascii() and entry.isdigit()):
            raise ValueError(f"{var} entry {number} {_PERCENT_RULE}")
        percents.append(int(entry))
    return tuple(percents)


_PERCENT_RULE = "must be a whole number of percent from 1 to 100"


def _check_percents(var: str, percents: tuple[int, ...]) -> None:
    """Thresholds in percent: from 1 to 100, ascending, each once."""
    if not percents:
        raise ValueError(f"{var} must list at least one percent")
    for number, percent in enumerate(percents, 1):
        if not 1 <= percent <= 100:
            raise ValueError(f"{var} entry {number} {_PERCENT_RULE}")
    if any(low >= high for low, high in itertools.pairwise(percents)):
        raise ValueError(f"{var} must list its percents in ascending order, each once (50,80,100)")


def _usd(var: str, get: Callable[[str], object]) -> float | None:
    text = _text(var, get)
    if text is None:
        return None
    try:
        amount = float(text)
    except ValueError:
        amount = math.nan
    if not math.isfinite(amount) or amount <= 0:
        raise ValueError(f"{var} must be a positive amount of US dollars")
    return amount


def _amount_usd(text: str) -> float | None:
    try:
        amount = float(text)
    except ValueError:
        return None
    return amount if math.isfinite(amount) and amount > 0 else None


def _amount_neurons(text: str) -> int | None:
    return int(text) if text.isdigit() and int(text) > 0 else None


def _key_limits[N: (int, float)](
    var: str,
    get: Callable[[str], object],
    keys: tuple[ApiKey, ...],
    amount: Callable[[str], N | None],
) -> tuple[tuple[str, N | None], ...]:
    """A named key's own daily limit, in place of USER_DAILY_USD or
    USER_DAILY_NEURONS: ``name:amount`` pairs, comma-separated, ``name:none``
    for no limit. Each name must be a key (API_KEYS, or api_token for
    API_TOKEN), once. Without any key (``scripts/check-config.sh`` sees no
    secrets) only the entries' form is checked."""
    text = _text(var, get)
    if text is None:
        return ()
    names = {key.name for key in keys}
    unit = "US dollars" if var.endswith("_USD") else "Neurons"
    found: dict[str, N | None] = {}
    for number, entry in enumerate(re.split(r"[,\s]+", text.strip()), 1):
        if not entry:
            continue
        name, colon, value = entry.partition(":")
        if not colon or not _KEY_NAME.fullmatch(name) or (names and name not in names):
            known = f" ({', '.join(sorted(names))})" if names else ""
            raise ValueError(
                f"{var} entry {number} must be name:amount, the name one of the keys{known}"
            )
        if name in found:
            raise ValueError(f"{var} names the key {name} more than once")
        limit = None if value.lower() == "none" else amount(value)
        if limit is None and value.lower() != "none":
            raise ValueError(
                f"{var} entry {number} ({name}) must be a positive amount of {unit}, or none"
            )
        found[name] = limit
    return tuple(("key:" + name, limit) for name, limit in found.items())


def _price(var: str, get: Callable[[str], object]) -> float | None:
    text = _text(var, get)
    if text is None:
        return None
    try:
        price = float(text)
    except ValueError:
        price = math.nan
    if not math.isfinite(price) or price < 0:
        raise ValueError(f"{var} must be a price in USD per million tokens")
    return price


_KEY_NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")


MIN_KEY_CHARS = 16


def _api_keys(get: Callable[[str], object]) -> tuple[ApiKey, ...]:
    """``API_TOKEN`` (the key ``api_token``) and ``API_KEYS``' ``name:token``
    pairs; a refusal names the entry by position, never its token."""
    keys: list[ApiKey] = []
    token = _text("API_TOKEN", get)
    if token is not None:
        if len(token) < MIN_KEY_CHARS:
            # A short token is guessable, and it is also taken out of every
            # stream that holds it: one a model's envelope holds (``t``)
            # would break every event.
            raise ValueError(
                f"API_TOKEN must be at least {MIN_KEY_CHARS} characters "
                "(for example: openssl rand -hex 24)"
            )
        keys.append(ApiKey("api_token", token))
    text = _text("API_KEYS", get) or ""
    for number, entry in enumerate(re.split(r"[,\s]+", text.strip()), 1):
        if not entry:
            continue
        name, _, token = entry.partition(":")
        if not _KEY_NAME.fullmatch(name) or len(token) < MIN_KEY_CHARS:
            raise ValueError(
                f"API_KEYS entry {number} must be name:token (a name of letters, digits, "
                f"_ . @ -, and a token of at least {MIN_KEY_CHARS} characters)"
            )
        keys.append(ApiKey(name, token))
    if len({key.name for key in keys}) != len(keys) or len({k.token for k in keys}) != len(keys):
        raise ValueError("API_KEYS names and tokens must each be unique (api_token is API_TOKEN)")
    return tuple(keys)


def _access(get: Callable[[str], object]) -> Access | None:
    team, aud = _text("ACCESS_TEAM_DOMAIN", get), _text("ACCESS_AUD", get)
    if team is None and aud is None:
        return None
    if team is None or aud is None:
        raise ValueError("ACCESS_TEAM_DOMAIN and ACCESS_AUD go together: set both or neither")
    url = team if "://" in team else "https://" + team
    _check_base_url("ACCESS_TEAM_DOMAIN", url)
    parts = urlsplit(url)
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("ACCESS_TEAM_DOMAIN must be a domain like <team>.cloudflareaccess.com")
    return Access(f"{parts.scheme}://{parts.netloc}".lower(), aud)


def _identity(get: Callable[[str], object]) -> Rules:
    return Rules(
        keys=_api_keys(get),
        access=_access(get),
        admins=frozenset(_list("ADMINS", get) or ()),
    )
