"""SGLang's scheduler on the fastest cores, where the CPU's cores differ in speed (every
profile).

A batch-1 round waits on one Python thread, the scheduler's; the DGX Spark's GB10 has 10
Cortex-X925 and 10 Cortex-A725 cores. The lever's patch (app/backend/engine/patches/host/
cores.py) reads each allowed core's speed from sysfs (`cpu_capacity`, else
`cpufreq/cpuinfo_max_freq`, never assumed) and pins the scheduler to the fast ones before
SGLang starts; where they are alike it leaves it alone, and the line says so.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.core.proof_report import ProofLine
from app.levers.host import patch_reader
from app.levers.lever import (
    ByteTerm,
    Facts,
    Lever,
    Line,
    Profile,
    RunsOn,
    fits_any,
    no_args,
    no_refusal,
)
from app.levers.lines import error, judged

PATCH = "host.cores"
AFFINITY_ENV = "SGLANG_SET_CPU_AFFINITY"
"""SGLang 0.5.23's switch (`set_gpu_proc_affinity`): it binds the scheduler to the physical
cores that follow from its GPU's number, after ling-chat's pinning, whatever their speed."""
TRUE = frozenset({"true", "1", "yes", "y"})
"""SGLang's EnvBool values for True."""
LINE = Line(
    "fast_cores",
    "Scheduler on the fastest cores",
    f"run ling-chat's engine with {AFFINITY_ENV} unset, and leave the fastest cores in the "
    "process's affinity (taskset, cgroups)",
)


def refuse_env(env: Mapping[str, str], profile: Profile) -> str | None:
    """SGLang's own CPU affinity turned on."""
    value = env.get(AFFINITY_ENV, "")
    if value.lower() in TRUE:
        return (
            f"{AFFINITY_ENV}={value} contradicts {LEVER.called} of profile {profile.name}: "
            "SGLang would bind the scheduler to cores by its GPU's number, whatever their "
            "speed; unset it"
        )
    return None


def judge(facts: Facts, profile: Profile) -> tuple[ProofLine, ...]:
    """Where the allowed cores differ in speed, the scheduler runs on fast ones only; where
    they are alike, there is nothing to pin and the line passes saying so."""
    if not profile.has(LEVER):
        return ()
    if err := error(facts, "cores"):
        return (judged(LINE, False, err),)
    cores = facts["cores"]
    speeds = {int(s): cpus for s, cpus in cores["speeds"].items()}
    by_speed = "; ".join(
        f"{_cpus(cpus)} at {s}" for s, cpus in sorted(speeds.items(), reverse=True)
    )
    if cores["pinned_to"] is None:
        if len(speeds) > 1:  # every core within `same_speed` of the fastest counts as fast
            alike = f"alike within {1 - cores['same_speed']:.0%} ({cores['source']}: {by_speed})"
        else:
            alike = f"alike ({cores['source']}: {by_speed})" if cores["source"] else "unknown"
        evidence = f"{len(cores['allowed'])} cores, speeds {alike}: nothing to pin"
        return (judged(LINE, True, evidence),)
    running, fast = set(cores["running_on"]), set(cores["pinned_to"])
    return (
        judged(
            LINE,
            bool(running) and running <= fast,
            f"runs on {_cpus(sorted(running))} of {_cpus(sorted(fast))}, the fastest by "
            f"{cores['source']} ({by_speed})",
        ),
    )


def _cpus(cpus: list[int]) -> str:
    """`cpus` as ranges, e.g. `cores 0-9,12`."""
    runs: list[list[int]] = []
    for cpu in sorted(cpus):
        if runs and cpu == runs[-1][-1] + 1:
            runs[-1].append(cpu)
        else:
            runs.append([cpu])
    return "cores " + ",".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs)


LEVER = Lever(
    name="fast_cores",
    called="the fast-cores lever",
    called_off="the scheduler on any allowed core",
    lines=(LINE,),
    args=no_args,
    args_why="none: a scheduler-side patch",
    free=frozenset(),
    refuse=no_refusal,
    refuse_env=refuse_env,
    packages=(),
    packages_off=(),
    runs_on=RunsOn(why="the host CPU's cores as sysfs states them, with any GPU"),
    patch=PATCH,
    facts={"cores": patch_reader(PATCH)},
    reads=("cores",),
    judge=judge,
    bytes=ByteTerm(why="host time: the core the scheduler's thread runs on, no byte"),
    fits=fits_any,
    draft_window=None,
    validate=None,
)
