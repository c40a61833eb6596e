"""DSpark: inclusionAI's DSpark draft (5 dense layers, a Markov head) drafts a block of 8
tokens in one forward, projected through the target's FP8 head; the target verifies the
block and its anchor (9 tokens) with KDA ReplaySSM.

No patch makes the draft use the FP8 head: in SGLang 0.5.23 `DSparkWorkerV2` hands the
draft the target's `lm_head` module itself (`attach_shared_modules`), and
`project_through_lm_head` (models/dspark.py) calls that module's `quant_method.apply`
whenever `should_apply_lm_head_quant_method` says so, which it does for any method that is
not one of SGLang's unquantized or ModelOpt ones: ling-chat's FP8 method runs. The patch
(patches/dspark.py) only counts the draft's projections in capture, to prove it.

SGLang attributes read: `scheduler.draft_worker` (`DSparkWorkerV2`): `.draft_model`
(`embed_tokens`, `lm_head`, `layers`, `markov_head`, `block_size`), `.gamma`,
`.verify_num_draft_tokens`, `._resolve_target_embed_tokens` (the embedding SGLang shares),
`.draft_model_runner.decode_cuda_graph_runner`; the target runner's
`decode_cuda_graph_runner`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.proof_report import ProofLine
from app.levers.backends import SPECULATIVE_ATTENTION, attention
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
from app.levers.lines import fact, judged
from app.levers.live import DSPARK_WORKER, Live
from app.levers.model.cuda_graphs import graph_runner
from app.levers.model.fp8_head import FP8_DTYPE
from app.levers.model.fp8_head import METHOD as FP8_HEAD_METHOD

DRAFT = "inclusionAI/Ling-3.0-flash-dspark"
"""inclusionAI's DSpark draft for Ling-3.0-flash: 5 dense layers, 1.36B parameters, BF16."""
BLOCK = 8
"""Draft tokens per DSpark block; the verify window is one more (the anchor token)."""
WINDOW = BLOCK + 1
DRAFT_CLASS = "LingDSparkModel"
ENGAGED = Line(
    "dspark",
    f"DSpark draft ({DRAFT_CLASS} in {DSPARK_WORKER})",
    "run the dspark profile with inclusionAI/Ling-3.0-flash-dspark as the draft "
    "(speculative_algorithm DSPARK)",
)
HEAD = Line(
    "dspark_head",
    "DSpark draft projects through the target's FP8 head",
    "run ling-chat's engine with the FP8 head: the draft must hold the target's own head "
    "module, whose FP8 method projects its hidden states",
)
BLOCK_LINE = Line(
    "dspark_block",
    f"DSpark block {BLOCK} / verify window {WINDOW}",
    f"use the draft's block size {BLOCK} (speculative_num_draft_tokens {WINDOW})",
)
NO_WORKER = "no DSpark worker"


def args(context: Context, on: bool) -> dict[str, Any]:
    """DSpark's draft (`context.dspark_draft`), one block of 8 a round, 9 tokens verified."""
    if not on:
        return {}
    return {
        "speculative_algorithm": "DSPARK",
        "speculative_draft_model_path": context.dspark_draft,
        "speculative_dspark_block_size": BLOCK,
        "speculative_num_steps": 1,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": WINDOW,
    }


def collect(live: Live) -> dict[str, Any] | None:
    """The `dspark` fact (None without a DSpark worker)."""
    if not live.dspark:
        return None
    from sglang.srt.layers.logits_processor import should_apply_lm_head_quant_method

    spec = live.spec
    runner = live.scheduler.tp_worker.model_runner
    target, draft = runner.model, spec.draft_model
    lm_head = draft.lm_head
    counts = live.sources.patch("dspark")
    return {
        "worker": type(spec).__name__,
        "draft_class": type(draft).__name__,
        "draft_layers": len(draft.layers),
        "markov_head": type(draft.markov_head).__name__,
        "gamma": spec.gamma,
        "verify_window": spec.verify_num_draft_tokens,
        "config_block_size": getattr(draft, "block_size", None),
        "head": {
            "is_target_head": lm_head is target.lm_head,
            "embed_is_target_embed": draft.embed_tokens
            is spec._resolve_target_embed_tokens(target),
            "weight_dtype": str(lm_head.weight.dtype).removeprefix("torch."),
            "quant_method": type(lm_head.quant_method).__name__,
            "applies_quant_method": should_apply_lm_head_quant_method(
                lm_head, lm_head.quant_method
            ),
        },
        "projections_captured": dict(counts.PROJECTIONS),
        "fp8_calls_in_draft_capture": counts.COUNTS["fp8_calls_in_draft_capture"],
        "graph_runners": {
            "target_verify": graph_runner(
                runner.decode_cuda_graph_runner, getattr(runner, "eager_runner", None)
            ),
            "draft_decode": graph_runner(
                spec.draft_model_runner.decode_cuda_graph_runner,
                getattr(spec.draft_model_runner, "eager_runner", None),
            ),
        },
    }


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """The draft engaged, its head, its block; none on a profile without DSpark."""
    if not profile.has(LEVER):
        return ()
    d = fact(facts, "dspark", NO_WORKER)
    if isinstance(d, str):
        return tuple(judged(line, False, d) for line in (ENGAGED, HEAD, BLOCK_LINE))
    return (_engaged(d), _head(d), _block(d))


def _engaged(d: Mapping[str, Any]) -> ProofLine:
    """The DSpark worker runs the Ling DSpark draft class."""
    return judged(
        ENGAGED,
        d["worker"] == DSPARK_WORKER and d["draft_class"] == DRAFT_CLASS,
        f"{d['worker']} with {d['draft_class']} ({d['draft_layers']} layers, markov head "
        f"{d['markov_head']})",
    )


def _head(d: Mapping[str, Any]) -> ProofLine:
    """The draft's head is the target's module, FP8 through ling-chat's method in capture."""
    h = d["head"]
    captured = d["projections_captured"]
    fp8_calls = d["fp8_calls_in_draft_capture"]
    ok = (
        h["is_target_head"]
        and h["embed_is_target_embed"]
        and h["weight_dtype"] == FP8_DTYPE
        and h["quant_method"] == FP8_HEAD_METHOD
        and h["applies_quant_method"]
        and captured.get(FP8_HEAD_METHOD, 0) > 0
        and set(captured) == {FP8_HEAD_METHOD}
        and fp8_calls > 0
    )
    methods = ", ".join(f"{m} {n}x" for m, n in sorted(captured.items())) or "none"
    return judged(
        HEAD,
        ok,
        f"draft.lm_head is target.lm_head: {h['is_target_head']}; embeddings shared: "
        f"{h['embed_is_target_embed']}; head {h['weight_dtype']} via {h['quant_method']} "
        f"(SGLang applies it: {h['applies_quant_method']}); draft projections in graph "
        f"capture: {methods}; {FP8_HEAD_METHOD}.apply ran {fp8_calls}x inside them",
    )


def _block(d: Mapping[str, Any]) -> ProofLine:
    """The worker's block size (gamma) and verify window."""
    return judged(
        BLOCK_LINE,
        (d["gamma"], d["verify_window"]) == (BLOCK, WINDOW),
        f"gamma {d['gamma']}, verify window {d['verify_window']} tokens "
        f"(draft config block_size {d['config_block_size']})",
    )


def fits(profile: Profile) -> str | None:
    """DSpark verifies with ReplaySSM, and its draft projects through the FP8 head."""
    missing = [name for name in ("replayssm", "fp8_head") if not profile.has(name)]
    return f"DSpark needs {', '.join(missing)}" if missing else None


LEVER = Lever(
    name="dspark",
    called="the DSpark draft lever",
    called_off="the target alone",
    lines=(ENGAGED, HEAD, BLOCK_LINE),
    args=args,
    args_why="inclusionAI's DSpark draft, one block of 8 a round, 9 tokens verified (block "
    "and anchor)",
    # where the DSpark draft is: `--dspark-draft`, or an override of its path
    free=frozenset({"speculative_draft_model_path"}),
    refuse=no_refusal,
    refuse_env=no_env_refusal,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(
        why="SGLang 0.5.23 runs no speculative algorithm on flex_attention; the DSpark draft "
        "picks its own backend",
        settings=attention(SPECULATIVE_ATTENTION),
    ),
    patch="dspark",
    facts={"dspark": collect},
    reads=("dspark",),
    judge=judge,
    bytes=ByteTerm(
        why="a round: the target's verify of 9 tokens, then one draft forward over the block "
        "reading the draft's weights once, its Markov head's markov_w2 once per drafted token "
        "(8 GEMVs), and the target's FP8 head a second time",
        round="dspark",
        markov_w2_reads=BLOCK,
    ),
    fits=fits,
    draft_window=WINDOW,
    validate=None,
)
