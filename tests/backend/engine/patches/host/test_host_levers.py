"""The scheduler's GC frozen once up, and its cores chosen by speed as sysfs states it; the
proof lines that judge both, and the ReplaySSM commit's."""

from __future__ import annotations

import copy
import gc
from pathlib import Path
from typing import Any

import pytest

from app.backend.engine.patches.host import cores, gc_freeze
from app.core.proof_report import Verdict
from tests.fixtures.sglang_objects import stack_facts
from tests.support.proof import judge

GB10 = {**{cpu: 1024 for cpu in range(10)}, **{cpu: 725 for cpu in range(10, 20)}}
"""cpu_capacity as a GB10 could state it: 10 big cores, 10 little (the values are made up)."""


def sysfs(tmp_path: Path, values: dict[int, int], source: str = "cpu_capacity") -> Path:
    for cpu, value in values.items():
        path = tmp_path / f"cpu{cpu}" / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{value}\n")
    return tmp_path


def test_on_big_and_little_cores_the_scheduler_is_pinned_to_the_big_ones(tmp_path):
    pinned: list[frozenset[int]] = []
    chosen = cores.pin(sysfs(tmp_path, GB10), frozenset(GB10), lambda _pid, c: pinned.append(c))
    assert chosen == frozenset(range(10)) and pinned == [chosen]
    assert cores.FACTS["source"] == "cpu_capacity"
    assert cores.FACTS["speeds"] == {"1024": list(range(10)), "725": list(range(10, 20))}


def test_alike_cores_are_left_alone_favoured_turbo_cores_included(tmp_path):
    pinned: list[frozenset[int]] = []
    uniform = dict.fromkeys(range(16), 1024)
    assert (
        cores.pin(sysfs(tmp_path / "a", uniform), frozenset(uniform), lambda *a: pinned.append(a))
        is None
    )
    favoured = {**dict.fromkeys(range(14), 3_500_000), 14: 3_700_000, 15: 3_700_000}
    root = sysfs(tmp_path / "b", favoured, "cpufreq/cpuinfo_max_freq")
    assert cores.pin(root, frozenset(favoured), lambda *a: pinned.append(a)) is None
    assert cores.FACTS["source"] == "cpufreq/cpuinfo_max_freq"
    assert pinned == []


def test_speeds_come_from_cpufreq_where_a_core_has_no_capacity_and_none_are_assumed(tmp_path):
    root = sysfs(tmp_path, {0: 1024, 1: 1024})  # cpu 2 has no capacity file
    sysfs(root, {0: 3_900_000, 1: 3_900_000, 2: 2_800_000}, "cpufreq/cpuinfo_max_freq")
    assert cores.core_speeds([0, 1, 2], root) == (
        "cpufreq/cpuinfo_max_freq",
        {0: 3_900_000, 1: 3_900_000, 2: 2_800_000},
    )
    assert cores.core_speeds([0, 1, 2], tmp_path / "none") == (None, {})
    assert cores.fastest({}) is None


def test_only_the_allowed_cores_are_weighed(tmp_path):
    root = sysfs(tmp_path, GB10)
    assert cores.pin(root, frozenset(range(10, 20)), lambda *a: None) is None  # littles only
    assert cores.pin(root, frozenset({3, 4, 12}), lambda *a: None) == frozenset({3, 4})


def test_freezing_moves_the_survivors_to_the_permanent_generation():
    try:
        gc_freeze.freeze()
        fact = gc_freeze.collect()
        assert fact["frozen"] == fact["freeze_count"] == gc.get_freeze_count() > 0
        assert fact["collect_s"] >= 0
    finally:
        gc.unfreeze()


def _with(key: str, value: Any) -> dict[str, Any]:
    facts = copy.deepcopy(stack_facts())
    facts[key] = value
    return facts


def _line(facts: dict[str, Any], key: str) -> Any:
    return next(line for line in judge(facts, accept=3.9, profile="stack").lines if line.key == key)


def test_the_host_lines_of_a_healthy_stack_say_what_they_read():
    facts = stack_facts()
    commit = _line(facts, "prepared_commit")
    assert commit.verdict is Verdict.PASS
    assert "commit_mamba_states_after_verify (fed the prepared indices: True)" in commit.evidence
    assert "1,804,522 objects frozen" in _line(facts, "gc_frozen").evidence
    assert _line(facts, "fast_cores").evidence == (
        "16 cores, speeds alike (cpu_capacity: cores 0-15 at 1024): nothing to pin"
    )


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("prepared_commit", {"verify_calls": "sglang.x.f", "fed_prepared": False,
                             "prepared_commits": 0, "stock_commits": 0}, "prepared_commit"),
        ("gc", {**stack_facts()["gc"], "freeze_count": 0}, "gc_frozen"),
        ("cores", {**stack_facts()["cores"], "pinned_to": list(range(10)),
                   "running_on": list(range(20))}, "fast_cores"),
        ("cores", {"error": "OSError: no sysfs"}, "fast_cores"),
    ],
)  # fmt: skip
def test_a_host_lever_not_engaged_fails_its_line_and_the_start(key, value, line):
    judged = _line(_with(key, value), line)
    assert judged.verdict is Verdict.FAIL and judged.fix


def test_a_top_k_tree_fails_the_commit_line_sglang_prepares_no_indices_for_it():
    facts = copy.deepcopy(stack_facts())
    facts["speculative"]["topk"] = 2
    assert _line(facts, "prepared_commit").verdict is Verdict.FAIL


def test_pinned_to_the_big_cores_passes_and_names_them():
    fact = {
        "source": "cpu_capacity",
        "speeds": {"1024": list(range(10)), "725": list(range(10, 20))},
        "allowed": list(range(20)),
        "pinned_to": list(range(10)),
        "same_speed": 0.9,
        "running_on": list(range(10)),
    }
    line = _line(_with("cores", fact), "fast_cores")
    assert line.verdict is Verdict.PASS
    assert line.evidence == (
        "runs on cores 0-9 of cores 0-9, the fastest by cpu_capacity "
        "(cores 0-9 at 1024; cores 10-19 at 725)"
    )


def test_the_cores_are_pinned_before_anything_else_is_installed(monkeypatch):
    from app.backend.engine import patches
    from app.backend.engine.patches import evidence
    from app.backend.engine.patches.boundary import PatchPlan
    from app.backend.engine.patches.host import commit, log_level

    order: list[str] = []
    for module, name in (
        (evidence, "evidence"),
        (log_level, "log_level"),
        (cores, "host.cores"),
        (gc_freeze, "host.gc_freeze"),
        (commit, "host.commit"),
    ):
        monkeypatch.setattr(module, "install", lambda *_plan, name=name: order.append(name))
    plan = PatchPlan(
        patches=("host.commit", "host.gc_freeze", "host.cores"), draft_own_shards=False
    )
    patches.install(plan)
    assert order == ["host.cores", "evidence", "log_level", "host.commit", "host.gc_freeze"]


def test_every_profile_freezes_and_pins_and_only_nextn_with_replayssm_feeds_the_commit():
    from app.levers.draft import dspark, replayssm
    from app.levers.host import prepared_commit
    from app.levers.model import fp8_head
    from app.levers.profiles import PROFILES, profile

    assert all(p.has("gc_freeze") and p.has("fast_cores") for p in PROFILES.values())
    fed = {name for name, p in PROFILES.items() if p.has("prepared_commit")}
    assert fed == {n for n, p in PROFILES.items() if p.has("nextn") and p.has("replayssm")}
    with pytest.raises(ValueError, match="needs NEXTN and ReplaySSM"):  # DSpark's own commit
        profile("dspark+fed", fp8_head.LEVER, dspark.LEVER, replayssm.LEVER, prepared_commit.LEVER)
