"""Every lever states every part, and the parts fit together: a new lever's module that lacks
one fails here (and gets the per-lever tests of test_each_lever.py for free)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from app.backend.engine.config import EngineConfig, GpuFacts, server_args
from app.levers.checks import accept_length
from app.levers.lever import Context, Lever, no_args, no_env_refusal, no_refusal
from app.levers.profiles import LEVERS, PROFILES
from app.levers.refusals import refusal
from tests.levers.cases import CONTRADICTIONS, UNCONTRADICTED, home
from tests.support.proof import HEALTHY, judge

PATCHES = Path(__file__).resolve().parents[2] / "app" / "backend" / "engine" / "patches"
GPUS = [
    GpuFacts(sm=90, has_fa3=True, has_flashinfer=True, has_xgrammar=True),
    GpuFacts(sm=90, has_fa3=False, has_flashinfer=False, has_xgrammar=False),
    GpuFacts(sm=121, has_fa3=False, has_flashinfer=True, has_xgrammar=True),
    GpuFacts(sm=121, has_fa3=False, has_flashinfer=False, has_xgrammar=False),
]
COLLECTED = {key for lever in LEVERS for key in lever.facts} | {accept_length.FACT}
"""Every fact a reader collects, and the one the backend measures."""
IDS = [lever.name for lever in LEVERS]


@pytest.mark.parametrize("lever", LEVERS, ids=IDS)
def test_a_lever_states_its_words_lines_and_reasons(lever: Lever):
    assert lever.called and lever.called_off and lever.args_why
    assert lever.lines, f"{lever.name}: no proof line"
    assert all(line.key and line.title and line.fix for line in lever.lines)
    assert lever.runs_on.why and lever.bytes.why
    assert lever.reads, f"{lever.name}: its judge reads no fact"
    missing = set(lever.reads) - COLLECTED
    assert not missing, f"{lever.name} reads facts no lever collects: {missing}"
    assert all(package.module and package.dist and package.fix for package in lever.packages)


def test_the_registry_has_one_lever_per_name_line_key_and_fact():
    names = [lever.name for lever in LEVERS]
    keys = [line.key for lever in LEVERS for line in lever.lines]
    facts = [key for lever in LEVERS for key in lever.facts]
    assert len(set(names)) == len(names)
    assert len(set(keys)) == len(keys)
    assert len(set(facts)) == len(facts)


@pytest.mark.parametrize("lever", LEVERS, ids=IDS)
def test_a_lever_is_in_a_profile_with_healthy_facts_and_contradicting_settings(lever: Lever):
    assert home(lever) in HEALTHY, f"{lever.name}: no profile in tests.support.proof.HEALTHY"
    assert CONTRADICTIONS.get(lever.name) or lever.name in UNCONTRADICTED, (
        f"{lever.name}: no case in tests.levers.cases"
    )


@pytest.mark.parametrize("name", list(UNCONTRADICTED))
def test_a_lever_no_setting_contradicts_sets_nothing_and_refuses_nothing(name: str):
    lever = next(lever for lever in LEVERS if lever.name == name)
    assert (lever.args, lever.refuse, lever.refuse_env) == (no_args, no_refusal, no_env_refusal)
    assert not lever.runs_on.settings and not lever.free and name not in CONTRADICTIONS


@pytest.mark.parametrize("lever", [x for x in LEVERS if x.patch], ids=lambda x: x.name)
def test_a_lever_s_patch_is_a_scheduler_module_with_an_install(lever: Lever):
    source = PATCHES / f"{lever.patch.replace('.', '/')}.py"
    assert importlib.util.find_spec(f"app.backend.engine.patches.{lever.patch}") is not None
    tree = ast.parse(source.read_text(encoding="utf-8"))
    installs = [
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "install"
    ]
    assert installs and [arg.arg for arg in installs[0].args.args] == ["plan"]


@pytest.mark.parametrize("name", list(HEALTHY))
def test_every_line_passes_on_each_profile_s_healthy_facts(name: str):
    report = judge(HEALTHY[name](), accept=3.9, profile=name)
    assert report.ok, [line for line in report.failed]
    assert {line.key for line in report.lines} >= {"no_faking", "accept_length"}


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("profile", list(PROFILES))
def test_ling_chat_s_own_settings_contradict_no_lever(profile: str, gpu: GpuFacts):
    """Each lever runs on what ling-chat itself sets on every GPU kind: its own server
    arguments, given back as overrides, are never refused."""
    config = EngineConfig("/m", profile=profile)
    own = server_args(config, gpu)
    assert refusal(config.levers, config.context, own, {}) is None


def test_a_draft_lever_gives_the_verify_window_the_replayssm_ring_is_sized_for():
    context = Context("/m", "/d", PROFILES["dspark"].window)
    assert PROFILES["dspark"].window == 9 and PROFILES["stack"].window == 4
    replay = next(lever for lever in LEVERS if lever.name == "replayssm")
    assert replay.args(context, True)["linear_replayssm_cache_len"] == 32
    assert PROFILES["baseline"].window is None and not PROFILES["baseline"].speculative
