"""The ceiling of MTP (NEXTN) speculative decoding, from accept length and cycle cost.

Notation (docs/byte-model.md derives the round):
a = accept length (tokens per verify, bonus included), k = draft steps, r = cost of one
draft+verify cycle relative to one plain decode step.
Speedup over plain decode is a / r and TPOT_mtp = TPOT_decode * r / a. `mtp_cycle`
estimates r from bytes: the verify reads the target once for its k+1 tokens (but the
routed experts of every token, and a KDA state snapshot per position), and each of the
k draft forwards reads the NEXTN layer, the shared LM head and the draft's own KV cache
(the first of them, the draft's extend over the verified tokens, reads their distinct
experts), and the verify commits the accepted KDA state.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from app.bench.bytemodel.checkpoint import ModelShape, Precision
from app.bench.bytemodel.roofline import (
    StepBytes,
    SummedParts,
    decode_step_bytes,
    kda_state_bytes,
    mla_projection_bytes,
    mlp_bytes,
    router_bytes,
)


class Routing(StrEnum):
    """How the verify's tokens spread over routed experts."""

    INDEPENDENT = "independent"
    """Each token picks its top-k independently: the upper bound on verify bytes."""
    SHARED = "shared"
    """All tokens use the same top-k experts: the lower bound."""


def distinct_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """Expected distinct experts `tokens` independently routed tokens touch in one layer."""
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def mtp_speedup_ceiling(accept_length: float, cycle_cost: float) -> float:
    """Speedup over plain decode: a / r."""
    return accept_length / cycle_cost


@dataclass(frozen=True, slots=True)
class DraftBytes(SummedParts):
    """Bytes one NEXTN draft forward reads, by part."""

    mla_projections: float
    eh_proj: float
    """The FP8 projection of [embedding; hidden] to hidden."""
    routed_experts: float
    """The distinct routed experts its tokens touch."""
    shared_experts: float
    router: float
    norms: float
    """enorm, hnorm, the layer's two norms, the head's norm and kv_a's norm."""
    embedding: float
    lm_head: float
    """The target's LM head, shared."""
    mla_kv: float
    """The draft layer's own latent KV cache."""


@dataclass(frozen=True, slots=True)
class MtpCycle:
    """Bytes of one draft+verify round next to one plain decode step.

    A round (SGLang's EAGLE worker, top-k 1) is the target's verify of draft_steps + 1
    tokens, then the draft's extend over those tokens (which yields the first draft token),
    then draft_steps - 1 one-token draft forwards.
    """

    decode: StepBytes
    verify: StepBytes
    """The target's verify of draft_steps + 1 tokens, with its KDA state commit."""
    draft_extend: DraftBytes
    """The draft's forward over the verified tokens."""
    draft_step: DraftBytes
    """One one-token draft forward."""
    draft_steps: int
    experts_per_layer: float
    """Distinct routed experts per MoE layer the verify (and the draft extend) reads."""

    @property
    def cycle_bytes(self) -> float:
        """Verify, the draft extend and the other draft forwards."""
        return (
            self.verify.total
            + self.draft_extend.total
            + (self.draft_steps - 1) * self.draft_step.total
        )

    @property
    def cost(self) -> float:
        """r: the cycle's bytes over one plain decode step's."""
        return self.cycle_bytes / self.decode.total

    def speedup_ceiling(self, accept_length: float) -> float:
        """a / r for a measured accept length."""
        return mtp_speedup_ceiling(accept_length, self.cost)

    def bytes_per_token(self, accept_length: float) -> float:
        """Bytes read per emitted token; divide by a measured TPOT for achieved GB/s."""
        return self.cycle_bytes / accept_length


def draft_bytes(
    shape: ModelShape,
    precision: Precision,
    *,
    context_tokens: int,
    experts: float | None = None,
    head_rows: int | None = None,
) -> DraftBytes:
    """One NEXTN draft forward: an MLA + MoE layer, eh_proj, LM head and the draft's KV cache.

    `experts`: distinct routed experts it reads (default top-k, one token); `head_rows`: the
    rows of the head it reads (default all: a hot-vocabulary head reads fewer).
    """
    s, p, h = shape, precision, shape.hidden_size
    one_expert = mlp_bytes(s, p, s.moe_intermediate_size, p.routed_experts)
    return DraftBytes(
        mla_projections=mla_projection_bytes(s, p),
        eh_proj=p.matrix(h, 2 * h, p.linear),
        routed_experts=(s.experts_per_tok if experts is None else experts) * one_expert,
        shared_experts=mlp_bytes(s, p, s.shared_intermediate_size, p.linear),
        router=router_bytes(s, p),
        norms=2.0 * (5 * h + s.kv_lora_rank),
        embedding=2.0 * h,
        lm_head=p.matrix(head_rows or s.vocab_size, h, p.lm_head),
        mla_kv=context_tokens * s.kv_width * p.kv_cache_bytes,
    )


def mtp_cycle(
    shape: ModelShape,
    precision: Precision,
    *,
    context_tokens: int,
    draft_steps: int = 3,
    routing: Routing = Routing.INDEPENDENT,
    state_snapshots: bool = True,
    draft_head_rows: int | None = None,
) -> MtpCycle:
    """Estimate one chain draft+verify round (top-k 1, draft_steps + 1 verify tokens).

    Args:
        shape: The model.
        precision: Its formats; the draft shares the target's LM head.
        context_tokens: Tokens in the KV cache.
        draft_steps: k, the NEXTN steps per round.
        routing: Whether the verify's tokens (and the draft extend's) route independently
            (upper bound) or share their experts (lower bound); measured rounds fall in
            between.
        state_snapshots: Whether the verify writes a KDA state snapshot per position and
            then commits the accepted one, a read and a write (SGLang's default;
            `--enable-linear-replayssm-spec` turns them off).
        draft_head_rows: The rows of the LM head the draft forwards read (None: all; the
            hot-vocabulary draft head reads fewer, the verify all).

    Raises:
        ValueError: When the model has no NEXTN layer or draft_steps < 1.
    """
    if shape.nextn_layers < 1:
        raise ValueError("the model has no NEXTN layer (num_nextn_predict_layers is 0)")
    if draft_steps < 1:
        raise ValueError(f"draft_steps must be at least 1, got {draft_steps}")
    tokens = draft_steps + 1
    decode = decode_step_bytes(shape, precision, context_tokens=context_tokens)
    if routing is Routing.INDEPENDENT:
        experts = distinct_experts(shape.num_experts, shape.experts_per_tok, tokens)
    else:
        experts = float(shape.experts_per_tok)
    state = decode.kda_state
    if state_snapshots:
        # Read once, a snapshot written per verified position, the accepted one committed.
        state = len(shape.kda_layers) * (1 + tokens + 2) * kda_state_bytes(shape, precision)
    verify = replace(
        decode,
        routed_experts=decode.routed_experts * experts / shape.experts_per_tok,
        embedding=decode.embedding * tokens,
        kda_state=state,
    )
    extend = draft_bytes(
        shape, precision, context_tokens=context_tokens, experts=experts, head_rows=draft_head_rows
    )
    return MtpCycle(
        decode=decode,
        verify=verify,
        draft_extend=replace(extend, embedding=extend.embedding * tokens),
        draft_step=draft_bytes(
            shape, precision, context_tokens=context_tokens, head_rows=draft_head_rows
        ),
        draft_steps=draft_steps,
        experts_per_layer=experts,
    )
