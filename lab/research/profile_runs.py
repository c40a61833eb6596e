"""The engines a kernel-profile run boots (lab/scripts/gpu_kernel_profile.py), and their files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from app.levers.draft.nextn import STEPS as NEXTN_STEPS
from app.levers.draft.nextn import depth_args as nextn_depth_args
from app.levers.draft.replayssm import ring_args as replayssm_args
from app.levers.profiles import PROFILES


@dataclass(frozen=True, slots=True)
class ProfileRun:
    """One profile, at a NEXTN depth other than its own when `draft_steps` is set."""

    profile: str
    layers: int
    draft_steps: int | None = None

    @property
    def _suffix(self) -> str:
        return "" if self.draft_steps is None else f"-k{self.draft_steps}"

    @property
    def name(self) -> str:
        """The run's name: its log directory."""
        return self.profile + self._suffix

    @property
    def file_name(self) -> str:
        """Its kernel-profile file: kernels-PROFILE-LAYERS[-kSTEPS].json."""
        return f"kernels-{self.profile.replace('+', '-')}-{self.layers}{self._suffix}.json"

    @property
    def depth(self) -> int | None:
        """Draft steps a round, None without NEXTN."""
        if not PROFILES[self.profile].has("nextn"):
            return None
        return NEXTN_STEPS if self.draft_steps is None else self.draft_steps

    @property
    def replayssm(self) -> bool:
        """Whether its KDA verify runs ReplaySSM."""
        return PROFILES[self.profile].has("replayssm")

    @property
    def overrides(self) -> dict[str, Any]:
        """Server arguments over the profile's own: its depth (the proof's NEXTN line then
        fails, which a profile run reports and goes on), and with ReplaySSM the shortest
        ring that depth's verify window allows."""
        if self.draft_steps is None:
            return {}
        args = nextn_depth_args(self.draft_steps)
        if self.replayssm:
            args |= replayssm_args(self.draft_steps + 1)
        return args


def profile_runs(profiles: Sequence[str], layers: int, steps: Sequence[int]) -> list[ProfileRun]:
    """Each profile once, or each NEXTN profile once a depth in `steps` when it is given.

    Raises:
        ValueError: An unknown profile, a depth under 1 or given twice, or depths for a
            profile without NEXTN.
    """
    if any(k < 1 for k in steps) or len(set(steps)) < len(steps):
        raise ValueError(f"depths must be distinct draft steps of at least 1: {list(steps)}")
    runs = []
    for profile in profiles:
        if profile not in PROFILES:
            raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
        if steps and not PROFILES[profile].has("nextn"):
            raise ValueError(f"{profile} has no NEXTN draft: no depth to set")
        depths: Sequence[int | None] = steps or [None]
        runs += [ProfileRun(profile, layers, k) for k in depths]
    return runs
