"""Before every start, before anything loads: the `--sglang-arg` or variable that contradicts a
lever of the profile, as one line naming the setting and the lever (pure).

Checked ahead of the preflight too, so the same command is refused the same way on any
machine. Each lever says what contradicts it (app/levers/lever.py): a value it sets changed
(unless the setting is `free`), its `refuse` and `refuse_env`, a backend outside its
`runs_on`; a speculative setting on a profile without a draft is refused here (SGLang would
ignore it). The proof still judges the running model; this only stops a start that cannot
pass it, naming the setting instead of a symptom.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from app.levers.lever import Context, Lever, Profile
from app.levers.profiles import LEVERS

SPECULATIVE_KEYS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_dspark_block_size",
)
SGLANG_DEFAULTS = {"enable_fp32_lm_head": False, "enable_linear_replayssm_spec": False}
"""What SGLang 0.5.23 uses for a lever setting an override hands back to it (`null`)."""


def lever_args(profile: Profile, context: Context) -> dict[str, Any]:
    """The server arguments that engage (or keep off) a profile's levers: every lever's, on
    or off, in `LEVERS`' order."""
    args: dict[str, Any] = {}
    for lever in LEVERS:
        args.update(lever.args(context, profile.has(lever)))
    return args


def shown(value: Any) -> str:
    """A value as `--sglang-arg` takes it: a string bare, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def refusal(
    profile: Profile, context: Context, overrides: Mapping[str, Any], env: Mapping[str, str]
) -> str | None:
    """The first override, or variable of `env`, that contradicts a lever of `profile` or
    that SGLang would drop, as one line; None when none does."""
    for key, value in overrides.items():
        if problem := _override(profile, context, key, value):
            return f"--sglang-arg {key}={shown(value)} {problem}"
    for lever in LEVERS:
        if problem := lever.refuse_env(env, profile):
            return problem
    return None


def _owner(profile: Profile, context: Context, key: str) -> tuple[Lever, bool] | None:
    """The first lever that sets `key` in this profile, and whether it is on."""
    for lever in LEVERS:
        on = profile.has(lever)
        if key in lever.args(context, on):
            return lever, on
    return None


def _override(profile: Profile, context: Context, key: str, value: Any) -> str | None:
    own = lever_args(profile, context)
    free = {name for lever in profile.levers for name in lever.free}
    effective = SGLANG_DEFAULTS.get(key) if value is None else value
    owner = _owner(profile, context, key)
    if owner is not None and key not in free and effective != own[key]:
        lever, on = owner
        return (
            f"contradicts {lever.called if on else lever.called_off} of profile "
            f"{profile.name} (ling-chat sets {key}={shown(own[key])})"
        )
    if owner is None and key in SPECULATIVE_KEYS and value is not None and not profile.speculative:
        return (
            f"does not apply to profile {profile.name}, which runs no draft model: SGLang "
            "would ignore it or start one the proof refuses"
        )
    for lever in LEVERS:
        if problem := lever.refuse(key, value, profile):
            return problem
    for lever in profile.levers:
        allowed = lever.runs_on.settings.get(key)
        if allowed is not None and value is not None and value not in allowed:
            return (
                f"contradicts {lever.called} of profile {profile.name}: it runs on {key} "
                f"{', '.join(sorted(allowed))} only ({lever.runs_on.why})"
            )
    return None
