"""The ceiling of MTP (NEXTN) speculative decoding, from accept length and cycle cost.

Notation of the team's research notes (perf-anchors.md §1.5, not in this repository):
a = accept length (tokens per verify, bonus included), k = draft steps, r = cost of one
draft+verify cycle relative to one plain decode step.
Speedup over plain decode is a / r and TPOT_mtp = TPOT_decode * r / a. `mtp_cycle`
estimates r from bytes: the verify reads the target once for its k+1 tokens (but the
routed experts of every token, and a KDA state snapshot per position), and each of the
k draft steps reads the NEXTN layer, the shared LM head and the draft's own KV cache.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from app.telemetry.roofline import (
    ModelShape,
    Precision,
    StepBytes,
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
class MtpCycle:
    """Bytes of one draft+verify cycle next to one plain decode step."""

    decode: StepBytes
    verify: StepBytes
    """The target's verify of draft_steps + 1 tokens."""
    draft_step_bytes: float
    """One NEXTN draft step: its layer, the LM head and its own KV cache."""
    draft_steps: int
    experts_per_layer: float
    """Distinct routed experts per MoE layer the verify reads."""

    @property
    def cycle_bytes(self) -> float:
        """Verify plus all draft steps."""
        return self.verify.total + self.draft_steps * self.draft_step_bytes

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


def draft_step_bytes(shape: ModelShape, precision: Precision, *, context_tokens: int) -> float:
    """One NEXTN draft step: an MLA + MoE layer, eh_proj, LM head and the draft's KV cache."""
    s, p, h = shape, precision, shape.hidden_size
    norms = 2.0 * (5 * h + s.kv_lora_rank)  # enorm, hnorm, two layer norms, head norm, kv_a
    return (
        mla_projection_bytes(s, p)
        + s.experts_per_tok * mlp_bytes(s, p, s.moe_intermediate_size, p.routed_experts)
        + mlp_bytes(s, p, s.shared_intermediate_size, p.linear)
        + router_bytes(s, p)
        + p.matrix(h, 2 * h, p.linear)  # eh_proj: [embedding; hidden] -> hidden
        + norms
        + 2.0 * h  # embedding row
        + p.matrix(s.vocab_size, h, p.lm_head)
        + context_tokens * s.kv_width * p.kv_cache_bytes
    )


def mtp_cycle(
    shape: ModelShape,
    precision: Precision,
    *,
    context_tokens: int,
    draft_steps: int = 3,
    routing: Routing = Routing.INDEPENDENT,
    state_snapshots: bool = True,
) -> MtpCycle:
    """Estimate one chain draft+verify cycle (top-k 1, draft_steps + 1 verify tokens).

    Args:
        shape: The model.
        precision: Its formats; the draft shares the target's LM head.
        context_tokens: Tokens in the KV cache.
        draft_steps: k, the NEXTN steps per cycle.
        routing: Whether the verify's tokens route independently (upper bound) or share
            their experts (lower bound); measured cycles fall in between.
        state_snapshots: Whether the verify writes a KDA state snapshot per position
            (SGLang's default; `--enable-linear-replayssm-spec` turns them off).

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
        # Read once, written once per verified position.
        state = len(shape.kda_layers) * (1 + tokens) * kda_state_bytes(shape, precision)
    verify = replace(
        decode,
        routed_experts=decode.routed_experts * experts / shape.experts_per_tok,
        embedding=decode.embedding * tokens,
        kda_state=state,
    )
    return MtpCycle(
        decode=decode,
        verify=verify,
        draft_step_bytes=draft_step_bytes(shape, precision, context_tokens=context_tokens),
        draft_steps=draft_steps,
        experts_per_layer=experts,
    )
