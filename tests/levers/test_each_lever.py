"""Each lever, from its record alone: the settings that contradict it are refused by the real
CLI before anything loads (exit status 2), a package it runs on that cannot be imported, or a
GPU older than it runs on, is refused by the preflight (exit status 3), and its proof lines
fail when the facts it reads are missing. Parametrized over the registry: a new lever gets
these by adding its cases to tests/levers/cases.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from app.backend.firststart.preflight import GpuInfo
from app.cli import main
from app.core.proof_report import ProofLine, ProofReport, Verdict
from app.levers.checks import accept_length
from app.levers.lever import Lever, Package
from app.levers.profiles import LEVERS, PROFILES
from tests.levers.cases import CONTRADICTIONS, Contradiction, home
from tests.support.preflight import HEALTHY_SPARK
from tests.support.proof import HEALTHY, judge

BY_NAME = {lever.name: lever for lever in LEVERS}
REFUSED = [
    pytest.param(BY_NAME[name], case, id=f"{name}-{case.profile}-{i}")
    for name, cases in CONTRADICTIONS.items()
    for i, case in enumerate(cases)
]
PACKAGES = [
    pytest.param(lever, profile, package, id=f"{lever.name}-{'on' if on else 'off'}-{package.dist}")
    for lever in LEVERS
    for on, packages in ((True, lever.packages), (False, lever.packages_off))
    for package in packages
    for profile in [home(lever) if on else next(n for n, p in PROFILES.items() if not p.has(lever))]
]
FLOORS = [lever for lever in LEVERS if lever.runs_on.min_sm is not None]


def doctor(model: Path, profile: str, *args: str) -> int:
    argv = ["doctor", "--model", str(model), "--profile", profile]
    for arg in args:
        argv += ["--sglang-arg", arg]
    return main(argv)


def lines_of(lever: Lever, report: ProofReport) -> list[ProofLine]:
    keys = {line.key for line in lever.lines}
    return [line for line in report.lines if line.key in keys]


@pytest.mark.parametrize(("lever", "case"), REFUSED)
def test_a_setting_that_contradicts_the_lever_is_refused_before_anything_loads_exit_2(
    lever: Lever,
    case: Contradiction,
    model: Path,
    machine: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    assert doctor(model, case.profile, *case.args) == 2
    captured = capsys.readouterr()
    line = captured.err.strip().splitlines()[-1]
    setting = case.args[0] if case.args else next(f"{k}={v}" for k, v in case.env.items())
    assert line.startswith(f"ling-chat: error: {'--sglang-arg ' if case.args else ''}{setting}")
    assert (lever.called if case.on else lever.called_off) in line, line
    assert machine["loaded"] == [] and "preflight" not in captured.out + captured.err


@pytest.mark.parametrize(("lever", "profile", "package"), PACKAGES)
def test_a_package_the_lever_runs_on_that_cannot_be_imported_fails_the_preflight_exit_3(
    lever: Lever,
    profile: str,
    package: Package,
    model: Path,
    machine: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
):
    error = f"ModuleNotFoundError: No module named '{package.module}'"
    machine["probes"] = dataclasses.replace(HEALTHY_SPARK, import_errors={package.module: error})
    assert doctor(model, profile) == 3
    captured = capsys.readouterr()
    failed = [line for line in (captured.out + captured.err).splitlines() if "FAIL" in line]
    assert any(
        f"FAIL lever package {package.dist}: `import {package.module}` failed: {error}; "
        f"fix: {package.fix}" in line
        for line in failed
    ), failed
    assert machine["loaded"] == []


@pytest.mark.parametrize("lever", FLOORS, ids=lambda lever: lever.name)
def test_a_gpu_older_than_the_lever_runs_on_fails_the_preflight_exit_3(
    lever: Lever, model: Path, machine: dict[str, Any], capsys: pytest.CaptureFixture[str]
):
    floor = lever.runs_on.min_sm or 0
    old = GpuInfo(name="an older GPU", sm=floor - 1, total_bytes=80 * 2**30)
    machine["probes"] = dataclasses.replace(HEALTHY_SPARK, gpu=old)
    assert doctor(model, home(lever)) == 3
    captured = capsys.readouterr()
    failed = [line for line in (captured.out + captured.err).splitlines() if "FAIL" in line]
    assert any(
        "levers on this GPU" in line and f"{lever.called} runs on sm_{floor}" in line
        for line in failed
    ), failed
    assert machine["loaded"] == []


@pytest.mark.parametrize("lever", LEVERS, ids=lambda lever: lever.name)
def test_the_lever_s_lines_fail_when_the_facts_it_reads_are_missing(lever: Lever):
    profile = home(lever)
    facts = HEALTHY[profile]()
    healthy = lines_of(lever, judge(facts, accept=3.9, profile=profile))
    assert healthy and {line.verdict for line in healthy} == {Verdict.PASS}
    stripped = {key: value for key, value in facts.items() if key not in lever.reads}
    accept = None if accept_length.FACT in lever.reads else 3.9
    broken = lines_of(lever, judge(stripped, accept=accept, profile=profile))
    assert [line.key for line in broken] == [line.key for line in healthy]
    assert all(line.verdict is Verdict.FAIL and line.fix for line in broken), broken
