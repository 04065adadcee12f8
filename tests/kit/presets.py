"""The two presets the black-box and browser tests configure: a translator
with every field (its prompt given by the test, a marker to look for) and a
brief one with only the required ones."""

from __future__ import annotations

from typing import Any

GREETING = {"en": "What shall I translate?", "zh": "要翻译什么。"}


def two_presets(prompt: str) -> list[dict[str, Any]]:
    return [
        {
            "name": "translator",
            "title": {"en": "Translator", "zh": "翻译"},
            "system_prompt": prompt,
            "model": "llama",
            "temperature": 0.2,
            "greeting": GREETING,
        },
        {"name": "brief", "title": {"en": "Brief", "zh": "简短"}, "system_prompt": "Be brief."},
    ]
