"""What the engine asks SGLang for, per profile and GPU (the proof checks the result)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine import config as engine_config
from app.backend.engine.config import (
    CHAT_TEMPLATE,
    ENVIRONMENT,
    REASONING_PARSER,
    SERVER_ARGS,
    EngineConfig,
    GpuFacts,
    Setting,
    engine_environment,
    server_args,
)
from app.backend.engine.setup import check_load_format, set_engine_environment
from app.commands.common import sglang_overrides
from app.core.errors import BackendError
from app.levers import profiles as lever_profiles
from app.levers.draft import fp8_draft, nextn
from app.levers.draft.nextn import depth_args as nextn_depth_args
from app.levers.lever import Context
from app.levers.model import fp8_head, humming
from app.levers.profiles import OPT_IN, PROFILES
from tests.fixtures.engine_double.sglang.srt.entrypoints import engine as engine_double

SETTINGS_DOC = Path(__file__).resolve().parents[3] / "docs" / "engine-settings.md"
H200_KIT = GpuFacts(sm=90, has_fa3=False, has_flashinfer=False, has_xgrammar=False)
H200_FULL = GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True)
SPARK = GpuFacts(sm=121, has_fa3=False, has_flashinfer=True, has_xgrammar=True)
SPARK_BARE = GpuFacts(sm=121, has_fa3=False, has_flashinfer=False, has_xgrammar=False)
GPUS = [H200_KIT, H200_FULL, SPARK, SPARK_BARE]

RECIPE_ARGS: dict[str, Any] = {
    # spark-recipes.md section 2, as SGLang 0.5.23's ServerArgs names its flags
    "max_running_requests": 1,
    "cuda_graph_backend_decode": "full",
    "cuda_graph_max_bs_decode": 1,
    "cuda_graph_bs_decode": [1],
    "cuda_graph_backend_prefill": "disabled",
    "page_size": 64,
    "max_mamba_cache_size": 64,
    "chunked_prefill_size": 8192,
    "max_prefill_tokens": 16384,
    "disable_flashinfer_autotune": True,
    "disable_shared_experts_fusion": True,
}
RECIPE_ENV = {
    "SGLANG_ENABLE_JIT_DEEPGEMM": "0",
    "SGLANG_JIT_DEEPGEMM_PRECOMPILE": "0",
    "HUMMING_COMPILER": "nvrtc",
    "HUMMING_CACHE_DIR": "~/.humming/cache",
}


@pytest.mark.parametrize("profile", list(PROFILES))
def test_moe_backend_is_never_left_on_auto(profile):
    args = server_args(EngineConfig("/m", profile=profile), H200_FULL)
    assert args["moe_runner_backend"] in ("humming", "flashinfer_mxfp4")
    assert (args["moe_runner_backend"] == "humming") == PROFILES[profile].has("humming")


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
    assert args["startup_weight_load_mode"] == "serial"


def test_a_nextn_depth_override_sets_a_top_1_chain_of_that_depth():
    config = EngineConfig("/m", profile="stack", overrides=nextn_depth_args(2))
    args = server_args(config, H200_FULL)
    assert (
        args["speculative_algorithm"],
        args["speculative_num_steps"],
        args["speculative_eagle_topk"],
        args["speculative_num_draft_tokens"],
    ) == ("NEXTN", 2, 1, 3)
    assert nextn_depth_args(7)["speculative_num_draft_tokens"] == 8
    with pytest.raises(ValueError, match="at least one draft step"):
        nextn_depth_args(0)


def test_baseline_is_the_official_recipe():
    args = server_args(EngineConfig("/m", profile="baseline"), H200_FULL)
    assert args["enable_fp32_lm_head"] is True
    assert "speculative_algorithm" not in args


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_profile_follows_the_spark_recipe_on_every_gpu(profile, gpu):
    args = server_args(EngineConfig("/m", profile=profile), gpu)
    assert {name: args.get(name) for name in RECIPE_ARGS} == RECIPE_ARGS
    # The checkpoint's native 262,144 context, no YaRN override (the BF16 router's config
    # override names the router alone).
    config = json.loads(args.get("json_model_override_args", "{}"))
    assert "context_length" not in args and set(config) <= {"router_dtype"}


@pytest.mark.parametrize(
    ("gpu", "attention", "fp8_gemm", "sampling", "grammar"),
    [
        (H200_KIT, "triton", None, "pytorch", "none"),
        (H200_FULL, "fa3", None, "flashinfer", "xgrammar"),  # cutlass is refused off sm_12x
        (SPARK, "flashinfer", "cutlass", "flashinfer", "xgrammar"),  # the recipe's
        (SPARK_BARE, "triton", "cutlass", "pytorch", "none"),
    ],
)
def test_kernel_backends_follow_the_gpu(gpu, attention, fp8_gemm, sampling, grammar):
    args = server_args(EngineConfig("/m"), gpu)
    assert (
        args["attention_backend"],
        args.get("fp8_gemm_runner_backend"),
        args["sampling_backend"],
        args["grammar_backend"],
    ) == (attention, fp8_gemm, sampling, grammar)


def test_overrides_win_and_memory_fraction_defaults_to_the_spark_safe_value():
    config = EngineConfig("/m", overrides={"load_format": "dummy", "attention_backend": "x"})
    args = server_args(config, H200_FULL)
    assert args["load_format"] == "dummy"
    assert args["attention_backend"] == "x"
    assert args["mem_fraction_static"] == 0.65


def test_a_null_override_gives_sglang_back_its_default_decode_graphs():
    # For comparing start time and memory with SGLang's own graph batch sizes. With
    # max_running_requests 1 SGLang's default list is [1] too, so it goes as well.
    flags = ["cuda_graph_bs_decode=null", "cuda_graph_max_bs_decode=null"]
    flags.append("max_running_requests=null")
    overrides = sglang_overrides(argparse.Namespace(sglang_arg=flags))
    args = server_args(EngineConfig("/m", overrides=overrides), H200_FULL)
    assert not {"cuda_graph_bs_decode", "cuda_graph_max_bs_decode", "max_running_requests"} & set(
        args
    )
    assert args["cuda_graph_backend_prefill"] == "disabled"  # the rest stays


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_setting_is_a_server_argument_of_sglang_0_5_23(profile, gpu):
    serve = {REASONING_PARSER.name, "default_chat_template_kwargs"}  # `ling-chat serve`
    names = set(server_args(EngineConfig("/m", profile=profile), gpu)) | serve
    assert names <= engine_double.SERVER_ARGS_FIELDS


def test_the_engine_double_refuses_a_misspelled_setting_as_sglang_does():
    args = {**server_args(EngineConfig("/m"), SPARK), "pagesize": 64}
    with pytest.raises(TypeError, match="^Unexpected keyword argument 'pagesize'$"):
        engine_double.Engine(**args)


def test_the_engine_environment_is_the_recipe_s_and_the_user_s_values_win(monkeypatch):
    for name in RECIPE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HUMMING_COMPILER", "nvcc")
    recipe = {name: os.path.expanduser(value) for name, value in RECIPE_ENV.items()}
    assert engine_environment() == recipe
    set_engine_environment()
    assert {name: os.environ.get(name) for name in RECIPE_ENV} == {
        **recipe,
        "HUMMING_COMPILER": "nvcc",
    }
    # The recipe's empty SGLANG_FP8_IGNORED_LAYERS is SGLang 0.5.23's unset: not set.
    assert "SGLANG_FP8_IGNORED_LAYERS" not in engine_environment()


@pytest.mark.parametrize("profile", list(PROFILES))
def test_an_idle_engine_sleeps_instead_of_spinning(profile):
    assert server_args(EngineConfig("/m", profile=profile), H200_FULL)["sleep_on_idle"] is True


def _shown(value: Any) -> str:
    if value is None:
        return "not set"
    return f"`{value}`" if isinstance(value, str) else f"`{value!r}`"


def engine_settings_table() -> str:
    """The table of docs/engine-settings.md, from the code's tables."""
    rows = [
        "| setting | kind | DGX Spark (sm_121) | H200 (sm_90) | why |",
        "|---|---|---|---|---|",
    ]
    kinds: list[tuple[str, tuple[Setting, ...]]] = [
        ("server argument", SERVER_ARGS),
        ("environment", ENVIRONMENT),
        ("chat template", CHAT_TEMPLATE),
        ("reasoning parser", (REASONING_PARSER,)),
    ]
    for kind, settings in kinds:
        for s in settings:
            spark, h200 = _shown(s.on(SPARK)), _shown(s.on(H200_FULL))
            rows.append(f"| `{s.name}` | {kind} | {spark} | {h200} | {s.why} |")
    return "\n".join(rows) + "\n"


def opt_in_levers_table() -> str:
    """The opt-in levers' table of docs/engine-settings.md, from the code's."""
    rows = ["| profile | server argument | value | why |", "|---|---|---|---|"]
    for name, lever in OPT_IN.items():
        ((arg, value),) = lever.args(Context("/m", "/d", PROFILES[name].window), True).items()
        rows.append(f"| `{name}` | `{arg}` | {_shown(value)} | {lever.args_why} |")
    return "\n".join(rows) + "\n"


def test_the_opt_in_levers_doc_table_is_the_code_s():
    table = opt_in_levers_table()
    assert table in SETTINGS_DOC.read_text(), f"docs/engine-settings.md's table should be:\n{table}"


@pytest.mark.parametrize(
    ("profile", "base"), [("stack+bf16-router", "stack"), ("dspark+fp8-draft", "dspark")]
)
def test_an_opt_in_lever_adds_its_one_setting_to_the_profile_it_changes(profile, base):
    ((name, value),) = OPT_IN[profile].args(Context("/m", "/d", 4), True).items()
    args = server_args(EngineConfig("/m", profile=profile), H200_FULL)
    assert args == {**server_args(EngineConfig("/m", profile=base), H200_FULL), name: value}
    assert all(
        name not in server_args(EngineConfig("/m", profile=p), H200_FULL)
        for p in PROFILES
        if p != profile
    )


def test_the_bf16_router_override_is_the_profile_s_config_override():
    levers = PROFILES["stack+bf16-router"]
    ((_, value),) = OPT_IN["stack+bf16-router"].args(Context("/m", "/d", 4), True).items()
    assert json.loads(value) == levers.bytes.config
    assert levers.bytes.config == {"router_dtype": "bf16"}
    assert PROFILES["stack"].bytes.config == {}


def test_the_fp8_draft_needs_the_dspark_draft():
    with pytest.raises(ValueError, match="needs dspark"):
        lever_profiles.profile("x", humming.LEVER, fp8_head.LEVER, nextn.LEVER, fp8_draft.LEVER)


def test_the_settings_doc_table_is_the_code_s():
    table = engine_settings_table()
    assert table in SETTINGS_DOC.read_text(), f"docs/engine-settings.md's table should be:\n{table}"


def test_the_load_format_is_chosen_per_gpu_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    assert server_args(EngineConfig("/m"), H200_FULL)["load_format"] == "instanttensor"
    spark = server_args(EngineConfig("/m"), SPARK)  # nothing passed: SGLang's `auto`
    assert "load_format" not in spark and "model_loader_extra_config" not in spark
    monkeypatch.setattr(engine_config, "LOAD_FORMAT_SM90", "fastsafetensors")
    h200 = server_args(EngineConfig("/m"), H200_FULL)
    assert h200["load_format"] == "fastsafetensors"
    assert h200["model_loader_extra_config"] == '{"enable_gds": false}'  # no GPUDirect Storage
    dummy = server_args(EngineConfig("/m", overrides={"load_format": "dummy"}), H200_FULL)
    assert dummy["load_format"] == "dummy"  # an override still wins


def test_a_load_format_whose_reader_is_missing_is_one_line_before_the_boot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(engine_config.LOAD_FORMAT_PACKAGES, "instanttensor", "no_such_reader_x")
    with pytest.raises(BackendError, match=r"^load format instanttensor needs the no_such_reader"):
        check_load_format({"load_format": "instanttensor"})
    check_load_format({"load_format": "dummy"})  # no reader package: nothing to check
    check_load_format({})
