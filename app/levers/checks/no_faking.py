"""No result-faking variable: none of SGLang's variables that fake a result, or silently
change the quantization or the process handling the proof relies on, is set, in ling-chat's
environment before the start (refused, exit status 2) nor in the scheduler's (the line).

The list is read from SGLang 0.5.23's `srt/environ.py`: its "Runtime simulations" (a forced
accept length and what shapes it, forced expert routing) and the other variables that make
a run's output or numbers not the model's.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from app.core.proof_report import ProofLine
from app.levers.lever import (
    ByteTerm,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    fits_any,
    no_args,
    no_refusal,
)
from app.levers.lines import error, judged

SIMULATE_ACC_LEN = "SGLANG_SIMULATE_ACC_LEN"
"""SGLang's benchmark knob: a value > 0 forces this accept length instead of verifying."""
FAKING: Mapping[str, str] = {
    SIMULATE_ACC_LEN: "SGLang would force this accept length instead of verifying the drafts",
    "SGLANG_SIMULATE_ACC_METHOD": "it shapes SGLang's simulated acceptance",
    "SGLANG_SIMULATE_ACC_TOKEN_MODE": "it shapes SGLang's simulated acceptance",
    "SGLANG_SIMULATE_ACC_GREEDY": "it shapes SGLang's simulated acceptance",
    "SGLANG_DSPARK_SIMULATE_FOLD": "it shapes SGLang's simulated acceptance",
    "SGLANG_SIMULATE_UNIFORM_EXPERTS": "SGLang would route tokens to experts by a fixed rule, "
    "not by the router",
    "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS": "SGLang would route tokens to experts by a fixed "
    "rule, not by the router",
    "SGLANG_DEBUG_HISPARSE_SKIP_IO": "SGLang would skip HiSparse's KV copies (its output is "
    "garbage, for benchmarks only)",
    "SGLANG_KILLPG_ON_SCHEDULER_EXCEPTION": "a scheduler error would kill ling-chat's whole "
    "process group instead of being reported",
    "SGLANG_FP8_IGNORED_LAYERS": "SGLang would leave those layers unquantized, not the "
    "checkpoint's quantization that the levers run on",
}
"""Each variable, and what setting it does; any value but the empty one counts as set (the
recipe's empty SGLANG_FP8_IGNORED_LAYERS is SGLang 0.5.23's unset)."""
LINE = Line("no_faking", "No result-faking variables", "unset the listed variables")


def refuse_env(env: Mapping[str, str], profile: Profile) -> str | None:
    """The first faking variable set in `env`."""
    for name, does in FAKING.items():
        if value := env.get(name, ""):
            return (
                f"{name}={value} contradicts the proof of profile {profile.name}: {does}; unset it"
            )
    return None


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Every faking variable unset in the scheduler."""
    if err := error(facts, "env"):
        return (judged(LINE, False, err),)
    set_vars = {k: v for k, v in facts["env"].items() if v not in (None, "")}
    evidence = (
        "set: " + ", ".join(f"{k}={v}" for k, v in set_vars.items())
        if set_vars
        else f"unset in the scheduler: {', '.join(facts['env'])}"
    )
    return (judged(LINE, not set_vars, evidence),)


LEVER = Lever(
    name="no_faking",
    called="the proof",
    called_off="the proof",
    lines=(LINE,),
    args=no_args,
    args_why="none: a check of the environment",
    free=frozenset(),
    refuse=no_refusal,
    refuse_env=refuse_env,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="a check of the scheduler's environment, on any GPU"),
    patch=None,
    facts={"env": lambda live: {name: os.environ.get(name) for name in FAKING}},
    reads=("env",),
    judge=judge,
    bytes=ByteTerm(why="a check: it changes no byte"),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
