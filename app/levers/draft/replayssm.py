"""KDA ReplaySSM: the verify folds each commit's raw inputs into the KDA state, on a ring
that is a power of two >= twice the verify window (8 for NEXTN's 4 tokens, 32 for DSpark's
9), instead of a state snapshot a draft position (`stack-recurrent`, which has no line).

SGLang attributes read: the target runner's `req_to_token_pool.mamba_pool`
(`enable_linear_replayssm_spec`, `replayssm_spec_fold`, `linear_replayssm_cache_len`,
`mamba_cache.replayssm_rawv`, the ring of raw inputs); the commits counted by its patch
(patches/replayssm.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.proof_report import ProofLine
from app.levers.backends import REPLAYSSM_LINEAR_BASE, REPLAYSSM_LINEAR_DECODE
from app.levers.lever import (
    ByteTerm,
    Context,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    no_env_refusal,
)
from app.levers.lines import error, fact, judged
from app.levers.live import Live

KEYS = ("enable_linear_replayssm_spec", "linear_replayssm_cache_len")
DEFAULT_RING = 16
"""SGLang 0.5.23's `linear_replayssm_cache_len` when none is given."""
LINE = Line(
    "replayssm",
    "KDA ReplaySSM verify ring",
    "keep enable_linear_replayssm_spec on with linear_replayssm_cache_len a power of two "
    ">= 2x the verify window (32 for DSpark's 9 tokens, 8 for NEXTN's 4)",
)


def ring_args(window: int) -> dict[str, Any]:
    """KDA ReplaySSM verify for a verify window of `window` tokens, with the shortest ring
    SGLang accepts: a power of two >= 2x the window (32 for DSpark's 9, 8 for NEXTN's 4)."""
    return {
        "enable_linear_replayssm_spec": True,
        "linear_replayssm_cache_len": 1 << (2 * window - 1).bit_length(),
    }


def args(context: Context, on: bool) -> dict[str, Any]:
    """The verify, its ring sized for the profile's draft."""
    return ring_args(context.window) if on and context.window is not None else {}


def refuse(key: str, value: Any, profile: Profile) -> str | None:
    """ReplaySSM turned on where the profile verifies recurrently."""
    if not profile.has(LEVER) and key in KEYS and value is not None:
        return (
            f"contradicts {LEVER.called_off} of profile {profile.name} "
            "(the stack verifies with ReplaySSM)"
        )
    return None


def ring_problem(args: Mapping[str, Any]) -> str | None:
    """Why these server arguments' ReplaySSM ring cannot work, or None.

    SGLang 0.5.23 sizes the KDA ring at `linear_replayssm_cache_len` and refuses, only
    while allocating the cache, a length that is not a power of two or is under twice the
    verify window (`speculative_num_draft_tokens`).
    """
    if not args.get("enable_linear_replayssm_spec"):
        return None
    ring = args.get("linear_replayssm_cache_len", DEFAULT_RING)
    window = int(args.get("speculative_num_draft_tokens") or 0)
    if not isinstance(ring, int) or ring < 1 or ring & (ring - 1):
        return f"linear_replayssm_cache_len={ring!r}: the ReplaySSM ring must be a power of two"
    if ring < 2 * window:
        return (
            f"linear_replayssm_cache_len={ring}: the ReplaySSM ring must be >= 2 x the "
            f"verify window of {window} tokens ({2 * window})"
        )
    return None


def collect(live: Live) -> dict[str, Any]:
    """The KDA state pool's verify mode, and the commits its patch counted."""
    pool = live.scheduler.tp_worker.model_runner.req_to_token_pool.mamba_pool
    return {
        "spec_enabled": bool(getattr(pool, "enable_linear_replayssm_spec", False)),
        "kda_fold": bool(getattr(pool, "replayssm_spec_fold", False)),
        "ring_len": getattr(pool, "linear_replayssm_cache_len", None),
        "ring_allocated": getattr(pool.mamba_cache, "replayssm_rawv", None) is not None,
        "commits": live.sources.patch("replayssm").COUNTS["commits"],
    }


def engaged(ring: Mapping[str, Any], window: int) -> tuple[bool, str]:
    """Whether the KDA pool folds each verify's commits through an allocated ring that is a
    power of two >= 2x the `window` tokens a verify takes, and the evidence."""
    length = ring["ring_len"] or 0
    ok = (
        ring["spec_enabled"]
        and ring["kda_fold"]
        and ring["ring_allocated"]
        and length > 0
        and length & (length - 1) == 0
        and length >= 2 * window
    )
    return bool(ok), (
        f"spec verify on: {ring['spec_enabled']}, KDA fold-every-commit: {ring['kda_fold']}; "
        f"ring {length} allocated: {ring['ring_allocated']} (needs a power of two >= "
        f"{2 * window}); {ring['commits']} ReplaySSM commits before the warm-up"
    )


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The ring, sized for the window of the profile's draft; no line without the lever."""
    if not profile.has(LEVER):
        return ()
    if profile.has("dspark"):  # the window is the DSpark worker's
        d = fact(facts, "dspark", "no DSpark worker")
        if isinstance(d, str):
            return (judged(LINE, False, d),)
        ring = fact(facts, "replayssm", "no KDA state pool")
        if isinstance(ring, str):
            return (judged(LINE, False, ring),)
        return (judged(LINE, *engaged(ring, d["verify_window"] or 0)),)
    if err := error(facts, "replayssm", "speculative", optional=("speculative",)):
        return (judged(LINE, False, err),)
    if facts.get("speculative") is None:
        return (judged(LINE, False, "no speculative worker is running"),)
    window = facts["speculative"]["num_draft_tokens"] or 0
    return (judged(LINE, *engaged(facts["replayssm"], window)),)


def fits(profile: Profile) -> str | None:
    """It verifies a draft."""
    return None if profile.window is not None else "ReplaySSM verifies a draft: it needs one"


LEVER = Lever(
    name="replayssm",
    called="the KDA ReplaySSM lever",
    called_off="the recurrent KDA verify",
    lines=(LINE,),
    args=args,
    args_why="the shortest ring SGLang accepts: a power of two >= 2x the draft's verify window",
    free=frozenset({"linear_replayssm_cache_len"}),  # judged by `ring_problem` and the proof
    refuse=refuse,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(
        why="SGLang 0.5.23's ReplaySSM verify needs the triton or flashinfer KDA decode",
        settings={
            "linear_attn_decode_backend": REPLAYSSM_LINEAR_DECODE,
            "linear_attn_backend": REPLAYSSM_LINEAR_BASE,
        },
    ),
    patch="replayssm",
    facts={"replayssm": collect},
    reads=("replayssm", "speculative", "dspark"),
    judge=judge,
    bytes=ByteTerm(
        why="the verify writes no KDA state snapshot a draft position", kda_snapshots=False
    ),
    fits=fits,
    draft_window=None,
    validate=ring_problem,
)
