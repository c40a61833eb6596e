"""The profiles a user meets: `--help` offers the few named for what they do; the A/B rigs
stay accepted by `bench --profiles` and, unlisted, by `--profile`."""

from __future__ import annotations

import pytest

from app.cli import build_parser, main
from app.levers.profiles import PROFILES, USER_PROFILES

RIGS = (
    "humming",
    "humming+fp8",
    "humming+nextn",
    "stack-recurrent",
    "stack+bf16-router",
    "dspark+fp8-draft",
    "stack+hot-vocab",
)


def test_the_user_profiles_are_few_and_the_rest_are_the_rigs() -> None:
    assert USER_PROFILES == ("stack", "dspark", "baseline")
    assert set(PROFILES) == {*USER_PROFILES, *RIGS}


@pytest.mark.parametrize("argv", [["--help"], ["doctor", "--help"], ["bench", "--help"]])
def test_help_lists_the_user_profiles_and_not_the_rigs(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert "--profile {stack,dspark,baseline}" in out
    profile_help = out[out.index("--profile {") : out.index("--dspark-draft")]
    for rig in RIGS:
        assert rig not in profile_help


@pytest.mark.parametrize("profile", [*USER_PROFILES, *RIGS])
def test_every_profile_is_still_accepted_by_profile(profile: str) -> None:
    assert build_parser().parse_args(["--profile", profile]).profile == profile


def test_bench_still_runs_the_rigs() -> None:
    args = build_parser().parse_args(["bench", "--profiles", ",".join(RIGS)])
    assert args.profiles == list(RIGS)


def test_an_unknown_profile_is_one_line_offering_the_user_profiles(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--profile", "fast"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.endswith("unknown profile 'fast'; choose from stack, dspark, baseline")
