"""The roofline columns of a row, against perf-anchors.md's numbers for Ling-3.0-flash."""

from __future__ import annotations

import pytest

from app.bench.bytemodel.bandwidth import roofline_columns
from app.bench.bytemodel.checkpoint import LmHead, ModelShape, Precision
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.bench.bytemodel.mtp import mtp_cycle
from app.bench.bytemodel.unit_bytes import lm_head
from tests.support.bench_builders import summary

FACTS = {"model_config": LING_3_FLASH_CONFIG, "config": {}}
ANCHOR = 5e-3
"""The byte model counts ~0.13% more than the anchors, which round to 3-4 digits."""
SGLANG_EXTRA = 29.35e6 + 3.44e6
"""Bytes a step reads beyond the anchors with SGLang's formats: MLA kv_b as BF16 w_kc/w_vc
(7 x 512 x 8192 B more) and FP32 KDA conv filters (35 x 3 x 4096 x 4 x 2 B more)."""


@pytest.mark.parametrize(
    ("profile", "head"),
    [
        ("baseline", LmHead.FP32_LOGITS),
        ("humming", LmHead.FP32_LOGITS),
        ("humming+fp8", LmHead.FP8),
        ("stack", LmHead.FP8),
        ("stack-recurrent", LmHead.FP8),
        ("unknown", LmHead.BF16),
    ],
)
def test_lm_head_follows_the_profile(profile: str, head: LmHead) -> None:
    assert lm_head(profile) == head


def test_nvidia_baseline_reads_5_2_gb_a_step_at_69_percent_of_spark() -> None:
    # perf-anchors.md §1.4: config A 5.196 GB/token; NV baseline TPOT 27.71 ms = 68.7%;
    # on SGLang's bytes 5.229 GB, 188.7 GB/s, 69.1%.
    row = summary(1 / 0.02771, context_tokens=32768.0)
    columns = roofline_columns("baseline", row, FACTS, peak_gbps=273.0)
    assert columns is not None
    assert columns.context_tokens == 32768
    assert columns.bytes_per_step == pytest.approx(5.196e9 + SGLANG_EXTRA, rel=ANCHOR / 2)
    assert columns.ceiling_tps == pytest.approx(273e9 / (5.196e9 + SGLANG_EXTRA), rel=ANCHOR)
    assert columns.achieved_gbps == pytest.approx(188.7, rel=ANCHOR / 2)
    assert columns.peak_share == pytest.approx(0.691, rel=ANCHOR / 2)
    assert columns.mtp_ceiling is None


def test_fp8_head_reads_4_8_gb() -> None:
    row = summary(1 / 0.02276, context_tokens=32768.0)
    columns = roofline_columns("humming+fp8", row, FACTS, peak_gbps=273.0)
    assert columns is not None
    assert columns.bytes_per_step == pytest.approx(4.793e9 + SGLANG_EXTRA, rel=ANCHOR / 2)
    assert columns.peak_share == pytest.approx(0.777, rel=ANCHOR / 2)


@pytest.mark.parametrize("steps", [3, 2])
def test_speculative_row_uses_cycle_bytes_and_a_over_r(steps: int) -> None:
    row = summary(1 / 0.01856, context_tokens=1024.0, accept_length=2.68)
    facts = {**FACTS, "config": {"speculative_num_steps": steps}} if steps != 3 else FACTS
    columns = roofline_columns("stack-recurrent", row, facts, peak_gbps=273.0)
    cycle = mtp_cycle(
        ModelShape.from_config(LING_3_FLASH_CONFIG),
        Precision.from_config(LING_3_FLASH_CONFIG, LmHead.FP8),
        context_tokens=1024,
        draft_steps=steps,
    )
    assert columns is not None
    assert columns.mtp_ceiling == pytest.approx(cycle.speedup_ceiling(2.68))
    assert columns.achieved_gbps == pytest.approx(cycle.bytes_per_token(2.68) / 0.01856 / 1e9)
    assert columns.bytes_per_step == pytest.approx(cycle.decode.total)


def test_a_recurrent_verify_stack_row_reads_9_43_gb_a_round_at_2k() -> None:
    # spark-recipes.md §6 with 40 MoE layers: a 2K FP8-head round is 9.425 GB (test_mtp.py
    # derives it); at accept 2.68 and 18.56 ms TPOT: 9.425 / 2.68 GB in 18.56 ms.
    row = summary(1 / 0.01856, context_tokens=2048.0, accept_length=2.68)
    columns = roofline_columns("stack-recurrent", row, FACTS, peak_gbps=273.0)
    assert columns is not None
    assert columns.bytes_per_step == pytest.approx(4.584e9, rel=1e-3)
    assert columns.achieved_gbps == pytest.approx(9.425 / 2.68 / 0.01856, rel=1e-3)
    assert columns.mtp_ceiling == pytest.approx(2.68 / (9.425 / 4.584), rel=1e-3)


def test_no_config_or_no_measurement_gives_no_columns() -> None:
    row = summary(40.0)
    assert roofline_columns("baseline", row, {"model_config": None}, peak_gbps=273.0) is None
    assert roofline_columns("baseline", row, {}, peak_gbps=273.0) is None
    empty = summary(None, context_tokens=None)
    assert roofline_columns("baseline", empty, FACTS, peak_gbps=273.0) is None


def test_a_config_the_byte_model_does_not_cover_gives_no_columns() -> None:
    facts = {"model_config": {"model_type": "llama", "hidden_size": 4096}}
    assert roofline_columns("baseline", summary(40.0), facts, peak_gbps=273.0) is None


def test_without_a_tpot_only_the_model_columns_are_filled() -> None:
    columns = roofline_columns("baseline", summary(None), FACTS, peak_gbps=273.0)
    assert columns is not None
    assert columns.achieved_gbps is None and columns.peak_share is None
    assert columns.ceiling_tps > 0


def test_a_replayssm_round_reads_fewer_bytes_and_a_dspark_round_more() -> None:
    row = summary(1 / 0.01856, context_tokens=1024.0, accept_length=2.68)
    rows = {p: roofline_columns(p, row, FACTS, peak_gbps=273.0) for p in PROFILES_OF_A_ROUND}
    achieved = {p: c.achieved_gbps for p, c in rows.items() if c is not None}
    ceiling = {p: c.mtp_ceiling for p, c in rows.items() if c is not None}
    # the same TPOT and accept length over fewer (ReplaySSM) or more (DSpark) bytes a round
    assert achieved["stack"] < achieved["stack-recurrent"] < achieved["dspark"]
    assert ceiling["stack"] > ceiling["stack-recurrent"] > ceiling["dspark"]


PROFILES_OF_A_ROUND = ("stack", "stack-recurrent", "dspark")
