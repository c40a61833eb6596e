"""Plain-text tables of a run (each lever against the row above and the baseline, and each
lever's gain alone and stacked), and the comparison of two runs with regressions flagged."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.bench import host_table
from app.bench.acceptance import SIMULATE_ENV, position_cell
from app.bench.results import BenchRun, ProfileResult, RooflineColumns, WorkloadSummary
from app.levers.profiles import DEFAULT_PROFILE, PROFILES
from app.render.bars import CEILING, bars
from app.render.grid import grid

BASELINE = "baseline"
_LEVERS = {"humming": "Humming", "fp8_head": "FP8 head", "nextn": "NEXTN"}
"""NVIDIA's three levers, whose gains alone and stacked the gains table shows."""
_DRAFTS = {"dspark": "DSpark"}
_NONE = "—"
REPS_NOTE = (
    "reps: the slowest and fastest repetition; deltas inside it are noise (on one engine boot"
    " it leaves out the variation from boot to boot: --boots measures that)"
)
BOOTS_NOTE = "boots: the slowest and fastest engine boot of the profile (--boots)"
POSITION_NOTE = "by position: the share of verify rounds that accepted draft 1, 2, ..."
PEER_LEVER = "peer"
"""The lever column of a peer's row: another server, not a ling-chat profile."""


def lever_label(profile: str, previous: str | None) -> str:
    """What a row changes against the row above, e.g. `+Humming`; else the profile name."""
    levers, before = PROFILES.get(profile), PROFILES.get(previous or "")
    if levers is None or before is None:
        return profile
    changes = [
        ("+" if levers.has(lever) else "-") + name
        for lever, name in (_LEVERS | _DRAFTS).items()
        if levers.has(lever) != before.has(lever)
    ]
    return " ".join(changes) or "="


@dataclass(frozen=True, slots=True)
class TableRow:
    """One profile's line in a workload's table."""

    profile: str
    lever: str
    summary: WorkloadSummary | None
    roofline: RooflineColumns | None
    error: str | None
    vs_prev: float | None
    """Decode tok/s relative to the nearest row above that has one (0.123 = +12.3%)."""
    vs_baseline: float | None
    """Decode tok/s relative to the `baseline` profile (else the first row with a speed)."""
    simulated_accept: float | None
    """The accept length SGLang faked on this profile's engine; None when it was measured."""
    peer: str | None = None
    """What a peer's row ran (`bench --peer`: its engine's `peer`); None on ling-chat's rows."""
    peer_ratio: tuple[str, float] | None = None
    """A peer's row: (ling-chat's row, the peer's decode tok/s over that row's): the default
    profile's row, else the reference row."""

    @property
    def label(self) -> str:
        """The profile's name, marked as a peer, or when its acceptance was faked."""
        name = f"{self.profile} (peer)" if self.peer is not None else self.profile
        if self.simulated_accept is None:
            return name
        return f"{name} (simulated accept {self.simulated_accept:g})"


def table_rows(profiles: Sequence[ProfileResult], workload: str) -> list[TableRow]:
    """The rows of one workload's table, in run order, with the decode-speed deltas."""
    speeds = {}
    for result in profiles:
        found = result.workload(workload)
        if found is not None and found.summary.decode_tps is not None:
            speeds[result.profile] = found.summary.decode_tps
    base = speeds.get(reference_profile(speeds) or "")
    peers = {result.profile for result in profiles if "peer" in result.engine}
    own = {name: speed for name, speed in speeds.items() if name not in peers}
    ours = DEFAULT_PROFILE if DEFAULT_PROFILE in own else reference_profile(own)
    rows, previous, prev_speed = [], None, None
    for result in profiles:
        found = result.workload(workload)
        speed = speeds.get(result.profile)
        peer = result.engine.get("peer")
        to_ours = speed / speeds[ours] if peer is not None and speed and ours else None
        rows.append(
            TableRow(
                profile=result.profile,
                lever=PEER_LEVER if peer is not None else lever_label(result.profile, previous),
                summary=found.summary if found else None,
                roofline=found.roofline if found else None,
                error=result.error
                or (f"{found.summary.errors} failed requests" if found and speed is None else None),
                vs_prev=_ratio(speed, prev_speed),
                vs_baseline=_ratio(speed, base),
                simulated_accept=result.simulated_accept_length,
                peer=peer,
                peer_ratio=(ours, to_ours) if ours and to_ours is not None else None,
            )
        )
        previous = result.profile
        prev_speed = speed if speed is not None else prev_speed
    return rows


@dataclass(frozen=True, slots=True)
class LeverGain:
    """One lever's decode-speed gain: added alone, and added last to the full stack."""

    lever: str
    alone: tuple[str, str, float] | None
    """(profile with it, profile without it, gain), on the fewest other levers measured
    short of the full stack."""
    stacked: tuple[str, str, float] | None
    """The same for the full stack against the stack without this lever."""


def lever_gains(speeds: Mapping[str, float]) -> list[LeverGain]:
    """Each lever's gain alone and stacked, from the profiles that have a decode speed.

    A lever can be fast alone and still slow the stack down (an FP8 head whose draft
    misreads it, say): the two numbers side by side show it. FP32 logits are not counted
    as a lever, though `baseline` and `humming` have them on and `humming+nextn` off: they
    cost under 1 us per head call on the H200 (`lab/results/2026-11-29-h200-lm-head.json`).
    """

    def on(profile: str) -> set[str]:
        return {lever for lever in _LEVERS if PROFILES[profile].has(lever)}

    known = [name for name in speeds if name in PROFILES]
    gains = []
    for attr, name in _LEVERS.items():
        pairs = sorted(
            (
                (with_, without)
                for with_ in known
                for without in known
                if on(with_) == on(without) | {attr} and attr not in on(without)
            ),
            key=lambda pair: len(on(pair[0])),
        )
        found = [
            (w, wo, gain) for w, wo in pairs if (gain := _ratio(speeds[w], speeds[wo])) is not None
        ]
        partial = [pair for pair in found if on(pair[0]) != set(_LEVERS)]
        full = [pair for pair in found if on(pair[0]) == set(_LEVERS)]
        gains.append(LeverGain(name, partial[0] if partial else None, full[0] if full else None))
    return gains


def gains_table(rows: Sequence[TableRow]) -> str:
    """The lever gains of a workload's rows, each with the two profiles it compares."""
    speeds = {
        r.profile: r.summary.decode_tps
        for r in rows
        if r.summary is not None and r.summary.decode_tps is not None
    }

    def cell(pair: tuple[str, str, float] | None) -> str:
        return _NONE if pair is None else f"{_pct(pair[2])} ({pair[0]} vs {pair[1]})"

    lines = [[g.lever, cell(g.alone), cell(g.stacked)] for g in lever_gains(speeds)]
    return grid(["lever", "alone", "stacked (added last)"], lines, left=3)


def reference_profile(speeds: Mapping[str, float]) -> str | None:
    """The profile every row is compared with: `baseline` if it has a speed, else the first."""
    return BASELINE if BASELINE in speeds else next(iter(speeds), None)


def _ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference - 1 if value is not None and reference else None


def _fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return _NONE if value is None else format(value * scale, spec)


def _pct(value: float | None) -> str:
    return _NONE if value is None else f"{value * 100:+.1f}%"


def workload_title(description: Mapping[str, Any], boots: int | Mapping[str, int] = 1) -> str:
    """One line saying what a workload sent, e.g. `synthetic: 32768 in / 2048 out, ...`."""
    d = description
    name = d["name"]
    counts = f"{d['reps']} reps x {d['num_prompts']} prompts after {d['warmup']} warm-up, batch 1"
    if isinstance(boots, Mapping):  # `--boots 3,NAME=1`: a count per engine
        counts += ", engine boots: " + ", ".join(f"{n} {k}" for k, n in boots.items())
    elif boots > 1:
        counts += f", on each of {boots} engine boots"
    if "what" in d:
        what = d["what"]
    elif name == "synthetic":
        what = f"{d['input_len']} in / {d['output_len']} out, greedy, ignore_eos"
    else:
        sampling = d["sampling"]
        what = (
            f"{d['dataset']}, {d['shots']}-shot CoT, T={sampling['temperature']}"
            f" top_p={sampling['top_p']} top_k={sampling['top_k']}"
        )
    return f"{name}: {what}; {counts}"


def speed_table(rows: Sequence[TableRow]) -> str:
    """Speed, latency, accept length (pooled, median, by draft position) and accuracy, with
    each row's deltas."""
    speeds = {
        r.profile: r.summary.decode_tps
        for r in rows
        if r.summary is not None and r.summary.decode_tps is not None
    }
    reference = reference_profile(speeds) or BASELINE
    booted = _booted(rows)
    headers = ["profile", "lever", "tok/s", "reps", *(["boots"] if booted else [])]
    headers += ["vs prev", f"vs {reference}", "TPOT ms", "p95"]
    headers += ["TTFT s", "E2E s mean", "p50", "p95", "accept", "median", "by position"]
    headers += ["accuracy", "err", "trunc"]
    lines = []
    for row in rows:
        s = row.summary
        if s is None:
            lines.append([row.label, row.lever] + [_NONE] * (len(headers) - 2))
            continue
        lines.append(
            [
                row.label,
                row.lever,
                _fmt(s.decode_tps, ".2f"),
                speed_range(s.rep_decode_tps),
                *([speed_range(s.boot_decode_tps)] if booted else []),
                _pct(row.vs_prev),
                _pct(row.vs_baseline),
                _fmt(s.tpot_s, ".2f", 1000),
                _fmt(s.tpot_p95_s, ".2f", 1000),
                _fmt(s.ttft_s, ".3f"),
                _fmt(s.latency_mean_s, ".2f"),
                _fmt(s.latency_p50_s, ".2f"),
                _fmt(s.latency_p95_s, ".2f"),
                _fmt(s.accept_length, ".2f"),
                _fmt(s.accept_length_median, ".2f"),
                position_cell(s.accept_positions) if s.accept_positions else _NONE,
                _fmt(s.accuracy, ".1%"),
                str(s.errors),
                _NONE if s.truncated is None else str(s.truncated),
            ]
        )
    return grid(headers, lines, left=2)


def _booted(rows: Sequence[TableRow]) -> bool:
    """Whether any row pooled several engine boots (`--boots`)."""
    return any(r.summary is not None and r.summary.boot_decode_tps for r in rows)


def speed_range(values: Sequence[float]) -> str:
    """The slowest and fastest decode tok/s of repetitions or boots, e.g. `387.5-399.2`."""
    if len(values) < 2:
        return _NONE
    return f"{min(values):.1f}-{max(values):.1f}"


def roofline_table(rows: Sequence[TableRow], peak_gbps: float) -> str:
    """Bytes per step and achieved bandwidth against the peak; a/r on speculative rows."""
    headers = ["profile", "context", "GB/step", "ceiling tok/s", "GB/s", f"% of {peak_gbps:g}"]
    headers.append("MTP a/r")
    lines = []
    for row in rows:
        r = row.roofline
        if r is None:
            lines.append([row.profile] + [_NONE] * (len(headers) - 1))
            continue
        lines.append(
            [
                row.profile,
                str(r.context_tokens),
                _fmt(r.bytes_per_step, ".3f", 1e-9),
                _fmt(r.ceiling_tps, ".1f"),
                _fmt(r.achieved_gbps, ".1f"),
                _fmt(r.peak_share, ".1%"),
                _fmt(r.mtp_ceiling, ".2f"),
            ]
        )
    return grid(headers, lines)


def speed_plot(rows: Sequence[TableRow], peak_gbps: float) -> str:
    """Decode tok/s bars with each row's bandwidth ceiling (times a/r on speculative rows)."""
    items = [
        (
            row.profile,
            row.summary.decode_tps if row.summary else None,
            row.roofline.ceiling_tps * (row.roofline.mtp_ceiling or 1.0) if row.roofline else None,
        )
        for row in rows
    ]
    title = "decode tok/s"
    if any(ceiling for _, _, ceiling in items):
        title += f" ({CEILING} bandwidth ceiling at {peak_gbps:g} GB/s)"
    return f"{title}\n{bars(items)}"


def render_run(run: BenchRun) -> str:
    """Every workload's speed table, roofline table, plot and failures."""
    peak = float(run.plan["peak_gbps"])
    blocks = []
    for description in run.plan["workloads"]:
        rows = table_rows(run.profiles, description["name"])
        notes = [REPS_NOTE, BOOTS_NOTE] if _booted(rows) else [REPS_NOTE]
        if any(row.summary is not None and row.summary.accept_positions for row in rows):
            notes.append(POSITION_NOTE)
        notes += [line for row in rows if row.peer is not None for line in peer_lines(row, rows)]
        block = [
            workload_title(description, run.plan.get("boots", 1)),
            "\n".join([speed_table(rows), *notes]),
            gains_table(rows),
        ]
        if any(row.roofline for row in rows):
            block.append(roofline_table(rows, peak))
        block.append(speed_plot(rows, peak))
        block += [f"{row.profile}: {row.error}" for row in rows if row.error]
        block += [
            f"{row.profile}: acceptance simulated, not measured ({SIMULATE_ENV}="
            f"{row.simulated_accept:g}): its accept length and speed are not the model's"
            for row in rows
            if row.simulated_accept is not None
        ]
        blocks.append("\n\n".join(block))
    if table := host_table.render(run.profiles):
        blocks.append(table)
    return "\n\n\n".join(blocks)


def peer_lines(row: TableRow, rows: Sequence[TableRow]) -> list[str]:
    """A peer's row: what it ran, and its decode speed and accept length against ling-chat's."""
    lines = [f"{row.label}: {row.peer}"]
    if row.peer_ratio is None or row.summary is None:
        return lines
    ours, ratio = row.peer_ratio
    theirs = next(r.summary for r in rows if r.profile == ours and r.summary is not None)
    accept = ""
    if row.summary.accept_length is not None or theirs.accept_length is not None:
        accept = (
            f", accept {_fmt(row.summary.accept_length, '.2f')} against"
            f" {_fmt(theirs.accept_length, '.2f')}"
        )
    speeds = f"{_fmt(row.summary.decode_tps, '.2f')} against {_fmt(theirs.decode_tps, '.2f')}"
    lines.append(f"{row.profile}: {ratio:.2f}x {ours}'s decode tok/s ({speeds}){accept}")
    mine, other = _boots(row.summary.boot_decode_tps), _boots(theirs.boot_decode_tps)
    if len(mine["boot_decode_tps"]) > 1 and len(other["boot_decode_tps"]) > 1:
        a, b = mine["boot_median_tps"], other["boot_median_tps"]
        lines.append(
            f"{row.profile}: by boot medians {a / b:.2f}x ({a:.2f}, boots "
            f"{speed_range(mine['boot_decode_tps'])}, against {b:.2f}, boots "
            f"{speed_range(other['boot_decode_tps'])})"
        )
    return lines


def _boots(speeds: Sequence[float]) -> dict[str, Any]:
    """Each boot's decode tok/s and their median (None without boots)."""
    return {
        "boot_decode_tps": list(speeds),
        "boot_median_tps": statistics.median(speeds) if speeds else None,
    }


def tables_json(run: BenchRun) -> dict[str, list[dict[str, Any]]]:
    """The rows of every workload's table (profile, lever, decode tok/s and deltas, the
    accept length SGLang faked, if it did, and a peer's label and ratio to ling-chat)."""
    return {
        description["name"]: [
            {
                "profile": row.profile,
                "lever": row.lever,
                "decode_tps": row.summary.decode_tps if row.summary else None,
                **_boots(row.summary.boot_decode_tps if row.summary else ()),
                "vs_prev": row.vs_prev,
                "vs_baseline": row.vs_baseline,
                "simulated_accept_length": row.simulated_accept,
                "peer": row.peer,
                "peer_ratio": dict(zip(("to", "decode_tps"), row.peer_ratio, strict=True))
                if row.peer_ratio
                else None,
            }
            for row in table_rows(run.profiles, description["name"])
        ]
        for description in run.plan["workloads"]
    }
