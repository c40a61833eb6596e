"""The roofline columns of a row, against perf-anchors.md's numbers for Ling-3.0-flash."""

from __future__ import annotations

import pytest

from app.bench.bandwidth import lm_head, roofline_columns
from app.telemetry.mtp import mtp_cycle
from app.telemetry.roofline import LmHead, ModelShape, Precision
from tests.bench.builders import summary
from tests.telemetry.conftest import LING_3_FLASH_CONFIG

FACTS = {"model_config": LING_3_FLASH_CONFIG, "config": {}}
ANCHOR = 5e-3
"""The byte model counts ~0.13% more than the anchors, which round to 3-4 digits."""


@pytest.mark.parametrize(
    ("profile", "head"),
    [
        ("baseline", LmHead.FP32_LOGITS),
        ("humming", LmHead.FP32_LOGITS),
        ("humming+fp8", LmHead.FP8),
        ("stack", LmHead.FP8),
        ("unknown", LmHead.BF16),
    ],
)
def test_lm_head_follows_the_profile(profile: str, head: LmHead) -> None:
    assert lm_head(profile) == head


def test_nvidia_baseline_reads_5_2_gb_a_step_at_69_percent_of_spark() -> None:
    # perf-anchors.md §1.4: config A 5.196 GB/token; NV baseline TPOT 27.71 ms = 68.7%.
    row = summary(1 / 0.02771, context_tokens=32768.0)
    columns = roofline_columns("baseline", row, FACTS, peak_gbps=273.0)
    assert columns is not None
    assert columns.context_tokens == 32768
    assert columns.bytes_per_step == pytest.approx(5.196e9, rel=ANCHOR)
    assert columns.ceiling_tps == pytest.approx(52.5, rel=ANCHOR)
    assert columns.achieved_gbps == pytest.approx(187.5, rel=ANCHOR)
    assert columns.peak_share == pytest.approx(0.687, rel=ANCHOR)
    assert columns.mtp_ceiling is None


def test_fp8_head_reads_4_8_gb() -> None:
    row = summary(1 / 0.02276, context_tokens=32768.0)
    columns = roofline_columns("humming+fp8", row, FACTS, peak_gbps=273.0)
    assert columns is not None
    assert columns.bytes_per_step == pytest.approx(4.793e9, rel=ANCHOR)
    assert columns.peak_share == pytest.approx(0.771, rel=ANCHOR)


@pytest.mark.parametrize("steps", [3, 2])
def test_speculative_row_uses_cycle_bytes_and_a_over_r(steps: int) -> None:
    row = summary(1 / 0.01856, context_tokens=1024.0, accept_length=2.68)
    facts = {**FACTS, "config": {"speculative_num_steps": steps}} if steps != 3 else FACTS
    columns = roofline_columns("stack", row, facts, peak_gbps=273.0)
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
