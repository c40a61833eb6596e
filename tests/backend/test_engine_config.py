"""What the engine asks SGLang for, per profile and GPU (the proof checks the result)."""

from __future__ import annotations

import pytest

from app.backend.engine_config import PROFILES, EngineConfig, GpuFacts, server_args

H200_KIT = GpuFacts(sm=90, has_fa3=False, has_flashinfer=False, has_xgrammar=False)
H200_FULL = GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True)
SPARK = GpuFacts(sm=121, has_fa3=True, has_flashinfer=True, has_xgrammar=True)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_moe_backend_is_never_left_on_auto(profile):
    args = server_args(EngineConfig("/m", profile=profile), H200_FULL)
    assert args["moe_runner_backend"] in ("humming", "flashinfer_mxfp4")
    assert (args["moe_runner_backend"] == "humming") == PROFILES[profile].humming


def test_stack_asks_for_nextn_3_1_4_with_the_model_as_draft_and_no_fp32_head():
    args = server_args(EngineConfig("/models/ling", profile="stack"), H200_FULL)
    assert args["speculative_algorithm"] == "NEXTN"
    assert (
        args["speculative_num_steps"],
        args["speculative_eagle_topk"],
        args["speculative_num_draft_tokens"],
    ) == (3, 1, 4)
    assert args["speculative_draft_model_path"] == "/models/ling"
    assert args["enable_fp32_lm_head"] is False
    assert args["cuda_graph_bs_decode"] == [1]
    assert args["startup_weight_load_mode"] == "serial"


def test_baseline_is_the_official_recipe():
    args = server_args(EngineConfig("/m", profile="baseline"), H200_FULL)
    assert args["enable_fp32_lm_head"] is True
    assert "speculative_algorithm" not in args


@pytest.mark.parametrize(
    ("gpu", "attention", "sampling", "grammar"),
    [
        (H200_KIT, "triton", "pytorch", "none"),
        (H200_FULL, "fa3", "flashinfer", "xgrammar"),
        (SPARK, "triton", "flashinfer", "xgrammar"),  # FA3 is Hopper-only
    ],
)
def test_kernel_backends_follow_the_gpu(gpu, attention, sampling, grammar):
    args = server_args(EngineConfig("/m"), gpu)
    assert (args["attention_backend"], args["sampling_backend"], args["grammar_backend"]) == (
        attention,
        sampling,
        grammar,
    )


def test_overrides_win_and_memory_fraction_defaults_to_the_spark_safe_value():
    config = EngineConfig("/m", overrides={"load_format": "dummy", "attention_backend": "x"})
    args = server_args(config, H200_FULL)
    assert args["load_format"] == "dummy"
    assert args["attention_backend"] == "x"
    assert args["mem_fraction_static"] == 0.65


@pytest.mark.parametrize("profile", list(PROFILES))
def test_an_idle_engine_sleeps_instead_of_spinning(profile):
    assert server_args(EngineConfig("/m", profile=profile), H200_FULL)["sleep_on_idle"] is True
