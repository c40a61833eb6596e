"""The profiles: which decode optimizations each turns on, and the defaults a user changes.

The levers a profile turns on are stated here once; the proof (app/backend/proof/rules.py)
later checks the running model against them. Settings, the engine and the proof import them.
"""

from __future__ import annotations

from dataclasses import dataclass

NEXTN_STEPS = 3
NEXTN_TOPK = 1
NEXTN_DRAFT_TOKENS = 4
DSPARK_DRAFT = "inclusionAI/Ling-3.0-flash-dspark"
"""inclusionAI's DSpark draft for Ling-3.0-flash: 5 dense layers, 1.36B parameters, BF16."""
DSPARK_BLOCK = 8
"""Draft tokens per DSpark block; the verify window is one more (the anchor token)."""
DSPARK_WINDOW = DSPARK_BLOCK + 1
BF16_ROUTER_CONFIG = {"router_dtype": "bf16"}
"""The config.json fields the BF16 router overrides: SGLang 0.5.23's BailingMoeV3 reads its
MoE gate in FP32 unless `router_dtype` says otherwise (the checkpoint says "fp32")."""
FP8_DRAFT_QUANTIZATION = "fp8"
"""SGLang's quantization for the FP8 DSpark draft: its layers' linears quantized at load."""


@dataclass(frozen=True, slots=True)
class Levers:
    """The three optimizations (plus the FP32-logits head of the official recipe)."""

    humming: bool
    fp8_head: bool
    nextn: bool
    fp32_logits: bool = False
    dspark: bool = False
    """DSpark draft model (block 8) with KDA ReplaySSM verify, instead of NEXTN."""
    replayssm: bool = False
    """NEXTN's verify with KDA ReplaySSM: the committed tokens' raw inputs folded into the
    state, instead of a state snapshot a draft position."""
    bf16_router: bool = False
    """Every MoE router gate (target and NEXTN draft) read in BF16 instead of the checkpoint's
    FP32: half the gates' bytes; it changes routing numerics, so it is an opt-in rig."""
    fp8_draft: bool = False
    """The DSpark draft's layer linears quantized to FP8 at load (one scale a row) instead of
    BF16; it changes the draft's numerics, so it is an opt-in rig."""

    def __post_init__(self) -> None:
        if self.fp8_draft and not self.dspark:
            raise ValueError("the FP8 draft lever quantizes the DSpark draft: it needs dspark")

    @property
    def kda_replayssm(self) -> bool:
        """The verify runs KDA ReplaySSM: NEXTN's with the lever, DSpark's always."""
        return self.replayssm or self.dspark

    @property
    def config_overrides(self) -> dict[str, str]:
        """The model config.json fields these levers override (SGLang's
        `json_model_override_args`; the byte model reads the config so too)."""
        return dict(BF16_ROUTER_CONFIG) if self.bf16_router else {}


PROFILES: dict[str, Levers] = {
    # Humming MoE + FP8 LM head + NEXTN MTP with a shared head, verified with KDA
    # ReplaySSM (ring 8): the product.
    "stack": Levers(humming=True, fp8_head=True, nextn=True, replayssm=True),
    # The stack with SGLang's recurrent verify (a KDA state snapshot a draft position).
    "stack-recurrent": Levers(humming=True, fp8_head=True, nextn=True),
    # The official recipe: FlashInfer MXFP4 MoE, BF16 head with FP32 logits, no MTP.
    "baseline": Levers(humming=False, fp8_head=False, nextn=False, fp32_logits=True),
    "humming": Levers(humming=True, fp8_head=False, nextn=False, fp32_logits=True),
    "humming+fp8": Levers(humming=True, fp8_head=True, nextn=False),
    # Humming + NEXTN with the BF16 head: isolates what the FP8 head adds to the stack.
    "humming+nextn": Levers(humming=True, fp8_head=False, nextn=True),
    "dspark": Levers(humming=True, fp8_head=True, nextn=False, dspark=True),
    # Opt-in, measured levers (they change numerics): the stack with BF16 router gates, and
    # DSpark with an FP8 draft.
    "stack+bf16-router": Levers(
        humming=True, fp8_head=True, nextn=True, replayssm=True, bf16_router=True
    ),
    "dspark+fp8-draft": Levers(
        humming=True, fp8_head=True, nextn=False, dspark=True, fp8_draft=True
    ),
}
"""Every profile by name: which optimizations it turns on (the others exist for A/B runs)."""
DEFAULT_PROFILE = "stack"
USER_PROFILES = (DEFAULT_PROFILE, "dspark", "baseline")
"""The profiles offered to a user (`--profile`, a config file's errors); the other PROFILES,
A/B rigs for `bench --profiles`, are accepted but not offered."""

DEFAULT_MEM_FRACTION = 0.65
DEFAULT_MIN_ACCEPT_LENGTH = 1.5
"""The warm-up accept length below which the proof refuses to start."""
