"""The MTP cycle cost and ceiling: by hand on the tiny config, against perf-anchors §1.5."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.telemetry import (
    LmHead,
    ModelShape,
    Precision,
    Routing,
    distinct_experts,
    mtp_cycle,
    mtp_speedup_ceiling,
)

FAST = settings(max_examples=60, deadline=None)
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
    # decode with an FP8 head: 2,841,000 - 524,288 (BF16 head) + 266,240 (FP8 head)
    assert cycle.decode.total == 2_582_952
    # 4 tokens touch 8 x (1 - 0.75^4) = 5.46875 of 8 experts: routed bytes x 5.46875 / 2
    assert cycle.experts_per_layer == 5.46875
    assert cycle.verify.routed_experts == 156_672 * 5.46875 / 2
    # KDA state read once and written 4 times: 2 layers x 5 x 135,680
    assert cycle.verify.kda_state == 2 * 5 * 135_680
    assert cycle.verify.embedding == 4 * 512
    assert cycle.verify.total == 3_670_296
    # draft: MLA 230,460 + 2 experts 52,224 + shared 49,176 + router 8,192
    # + eh_proj 256x512 FP8 131,104 + norms 2,816 + embedding 512 + FP8 head 266,240
    # + its KV 100 x 192 x 2
    assert cycle.draft_step_bytes == 779_124
    assert cycle.cycle_bytes == 3_670_296 + 3 * 779_124
    assert cycle.cost == pytest.approx(6_007_668 / 2_582_952)
    assert cycle.speedup_ceiling(3.0) == pytest.approx(3.0 * 2_582_952 / 6_007_668)
    assert cycle.bytes_per_token(3.0) == pytest.approx(6_007_668 / 3)


def test_shared_routing_and_no_snapshots_cost_less(tiny_config: dict[str, Any]) -> None:
    shape, precision = _ling(tiny_config)
    full = mtp_cycle(shape, precision, context_tokens=100)
    shared = mtp_cycle(shape, precision, context_tokens=100, routing=Routing.SHARED)
    replay = mtp_cycle(shape, precision, context_tokens=100, state_snapshots=False)
    assert shared.verify.routed_experts == full.decode.routed_experts
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
    assert cycle.cost == pytest.approx(anchor_r, abs=R_ABS)


def test_ling_draft_and_verify_sizes(ling_config: dict[str, Any]) -> None:
    shape, precision = _ling(ling_config)
    cycle = mtp_cycle(shape, precision, context_tokens=32768)
    assert cycle.draft_step_bytes / 1e9 == pytest.approx(0.52, abs=0.005)
    nextn_layer = cycle.draft_step_bytes - cycle.decode.lm_head - 32768 * 576 * 2
    assert nextn_layer / 1e6 == pytest.approx(81, abs=0.5)
    assert cycle.decode.lm_head / cycle.draft_step_bytes == pytest.approx(0.77, abs=0.005)
    assert cycle.verify.total / 1e9 == pytest.approx(7.9, abs=0.05)


# perf-anchors §1.5 chain-length sweep: r per k, and speedup a(p, k) / r.
SWEEP_R = {1: 1.33, 2: 1.66, 3: 1.98, 4: 2.30, 5: 2.62, 7: 3.24}
SWEEP_SPEEDUP = {
    0.74: {1: 1.31, 2: 1.38, 3: 1.35, 4: 1.29, 5: 1.22, 7: 1.07},
    0.90: {1: 1.43, 2: 1.64, 3: 1.74, 4: 1.78, 5: 1.79, 7: 1.76},
    0.97: {1: 1.48, 2: 1.76, 3: 1.93, 4: 2.05, 5: 2.13, 7: 2.22},
}


@pytest.mark.parametrize("draft_steps", sorted(SWEEP_R))
def test_ling_chain_sweep_matches_anchors(ling_config: dict[str, Any], draft_steps: int) -> None:
    shape, precision = _ling(ling_config)
    cycle = mtp_cycle(shape, precision, context_tokens=32768, draft_steps=draft_steps)
    assert cycle.cost == pytest.approx(SWEEP_R[draft_steps], abs=R_ABS)
    for p, row in SWEEP_SPEEDUP.items():
        speedup = cycle.speedup_ceiling(expected_accept_length(p, draft_steps))
        assert speedup == pytest.approx(row[draft_steps], abs=R_ABS)
