"""NEXTN MTP: the checkpoint's NEXTN layer drafts 3 tokens top-1, the target verifies 4, and
the draft shares the target's whole LM-head module (patches/sharing.py: stock SGLang shares
only the weight, which the draft misreads once the head is FP8).

Two lines: the draft shares the head module and embeddings (`shared_head`), the speculative
worker runs 3 steps, top-1, 4 tokens (`nextn`). Off, both are verified off; a DSpark
profile has neither (its draft replaces them).
"""

from __future__ import annotations

from typing import Any

from app.core.proof_report import ProofLine
from app.levers.backends import DRAFT_ATTENTION, EAGLE_ATTENTION, FLASHINFER, attention
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
    no_refusal,
)
from app.levers.lines import error, judged, off
from app.levers.live import Live
from app.levers.model.fp8_head import head

STEPS = 3
TOPK = 1
DRAFT_TOKENS = STEPS + 1
"""The verify window: the drafts and the bonus token."""
SHARED = Line(
    "shared_head",
    "Draft shares the target's LM head module",
    "run ling-chat's engine: stock SGLang shares only the weight tensor, which the draft "
    "misreads once the head is FP8",
)
LINE = Line(
    "nextn",
    f"NEXTN MTP {STEPS} steps / top-{TOPK} / {DRAFT_TOKENS} tokens",
    "use a checkpoint with num_nextn_predict_layers=1 and let ling-chat set NEXTN 3/1/4 "
    "(draft path = model path)",
)


def depth_args(steps: int) -> dict[str, Any]:
    """A top-1 NEXTN chain of `steps` draft steps: the verify reads the drafts and the bonus.

    Raises:
        ValueError: steps < 1.
    """
    if steps < 1:
        raise ValueError(f"a NEXTN chain needs at least one draft step, got {steps}")
    return {
        "speculative_num_steps": steps,
        "speculative_eagle_topk": TOPK,
        "speculative_num_draft_tokens": steps + 1,
    }


def args(context: Context, on: bool) -> dict[str, Any]:
    """The model is its own NEXTN draft."""
    if not on:
        return {}
    return {
        "speculative_draft_model_path": context.model_path,
        "speculative_algorithm": "NEXTN",
        **depth_args(STEPS),
    }


def sharing(target: Any, draft: Any) -> dict[str, Any]:
    """Whether the draft holds the target's head module, head weight and embeddings."""
    return {
        "head_module_shared": draft.lm_head is target.lm_head,
        "head_weight_shared": getattr(draft.lm_head, "weight", None) is target.lm_head.weight,
        "embed_shared": draft.model.word_embeddings.weight is target.model.word_embeddings.weight,
    }


def speculative(spec: Any, draft_worker: Any) -> dict[str, Any] | None:
    """The speculative worker and its draft worker's shape, or None without one."""
    if spec is None:
        return None
    return {
        "worker": type(spec).__name__,
        "draft_worker": type(draft_worker).__name__ if draft_worker is not None else None,
        "num_steps": getattr(draft_worker, "speculative_num_steps", None),
        "topk": getattr(draft_worker, "topk", None),
        "num_draft_tokens": getattr(draft_worker, "speculative_num_draft_tokens", None),
    }


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The shared head, then the worker's shape; none on a DSpark profile."""
    if profile.has("dspark"):
        return ()
    return (_shared(facts, profile), _shape(facts, profile))


def _shared(facts: Facts, profile: Profile) -> ProofLine:
    fact = facts.get("sharing")
    if not profile.has(LEVER):
        return off(SHARED, fact is None, "no draft model")
    if err := error(facts, "sharing", optional=("sharing",)):
        return judged(SHARED, False, err)
    if fact is None:
        return judged(SHARED, False, "no draft model is running")
    draft = facts.get("head_draft") or {}
    ok = bool(fact["head_module_shared"] and fact["embed_shared"])
    evidence = (
        f"draft.lm_head is target.lm_head: {fact['head_module_shared']}; "
        f"embeddings shared: {fact['embed_shared']}; draft head reads "
        f"{draft.get('weight_dtype')} via {draft.get('quant_method')}"
    )
    return judged(SHARED, ok, evidence)


def _shape(facts: Facts, profile: Profile) -> ProofLine:
    spec = facts.get("speculative")
    if not profile.has(LEVER):
        return off(LINE, spec is None, "no speculative worker")
    if err := error(facts, "speculative", optional=("speculative",)):
        return judged(LINE, False, err)
    if spec is None:
        return judged(LINE, False, "no speculative worker is running")
    shape = (spec["num_steps"], spec["topk"], spec["num_draft_tokens"])
    return judged(
        LINE,
        shape == (STEPS, TOPK, DRAFT_TOKENS),
        f"{spec['worker']} with {spec['draft_worker']}: {shape[0]} steps, top-{shape[1]}, "
        f"{shape[2]} draft tokens",
    )


def _sharing(live: Live) -> dict[str, Any] | None:
    return sharing(live.target, live.draft) if live.draft is not None else None


def _head_draft(live: Live) -> dict[str, Any] | None:
    return head(live.draft) if live.draft is not None else None


LEVER = Lever(
    name="nextn",
    called="the NEXTN 3/1/4 lever",
    called_off="the target alone",
    lines=(SHARED, LINE),
    args=args,
    args_why="the checkpoint's NEXTN layer is its own draft: 3 steps, top-1, a verify of 4 tokens",
    free=frozenset(),
    refuse=no_refusal,
    refuse_env=no_env_refusal,
    packages=(FLASHINFER,),  # the NEXTN verify samples with FlashInfer's kernels
    packages_off=(),
    runs_on=RunsOn(
        why="SGLang 0.5.23's EAGLE draft, an MLA model, has no other backend",
        settings={
            **attention(EAGLE_ATTENTION),
            "speculative_draft_attention_backend": DRAFT_ATTENTION,
        },
    ),
    patch="sharing",
    facts={
        "speculative": lambda live: speculative(live.spec, live.draft_worker),
        "sharing": _sharing,
        "head_draft": _head_draft,
    },
    reads=("speculative", "sharing", "head_draft"),
    judge=judge,
    bytes=ByteTerm(
        why="a round: the draft's extend and 2 more steps, each reading the NEXTN layer and the "
        "whole head, then the target's verify of 4 tokens",
        round="nextn",
    ),
    fits=fits_any,
    draft_window=DRAFT_TOKENS,
    validate=None,
)
