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

    @property
    def kda_replayssm(self) -> bool:
        """The verify runs KDA ReplaySSM: NEXTN's with the lever, DSpark's always."""
        return self.replayssm or self.dspark


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
}
"""Every profile by name: which optimizations it turns on (the others exist for A/B runs)."""
DEFAULT_PROFILE = "stack"

DEFAULT_MEM_FRACTION = 0.65
DEFAULT_MIN_ACCEPT_LENGTH = 1.5
"""The warm-up accept length below which the proof refuses to start."""
