"""Presets: the operator's named starting points for a conversation.

``PRESETS`` in ``[vars]`` is a JSON array; each preset is::

    {"name": "translator",                      # what /chat's "preset" names
     "title": {"en": "Translator", "zh": "翻译"}, # what the page shows
     "system_prompt": "…",                       # replaces SYSTEM_PROMPT
     "model": "glm"?,                            # one of MODELS
     "temperature": 0.3?,                        # 0 to 2
     "greeting": {"en": "…", "zh": "…"}?}        # shown before the first question

A request naming a preset is answered under the preset's system prompt; its
model and temperature apply unless the request gives its own. A client still
never sends a system prompt, and ``GET /api/presets`` lists everything but
it: the prompt is the operator's (not a secret, but not the client's to read
back either). A bad entry raises ``ValueError`` naming the preset's position
and the rule, so it is caught where every setting is (``config.settings``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_PRESETS", "Preset", "parse_presets", "presets_json"]

MAX_PRESETS = 32
MAX_PROMPT_CHARS = 8_000
MAX_TITLE_CHARS = 60
MAX_GREETING_CHARS = 500
LANGUAGES = ("en", "zh")
NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,31}", re.ASCII)
_FIELDS = frozenset(("name", "title", "system_prompt", "model", "temperature", "greeting"))


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    title: Mapping[str, str]
    system_prompt: str
    model: str | None = None
    temperature: float | None = None
    greeting: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        """What ``GET /api/presets`` shows of it: everything but the prompt."""
        return {
            "name": self.name,
            "title": dict(self.title),
            "model": self.model,
            "temperature": self.temperature,
            "greeting": dict(self.greeting) if self.greeting else None,
        }


def presets_json(presets: tuple[Preset, ...]) -> dict[str, Any]:
    return {"presets": [preset.to_json() for preset in presets]}


def parse_presets(value: object) -> tuple[Preset, ...]:
    """``PRESETS``, JSON text, as presets; ``ValueError`` names the rule a
    bad one breaks, never its text. Only text: a TOML array in ``[vars]``
    would reach the Worker as a JavaScript object, not as Python data."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ()
    if not isinstance(value, str):
        raise ValueError("PRESETS must be text holding a JSON array of presets")
    try:
        value = json.loads(value)
    except ValueError:
        raise ValueError("PRESETS must be a JSON array of presets") from None
    if not isinstance(value, list) or len(value) > MAX_PRESETS:
        raise ValueError(f"PRESETS must be a JSON array of at most {MAX_PRESETS} presets")
    presets = tuple(_preset(entry, f"PRESETS[{index}]") for index, entry in enumerate(value))
    names = [preset.name for preset in presets]
    if len(set(names)) != len(names):
        raise ValueError("PRESETS has two presets of the same name")
    return presets


def _preset(entry: object, where: str) -> Preset:
    if not isinstance(entry, dict) or not entry.keys() <= _FIELDS:
        raise ValueError(f"{where} must be an object of {', '.join(sorted(_FIELDS))}")
    name = entry.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(
            f"{where}.name must be 1 to 32 lower-case letters, digits, - or _, "
            "starting with a letter or digit"
        )
    prompt = entry.get("system_prompt")
    if not isinstance(prompt, str) or not prompt.strip() or len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(
            f"{where}.system_prompt must be text of 1 to {MAX_PROMPT_CHARS} characters"
        )
    model = entry.get("model")
    if model is not None and not isinstance(model, str):
        raise ValueError(f"{where}.model must be a model's alias or id")
    temperature = entry.get("temperature")
    if temperature is not None and (
        type(temperature) not in (int, float)
        or not math.isfinite(temperature)
        or not 0 <= temperature <= 2
    ):
        raise ValueError(f"{where}.temperature must be a number from 0 to 2")
    greeting = entry.get("greeting")
    return Preset(
        name=name,
        title=_texts(entry.get("title"), f"{where}.title", MAX_TITLE_CHARS, required=True),
        system_prompt=prompt.strip(),
        model=model,
        temperature=None if temperature is None else float(temperature),
        greeting=None
        if greeting is None
        else _texts(greeting, f"{where}.greeting", MAX_GREETING_CHARS, required=False),
    )


def _texts(value: object, where: str, most: int, *, required: bool) -> Mapping[str, str]:
    """``{"en": …, "zh": …}``: both languages, each non-empty and short."""
    if (
        not isinstance(value, dict)
        or value.keys() != set(LANGUAGES)
        or not all(
            isinstance(text, str) and 0 < len(text.strip()) <= most for text in value.values()
        )
    ):
        need = "needs" if required else "must have"
        raise ValueError(f'{where} {need} "en" and "zh" texts of 1 to {most} characters')
    return {language: value[language].strip() for language in LANGUAGES}
