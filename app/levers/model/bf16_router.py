"""The BF16 router (opt-in, `stack+bf16-router`): every MoE router gate, the target's and the
NEXTN draft's, read in BF16 instead of the checkpoint's FP32.

SGLang 0.5.23's BailingMoeV3 builds its gates in the config's `router_dtype`; the lever
overrides that field through `json_model_override_args`. It changes routing numerics, so no
default profile has it, and only its own profile has its line.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
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
    fits_any,
    no_env_refusal,
)
from app.levers.lines import LACKING_FIX, error, failed

CONFIG = {"router_dtype": "bf16"}
"""The config.json fields the lever overrides (the checkpoint says "fp32")."""
KEY = "json_model_override_args"
WHY = (
    "SGLang 0.5.23's BailingMoeV3 builds its router gates (target and NEXTN draft) in the "
    "config's `router_dtype`, FP32 when it is `fp32` (the checkpoint's) or absent; BF16 reads "
    "105 of their 210 MB a step at 42 layers (byte model: 1.2% of a stack round's bytes) and "
    "changes routing numerics"
)
"""Why the lever's one server argument (docs/engine-settings.md's opt-in table)."""
GATE_CLASS = "BailingMoEGate"
"""SGLang 0.5.23's MoE router gate of BailingMoeV3 and of its NEXTN layer."""
LINE = Line(
    "router",
    "BF16 router gates (opt-in)",
    "run profile stack+bf16-router as ling-chat sets it (json_model_override_args "
    "router_dtype bf16)",
)


def args(context: Context, on: bool) -> dict[str, Any]:
    """The config's router dtype, for the target and its NEXTN draft."""
    return {KEY: json.dumps(CONFIG)} if on else {}


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """A config override that turns the router to BF16 (or another dtype) on a profile
    without the lever."""
    if profile.has(LEVER) or key != KEY:
        return None
    fields = value  # `--sglang-arg` hands a JSON object over as one
    if isinstance(value, str):
        try:
            fields = json.loads(value)
        except json.JSONDecodeError:
            return None  # SGLang refuses it in its own words
    router = fields.get("router_dtype") if isinstance(fields, Mapping) else None
    if router in (None, "fp32"):
        return None
    return f"contradicts {LEVER.called_off} of profile {profile.name}"


def gates(model: Any) -> dict[str, Any]:
    """Every router gate of `model`: how many in each weight dtype, and their bytes."""
    dtypes: Counter[str] = Counter()
    nbytes = 0
    for _name, module in model.named_modules():
        if type(module).__name__ == GATE_CLASS:
            dtypes[str(module.weight.dtype).removeprefix("torch.")] += 1
            nbytes += module.weight.numel() * module.weight.element_size()
    return {"dtypes": dict(dtypes), "bytes": nbytes}


def router(target: Any, draft: Any) -> dict[str, Any]:
    """The router gates' weight dtypes and bytes (target, NEXTN draft), and the config's
    `router_dtype` as SGLang read it (after `json_model_override_args`)."""
    return {
        "config_router_dtype": getattr(target.config, "router_dtype", None),
        "target": gates(target),
        "draft": gates(draft) if draft is not None else None,
    }


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Every router gate in BF16; no line on a profile without the lever."""
    if not profile.has(LEVER):
        return ()
    if err := error(facts, "router"):
        return (failed(LINE, err, LACKING_FIX if "router" not in facts else LINE.fix),)
    fact = facts["router"]
    models = {"target": fact["target"], "draft": fact.get("draft")}
    dtypes: Counter[str] = Counter()
    for found in filter(None, models.values()):
        dtypes.update(found["dtypes"])
    counts = ", ".join(
        f"{sum(found['dtypes'].values())} {name}" for name, found in models.items() if found
    )
    nbytes = sum(found["bytes"] for found in filter(None, models.values()))
    evidence = (
        f"{sum(dtypes.values())} router gates ({counts}): "
        + ", ".join(f"{t} {n}" for t, n in sorted(dtypes.items()))
        + f", {nbytes / 1e6:.1f} MB; config router_dtype {fact['config_router_dtype']!r}"
    )
    if not dtypes:
        evidence = "no router gate found in the model"
    ok = set(dtypes) == {"bfloat16"}
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return (ProofLine(LINE.key, LINE.title, verdict, evidence, "" if ok else LINE.fix),)


LEVER = Lever(
    name="bf16_router",
    called="the BF16 router lever",
    called_off="the checkpoint's FP32 router",
    lines=(LINE,),
    args=args,
    args_why=WHY,
    free=frozenset(),
    refuse=refuse,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="a dtype of SGLang's BailingMoeV3 router gates, on any GPU"),
    patch=None,
    facts={"router": lambda live: router(live.target, live.draft)},
    reads=("router",),
    judge=judge,
    bytes=ByteTerm(
        why="the gates' weights are read in BF16: half of their FP32 bytes", config=CONFIG
    ),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
