"""The `dspark` profile: what it asks SGLang for, and the ReplaySSM ring it refuses early."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from app.backend.engine.config import EngineConfig, GpuFacts, draft_models, server_args
from app.cli import main
from app.commands.common import settings_from
from app.core.errors import ConfigError
from app.launch import engine_config
from app.levers.draft.dspark import DRAFT as DSPARK_DRAFT
from app.levers.draft.replayssm import ring_args as replayssm_args
from app.levers.draft.replayssm import ring_problem as replayssm_problem
from app.levers.profiles import PROFILES
from app.settings import Settings

H200 = GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True)


def test_dspark_is_humming_the_fp8_head_and_dspark_block_8_with_replayssm_32():
    args = server_args(EngineConfig("/m", profile="dspark"), H200)
    assert args["moe_runner_backend"] == "humming"
    assert args["enable_fp32_lm_head"] is False
    assert PROFILES["dspark"].has("fp8_head") and not PROFILES["dspark"].has("nextn")
    assert {k: args[k] for k in args if "specul" in k or "replayssm" in k} == {
        "speculative_algorithm": "DSPARK",
        "speculative_draft_model_path": DSPARK_DRAFT,
        "speculative_dspark_block_size": 8,
        "speculative_num_steps": 1,
        "speculative_eagle_topk": 1,
        "speculative_num_draft_tokens": 9,
        "enable_linear_replayssm_spec": True,
        "linear_replayssm_cache_len": 32,
    }


def test_stack_stays_the_default_with_nextn_verified_by_replayssm():
    assert Settings().profile == "stack"
    args = server_args(EngineConfig("/m"), H200)
    assert (args["speculative_algorithm"], args["speculative_draft_model_path"]) == ("NEXTN", "/m")
    assert (args["enable_linear_replayssm_spec"], args["linear_replayssm_cache_len"]) == (True, 8)


def test_a_local_draft_folder_replaces_the_hub_draft():
    config = EngineConfig("/m", profile="dspark", overrides={"speculative_draft_model_path": "/d"})
    assert server_args(config, H200)["speculative_draft_model_path"] == "/d"


@pytest.mark.parametrize(
    ("ring", "why"),
    [
        (16, "must be >= 2 x the verify window of 9 tokens (18)"),
        (24, "a power of two"),
        (0, "a power of two"),
    ],
)
def test_a_bad_replayssm_ring_is_refused_at_config_time_in_one_line(ring, why):
    with pytest.raises(ConfigError, match=why.replace("(", r"\(").replace(")", r"\)")):
        EngineConfig("/m", profile="dspark", overrides={"linear_replayssm_cache_len": ring})


def test_the_ring_rule_follows_the_verify_window_and_sglang_s_default_length():
    assert (
        replayssm_problem({"enable_linear_replayssm_spec": True, "speculative_num_draft_tokens": 4})
        is None
    )
    assert "(18)" in str(
        replayssm_problem({"enable_linear_replayssm_spec": True, "speculative_num_draft_tokens": 9})
    )  # SGLang's default ring, 16, under a DSpark window
    assert replayssm_problem({"linear_replayssm_cache_len": 3}) is None  # ReplaySSM off
    ring_64 = {"enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": 64}
    assert replayssm_problem({**ring_64, "speculative_num_draft_tokens": 9}) is None


@pytest.mark.parametrize(("window", "ring"), [(2, 4), (4, 8), (5, 16), (8, 16), (9, 32)])
def test_replayssm_args_give_the_shortest_ring_sglang_accepts(window: int, ring: int):
    args = replayssm_args(window)
    assert args == {"enable_linear_replayssm_spec": True, "linear_replayssm_cache_len": ring}
    assert replayssm_problem({**args, "speculative_num_draft_tokens": window}) is None
    shorter = {**args, "linear_replayssm_cache_len": ring // 2}
    assert replayssm_problem({**shorter, "speculative_num_draft_tokens": window}) is not None


def test_the_cli_refuses_a_bad_ring_with_one_line_before_anything_starts(capsys):
    code = main(["prepare", "--profile", "dspark", "--sglang-arg", "linear_replayssm_cache_len=16"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert err.count("\n") == 0 and "linear_replayssm_cache_len=16" in err


def test_a_dspark_engine_reports_speculation_on_so_the_collapse_check_watches_it():
    from app.backend.engine.engine import EngineBackend

    assert EngineBackend(EngineConfig("/m", profile="dspark")).info.speculative
    assert not EngineBackend(EngineConfig("/m", profile="humming")).info.speculative


def test_the_dspark_draft_setting_reaches_the_server_arguments_and_an_override_wins():
    config = EngineConfig("/m", profile="dspark", dspark_draft="/d")
    assert server_args(config, H200)["speculative_draft_model_path"] == "/d"
    assert config.draft_model == "/d"
    pinned = EngineConfig(
        "/m", profile="dspark", dspark_draft="/d", overrides={"speculative_draft_model_path": "/o"}
    )
    assert server_args(pinned, H200)["speculative_draft_model_path"] == "/o"
    assert pinned.draft_model == "/o"
    assert EngineConfig("/m", dspark_draft="/d").draft_model is None  # NEXTN: its own draft
    assert draft_models([config, pinned, config]) == ["/d", "/o"]


def test_dspark_draft_comes_from_the_flag_or_the_environment_with_home_expanded(monkeypatch):
    monkeypatch.setenv("LING_CHAT_DSPARK_DRAFT", "~/env-draft")
    assert Settings().dspark_draft == str(Path("~/env-draft").expanduser())
    args = argparse.Namespace(dspark_draft="~/flag-draft", profile="dspark")
    config = engine_config(settings_from(args))
    assert config.dspark_draft == str(Path("~/flag-draft").expanduser())
    monkeypatch.delenv("LING_CHAT_DSPARK_DRAFT")
    assert Settings().dspark_draft == DSPARK_DRAFT


def test_a_missing_local_draft_refuses_the_dspark_start_in_one_line(tmp_path, capsys):
    model = tmp_path / "ling"
    model.mkdir()
    (model / "config.json").write_text("{}")
    draft = tmp_path / "no-draft"
    argv = ["prepare", "--model", str(model), "--profile", "dspark", "--dspark-draft", str(draft)]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"draft model path {draft} does not exist" in err
