"""The Spark projection: kernel mapping, the fit, the NEXTN verdict, and the script's JSON.

The kernel profiles are synthetic (42-layer call counts chosen here), built from kernel
names torch.profiler gave on the H200 (lab/results/2026-11-29-h200-stack-ab-*.json).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.bench.bytemodel.checkpoint import LmHead, ModelShape, Precision
from app.bench.bytemodel.kernels import (
    KDA_UPDATE_KERNEL,
    Category,
    KernelProfile,
    KernelRecord,
    Phase,
    map_kernels,
    target_forwards,
)
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.bytemodel.mtp import mtp_cycle
from app.bench.bytemodel.unit_bytes import unit_bytes
from lab.research.projection import PUBLISHED_CONTEXT_TOKENS, spark_projection
from lab.research.spark_fit import FitPoint, fit_spark

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 64
HUMMING_W13 = (
    "void humming<MmaOpClass, Shape<0u, 1536u, 2560u>, Shape<8u, 128u, 256u>, Shape<8u, 32u, 64"
)
HUMMING_W2 = (
    "void humming<MmaOpClass, Shape<0u, 2560u, 768u>, Shape<8u, 128u, 256u>, Shape<8u, 32u, 64u"
)
TRITON_FP8 = "_w8a8_block_fp8_matmul"
NVJET_SMALL = "nvjet_sm90_tst_64x8_64x16_1x1_h_bz_TNT"
NVJET_HEAD = "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT"
CUTLASS_FP8 = (
    "void cutlass::device_kernel<cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t, cutlass::bfloa"
)
HEAD_QUANT = (
    "void sglang::per_token_quant_fp8_cta_kernel<__nv_bfloat16, 8>(__nv_bfloat16 const*, __nv_f"
)
MYSTERY = "totally_new_kernel_nobody_maps"

# per decode step: (name, calls, microseconds a call on the H200)
LAYERS_BODY = [
    (HUMMING_W13, 40, 8.0),
    (HUMMING_W2, 40, 7.0),
    (TRITON_FP8, 160, 9.0),
    (NVJET_SMALL, 56, 3.0),
    ("fused_sigmoid_gating_delta_rule_update_kernel", 35, 4.0),
    ("_causal_conv1d_update_kernel", 35, 2.0),
    ("_fwd_grouped_kernel_stage1", 7, 3.0),
    ("_fwd_kernel_stage2", 7, 2.0),
    ("router_gate_matvec_kernel", 40, 3.0),
    (
        "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*",
        84,
        2.0,
    ),
    ("Memcpy DtoD (Device -> Device)", 3, 2.0),
]
BF16_HEAD = [(NVJET_HEAD, 1, 190.0)]
FP8_HEAD = [(CUTLASS_FP8, 1, 100.0), (HEAD_QUANT, 1, 3.0)]


def profile(name: str, kernels: list[tuple[str, int, float]], **extra: Any) -> dict[str, Any]:
    """A profile file's dict: per-unit counts times ROUNDS."""
    return {
        "gpu": "NVIDIA H200",
        "layers": 42,
        "profile": name,
        "phase": "decode",
        "rounds": ROUNDS,
        "accept_length": None,
        "context_tokens": 2048,
        "kernels": [
            {"name": n, "calls": calls * ROUNDS, "total_us": calls * us * ROUNDS}
            for n, calls, us in kernels
        ],
        **extra,
    }


def humming() -> dict[str, Any]:
    return profile("humming", LAYERS_BODY + BF16_HEAD)


def humming_fp8() -> dict[str, Any]:
    return profile("humming+fp8", LAYERS_BODY + FP8_HEAD + [(MYSTERY, 2, 1.0)])


def recurrent_round() -> dict[str, Any]:
    """The stack's round with the recurrent verify (`stack-recurrent`)."""
    # verify (one step's kernels) + 3 draft forwards (one layer each) + 4 FP8 head calls
    draft = [(HUMMING_W13, 3, 8.0), (HUMMING_W2, 3, 7.0), (TRITON_FP8, 15, 9.0)]
    heads = [(CUTLASS_FP8, 4, 110.0), (HEAD_QUANT, 4, 3.0)]
    kernels = LAYERS_BODY + draft + heads
    return profile("stack-recurrent", kernels, phase="verify", accept_length=3.9)


def load(data: dict[str, Any]) -> KernelProfile:
    return KernelProfile.from_dict(data)


# --- the profile file and the mapping ----------------------------------------------------


def test_per_unit_values_divide_by_rounds() -> None:
    p = load(humming())
    assert p.per_unit(p.kernels[0]) == (40.0, 320.0)
    assert p.forwards == 1
    assert load(recurrent_round()).forwards == 4
    step_us = sum(calls * us for _, calls, us in LAYERS_BODY + BF16_HEAD)
    assert p.unit_ms == pytest.approx(step_us / 1e3)


def test_a_round_profile_names_its_depth_and_older_files_ran_three_steps() -> None:
    assert load(recurrent_round()).draft_steps == 3
    two = load({**recurrent_round(), "draft_steps": 2})
    assert two.draft_steps == 2
    assert two.forwards == 3
    with pytest.raises(ValueError, match="draft_steps must be at least 1"):
        load({**recurrent_round(), "draft_steps": 0})


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("rounds"), "lacks 'rounds'"),
        (lambda d: d.update(phase="prefill"), "malformed"),
        (lambda d: d.update(rounds=0), "rounds must be at least 1"),
        (lambda d: d["kernels"].append({"name": "x", "calls": "many", "total_us": 1}), "malformed"),
        (lambda d: d["kernels"].append({"name": "x", "calls": 0, "total_us": 1}), "one call"),
    ],
)
def test_bad_profile_files_get_one_line(mutate: Any, message: str) -> None:
    data = humming()
    mutate(data)
    with pytest.raises(ValueError, match=message) as info:
        KernelProfile.from_dict(data)
    assert "\n" not in str(info.value)


def test_real_names_map_to_byte_categories() -> None:
    fp8 = map_kernels(load(humming_fp8())).categories
    assert fp8[HUMMING_W13] is fp8[HUMMING_W2] is Category.ROUTED_EXPERTS
    assert fp8[TRITON_FP8] is Category.FP8_LINEAR
    assert fp8[NVJET_SMALL] is Category.BF16_LINEAR
    assert fp8[CUTLASS_FP8] is fp8[HEAD_QUANT] is Category.LM_HEAD
    assert fp8["fused_sigmoid_gating_delta_rule_update_kernel"] is Category.KDA_STATE
    assert fp8["_fwd_kernel_stage2"] is Category.MLA_KV
    assert fp8["router_gate_matvec_kernel"] is Category.ROUTER
    assert fp8["Memcpy DtoD (Device -> Device)"] is Category.FIXED
    bf16 = map_kernels(load(humming())).categories
    assert bf16[NVJET_HEAD] is Category.LM_HEAD  # once a step, the longest call
    assert bf16[NVJET_SMALL] is Category.BF16_LINEAR


def test_a_name_nobody_maps_is_fixed_cost_and_listed() -> None:
    kmap = map_kernels(load(humming_fp8()))
    assert kmap.categories[MYSTERY] is Category.FIXED
    assert kmap.unmapped == (MYSTERY,)
    assert map_kernels(load(humming())).unmapped == ()


def test_a_named_fp8_head_kernel_wins_over_the_longest_gemm() -> None:
    head = [("_fp8_head_qdot", 1, 94.0), ("_quantize_tokens", 1, 2.0)]
    categories = map_kernels(load(profile("humming+fp8", LAYERS_BODY + head))).categories
    assert categories["_fp8_head_qdot"] is Category.LM_HEAD
    assert categories["_quantize_tokens"] is Category.LM_HEAD
    assert categories[NVJET_SMALL] is Category.BF16_LINEAR


# --- bytes -------------------------------------------------------------------------------


def test_unit_bytes_are_the_byte_model_plus_logits() -> None:
    ctx = PUBLISHED_CONTEXT_TOKENS
    hum = unit_bytes("humming", Phase.DECODE, context_tokens=ctx, config=LING_3_FLASH_CONFIG)
    fp8 = unit_bytes("humming+fp8", Phase.DECODE, context_tokens=ctx, config=LING_3_FLASH_CONFIG)
    # FP32-logits head: BF16 weight 157,184 x 2,560 x 2 + FP32 logits 157,184 x 4
    assert hum[Category.LM_HEAD] == 157184 * 2560 * 2 + 157184 * 4
    # FP8 head: 1 B a weight + an FP32 scale a row + BF16 logits
    assert fp8[Category.LM_HEAD] == 157184 * 2560 + 157184 * 4 + 157184 * 2
    # BF16 GEMMs: KDA beta 35 x 32 x 2560, MLA gate 7 x 32 x 2560, w_kc/w_vc 7 x 8192 x 512
    assert hum[Category.BF16_LINEAR] == 2 * (35 * 32 * 2560 + 7 * 32 * 2560 + 7 * 8192 * 512)
    for category in set(hum) - {Category.LM_HEAD}:
        assert hum[category] == fp8[category]


def test_round_bytes_hold_four_head_reads() -> None:
    kw: dict[str, Any] = {"context_tokens": 2048, "config": LING_3_FLASH_CONFIG}
    fp8 = unit_bytes("stack-recurrent", Phase.VERIFY, **kw)
    bf16 = unit_bytes("humming+nextn", Phase.VERIFY, **kw)
    head_fp8, head_bf16 = 157184 * 2560 + 157184 * 4, 157184 * 2560 * 2
    assert bf16[Category.LM_HEAD] - fp8[Category.LM_HEAD] == 4 * (head_bf16 - head_fp8)
    # the round is test_mtp's 9.425 GB, plus 7 logits rows (4 verified tokens, 3 drafts)
    assert sum(fp8.values()) == pytest.approx(9.425e9 + 7 * 157184 * 2, rel=1e-4)


def test_a_round_of_other_depths_reads_the_head_once_a_forward() -> None:
    kw: dict[str, Any] = {"context_tokens": 2048, "config": LING_3_FLASH_CONFIG}
    head_fp8, head_bf16 = 157184 * 2560 + 157184 * 4, 157184 * 2560 * 2
    for k in (1, 2, 5):
        fp8 = unit_bytes("stack", Phase.VERIFY, draft_steps=k, **kw)
        bf16 = unit_bytes("humming+nextn", Phase.VERIFY, draft_steps=k, **kw)
        assert bf16[Category.LM_HEAD] - fp8[Category.LM_HEAD] == (k + 1) * (head_bf16 - head_fp8)
        # logits rows: k + 1 verified tokens, k drafts
        assert fp8[Category.LM_HEAD] == (k + 1) * head_fp8 + (2 * k + 1) * 157184 * 2
    shallow = sum(unit_bytes("stack", Phase.VERIFY, draft_steps=2, **kw).values())
    assert shallow < sum(unit_bytes("stack", Phase.VERIFY, **kw).values())


def test_a_profiled_round_of_another_depth_is_projected_with_that_depth_s_bytes() -> None:
    two = {**recurrent_round(), "draft_steps": 2}
    result = spark_projection([load(humming()), load(humming_fp8()), load(two)])
    round_ = next(p for p in result.profiles if p.profile == "stack-recurrent")
    kw: dict[str, Any] = {"context_tokens": PUBLISHED_CONTEXT_TOKENS, "config": LING_3_FLASH_CONFIG}
    assert round_.bytes == pytest.approx(
        sum(unit_bytes("stack-recurrent", Phase.VERIFY, draft_steps=2, **kw).values())
    )


def replayssm_round() -> dict[str, Any]:
    """The stack's round (ReplaySSM verify): its fold kernel beside the recurrent kernels."""
    data = recurrent_round()
    data["kernels"].append(
        {"name": "kda_replayssm_exact_fold_kernel", "calls": 35 * ROUNDS, "total_us": 35 * ROUNDS}
    )
    return {**data, "profile": "stack", "replayssm": True}


def test_the_target_forwards_are_counted_from_the_kda_updates() -> None:
    # the depth-4 round of 2026-12-01: SGLang counted 13 verifies, the GPU ran 12 forwards
    kernels = [
        KernelRecord(f"{KDA_UPDATE_KERNEL}_kernel", 420, 577.0 * 12),
        KernelRecord("_fp8_head_qdot", 60, 433.0 * 12),
    ]
    assert target_forwards(kernels, kda_layers=35) == 12
    with pytest.raises(ValueError, match="not a whole number of forwards of 35 KDA layers"):
        target_forwards(kernels[:1] + [KernelRecord(f"{KDA_UPDATE_KERNEL}_kernel", 1, 1.0)], 35)
    with pytest.raises(ValueError, match="0 calls"):
        target_forwards(kernels[1:], 35)


def test_a_dspark_round_is_a_9_token_replayssm_verify_the_draft_s_weights_and_two_heads() -> None:
    """...the draft's weights once, but its Markov head's `markov_w2` (vocab x 2,560, BF16)
    once per draft position: 8 reads, 7 more than the rest."""
    kw: dict[str, Any] = {"context_tokens": 2048, "config": LING_3_FLASH_CONFIG}
    dspark = unit_bytes("dspark", Phase.VERIFY, **kw)
    shape = ModelShape.from_config(LING_3_FLASH_CONFIG)
    precision = Precision.from_config(LING_3_FLASH_CONFIG, LmHead.FP8)
    verify = mtp_cycle(
        shape, precision, context_tokens=2048, draft_steps=8, state_snapshots=False
    ).verify
    step = unit_bytes("humming+fp8", Phase.DECODE, **kw)
    # the target's verify of 9 tokens, its KDA state without snapshots; no NEXTN draft
    assert dspark[Category.ROUTED_EXPERTS] == verify.routed_experts
    assert dspark[Category.KDA_STATE] == verify.kda_state
    assert dspark[Category.MLA_KV] == verify.mla_kv
    head, logits = 157184 * 2560 + 157184 * 4, 157184 * 2
    assert dspark[Category.LM_HEAD] == pytest.approx(2 * head + 17 * logits, rel=1e-6)
    markov_w2 = 2 * 157184 * 2560
    assert dspark[Category.BF16_LINEAR] - step[Category.BF16_LINEAR] == pytest.approx(
        2.72e9 + 7 * markov_w2
    )
    assert unit_bytes("dspark", Phase.DECODE, **kw) == step


def dspark_round() -> dict[str, Any]:
    """A DSpark round: the stack's verify kernels and the draft's BF16 layers."""
    data = recurrent_round()
    data["kernels"].append({"name": NVJET_HEAD, "calls": 5 * ROUNDS, "total_us": 400.0 * ROUNDS})
    return {**data, "profile": "dspark"}


def test_the_dspark_round_is_projected_beside_the_stack_s_with_its_break_even_accept() -> None:
    result = spark_projection(
        [load(humming()), load(humming_fp8()), load(replayssm_round()), load(dspark_round())]
    )
    d = result.dspark
    assert d is not None
    stack = next(p for p in result.profiles if p.profile == "stack")
    assert d.stack_round_ms == stack.projected_ms < d.round_ms
    assert d.break_even == pytest.approx(d.round_ms / d.stack_round_ms)
    assert d.tpot_ms_at_published_accept == pytest.approx(d.round_ms / 5.29)
    assert result.to_dict()["dspark"]["break_even"] == d.break_even
    without = spark_projection(
        [load(humming()), load(humming_fp8()), load(recurrent_round()), load(dspark_round())]
    )
    assert without.dspark is None


def test_each_opt_in_lever_s_round_is_projected_against_the_profile_it_changes() -> None:
    bf16_router = {**replayssm_round(), "profile": "stack+bf16-router"}
    fp8_draft = {**dspark_round(), "profile": "dspark+fp8-draft"}
    rounds = [replayssm_round(), bf16_router, dspark_round(), fp8_draft]
    result = spark_projection([load(humming()), load(humming_fp8()), *map(load, rounds)])
    levers = {lever.profile: lever for lever in result.levers}
    assert [(x.profile, x.base) for x in result.levers] == [
        ("stack+bf16-router", "stack"),
        ("dspark+fp8-draft", "dspark"),
    ]
    # the same kernels, fewer bytes: the projection moves by the bytes alone
    for lever in levers.values():
        assert lever.bytes < lever.base_bytes and lever.round_ms < lever.base_round_ms
        assert lever.saving == pytest.approx(1 - lever.round_ms / lever.base_round_ms)
        assert lever.gpu_round_ms == lever.gpu_base_round_ms
    assert levers["dspark+fp8-draft"].base_bytes - levers["dspark+fp8-draft"].bytes == (
        pytest.approx(0.504e9, rel=1e-3)
    )
    assert result.to_dict()["levers"][0]["profile"] == "stack+bf16-router"
    assert spark_projection([load(humming()), load(humming_fp8()), load(bf16_router)]).levers == ()


def test_a_replayssm_round_drops_the_kda_state_snapshots() -> None:
    kw: dict[str, Any] = {"context_tokens": 2048, "config": LING_3_FLASH_CONFIG}
    snapshots = unit_bytes("stack-recurrent", Phase.VERIFY, **kw)
    replay = unit_bytes("stack", Phase.VERIFY, **kw)
    assert replay[Category.KDA_STATE] < snapshots[Category.KDA_STATE]
    assert {c: b for c, b in replay.items() if c is not Category.KDA_STATE} == {
        c: b for c, b in snapshots.items() if c is not Category.KDA_STATE
    }
    p = load(replayssm_round())
    assert (p.replayssm, p.label) == (True, "stack")
    assert map_kernels(p).categories["kda_replayssm_exact_fold_kernel"] is Category.KDA_STATE
    assert load(recurrent_round()).label == "stack-recurrent"


def test_a_file_is_labelled_with_the_profile_whose_verify_its_round_ran() -> None:
    # files name the profile they booted; its verify ran as their `replayssm` says
    assert load({**recurrent_round(), "profile": "stack"}).label == "stack-recurrent"
    assert load({**replayssm_round(), "profile": "stack-recurrent"}).label == "stack"
    assert load({**dspark_round(), "replayssm": True}).label == "dspark"
    assert load(humming()).label == "humming"
    with pytest.raises(ValueError, match=r"no profile verifies humming\+nextn's rounds with"):
        load({**recurrent_round(), "profile": "humming+nextn", "replayssm": True})


def test_the_stack_round_is_projected_with_and_without_replayssm_side_by_side() -> None:
    both = [{**recurrent_round(), "profile": "stack"}, replayssm_round()]  # both files `stack`
    result = spark_projection([load(humming()), load(humming_fp8()), *map(load, both)])
    rounds = {p.profile: p for p in result.profiles if p.phase is Phase.VERIFY}
    assert (rounds["stack"].kernels_from, rounds["stack-recurrent"].kernels_from) == (
        "stack",
        "stack-recurrent",
    )
    assert rounds["stack"].bytes < rounds["stack-recurrent"].bytes
    # NVIDIA's stack TPOTs and the BF16-head round are set against the recurrent verify
    assert result.nextn is not None
    assert result.nextn.fp8_round_ms == rounds["stack-recurrent"].projected_ms
    r = result.replayssm
    assert r is not None
    assert r.speedup == pytest.approx(r.recurrent_round_ms / r.replayssm_round_ms)
    assert r.speedup > 1
    # the synthetic ReplaySSM round has one fold kernel more than the recurrent one
    assert r.gpu_replayssm_round_ms > r.gpu_recurrent_round_ms
    assert not r.gpu_direction_agrees
    assert (
        spark_projection([load(humming()), load(humming_fp8()), load(recurrent_round())]).replayssm
        is None
    )


def test_a_replayssm_flag_that_is_not_a_boolean_is_refused() -> None:
    with pytest.raises(ValueError, match="replayssm must be true or false"):
        load({**recurrent_round(), "replayssm": "yes"})


# --- the fit -----------------------------------------------------------------------------


def test_fit_recovers_known_parameters() -> None:
    bw, fixed_us = 230.0, 4.5
    points = [
        FitPoint(name, b, n, b / (bw * 1e9) * 1e3 + n * fixed_us / 1e3)
        for name, b, n in [("a", 5.2e9, 1300.0), ("b", 4.8e9, 1301.0), ("c", 4.8e9, 900.0)]
    ]
    fit = fit_spark(points)
    assert fit.bandwidth_gbps == pytest.approx(bw)
    assert fit.fixed_us == pytest.approx(fixed_us)
    assert not fit.constrained


def test_a_negative_fixed_cost_is_held_at_zero() -> None:
    # 0.4 GB less saves more time than any positive bandwidth allows with c >= 0
    points = [FitPoint("a", 5.2e9, 1000.0, 25.35), FitPoint("b", 4.8e9, 1001.0, 22.76)]
    fit = fit_spark(points)
    assert fit.constrained and fit.fixed_us == 0.0
    assert fit.bandwidth_gbps == pytest.approx(
        1e-6 / ((5.2 * 25.35 + 4.8 * 22.76) / (5.2**2 + 4.8**2) / 1e9)
    )


def test_the_fit_needs_two_points() -> None:
    with pytest.raises(ValueError, match="at least two"):
        fit_spark([FitPoint("a", 5e9, 1000.0, 25.0)])


# --- the whole projection ----------------------------------------------------------------


def test_projection_fits_published_tpots_and_projects_the_baseline_from_humming() -> None:
    result = spark_projection([load(humming()), load(humming_fp8()), load(recurrent_round())])
    by_name = {(p.profile, p.phase): p for p in result.profiles}
    baseline = by_name[("baseline", Phase.DECODE)]
    hum = by_name[("humming", Phase.DECODE)]
    assert baseline.kernels_from == "humming"
    assert baseline.projected_ms == pytest.approx(hum.projected_ms)
    assert [p.profile for p in result.fit_points] == ["baseline", "humming", "humming+fp8"]
    for p in (baseline, hum, by_name[("humming+fp8", Phase.DECODE)]):
        assert p.residual_ms == pytest.approx(p.published_ms - p.projected_ms)
        assert p.projected_ms == pytest.approx(p.bandwidth_ms + p.fixed_ms)
        assert sum(r.bytes for r in p.kernels) == pytest.approx(p.bytes)
        assert sum(r.projected_us for r in p.kernels) / 1e3 == pytest.approx(p.projected_ms)
    stack = by_name[("stack-recurrent", Phase.VERIFY)]
    assert stack.published_ms is None and stack.calls == pytest.approx(
        sum(c for _, c, _ in LAYERS_BODY) + 21 + 8
    )


def test_nextn_derives_the_bf16_head_round_by_swapping_head_kernels() -> None:
    result = spark_projection([load(humming()), load(humming_fp8()), load(recurrent_round())])
    nextn = result.nextn
    assert nextn is not None
    assert nextn.bf16_round_source.startswith("derived")
    fit = result.fit
    head_bytes = 4 * (157184 * 2560 * 2 - 157184 * 2560 - 157184 * 4)
    # the BF16 head: one kernel a forward instead of the FP8 GEMM and its quant (-4 calls)
    expected = fit.bandwidth_ms(head_bytes) - fit.fixed_ms(4)
    assert nextn.bf16_round_ms - nextn.fp8_round_ms == pytest.approx(expected)
    assert nextn.round_step_ratio == pytest.approx(nextn.fp8_round_ms / nextn.step_ms)
    # H200 time: 4 x 190 us BF16 head against 4 x (110 + 3) us
    assert nextn.gpu_bf16_round_ms - nextn.gpu_fp8_round_ms == pytest.approx(4 * (190 - 113) / 1e3)
    assert nextn.gpu_direction_agrees
    assert [row.accept_length for row in nextn.accept] == [2.68, 3.9]
    for row in nextn.accept:
        assert row.speedup == pytest.approx(nextn.bf16_round_ms / nextn.fp8_round_ms)
        assert row.fp8_head_tpot_ms == pytest.approx(nextn.fp8_round_ms / row.accept_length)


def test_a_measured_bf16_head_round_is_used_as_measured() -> None:
    bf16_round = recurrent_round()
    bf16_round["profile"] = "humming+nextn"
    bf16_round["kernels"] = [
        k for k in bf16_round["kernels"] if k["name"] not in (CUTLASS_FP8, HEAD_QUANT)
    ]
    bf16_round["kernels"].append(
        {"name": NVJET_HEAD, "calls": 4 * ROUNDS, "total_us": 4 * 190.0 * ROUNDS}
    )
    result = spark_projection(
        [load(humming()), load(humming_fp8()), load(recurrent_round()), load(bf16_round)]
    )
    assert result.nextn is not None
    assert result.nextn.bf16_round_source.startswith("measured")


@pytest.mark.parametrize(
    ("profiles", "message"),
    [
        ([profile("humming", LAYERS_BODY + BF16_HEAD, layers=6), humming_fp8()], "6 layers"),
        ([humming(), humming()], "given twice"),
        ([humming()], "at least two"),
    ],
)
def test_unusable_profile_sets_are_refused(profiles: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        spark_projection([load(p) for p in profiles])


# --- the script --------------------------------------------------------------------------


def run_script(
    tmp_path: Path, *profiles: dict[str, Any]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    paths = []
    for i, data in enumerate(profiles):
        paths.append(tmp_path / f"profile-{i}.json")
        paths[-1].write_text(json.dumps(data))
    out = tmp_path / "bench" / "spark-projection.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "lab" / "scripts" / "spark_projection.py"),
            *map(str, paths),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc, out


def test_script_writes_the_projection_json_and_prints_a_table(tmp_path: Path) -> None:
    proc, out = run_script(tmp_path, humming(), humming_fp8(), recurrent_round())
    assert proc.returncode == 0, proc.stderr
    assert "PROJECTION, not a measurement" in proc.stdout
    data = json.loads(out.read_text())
    assert data["kind"] == "projection"
    assert not [key for p in data["profiles"] for key in p if "measured" in key]
    assert set(data["fit"]) == {"bandwidth_gbps", "fixed_us_per_kernel", "constrained", "points"}
    first = data["profiles"][0]
    for key in (
        "profile",
        "phase",
        "kernels_from",
        "bytes",
        "calls",
        "bandwidth_ms",
        "fixed_ms",
        "projected_ms",
        "published_ms",
        "residual_ms",
        "bytes_by_category",
        "calls_by_category",
        "unmapped",
        "kernels",
    ):
        assert key in first
    fp8 = next(p for p in data["profiles"] if p["profile"] == "humming+fp8")
    assert fp8["unmapped"] == [MYSTERY]
    assert {"name", "category", "calls", "gpu_us", "bytes", "projected_us"} <= set(
        fp8["kernels"][0]
    )
    nextn = data["nextn"]
    assert nextn["nvidia_round_step_ratio"] == 2.26
    assert [row["accept_length"] for row in nextn["accept"]] == [2.68, 3.9]


def test_script_refuses_a_bad_file_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    bad = humming_fp8()
    del bad["kernels"]
    proc, out = run_script(tmp_path, humming(), bad)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "profile-1.json" in proc.stderr and "kernels" in proc.stderr
    assert not out.exists()
