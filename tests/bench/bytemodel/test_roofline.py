"""The decode byte model: by hand on a tiny config, and against perf-anchors.md on the real one."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

import pytest

from app.bench.bytemodel.checkpoint import LmHead, ModelShape, Precision, WeightFormat, matrix_bytes
from app.bench.bytemodel.roofline import (
    DGX_SPARK_GBPS,
    achieved_gbps,
    decode_step_bytes,
    roofline,
    share_of_peak,
)

H200_GBPS = 4800.0
"""Peak HBM3e bandwidth of one H200, GB/s."""

MB = 1e6
GB = 1e9
ANCHOR_REL = 2.5e-3
"""Tolerance against perf-anchors.md: our model counts +0.13% more bytes (scales, norms,
conv filters; see roofline's docstring) and the anchors round to 3-4 digits (<= 0.09%)."""
KV_B_BF16_MB = (7 * 512 * 8192 * (2 - 1) - 7 * 4 * (4 * 64)) / MB
"""perf-anchors.md reads MLA kv_b (8192 x 512) as FP8; SGLang serves it as BF16 w_kc/w_vc:
7 layers x one more byte a weight, less the FP8 block scales (4 x 64 blocks of 4 B)."""
CONV_FP32_MB = 35 * 3 * 4096 * 4 * (4 - 2) / MB
"""The KDA q/k/v conv filters (35 layers x 3 x 4096 x 4 taps) are FP32 in SGLang, not BF16."""
SERVED_EXTRA_MB = KV_B_BF16_MB + CONV_FP32_MB
"""Bytes a step reads beyond perf-anchors.md's appendix, with SGLang 0.5.23's formats: 32.8 MB."""


# --- matrix formats -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fmt", "expected"),
    [
        (WeightFormat.BF16, 2 * 256 * 384),
        (WeightFormat.FP32, 4 * 256 * 384),
        (WeightFormat.FP8_BLOCK, 256 * 384 + 4 * (2 * 3)),  # 2 x 3 blocks of 128x128
        (WeightFormat.FP8_CHANNEL, 256 * 384 + 4 * 256),  # one FP32 scale per row
        (WeightFormat.MXFP4, 256 * 384 / 2 + 256 * (384 // 32)),  # E8M0 per 32 inputs
    ],
)
def test_matrix_bytes(fmt: WeightFormat, expected: float) -> None:
    assert matrix_bytes(256, 384, fmt) == expected


def test_partial_blocks_round_up() -> None:
    assert matrix_bytes(129, 1, WeightFormat.FP8_BLOCK) == 129 + 4 * 2
    assert matrix_bytes(1, 33, WeightFormat.MXFP4) == 16.5 + 2


# --- the tiny config, by hand -----------------------------------------------------------

# Tiny: H 256, V 1024, 4 layers (KDA 0 and 2, MLA 1 and 3), 2 heads x 128, layer 0 dense
# (I 128), layers 1-3 MoE: 8 experts, top-2, I 64, one shared expert of 64.
TINY_PARTS = {
    # q, k, v, f, g, o: six 256x256 FP8 (4 blocks each) + b_proj 2x256 BF16; x2 layers
    "kda_projections": 2 * (6 * (65536 + 4 * 4) + 2 * 256 * 2),
    # q 256x256, kv_a 192x256, o 256x256 FP8 (4+4+4 blocks), kv_b 384x128 as BF16 w_kc/w_vc,
    # gate 2x256 BF16
    "mla_projections": 2 * (65536 + 49152 + 65536 + 4 * 12 + 2 * 49152 + 2 * 256 * 2),
    # gate/up 128x256 (2 blocks each), down 256x128 (2 blocks)
    "dense_mlp": 3 * 32768 + 4 * 6,
    # 3 layers x 2 experts x (gate/up 64x256 + down 256x64) MXFP4: 8192 B + 512 scales each
    "routed_experts": 3 * 2 * 3 * (8192 + 512),
    # 3 layers x (gate/up 64x256 + down 256x64) FP8: 16384 B + 2 blocks each
    "shared_experts": 3 * 3 * (16384 + 4 * 2),
    # 3 layers x 8x256 FP32 (no expert bias)
    "router": 3 * 8 * 256 * 4,
    # BF16: 2 norms x 4 layers + final (2304) + kv_a norms (2 x 128) + KDA o_norm (2 x 128);
    # FP32: KDA conv filters (2 x 3 x 256 x 4), A_log + dt_bias (2 x (2 + 256))
    "norms": 2 * (2304 + 256 + 2 * 128) + 4 * 2 * (3072 + 2 + 256),
    "embedding": 256 * 2,
    "lm_head": 1024 * 256 * 2,
    # per KDA layer: 2 x 128 x 128 FP32 + 3 x 3 x 256 BF16 conv, read and written; x2
    "kda_state": 2 * 2 * (2 * 128 * 128 * 4 + 3 * 3 * 256 * 2),
    # 2 MLA layers x 100 tokens x (128 + 64) BF16
    "mla_kv": 2 * 100 * 192 * 2,
}
TINY_TOTAL = 2_951_568


def test_tiny_shape(tiny_config: dict[str, Any]) -> None:
    shape = ModelShape.from_config(tiny_config)
    assert shape.mla_layers == (1, 3)
    assert shape.kda_layers == (0, 2)
    assert shape.moe_layers == 3
    assert shape.kv_width == 192
    assert shape.mla_gate_width == 2
    assert not shape.kda_lora


def test_tiny_decode_bytes_by_hand(tiny_config: dict[str, Any]) -> None:
    rf = roofline(tiny_config, context_tokens=100, peak_gbps=2.951568, head="bf16")
    assert asdict(rf.step) == TINY_PARTS
    assert rf.step.total == sum(TINY_PARTS.values()) == TINY_TOTAL
    assert rf.floor_tpot_s == pytest.approx(1e-3)
    assert rf.ceiling_tps == pytest.approx(1000.0)
    assert achieved_gbps(rf.step.total, 2e-3) == pytest.approx(1.475784)
    assert share_of_peak(rf.step.total, 2e-3, rf.peak_gbps) == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("head", "head_bytes"),
    [
        (LmHead.BF16, 1024 * 256 * 2),
        (LmHead.FP32_LOGITS, 1024 * 256 * 2),  # FP32 logits, BF16 weight read
        (LmHead.FP8, 1024 * 256 + 1024 * 4),
        (LmHead.MXFP4, 1024 * 256 / 2 + 1024 * 8),
    ],
)
def test_tiny_lm_head(tiny_config: dict[str, Any], head: LmHead, head_bytes: float) -> None:
    step = roofline(tiny_config, context_tokens=100, peak_gbps=1.0, head=head).step
    assert step.lm_head == head_bytes
    assert step.total == TINY_TOTAL - TINY_PARTS["lm_head"] + head_bytes


def test_kv_grows_linearly_with_context(tiny_config: dict[str, Any]) -> None:
    shape, precision = ModelShape.from_config(tiny_config), Precision.from_config(tiny_config)
    short = decode_step_bytes(shape, precision, context_tokens=100)
    long = decode_step_bytes(shape, precision, context_tokens=1100)
    assert long.total - short.total == 2 * 1000 * 192 * 2
    assert decode_step_bytes(shape, precision, context_tokens=0).mla_kv == 0


def test_kda_lora_and_q_lora_variants(tiny_config: dict[str, Any]) -> None:
    precision = Precision.from_config(tiny_config)
    lora = ModelShape.from_config({**tiny_config, "no_kda_lora": False, "q_lora_rank": 128})
    step = decode_step_bytes(lora, precision, context_tokens=0)
    # f and g become 256->128 plus 128->256: 2 x 2 x (32768 + 2 blocks) instead of 2 x 65552
    assert step.kda_projections == TINY_PARTS["kda_projections"] + 2 * (
        2 * 2 * (32768 + 8) - 2 * (65536 + 16)
    )
    # q becomes q_a 128x256 + q_b 256x128 (2 + 2 blocks) instead of 256x256 (4 blocks)
    assert step.mla_projections == TINY_PARTS["mla_projections"] + 2 * (2 * 32776 - 65552)
    assert step.norms == TINY_PARTS["norms"] + 2 * 2 * 128  # q_a norms


def test_unquantized_checkpoint_is_bf16(tiny_config: dict[str, Any]) -> None:
    del tiny_config["quantization_config"]
    precision = Precision.from_config(tiny_config)
    assert precision.linear is WeightFormat.BF16
    assert precision.routed_experts is WeightFormat.BF16


def test_bad_configs_are_rejected(tiny_config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="hidden_size"):
        ModelShape.from_config({k: v for k, v in tiny_config.items() if k != "hidden_size"})
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelShape.from_config({**tiny_config, "intermediate_size": None})
    with pytest.raises(ValueError, match="quant_method"):
        Precision.from_config({**tiny_config, "quantization_config": {"quant_method": "awq"}})
    with pytest.raises(ValueError):
        Precision.from_config(tiny_config, head="int3")


# --- the real Ling-3.0-flash against perf-anchors.md -----------------------------------


def test_ling_active_parameters(ling_config: dict[str, Any]) -> None:
    shape = ModelShape.from_config(ling_config)
    assert shape.mla_layers == (5, 11, 17, 23, 29, 35, 41)
    assert len(shape.kda_layers) == 35
    assert shape.moe_layers == 40


@pytest.mark.parametrize(
    ("part", "anchor_mb"),
    [
        ("kda_projections", 2207.7),
        ("mla_projections", 224.3 + KV_B_BF16_MB),
        ("dense_mlp", 94.4),
        ("routed_experts", 1002.7),
        ("shared_experts", 235.9),
        ("router", 209.7),
        ("lm_head", 804.8),
        ("kda_state", 152.0),
        ("mla_kv", 264.2),
    ],
)
def test_ling_parts_match_anchors(ling_config: dict[str, Any], part: str, anchor_mb: float) -> None:
    step = roofline(ling_config, context_tokens=32768, peak_gbps=DGX_SPARK_GBPS).step
    assert getattr(step, part) / MB == pytest.approx(anchor_mb, rel=ANCHOR_REL)


@pytest.mark.parametrize(
    ("head", "anchor_mb"),
    [("bf16", 804.8), ("fp32-logits", 804.8), ("fp8", 402.4), ("mxfp4", 213.8)],
)
def test_ling_head_matches_anchors(
    ling_config: dict[str, Any], head: str, anchor_mb: float
) -> None:
    step = roofline(ling_config, context_tokens=0, peak_gbps=1.0, head=head).step
    assert step.lm_head / MB == pytest.approx(anchor_mb, rel=ANCHOR_REL)


@pytest.mark.parametrize(
    ("context", "anchor_mb"), [(2048, 16.5), (8192, 66.1), (32768, 264.2), (131072, 1057.0)]
)
def test_ling_kv_matches_anchors(
    ling_config: dict[str, Any], context: int, anchor_mb: float
) -> None:
    step = roofline(ling_config, context_tokens=context, peak_gbps=1.0).step
    assert step.mla_kv / MB == pytest.approx(anchor_mb, rel=ANCHOR_REL)


@pytest.mark.parametrize(
    ("head", "context", "router", "kv_bytes", "anchor_gb"),
    [
        ("bf16", 32768, WeightFormat.FP32, 2.0, 5.196),  # A: the NV baseline
        ("fp8", 32768, WeightFormat.FP32, 2.0, 4.793),  # B
        ("fp8", 1024, WeightFormat.FP32, 2.0, 4.537),  # C
        ("fp8", 32768, WeightFormat.BF16, 1.0, 4.556),  # D: BF16 router, FP8 KV
    ],
)
def test_ling_totals_match_anchors(
    ling_config: dict[str, Any],
    head: str,
    context: int,
    router: WeightFormat,
    kv_bytes: float,
    anchor_gb: float,
) -> None:
    shape = ModelShape.from_config(ling_config)
    precision = replace(
        Precision.from_config(ling_config, head), router=router, kv_cache_bytes=kv_bytes
    )
    step = decode_step_bytes(shape, precision, context_tokens=context)
    assert step.total / MB == pytest.approx(anchor_gb * 1e3 + SERVED_EXTRA_MB, rel=ANCHOR_REL)
    assert step.total / GB != pytest.approx(anchor_gb, rel=ANCHOR_REL)  # the appendix's formats


def test_ling_all_4bit_matches_anchor_e(ling_config: dict[str, Any]) -> None:
    precision = replace(
        Precision.from_config(ling_config, LmHead.FP8),
        linear=WeightFormat.MXFP4,
        mla_absorbed=WeightFormat.MXFP4,
        router=WeightFormat.BF16,
        kv_cache_bytes=1.0,
    )
    step = decode_step_bytes(ModelShape.from_config(ling_config), precision, context_tokens=32768)
    assert step.total / MB == pytest.approx(3265 + CONV_FP32_MB, rel=ANCHOR_REL)


@pytest.mark.parametrize(
    ("head", "peak", "anchor_gb", "tpot_ms", "tps"),
    [
        ("bf16", DGX_SPARK_GBPS, 5.196, 19.03, 52.5),
        ("fp8", DGX_SPARK_GBPS, 4.793, 17.56, 57.0),
        ("bf16", H200_GBPS, 5.196, 1.08, 924.0),
        ("fp8", H200_GBPS, 4.793, 1.00, 1001.0),
    ],
)
def test_ling_floors_match_anchors(
    ling_config: dict[str, Any],
    head: str,
    peak: float,
    anchor_gb: float,
    tpot_ms: float,
    tps: float,
) -> None:
    rf = roofline(ling_config, context_tokens=32768, peak_gbps=peak, head=head)
    more = 1 + SERVED_EXTRA_MB / (anchor_gb * 1e3)  # the anchors' floors, on SGLang's bytes
    # abs: half a unit of the anchor's last digit (1.08 ms stands for 1.075-1.085)
    assert rf.floor_tpot_s * 1e3 == pytest.approx(tpot_ms * more, rel=ANCHOR_REL, abs=0.005)
    assert rf.ceiling_tps == pytest.approx(tps / more, rel=ANCHOR_REL)


@pytest.mark.parametrize(
    ("head", "tpot_ms", "anchor_gb", "gbps", "share"),
    [  # NV-blog baseline and +FP8 head, as perf-anchors.md §1.4 reads them
        ("bf16", 27.71, 5.196, 187.5, 0.687),
        ("fp8", 22.76, 4.793, 210.6, 0.771),
    ],
)
def test_ling_nvidia_measurements_as_share_of_peak(
    ling_config: dict[str, Any],
    head: str,
    tpot_ms: float,
    anchor_gb: float,
    gbps: float,
    share: float,
) -> None:
    rf = roofline(ling_config, context_tokens=32768, peak_gbps=DGX_SPARK_GBPS, head=head)
    more = 1 + SERVED_EXTRA_MB / (anchor_gb * 1e3)
    achieved = achieved_gbps(rf.step.total, tpot_ms / 1e3)
    assert achieved == pytest.approx(gbps * more, rel=ANCHOR_REL)
    share_measured = share_of_peak(rf.step.total, tpot_ms / 1e3, rf.peak_gbps)
    assert share_measured == pytest.approx(share * more, rel=ANCHOR_REL)
