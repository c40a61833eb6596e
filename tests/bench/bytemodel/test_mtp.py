"""The MTP cycle cost and ceiling: by hand on the tiny config, against perf-anchors §1.5."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.bench.bytemodel.checkpoint import LmHead, ModelShape, Precision
from app.bench.bytemodel.mtp import Routing, distinct_experts, mtp_cycle, mtp_speedup_ceiling

FAST = settings(max_examples=60, deadline=None)
MB = 1e6
R_ABS = 0.02
"""Tolerance on r against perf-anchors: it quotes r to 2 decimals, and our byte model
counts 0.13% more bytes per step (see roofline's docstring)."""


def expected_accept_length(p_accept: float, draft_steps: int) -> float:
    """Accept length of a chain of drafts each accepted with `p_accept` (bonus included)."""
    return sum(p_accept**i for i in range(draft_steps + 1))


def _ling(config: dict[str, Any], head: LmHead = LmHead.FP8) -> tuple[ModelShape, Precision]:
    return ModelShape.from_config(config), Precision.from_config(config, head)


def test_tiny_cycle_by_hand(tiny_config: dict[str, Any]) -> None:
    shape, precision = _ling(tiny_config)
    cycle = mtp_cycle(shape, precision, context_tokens=100, draft_steps=3)
    # decode with an FP8 head: 2,951,568 - 524,288 (BF16 head) + 266,240 (FP8 head)
    assert cycle.decode.total == 2_693_520
    # 4 tokens touch 8 x (1 - 0.75^4) = 5.46875 of 8 experts: routed bytes x 5.46875 / 2
    assert cycle.experts_per_layer == 5.46875
    assert cycle.verify.routed_experts == 156_672 * 5.46875 / 2
    # KDA state read once, written 4 times, then the accepted one committed (a read and a
    # write): 2 layers x 7 x 135,680
    assert cycle.verify.kda_state == 2 * 7 * 135_680
    assert cycle.verify.embedding == 4 * 512
    assert cycle.verify.total == 4_323_584
    # one-token draft: MLA 279,600 + 2 experts 52,224 + shared 49,176 + router 8,192
    # + eh_proj 256x512 FP8 131,104 + norms 2,816 + embedding 512 + FP8 head 266,240
    # + its KV 100 x 192 x 2
    assert cycle.draft_step.total == 828_264
    # the draft extend over the 4 verified tokens: 5.46875 experts (142,800), 4 embedding rows
    assert cycle.draft_extend.routed_experts == 26_112 * 5.46875
    assert cycle.draft_extend.total == 828_264 + (142_800 - 52_224) + 3 * 512
    assert cycle.cycle_bytes == 4_323_584 + 920_376 + 2 * 828_264
    assert cycle.cost == pytest.approx(6_900_488 / 2_693_520)
    assert cycle.speedup_ceiling(3.0) == pytest.approx(3.0 * 2_693_520 / 6_900_488)
    assert cycle.bytes_per_token(3.0) == pytest.approx(6_900_488 / 3)


def test_shared_routing_and_no_snapshots_cost_less(tiny_config: dict[str, Any]) -> None:
    shape, precision = _ling(tiny_config)
    full = mtp_cycle(shape, precision, context_tokens=100)
    shared = mtp_cycle(shape, precision, context_tokens=100, routing=Routing.SHARED)
    replay = mtp_cycle(shape, precision, context_tokens=100, state_snapshots=False)
    assert shared.verify.routed_experts == full.decode.routed_experts
    assert shared.draft_extend.routed_experts == full.draft_step.routed_experts
    assert replay.verify.kda_state == full.decode.kda_state
    assert shared.cost < full.cost and replay.cost < full.cost


def test_mtp_needs_a_nextn_layer(tiny_config: dict[str, Any]) -> None:
    shape, precision = _ling({**tiny_config, "num_nextn_predict_layers": 0})
    with pytest.raises(ValueError, match="NEXTN"):
        mtp_cycle(shape, precision, context_tokens=0)
    shape, precision = _ling(tiny_config)
    with pytest.raises(ValueError):
        mtp_cycle(shape, precision, context_tokens=0, draft_steps=0)


def test_closed_forms() -> None:
    assert distinct_experts(512, 8, 1) == pytest.approx(8.0)
    assert distinct_experts(512, 8, 4) == pytest.approx(31.3, abs=0.05)  # perf-anchors §1.5
    assert distinct_experts(512, 8, 60) == pytest.approx(313, abs=0.5)  # the 60-token tree
    assert mtp_speedup_ceiling(2.68, 2.26) == pytest.approx(1.186, abs=1e-3)


@FAST
@given(experts=st.integers(2, 1024), data=st.data(), tokens=st.integers(1, 64))
def test_distinct_experts_bounds(experts: int, data: st.DataObject, tokens: int) -> None:
    top_k = data.draw(st.integers(1, experts))
    touched = distinct_experts(experts, top_k, tokens)
    assert top_k - 1e-9 <= touched <= min(experts, top_k * tokens) + 1e-9


# perf-anchors.md §1.5 computed r with the appendix's formats, one-token draft forwards and
# no KDA commit. SGLang 0.5.23 reads more a round (spark-recipes.md §6), in MB at 32K:
EXPERT_MB = 3 * 2560 * 768 * 4.25 / 8 / MB
"""One MXFP4 routed expert (gate, up, down), scales included: 3.13 MB."""
KV_B_MB = 512 * 8192 / MB
"""One MLA layer's kv_b served as BF16, over its FP8 size (the scales are a rounding)."""
CONV_MB = 35 * 3 * 4096 * 4 * 2 / MB
"""The KDA conv filters in FP32, over BF16."""
COMMIT_MB = 2 * 35 * (32 * 128 * 128 * 4 + 3 * 3 * 4096 * 2) / MB
"""The verify's KDA commit: each KDA layer's recurrent + conv state read and written: 152 MB."""


def sglang_round_extra_mb(draft_steps: int, routing: Routing, snapshots: bool) -> float:
    """What a round reads beyond the anchors' model, and a step beyond theirs (MB, 32K)."""
    step = 7 * KV_B_MB + CONV_MB
    extend = 0.0
    if routing is Routing.INDEPENDENT:  # the draft extend's distinct experts, not top-8
        extend = (distinct_experts(512, 8, draft_steps + 1) - 8) * EXPERT_MB
    commit = COMMIT_MB if snapshots else 0.0
    return step + draft_steps * KV_B_MB + extend + commit


def sglang_r(anchor_r: float, draft_steps: int, routing: Routing, snapshots: bool) -> float:
    """perf-anchors' r at 32K with the FP8 head (4,793 MB a step), on SGLang's bytes."""
    extra = sglang_round_extra_mb(draft_steps, routing, snapshots)
    return (anchor_r * 4793 + extra) / (4793 + 7 * KV_B_MB + CONV_MB)


def test_sglang_round_extras_are_spark_recipes_numbers() -> None:
    assert round(7 * KV_B_MB, 1) == 29.4  # +29 MB a step
    assert round(CONV_MB, 1) == 3.4  # +3 MB
    assert round(COMMIT_MB, 1) == 152.0  # +152 MB a round
    extend = (distinct_experts(512, 8, 4) - 8) * EXPERT_MB
    assert extend == pytest.approx(72.9, abs=0.05)  # +73 MB a round


@pytest.mark.parametrize(
    ("routing", "snapshots", "anchor_r"),
    [
        (Routing.INDEPENDENT, True, 1.98),
        (Routing.SHARED, True, 1.37),
        (Routing.INDEPENDENT, False, 1.93),  # --enable-linear-replayssm-spec
    ],
)
def test_ling_cycle_cost_matches_anchors(
    ling_config: dict[str, Any], routing: Routing, snapshots: bool, anchor_r: float
) -> None:
    shape, precision = _ling(ling_config)
    cycle = mtp_cycle(
        shape, precision, context_tokens=32768, routing=routing, state_snapshots=snapshots
    )
    assert cycle.cost == pytest.approx(sglang_r(anchor_r, 3, routing, snapshots), abs=R_ABS)


def test_ling_draft_and_verify_sizes(ling_config: dict[str, Any]) -> None:
    shape, precision = _ling(ling_config)
    cycle = mtp_cycle(shape, precision, context_tokens=32768)
    draft = cycle.draft_step.total
    assert draft / 1e9 == pytest.approx(0.52 + KV_B_MB / 1e3, abs=0.005)
    nextn_layer = draft - cycle.decode.lm_head - 32768 * 576 * 2
    assert nextn_layer / 1e6 == pytest.approx(81 + KV_B_MB, abs=0.5)
    assert cycle.decode.lm_head / draft == pytest.approx(0.77, abs=0.005)
    verify_anchor_mb = 7900 + 7 * KV_B_MB + CONV_MB + COMMIT_MB
    assert cycle.verify.total / 1e6 == pytest.approx(verify_anchor_mb, abs=50)


@pytest.mark.parametrize(
    ("first_k_dense", "round_gb", "step_gb"),
    [
        (2, 9.43, 4.58),  # the real model: 2 dense + 40 MoE layers
        (1, 9.49, 4.57),  # spark-recipes.md §6's 9.49 and 4.57 GB: 1 dense + 41 MoE layers
    ],
)
def test_ling_round_at_2k_with_the_fp8_head(
    ling_config: dict[str, Any], first_k_dense: int, round_gb: float, step_gb: float
) -> None:
    # The appendix's model gave 9.155 GB (40 MoE layers) or 9.217 GB (41) a round; SGLang's
    # code adds 29.4 (verify kv_b) + 3 x 4.2 (draft kv_b) + 3.4 (conv) + 152 (commit)
    # + 73 (draft extend) = 270 MB.
    shape, precision = _ling({**ling_config, "first_k_dense_replace": first_k_dense})
    cycle = mtp_cycle(shape, precision, context_tokens=2048)
    extra = sglang_round_extra_mb(3, Routing.INDEPENDENT, snapshots=True)
    assert extra == pytest.approx(270.2, abs=0.1)
    assert cycle.cycle_bytes / 1e9 == pytest.approx(round_gb, abs=0.005)
    assert cycle.decode.total / 1e9 == pytest.approx(step_gb, abs=0.005)


# perf-anchors §1.5 chain-length sweep of r per k, on SGLang's bytes.
SWEEP_R = {1: 1.33, 2: 1.66, 3: 1.98, 4: 2.30, 5: 2.62, 7: 3.24}


@pytest.mark.parametrize("draft_steps", sorted(SWEEP_R))
def test_ling_chain_sweep_matches_anchors(ling_config: dict[str, Any], draft_steps: int) -> None:
    shape, precision = _ling(ling_config)
    cycle = mtp_cycle(shape, precision, context_tokens=32768, draft_steps=draft_steps)
    expected = sglang_r(SWEEP_R[draft_steps], draft_steps, Routing.INDEPENDENT, True)
    assert cycle.cost == pytest.approx(expected, abs=R_ABS)
