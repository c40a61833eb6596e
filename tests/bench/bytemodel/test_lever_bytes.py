"""The opt-in levers' bytes: the BF16 router halves every gate a step and a round reads, the
FP8 draft halves only the DSpark draft's layer linears, the hot-vocabulary draft head cuts
only the head rows the NEXTN draft reads and the logits it writes; nothing else moves. And
the DSpark round reads its Markov head's `markov_w2` once per draft position, as the H200's
kernel profiles show."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.bench.bytemodel.bandwidth import roofline_columns
from app.bench.bytemodel.checkpoint import LmHead, Precision
from app.bench.bytemodel.kernels import Category, Phase
from app.bench.bytemodel.ling_config import DSPARK_MARKOV_RANK, LING_3_FLASH_CONFIG
from app.bench.bytemodel.unit_bytes import (
    dspark_draft_bytes,
    served_config,
    terms,
    unit_bytes,
)
from app.levers.draft.dspark import BLOCK
from tests.support.bench_builders import summary

KW: dict[str, Any] = {"context_tokens": 32768 + 1024, "config": LING_3_FLASH_CONFIG}
GATE_FP32 = 512 * 2560 * 4
"""One router gate's FP32 weight (experts x hidden); its FP32 expert bias stays."""
DRAFT_LINEAR_PARAMS = 5 * (6144 * 2560 + 2560 * 4096 + 19456 * 2560 + 2560 * 9728)
DRAFT_SCALE_ROWS = 5 * (6144 + 2560 + 19456 + 2560)
MARKOV_W2 = 2 * 157184 * DSPARK_MARKOV_RANK
"""The Markov head's `markov_w2`, BF16 vocab x rank: 0.805 GB at the test draft's 2,560."""
RESULTS = Path(__file__).resolve().parents[3] / "lab" / "results"
MARKOV_GEMV = "nvjet_sm90_tst_256x8_64x6_2x1_v_bz_TNT"
"""cuBLAS's kernel for the Markov head's GEMV in the H200's DSpark kernel profiles."""


def _total(parts: dict[Category, float]) -> float:
    return math.fsum(parts.values())


def _changed(a: dict[Category, float], b: dict[Category, float]) -> set[Category]:
    return {c for c in {*a, *b} if a.get(c, 0.0) != pytest.approx(b.get(c, 0.0), rel=1e-12)}


def test_the_bf16_router_profile_reads_its_config_with_router_dtype_bf16():
    assert served_config("stack+bf16-router", LING_3_FLASH_CONFIG)["router_dtype"] == "bf16"
    assert served_config("stack", LING_3_FLASH_CONFIG) == LING_3_FLASH_CONFIG
    assert served_config("unknown", LING_3_FLASH_CONFIG) == LING_3_FLASH_CONFIG


@pytest.mark.parametrize(("phase", "gates"), [(Phase.DECODE, 40), (Phase.VERIFY, 43)])
def test_the_bf16_router_halves_every_gate_of_a_step_or_a_round(phase: Phase, gates: int):
    fp32, bf16 = unit_bytes("stack", phase, **KW), unit_bytes("stack+bf16-router", phase, **KW)
    assert _changed(fp32, bf16) == {Category.ROUTER}
    # a round: the target's 40 MoE layers and one for each of NEXTN's 3 draft forwards
    assert fp32[Category.ROUTER] - bf16[Category.ROUTER] == gates * GATE_FP32 / 2


def test_the_bf16_router_saves_1_2_percent_of_a_stack_round_at_the_published_context():
    stack = _total(unit_bytes("stack", Phase.VERIFY, **KW))
    lever = _total(unit_bytes("stack+bf16-router", Phase.VERIFY, **KW))
    assert (stack / 1e9, lever / 1e9) == pytest.approx((9.413, 9.300), abs=5e-4)
    assert 1 - lever / stack == pytest.approx(0.012, abs=5e-4)


def test_the_fp8_draft_halves_only_the_draft_s_layer_linears():
    bf16 = unit_bytes("dspark", Phase.VERIFY, **KW)
    fp8 = unit_bytes("dspark+fp8-draft", Phase.VERIFY, **KW)
    assert _changed(bf16, fp8) == {Category.BF16_LINEAR, Category.FP8_LINEAR}
    assert bf16[Category.BF16_LINEAR] - fp8[Category.BF16_LINEAR] == 2 * DRAFT_LINEAR_PARAMS
    assert fp8[Category.FP8_LINEAR] - bf16[Category.FP8_LINEAR] == pytest.approx(
        DRAFT_LINEAR_PARAMS + 4 * DRAFT_SCALE_ROWS
    )
    # 0.50 GB of the 2.72 GB the draft's 1.36B BF16 parameters read: fc and the Markov head
    # are plain torch linears SGLang does not quantize
    saved = _total(bf16) - _total(fp8)
    assert saved / 1e9 == pytest.approx(0.504, abs=1e-3)
    assert (_total(bf16) / 1e9, _total(fp8) / 1e9) == pytest.approx((21.080, 20.576), abs=5e-4)


def test_the_dspark_round_reads_markov_w2_once_per_draft_position():
    assert terms("dspark").markov_w2_reads == terms("dspark+fp8-draft").markov_w2_reads == BLOCK
    precision = Precision.from_config(LING_3_FLASH_CONFIG, LmHead.FP8)
    once = dspark_draft_bytes(precision, fp8=False, vocab_size=157184)
    per_position = dspark_draft_bytes(
        precision, fp8=False, vocab_size=157184, markov_w2_reads=BLOCK
    )
    assert once == {Category.BF16_LINEAR: 2 * 1.36e9}
    assert per_position[Category.BF16_LINEAR] - once[Category.BF16_LINEAR] == pytest.approx(
        (BLOCK - 1) * MARKOV_W2
    )
    # the round: the draft's 2.72 GB read once would make it 15.446 GB; 7 more reads of the
    # 0.805 GB markov_w2 make it 21.080 (the 8 reads alone 6.44 GB)
    round_bytes = _total(unit_bytes("dspark", Phase.VERIFY, **KW))
    assert round_bytes / 1e9 == pytest.approx(15.446 + 7 * MARKOV_W2 / 1e9, abs=5e-4)


@pytest.mark.parametrize(
    "name",
    [
        "2026-12-01-h200-session10-kernels-dspark-42.json",
        "2026-12-02-h200-session17-kernels-dspark-42.json",
        "2026-12-02-h200-session17-kernels-dspark-fp8-draft-42.json",
    ],
)
def test_the_h200_ran_one_markov_w2_gemv_a_draft_position(name: str):
    profile = json.loads((RESULTS / name).read_text())
    (gemv,) = [k for k in profile["kernels"] if k["name"] == MARKOV_GEMV]
    assert gemv["calls"] == BLOCK * profile["rounds"]
    # about 188 us a call: 0.805 GB at 4.3 TB/s, 89% of the H200's 4.8 TB/s
    tbps = MARKOV_W2 / (gemv["total_us"] / gemv["calls"] * 1e-6) / 1e12
    assert 3.8 < tbps < 4.8


def test_a_lever_s_row_counts_its_own_bytes_at_the_same_tpot_and_accept():
    facts = {"model_config": LING_3_FLASH_CONFIG, "config": {}}
    row = summary(1 / 0.0174, context_tokens=1024.0, accept_length=2.68)
    achieved = {}
    for profile in ("stack", "stack+bf16-router", "dspark", "dspark+fp8-draft", "stack+hot-vocab"):
        columns = roofline_columns(profile, row, facts, peak_gbps=273.0)
        assert columns is not None
        achieved[profile] = columns.achieved_gbps
    assert achieved["stack+bf16-router"] < achieved["stack"]
    assert achieved["dspark+fp8-draft"] < achieved["dspark"]
    assert achieved["stack+hot-vocab"] < achieved["stack"]


HOT_ROWS_CUT = 157184 - 32768
"""The head rows each NEXTN draft forward no longer reads with a 32K hot head."""


def test_the_hot_vocab_head_cuts_only_the_draft_s_head_rows_and_logits_of_a_round():
    stack = unit_bytes("stack", Phase.VERIFY, **KW)
    hot = unit_bytes("stack+hot-vocab", Phase.VERIFY, **KW)
    assert _changed(stack, hot) == {Category.LM_HEAD}
    # 3 draft forwards: an FP8 byte and an FP32 scale a row, and a BF16 logit a row
    assert stack[Category.LM_HEAD] - hot[Category.LM_HEAD] == pytest.approx(
        3 * HOT_ROWS_CUT * (2560 + 4 + 2)
    )
    assert (stack[Category.LM_HEAD] - hot[Category.LM_HEAD]) / 1e9 == pytest.approx(0.958, abs=5e-4)


def test_the_hot_vocab_head_leaves_a_plain_decode_step_alone():
    assert unit_bytes("stack+hot-vocab", Phase.DECODE, **KW) == unit_bytes(
        "stack", Phase.DECODE, **KW
    )
