"""The engines lab/scripts/gpu_kernel_profile.py boots, their server arguments and their files."""

from __future__ import annotations

import pytest

from app.backend.engine.config import EngineConfig, GpuFacts, server_args
from lab.research.profile_runs import ProfileRun, profile_runs

H200 = GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True)


def test_without_depths_each_profile_runs_once_under_its_old_file_name() -> None:
    runs = profile_runs(["humming+fp8", "stack"], 42, [])
    assert [(r.name, r.file_name, r.overrides) for r in runs] == [
        ("humming+fp8", "kernels-humming-fp8-42.json", {}),
        ("stack", "kernels-stack-42.json", {}),
    ]
    assert [r.depth for r in runs] == [None, 3]


def test_depths_run_the_nextn_profile_once_each_in_the_order_given() -> None:
    runs = profile_runs(["stack"], 42, [2, 4, 3])
    assert [r.name for r in runs] == ["stack-k2", "stack-k4", "stack-k3"]
    assert [r.file_name for r in runs] == [
        "kernels-stack-42-k2.json",
        "kernels-stack-42-k4.json",
        "kernels-stack-42-k3.json",
    ]
    assert [r.depth for r in runs] == [2, 4, 3]


@pytest.mark.parametrize("steps", [1, 2, 4, 7])
def test_a_depth_reaches_sglang_as_a_top_1_chain_over_the_profile_s_args(steps: int) -> None:
    run = ProfileRun("stack", 42, steps)
    args = server_args(EngineConfig("/m", profile=run.profile, overrides=run.overrides), H200)
    assert (
        args["speculative_algorithm"],
        args["speculative_num_steps"],
        args["speculative_eagle_topk"],
        args["speculative_num_draft_tokens"],
    ) == ("NEXTN", steps, 1, steps + 1)
    assert args["moe_runner_backend"] == "humming"


@pytest.mark.parametrize(
    ("profiles", "steps", "message"),
    [
        (["humming+fp8"], [2], "no NEXTN draft"),
        (["stack", "dspark"], [2], "no NEXTN draft"),
        (["stak"], [], "unknown profile 'stak'"),
        (["stack"], [0, 2], "at least 1"),
        (["stack"], [2, 2], "distinct"),
    ],
)
def test_runs_that_cannot_set_a_depth_are_refused_before_any_boot(
    profiles: list[str], steps: list[int], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        profile_runs(profiles, 42, steps)


def test_the_stack_s_depths_verify_with_the_shortest_ring_for_their_window() -> None:
    plain, deep = profile_runs(["stack"], 42, [3, 4])
    assert plain.overrides["linear_replayssm_cache_len"] == 8  # 2 x 4 verify tokens
    assert deep.overrides["linear_replayssm_cache_len"] == 16  # 2 x 5, a power of two
    args = server_args(EngineConfig("/m", profile="stack", overrides=deep.overrides), H200)
    assert (args["speculative_num_draft_tokens"], args["linear_replayssm_cache_len"]) == (5, 16)
    (recurrent,) = profile_runs(["stack-recurrent"], 42, [4])
    assert (recurrent.file_name, recurrent.replayssm) == (
        "kernels-stack-recurrent-42-k4.json",
        False,
    )
    assert "linear_replayssm_cache_len" not in recurrent.overrides
    assert [r.replayssm for r in profile_runs(["stack", "dspark", "humming+fp8"], 42, [])] == [
        True,
        True,
        False,
    ]
