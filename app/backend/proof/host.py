"""The host levers' proof rules: the `prepared_commit`, `gc` and `cores` facts in, a verdict
each out.

Pure functions over what app/backend/engine/patches/host collects in SGLang's scheduler;
app/backend/proof/rules.py runs the commit's line in NEXTN profiles with ReplaySSM, the
other two in every profile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.backend.proof import LACKING_FIX
from app.core.profiles import Levers
from app.core.proof_report import ProofLine, Verdict

TITLES = {
    "prepared_commit": "KDA ReplaySSM commit fed the verify's prepared indices",
    "gc_frozen": "Scheduler's garbage collector frozen once up",
    "fast_cores": "Scheduler on the fastest cores",
}
FIXES = {
    "prepared_commit": "run ling-chat's engine (its scheduler entry installs the commit) with "
    "NEXTN top-1: SGLang prepares the indices only for a top-1 chain",
    "gc_frozen": "run ling-chat's engine: its scheduler entry freezes the collector as the "
    "scheduler reports ready",
    "fast_cores": "run ling-chat's engine, and leave the fastest cores in the process's "
    "affinity (taskset, cgroups)",
}

Facts = Mapping[str, Any]


def _line(key: str, ok: bool, evidence: str) -> ProofLine:
    verdict = Verdict.PASS if ok else Verdict.FAIL
    return ProofLine(key, TITLES[key], verdict, evidence, "" if ok else FIXES[key])


def _fact(facts: Facts, key: str) -> Mapping[str, Any] | ProofLine:
    """The fact `key`, or the failed line saying why it cannot be judged."""
    line = {"prepared_commit": "prepared_commit", "gc": "gc_frozen", "cores": "fast_cores"}[key]
    fact = facts.get(key)
    if fact is None:
        return ProofLine(line, TITLES[line], Verdict.FAIL, f"{key}: not reported", LACKING_FIX)
    if "error" in fact:
        return _line(line, False, f"{key}: {fact['error']}")
    return fact


def prepared_commit(facts: Facts, levers: Levers) -> ProofLine:
    """The verify commits through ling-chat's commit, on a KDA pool that folds each commit,
    at top-1 (where SGLang's verify prepares the indices)."""
    fact = _fact(facts, "prepared_commit")
    if isinstance(fact, ProofLine):
        return fact
    pool = facts.get("replayssm") or {}
    spec = facts.get("speculative") or {}
    ok = bool(fact["fed_prepared"] and pool.get("kda_fold") and spec.get("topk") == 1)
    evidence = (
        f"the verify commits through {fact['verify_calls']} (fed the prepared indices: "
        f"{fact['fed_prepared']}); KDA fold-every-commit: {pool.get('kda_fold')}; top-"
        f"{spec.get('topk')}; {fact['prepared_commits']} fed and {fact['stock_commits']} "
        "stock commits before the warm-up"
    )
    return _line("prepared_commit", ok, evidence)


def gc_frozen(facts: Facts, levers: Levers) -> ProofLine:
    """Objects sit in the scheduler's permanent generation."""
    fact = _fact(facts, "gc")
    if isinstance(fact, ProofLine):
        return fact
    ok = fact["freeze_count"] > 0
    evidence = (
        f"{fact['freeze_count']:,} objects frozen in the scheduler (a collection of "
        f"{fact['collect_s']} s first); thresholds {fact['thresholds']}"
    )
    return _line("gc_frozen", ok, evidence)


def fast_cores(facts: Facts, levers: Levers) -> ProofLine:
    """Where the allowed cores differ in speed, the scheduler runs on fast ones only; where
    they are alike, there is nothing to pin and the line says so."""
    fact = _fact(facts, "cores")
    if isinstance(fact, ProofLine):
        return fact
    speeds = {int(s): cpus for s, cpus in fact["speeds"].items()}
    by_speed = "; ".join(
        f"{_cpus(cpus)} at {s}" for s, cpus in sorted(speeds.items(), reverse=True)
    )
    running = set(fact["running_on"])
    if fact["pinned_to"] is None:
        if len(speeds) > 1:  # every core within `same_speed` of the fastest counts as fast
            alike = f"alike within {1 - fact['same_speed']:.0%} ({fact['source']}: {by_speed})"
        else:
            alike = f"alike ({fact['source']}: {by_speed})" if fact["source"] else "unknown"
        evidence = f"{len(fact['allowed'])} cores, speeds {alike}: nothing to pin"
        return _line("fast_cores", True, evidence)
    fast = set(fact["pinned_to"])
    ok = bool(running) and running <= fast
    evidence = (
        f"runs on {_cpus(sorted(running))} of {_cpus(sorted(fast))}, the fastest by "
        f"{fact['source']} ({by_speed})"
    )
    return _line("fast_cores", ok, evidence)


def _cpus(cpus: list[int]) -> str:
    """`cpus` as ranges, e.g. `cores 0-9,12`."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return "cores " + ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)
