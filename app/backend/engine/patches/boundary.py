"""What crosses the process boundary between the app and SGLang's spawned scheduler: the
plan of the changes to install (in the `LING_CHAT_PATCH_PLAN` variable, which spawned
children inherit), and the refusal the scheduler raises back (read from the engine's error
or the log)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass

from app.levers.lever import Profile
from app.levers.profiles import DEFAULT_PROFILE, PROFILES

PLAN_ENV = "LING_CHAT_PATCH_PLAN"
REFUSAL = re.compile(r"LING_CHAT_REFUSED\[(\w+)\] (.+?) LING_CHAT_END")
"""Finds a refusal raised in the scheduler, in the engine's error or in the log."""


def refusal(key: str, message: str) -> RuntimeError:
    """An error that stops the scheduler and reaches the app as a failed proof line `key`."""
    return RuntimeError(f"LING_CHAT_REFUSED[{key}] {message} LING_CHAT_END")


@dataclass(frozen=True, slots=True)
class PatchPlan:
    """Which model changes the child installs."""

    patches: tuple[str, ...] = PROFILES[DEFAULT_PROFILE].patches
    """The levers' patches: modules of app/backend/engine/patches, each installed with this
    plan (the profile's `patches`)."""
    log_file: str | None = None
    """Child stdout/stderr go here (None: leave them alone)."""
    min_head_speedup: float = 1.2
    """The FP8 head must beat the BF16 head by this factor in the load-time timing."""
    progress_file: str | None = None
    """Where the load's progress goes (app/backend/engine/boot/load_progress.py; None: nowhere)."""
    draft_own_shards: bool = True
    """The NEXTN draft reads only its own shards (draft_shards.py); off: SGLang's second
    reading of the whole checkpoint, for the load benchmark's side-by-side rows."""

    @property
    def fp8_head(self) -> bool:
        """Whether the FP8 head's patch is in the plan."""
        return "fp8_head" in self.patches

    @classmethod
    def for_profile(
        cls, profile: Profile, log_file: str, progress_file: str | None = None
    ) -> PatchPlan:
        """The changes a profile's levers need, the child's output going to `log_file`."""
        return cls(patches=profile.patches, log_file=log_file, progress_file=progress_file)

    def to_env(self) -> str:
        """The JSON value of LING_CHAT_PATCH_PLAN."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> PatchPlan:
        """The plan `to_env` wrote."""
        data = json.loads(raw)
        return cls(**{**data, "patches": tuple(data.get("patches", ()))})

    @classmethod
    def from_env(cls) -> PatchPlan:
        """The plan the parent set; the default profile's when unset."""
        raw = os.environ.get(PLAN_ENV)
        return cls.from_json(raw) if raw else cls()
