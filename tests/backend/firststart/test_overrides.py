"""Overrides that contradict a profile's levers are refused before anything loads, each in
one line naming the setting and the lever; harmless ones pass."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.config import EngineConfig
from app.levers.profiles import PROFILES
from app.levers.refusals import refusal
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[3]


def refused(overrides: dict[str, Any], profile: str = "stack", **env: str) -> str | None:
    config = EngineConfig("/m", profile=profile, overrides=overrides)
    return refusal(config.levers, config.context, config.overrides, env)


CONTRADICTIONS = {
    "MoE runner": ({"moe_runner_backend": "triton"}, "stack", "the Humming MoE lever"),
    "MoE runner left to SGLang": ({"moe_runner_backend": None}, "stack", "the Humming MoE lever"),
    "baseline's MoE": (
        {"moe_runner_backend": "humming"},
        "baseline",
        "the recipe's FlashInfer MXFP4 MoE",
    ),
    "FP32 head beside FP8": ({"enable_fp32_lm_head": True}, "stack", "the FP8 LM head lever"),
    "FP32 head off in the recipe": (
        {"enable_fp32_lm_head": False},
        "baseline",
        "the recipe's FP32 LM head",
    ),
    "FP32 head handed back to SGLang's off in the recipe": (
        {"enable_fp32_lm_head": None},
        "baseline",
        "the recipe's FP32 LM head",
    ),
    "NEXTN off": ({"speculative_algorithm": None}, "stack", "the NEXTN 3/1/4 lever"),
    "NEXTN depth": ({"speculative_num_steps": 2}, "stack", "the NEXTN 3/1/4 lever"),
    "NEXTN top-k": ({"speculative_eagle_topk": 4}, "stack-recurrent", "the NEXTN 3/1/4 lever"),
    "another draft for NEXTN": (
        {"speculative_draft_model_path": "/other"},
        "stack",
        "the NEXTN 3/1/4 lever",
    ),
    "speculation on a plain profile": (
        {"speculative_num_steps": 2},
        "baseline",
        "does not apply to profile baseline, which runs no draft model",
    ),
    "NEXTN on a plain profile": (
        {"speculative_algorithm": "NEXTN"},
        "humming+fp8",
        "does not apply to profile humming+fp8",
    ),
    "DSpark block": ({"speculative_dspark_block_size": 4}, "dspark", "the DSpark draft lever"),
    "ReplaySSM off": ({"enable_linear_replayssm_spec": False}, "stack", "the KDA ReplaySSM lever"),
    "ReplaySSM on the recurrent stack": (
        {"enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": 8},
        "stack-recurrent",
        "the recurrent KDA verify",
    ),
    "quantization": ({"quantization": "fp8"}, "stack", "the checkpoint's quantization"),
    "a BF16 router on the stack": (
        {"json_model_override_args": '{"router_dtype": "bf16"}'},
        "stack",
        "the checkpoint's FP32 router",
    ),
    "the router handed back to the checkpoint's": (
        {"json_model_override_args": None},
        "stack+bf16-router",
        "the BF16 router lever",
    ),
    "an FP8 draft on dspark": (
        {"speculative_draft_model_quantization": "fp8"},
        "dspark",
        "the draft's own weights",
    ),
    "an FP8 NEXTN draft": (
        {"speculative_draft_model_quantization": "fp8"},
        "stack",
        "the draft's own weights",
    ),
    "the FP8 draft left unquantized": (
        {"speculative_draft_model_quantization": "unquant"},
        "dspark+fp8-draft",
        "the FP8 draft lever",
    ),
    "graphs disabled": ({"disable_cuda_graph": True}, "stack", "the CUDA graphs lever"),
    "decode graphs disabled": ({"disable_decode_cuda_graph": True}, "humming", "CUDA graphs"),
    "decode backend disabled": (
        {"cuda_graph_backend_decode": "disabled"},
        "stack",
        "the CUDA graphs lever",
    ),
    "graph config disabling decode": (
        {"cuda_graph_config": {"decode": {"backend": "disabled"}}},
        "stack",
        "the CUDA graphs lever",
    ),
}


@pytest.mark.parametrize("name", list(CONTRADICTIONS))
def test_an_override_that_contradicts_a_lever_is_refused_naming_it_and_the_lever(name):
    overrides, profile, lever = CONTRADICTIONS[name]
    line = refused(overrides, profile)
    assert line is not None and "\n" not in line
    key = next(iter(overrides))
    assert line.startswith(f"--sglang-arg {key}=")
    assert lever in line


def test_disable_cuda_graph_says_sglang_would_let_ling_chat_s_setting_outrank_it():
    line = refused({"disable_cuda_graph": True}) or ""
    assert "outrank" in line and "silently do nothing" in line
    assert line.startswith("--sglang-arg disable_cuda_graph=true contradicts")
    assert "cuda_graph_backend_decode=full outrank" in line


HARMLESS = {
    "dummy weights": ({"load_format": "dummy"}, "stack"),
    "its own values": ({"moe_runner_backend": "humming", "enable_fp32_lm_head": False}, "stack"),
    "the recipe's own": ({"moe_runner_backend": "flashinfer_mxfp4"}, "baseline"),
    "a longer ReplaySSM ring": ({"linear_replayssm_cache_len": 16}, "stack"),
    "the DSpark draft's folder": ({"speculative_draft_model_path": "/d"}, "dspark"),
    "prefill graphs off, as already": ({"disable_prefill_cuda_graph": True}, "stack"),
    "graphs kept on": ({"disable_cuda_graph": False}, "stack"),
    "another graph backend": ({"cuda_graph_backend_decode": "breakable"}, "stack"),
    "a setting handed back to SGLang": ({"cuda_graph_bs_decode": None}, "stack"),
    "no speculation asked of a plain profile": ({"speculative_algorithm": None}, "baseline"),
    "FP32 logits handed back to SGLang's off": ({"enable_fp32_lm_head": None}, "stack"),
    "another config override": ({"json_model_override_args": '{"max_window_layers": 4}'}, "stack"),
    "the checkpoint's own FP32 router": (
        {"json_model_override_args": '{"router_dtype": "fp32"}'},
        "stack",
    ),
    "the BF16 router's own override": (
        {"json_model_override_args": '{"router_dtype": "bf16"}'},
        "stack+bf16-router",
    ),
}


@pytest.mark.parametrize("name", list(HARMLESS))
def test_an_override_that_leaves_the_levers_alone_passes(name):
    overrides, profile = HARMLESS[name]
    assert refused(overrides, profile) is None


def test_a_variable_that_turns_off_nextn_s_draft_extend_graph_is_refused():
    line = refused({}, SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH="1") or ""
    assert line.startswith("SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH=1 contradicts")
    assert refused({}, "humming", SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH="1") is None
    assert refused({}, SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH="0") is None


def test_a_variable_that_leaves_layers_unquantized_is_refused_on_every_profile():
    for profile in PROFILES:
        line = refused({}, profile, SGLANG_FP8_IGNORED_LAYERS="lm_head") or ""
        assert line.startswith("SGLANG_FP8_IGNORED_LAYERS=lm_head contradicts"), profile
    assert refused({}, SGLANG_FP8_IGNORED_LAYERS="") is None  # the recipe's empty = unset


def ling_chat(*argv: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The real command, on this machine (no GPU, no SGLang), with a throwaway data dir."""
    (tmp_path / "config.toml").write_text("")
    environment = {
        **os.environ,
        "LING_CHAT_CONFIG": str(tmp_path / "config.toml"),
        "LING_CHAT_DATA_DIR": str(tmp_path),
        **env,
    }
    return subprocess.run(
        [sys.executable, "-m", "app", *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=False,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ("--sglang-arg", "moe_runner_backend=triton"),
        ("doctor", "--sglang-arg", "moe_runner_backend=triton"),
        ("prepare", "--sglang-arg", "moe_runner_backend=triton"),
        ("serve", "--sglang-arg", "moe_runner_backend=triton"),
    ],
    ids=["chat", "doctor", "prepare", "serve"],
)
def test_the_cli_refuses_the_override_with_exit_2_before_the_preflight(
    end_to_end: None, argv, tmp_path
):
    done = ling_chat(*argv, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "ling-chat: error: --sglang-arg moe_runner_backend=triton contradicts the Humming MoE "
        "lever of profile stack (ling-chat sets moe_runner_backend=humming)"
    )
    assert "preflight" not in done.stdout + done.stderr


def test_the_cli_refuses_disabled_graphs_and_a_variable_the_same_way(end_to_end: None, tmp_path):
    done = ling_chat("--sglang-arg", "disable_cuda_graph=true", tmp_path=tmp_path)
    assert done.returncode == 2 and "disable_cuda_graph=true contradicts" in done.stderr
    done = ling_chat("doctor", tmp_path=tmp_path, SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH="1")
    assert done.returncode == 2
    assert "SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH=1 contradicts" in done.stderr


@pytest.mark.parametrize(
    ("argv", "env", "named"),
    [
        (
            ("--sglang-arg", "attention_backend=torch_native"),
            {},
            "--sglang-arg attention_backend=torch_native contradicts the CUDA graphs lever",
        ),
        ((), {"SGLANG_SIMULATE_ACC_LEN": "3.5"}, "SGLANG_SIMULATE_ACC_LEN=3.5 contradicts"),
    ],
    ids=["torch_native", "simulated-accept"],
)
def test_an_attention_backend_or_a_faking_variable_is_refused_before_sglang_loads(
    argv, env, named, end_to_end: None, tmp_path
):
    """What SGLang refused only after the weights had loaded (49 s on the H200) is refused by
    the real command before it imports SGLang, with the engine double's SGLang installed."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    double = str(ROOT / "tests" / "fixtures" / "engine_double")
    done = ling_chat(
        "doctor", "--model", str(model), *argv, tmp_path=tmp_path, PYTHONPATH=double, **env
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"ling-chat: error: {named}")
    assert "preflight" not in done.stdout + done.stderr
    assert "Importing SGLang" not in done.stdout + done.stderr


def test_a_missing_lever_package_is_a_preflight_line_before_the_gpu_checks(
    end_to_end: None, tmp_path
):
    """Through the CLI with the engine double's sglang and torch, and no humming."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    double = ROOT / "tests" / "fixtures" / "engine_double"
    done = ling_chat("doctor", "--model", str(model), tmp_path=tmp_path, PYTHONPATH=str(double))
    assert done.returncode == 3, done.stdout + done.stderr
    preflight = [line for line in done.stdout.splitlines() if line.startswith("preflight: ")]
    # The double's world hides an installed humming too (its message then says so).
    assert preflight[0].startswith(
        "preflight: FAIL lever package humming-kernels: `import humming` failed: "
        "ModuleNotFoundError: "
    )
    assert preflight[0].endswith("; fix: pip install humming-kernels==0.1.12 cuda-python (NVRTC)")


def test_bench_refuses_per_profile_unless_it_may_measure_unproven_engines(
    end_to_end: None, tmp_path
):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    double = str(ROOT / "tests" / "fixtures" / "engine_double")
    argv = ("bench", "--model", str(model), "--profiles", "baseline,stack")
    done = ling_chat(
        *argv, "--sglang-arg", "speculative_num_steps=2", tmp_path=tmp_path, PYTHONPATH=double
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "ling-chat: error: --sglang-arg speculative_num_steps=2 does not apply to profile "
        "baseline, which runs no draft model: SGLang would ignore it or start one the proof refuses"
    )
    done = ling_chat(
        *argv,
        "--allow-unproven",
        "--sglang-arg",
        "speculative_num_steps=2",
        tmp_path=tmp_path,
        PYTHONPATH=double,
    )
    assert "does not apply" not in done.stderr
    assert "preflight refused the start" in done.stderr  # on to the preflight: no GPU here
