"""Presets: named system prompt, sampling and thinking settings for new chats, one of them
the default, kept in `presets.json` beside the config file (`PresetFile`).

The file is JSON, written whole or not at all (`app.files`):

    {"default": "terse",
     "presets": [{"name": "terse", "system_prompt": "Answer briefly.",
                  "sampling": {"temperature": 0.6, "top_p": 0.95, "top_k": 29,
                               "max_new_tokens": 4096},
                  "thinking": {"enabled": true, "budget": 2048}}]}

A file that does not read is never overwritten: saving refuses until it is fixed or moved.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.core.chat import MAX_THINKING_BUDGET, Sampling, Thinking
from app.core.errors import ConfigError
from app.prefs.pref_file import read_pref, write_pref
from app.settings import SamplingSettings

FILE_NAME: Final = "presets.json"
MAX_NAME_CHARS: Final = 60


@dataclass(frozen=True, slots=True)
class Preset:
    """A named set of settings a new chat can start with."""

    name: str
    system_prompt: str
    sampling: Sampling
    thinking: Thinking


@dataclass(frozen=True, slots=True)
class Presets:
    """Every preset, in the order saved, and the default's name (None: no default)."""

    presets: tuple[Preset, ...] = ()
    default: str | None = None

    def get(self, name: str | None) -> Preset | None:
        """The preset called `name`, if any."""
        return next((preset for preset in self.presets if preset.name == name), None)

    def saved(self, preset: Preset, *, default: bool) -> Presets:
        """These presets with `preset` added (or replacing the one of its name), and made
        the default when `default` (else the default stays as it was)."""
        others = tuple(p for p in self.presets if p.name != preset.name)
        chosen = preset.name if default else self.default
        return replace(self, presets=(*others, preset), default=chosen)


class _Thinking(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = True
    budget: int | None = Field(default=Thinking().budget, ge=1, le=MAX_THINKING_BUDGET)


class _Preset(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=MAX_NAME_CHARS)
    system_prompt: str = ""
    sampling: SamplingSettings = SamplingSettings()
    thinking: _Thinking = _Thinking()


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    default: str | None = None
    presets: list[_Preset] = []


class PresetFile:
    """`presets.json` in a folder (the config file's)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE_NAME

    def load(self) -> Presets:
        """The presets; none when the file does not exist.

        Raises:
            ConfigError: the file cannot be read or is not valid presets (one line naming it;
                the file is left as it is).
        """
        text = read_pref(self.path, "presets")
        if text is None:
            return Presets()
        try:
            found = _File.model_validate_json(text)
        except ValidationError as exc:
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "the file"
            raise ConfigError(
                f"{self.path}: the presets do not read: {where}: {error['msg']} "
                "(the file is left as it is)"
            ) from exc
        presets = tuple(_preset(p) for p in found.presets)
        if len({p.name for p in presets}) < len(presets):
            raise ConfigError(f"{self.path}: the presets do not read: two share a name")
        if found.default is not None and found.default not in {p.name for p in presets}:
            raise ConfigError(
                f"{self.path}: the presets do not read: the default {found.default!r} is none "
                "of them"
            )
        return Presets(presets, found.default)

    def save(self, presets: Presets) -> None:
        """Write the presets, whole or not at all.

        Raises:
            ConfigError, ExportError: the folder or the file cannot be written (or is a link).
        """
        document = {
            "default": presets.default,
            "presets": [_record(preset) for preset in presets.presets],
        }
        write_pref(self.path, json.dumps(document, ensure_ascii=False, indent=2) + "\n")


def _preset(found: _Preset) -> Preset:
    thinking = Thinking(found.thinking.enabled, found.thinking.budget)
    return Preset(found.name, found.system_prompt, found.sampling.to_sampling(), thinking)


def _record(preset: Preset) -> dict[str, object]:
    sampling = preset.sampling
    return {
        "name": preset.name,
        "system_prompt": preset.system_prompt,
        "sampling": {
            "temperature": sampling.temperature,
            "top_p": sampling.top_p,
            "top_k": sampling.top_k,
            "max_new_tokens": sampling.max_new_tokens,
        },
        "thinking": {"enabled": preset.thinking.enabled, "budget": preset.thinking.budget},
    }
