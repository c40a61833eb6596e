"""The official recipe's BF16 head with FP32 logits (`enable_fp32_lm_head`), on `baseline` and
`humming`; every other profile verifies it off (the FP8 head and FP32 logits exclude each
other: FP32 logits would upcast the BF16 matmul that the FP8 head replaces).
"""

from __future__ import annotations

from typing import Any

from app.core.proof_report import ProofLine, Verdict
from app.levers.lever import (
    ByteTerm,
    Context,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    no_env_refusal,
    no_refusal,
)
from app.levers.lines import error, judged

LINE = Line(
    "fp32_head",
    "FP32 LM head off (exclusive with FP8)",
    "unset enable_fp32_lm_head and the config's enable_lm_head_fp32",
)
RECIPE_TITLE = "FP32 LM head (official recipe)"
"""The line's title where the profile asks for FP32 logits."""


def args(context: Context, on: bool) -> dict[str, Any]:
    """Set either way: SGLang's default is off, and the proof judges the flag."""
    return {"enable_fp32_lm_head": on}


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """FP32 logits on where the profile runs the recipe's head, off everywhere else."""
    if err := error(facts, "head_target"):
        return (judged(LINE, False, err),)
    head = facts["head_target"]
    on = head["fp32_logits"] or head["config_fp32_logits"]
    flags = (
        f"logits processor use_fp32_lm_head={head['fp32_logits']}, "
        f"config enable_lm_head_fp32={head['config_fp32_logits']}"
    )
    if profile.has(LEVER):
        return (ProofLine(LINE.key, RECIPE_TITLE, Verdict.PASS if on else Verdict.FAIL, flags),)
    return (judged(LINE, not on, flags),)


def fits(profile: Profile) -> str | None:
    """Not beside the FP8 head."""
    return "FP32 logits and the FP8 head exclude each other" if profile.has("fp8_head") else None


LEVER = Lever(
    name="fp32_head",
    called="the recipe's FP32 LM head",
    called_off="the BF16 logits",
    lines=(LINE,),
    args=args,
    args_why="the official recipe's FP32 logits on the BF16 head; set off elsewhere too, where "
    "SGLang's default is off, so that an override cannot hide",
    free=frozenset(),
    refuse=no_refusal,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="SGLang's logits processor, on any GPU"),
    patch=None,
    facts={},
    reads=("head_target",),
    judge=judge,
    bytes=ByteTerm(why="the logits are written in FP32: 4 bytes a row entry", head="fp32-logits"),
    fits=fits,
    draft_window=None,
    validate=None,
)
