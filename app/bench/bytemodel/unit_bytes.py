"""The byte model's bytes of one decode step or NEXTN round, split by kernel category."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from app.bench.bytemodel.checkpoint import LmHead, ModelShape, Precision, WeightFormat
from app.bench.bytemodel.kernels import Category, Phase
from app.bench.bytemodel.ling_config import (
    DSPARK_DRAFT_LAYER_LINEARS,
    DSPARK_DRAFT_LAYERS,
    DSPARK_DRAFT_PARAMS,
    DSPARK_MARKOV_RANK,
)
from app.bench.bytemodel.mtp import DraftBytes, Routing, mtp_cycle
from app.bench.bytemodel.roofline import StepBytes, decode_step_bytes
from app.levers.draft.dspark import BLOCK as DSPARK_BLOCK
from app.levers.draft.dspark import WINDOW as DSPARK_WINDOW
from app.levers.draft.nextn import STEPS as NEXTN_STEPS
from app.levers.lever import ByteTerm
from app.levers.profiles import PROFILES


def terms(profile: str) -> ByteTerm:
    """A profile's levers' byte-model terms, merged (unknown profiles: none)."""
    levers = PROFILES.get(profile)
    return levers.bytes if levers is not None else ByteTerm(why="not a profile")


def lm_head(profile: str) -> LmHead:
    """How a profile serves the LM head (unknown profiles: BF16)."""
    head = terms(profile).head
    return LmHead(head) if head is not None else LmHead.BF16


def served_config(profile: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` as a profile's engine reads it: with its levers' config overrides (the BF16
    router's `router_dtype`; unknown profiles: none)."""
    return {**config, **terms(profile).config}


def _small_gemm_bytes(shape: ModelShape, precision: Precision, kda: int, mla: int) -> float:
    """The BF16 GEMMs: KDA beta, and the MLA output gate and w_kc/w_vc, of these layers."""
    h, p = shape.hidden_size, precision
    kv_b = p.matrix(
        shape.num_heads * (shape.qk_nope_head_dim + shape.v_head_dim),
        shape.kv_lora_rank,
        p.mla_absorbed,
    )
    gate = p.matrix(shape.mla_gate_width, h, WeightFormat.BF16)
    return kda * p.matrix(shape.num_heads, h, WeightFormat.BF16) + mla * (gate + kv_b)


def _step_parts(shape: ModelShape, precision: Precision, step: StepBytes) -> dict[Category, float]:
    small = _small_gemm_bytes(shape, precision, len(shape.kda_layers), len(shape.mla_layers))
    linears = step.kda_projections + step.mla_projections + step.dense_mlp + step.shared_experts
    return {
        Category.ROUTED_EXPERTS: step.routed_experts,
        Category.FP8_LINEAR: linears - small,
        Category.BF16_LINEAR: small,
        Category.LM_HEAD: step.lm_head,
        Category.KDA_STATE: step.kda_state,
        Category.MLA_KV: step.mla_kv,
        Category.ROUTER: step.router,
        Category.FIXED: step.norms + step.embedding,
    }


def _draft_parts(shape: ModelShape, precision: Precision, d: DraftBytes) -> dict[Category, float]:
    small = _small_gemm_bytes(shape, precision, 0, 1)
    return {
        Category.ROUTED_EXPERTS: d.routed_experts,
        Category.FP8_LINEAR: d.mla_projections - small + d.eh_proj + d.shared_experts,
        Category.BF16_LINEAR: small,
        Category.LM_HEAD: d.lm_head,
        Category.MLA_KV: d.mla_kv,
        Category.ROUTER: d.router,
        Category.FIXED: d.norms + d.embedding,
    }


def unit_bytes(
    profile: str,
    phase: Phase,
    *,
    context_tokens: int,
    config: Mapping[str, Any],
    draft_steps: int = NEXTN_STEPS,
    routing: Routing = Routing.INDEPENDENT,
) -> dict[Category, float]:
    """The byte model's bytes of one step or round of `profile`, by category.

    The head's category also holds the logits it writes: FP32 for the FP32-logits head,
    BF16 otherwise, one row a token. `draft_steps` and `routing` shape a round (see
    `mtp_cycle`); a ReplaySSM verify writes no KDA state snapshots; the draft forwards of a
    hot-vocabulary draft head read and write its rows only.

    A DSpark profile's round is `_dspark_round`'s.
    """
    head = lm_head(profile)
    served = served_config(profile, config)
    shape, precision = ModelShape.from_config(served), Precision.from_config(served, head)
    row = shape.vocab_size * (4 if head is LmHead.FP32_LOGITS else 2)
    if phase is Phase.DECODE:
        parts = _step_parts(
            shape, precision, decode_step_bytes(shape, precision, context_tokens=context_tokens)
        )
        parts[Category.LM_HEAD] += row
        return parts
    term = terms(profile)
    if term.round == "dspark":
        weights = dspark_draft_bytes(
            precision,
            fp8=term.draft_linears == "fp8",
            vocab_size=shape.vocab_size,
            markov_w2_reads=term.markov_w2_reads or 1,
        )
        return _dspark_round(shape, precision, context_tokens, routing, row, weights)
    cycle = mtp_cycle(
        shape,
        precision,
        context_tokens=context_tokens,
        draft_steps=draft_steps,
        routing=routing,
        state_snapshots=term.kda_snapshots is not False,
        draft_head_rows=term.draft_head_rows,
    )
    parts = defaultdict(float, _step_parts(shape, precision, cycle.verify))
    draft = [cycle.draft_extend] + [cycle.draft_step] * (draft_steps - 1)
    for forward in draft:
        for category, nbytes in _draft_parts(shape, precision, forward).items():
            parts[category] += nbytes
    draft_row = row * (term.draft_head_rows or shape.vocab_size) / shape.vocab_size
    parts[Category.LM_HEAD] += row * (draft_steps + 1) + draft_row * draft_steps
    return dict(parts)


def dspark_draft_bytes(
    precision: Precision, *, fp8: bool, vocab_size: int, markov_w2_reads: int = 1
) -> dict[Category, float]:
    """The DSpark draft's own weights a round: its Markov head's `markov_w2` (vocab x
    `markov_rank`, BF16) `markov_w2_reads` times (SGLang's draft applies it once per draft
    position, a GEMV each), the rest once. The rest is all BF16, or with `fp8` (the FP8
    draft) its layer linears FP8 with one FP32 scale a row, as SGLang's online FP8 quantizes
    them; `fc`, the Markov head and the norms stay BF16 either way."""
    markov_w2 = 2.0 * vocab_size * DSPARK_MARKOV_RANK
    parts = {Category.BF16_LINEAR: 2.0 * DSPARK_DRAFT_PARAMS + (markov_w2_reads - 1) * markov_w2}
    if not fp8:
        return parts
    params = DSPARK_DRAFT_LAYERS * sum(rows * cols for rows, cols in DSPARK_DRAFT_LAYER_LINEARS)
    parts[Category.BF16_LINEAR] -= 2.0 * params
    parts[Category.FP8_LINEAR] = DSPARK_DRAFT_LAYERS * sum(
        precision.matrix(rows, cols, WeightFormat.FP8_CHANNEL)
        for rows, cols in DSPARK_DRAFT_LAYER_LINEARS
    )
    return parts


def _dspark_round(
    shape: ModelShape,
    precision: Precision,
    context_tokens: int,
    routing: Routing,
    row: float,
    draft: dict[Category, float],
) -> dict[Category, float]:
    """One DSpark round: the target's ReplaySSM verify of the block and its anchor (9 tokens),
    then the draft's one forward over the block, whose weights are `draft`
    (`dspark_draft_bytes`: the Markov head's `markov_w2` once per draft position, the rest
    once) and whose hidden states go through the target's FP8 head (a second read of it).
    The draft's own KV cache is not counted: its attention shapes are not published
    (2026-12-01)."""
    cycle = mtp_cycle(
        shape,
        precision,
        context_tokens=context_tokens,
        draft_steps=DSPARK_WINDOW - 1,
        routing=routing,
        state_snapshots=False,
    )
    parts = _step_parts(shape, precision, cycle.verify)
    for category, nbytes in draft.items():
        parts[category] += nbytes
    parts[Category.LM_HEAD] += cycle.verify.lm_head + row * (DSPARK_WINDOW + DSPARK_BLOCK)
    return parts
