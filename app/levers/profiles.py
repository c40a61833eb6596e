"""Every lever in proof-line order, and the profiles: lists of levers, the rest off.

A profile turns its levers on; the proof judges every lever of `LEVERS` on the running
model, on or off (a lever without a line in a profile judges to none). Settings, the
engine, the proof, the preflight and the byte model read profiles here.
"""

from __future__ import annotations

from typing import Final

from app.levers.checks import accept_length, no_faking
from app.levers.draft import dspark, fp8_draft, hot_vocab, nextn, replayssm
from app.levers.host import fast_cores, gc_freeze, prepared_commit
from app.levers.lever import Lever, Package, Profile
from app.levers.model import bf16_router, cuda_graphs, fp8_head, fp32_head, humming

LEVERS: Final[tuple[Lever, ...]] = (
    cuda_graphs.LEVER,  # first: the Humming and FP8 head lines count what ran in capture
    humming.LEVER,
    fp8_head.LEVER,
    fp32_head.LEVER,
    bf16_router.LEVER,
    nextn.LEVER,
    dspark.LEVER,
    fp8_draft.LEVER,
    hot_vocab.LEVER,  # after nextn: its patch wraps the draft head's init after sharing's check
    replayssm.LEVER,
    prepared_commit.LEVER,
    gc_freeze.LEVER,
    fast_cores.LEVER,
    no_faking.LEVER,
    accept_length.LEVER,
)
"""Every lever, in the order of the proof's lines."""
BY_NAME: Final = {lever.name: lever for lever in LEVERS}
ALWAYS: Final = (
    cuda_graphs.LEVER,
    gc_freeze.LEVER,
    fast_cores.LEVER,
    no_faking.LEVER,
    accept_length.LEVER,
)
"""The levers of every profile: CUDA graphs, the scheduler's host levers and the guards of the
results."""


def profile(name: str, *levers: Lever) -> Profile:
    """Profile `name`: these levers and `ALWAYS`, in `LEVERS`' order."""
    chosen = {lever.name for lever in (*ALWAYS, *levers)}
    return Profile(name, tuple(lever for lever in LEVERS if lever.name in chosen))


STACK = (humming.LEVER, fp8_head.LEVER, nextn.LEVER)
"""NVIDIA's three levers: Humming MoE, the FP8 LM head, NEXTN MTP."""
PROFILES: Final[dict[str, Profile]] = {
    p.name: p
    for p in (
        # Humming MoE + FP8 LM head + NEXTN MTP with a shared head, verified with KDA
        # ReplaySSM (ring 8): the product.
        profile("stack", *STACK, replayssm.LEVER, prepared_commit.LEVER),
        # The stack with SGLang's recurrent verify (a KDA state snapshot a draft position).
        profile("stack-recurrent", *STACK),
        # The official recipe: FlashInfer MXFP4 MoE, BF16 head with FP32 logits, no MTP.
        profile("baseline", fp32_head.LEVER),
        profile("humming", humming.LEVER, fp32_head.LEVER),
        profile("humming+fp8", humming.LEVER, fp8_head.LEVER),
        # Humming + NEXTN with the BF16 head: isolates what the FP8 head adds to the stack.
        profile("humming+nextn", humming.LEVER, nextn.LEVER),
        profile("dspark", humming.LEVER, fp8_head.LEVER, dspark.LEVER, replayssm.LEVER),
        # Opt-in, measured levers (they change numerics): the stack with BF16 router gates,
        # and DSpark with an FP8 draft.
        profile(
            "stack+bf16-router", *STACK, replayssm.LEVER, prepared_commit.LEVER, bf16_router.LEVER
        ),
        profile(
            "dspark+fp8-draft",
            humming.LEVER,
            fp8_head.LEVER,
            dspark.LEVER,
            replayssm.LEVER,
            fp8_draft.LEVER,
        ),
        # Opt-in, coverage unmeasured: the stack whose NEXTN draft reads a hot-vocabulary
        # slice of the FP8 head (the verify's full head keeps the output; acceptance may drop).
        profile("stack+hot-vocab", *STACK, replayssm.LEVER, prepared_commit.LEVER, hot_vocab.LEVER),
    )
}
"""Every profile by name (the others than USER_PROFILES exist for A/B runs)."""
DEFAULT_PROFILE: Final = "stack"
USER_PROFILES: Final = (DEFAULT_PROFILE, "dspark", "baseline")
"""The profiles offered to a user (`--profile`, a config file's errors); the other PROFILES,
A/B rigs for `bench --profiles`, are accepted but not offered."""
OPT_IN: Final = {"stack+bf16-router": bf16_router.LEVER, "dspark+fp8-draft": fp8_draft.LEVER}
"""The opt-in levers, by the profile that adds each to its base: they change numerics, so no
default profile has them until accuracy on real weights backs them (docs/engine-settings.md's
table)."""
DEFAULT_MEM_FRACTION: Final = 0.65


def packages_of(p: Profile) -> tuple[Package, ...]:
    """The modules a profile runs on (its levers' packages, the others' `packages_off`),
    each once, in `LEVERS`' order."""
    found = (
        pkg for lever in LEVERS for pkg in (lever.packages if p.has(lever) else lever.packages_off)
    )
    return tuple(dict.fromkeys(found))


def same_levers(levers: tuple[str, ...]) -> str | None:
    """The profile that runs exactly these levers, or None."""
    wanted = set(levers)
    return next((name for name, p in PROFILES.items() if set(p.names) == wanted), None)
