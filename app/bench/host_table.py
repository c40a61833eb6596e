"""The host-time table of a run (`bench --host-time`): per engine, a round's wall time
(median over its boots, with their range), its GPU-busy time, what the GPU idled, and each
against the row above: with `--profiles stack,stack-recurrent,humming+nextn --peer
stock-sglang` each step is one lever (ReplaySSM, then the FP8 head and its sharing, then
ling-chat's engine against the stock server), its round split into GPU and host."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.bench.host.rounds import spread
from app.bench.results import ProfileResult
from app.render.grid import grid

NOTE = (
    "host time: ms a verify round, each the long request's less the short one's over the "
    "rounds between (prefill and fixed costs cancel); wall: median over boots (their range), "
    "each boot's the median of its pairs; GPU busy: under SGLang's profiler on the first boot; "
    "idle: wall - busy, the round's host share; d: this row less the row above"
)
HEADERS = ("engine", "boots", "wall ms", "GPU busy", "GPU idle", "d wall", "d busy", "d idle", "")


def rows_json(profiles: Sequence[ProfileResult]) -> list[dict[str, Any]]:
    """One row per engine that measured its host time, with its deltas to the row above."""
    rows: list[dict[str, Any]] = []
    for result in profiles:
        if (host := result.host) is None:
            continue
        row = {
            "engine": result.profile,
            "boots": len(host.boots),
            "wall_ms": host.wall_ms,
            "wall_ms_boots": host.walls,
            "gpu_busy_ms": host.gpu_busy_ms,
            "idle_ms": host.idle_ms,
            "errors": [b.error for b in host.boots if b.error],
        }
        above = rows[-1] if rows else {}
        for key in ("wall_ms", "gpu_busy_ms", "idle_ms"):
            mine, theirs = row[key], above.get(key)
            row[f"{key}_vs_above"] = (
                mine - theirs if mine is not None and theirs is not None else None
            )
        rows.append(row)
    return rows


def render(profiles: Sequence[ProfileResult]) -> str | None:
    """The table and its note, or None when no engine measured its host time."""
    rows = rows_json(profiles)
    if not rows:
        return None

    def one(value: float | None, signed: bool = False) -> str:
        return "—" if value is None else f"{value:+.3f}" if signed else f"{value:.3f}"

    lines = [
        [
            row["engine"],
            str(row["boots"]),
            spread(row["wall_ms_boots"]),
            one(row["gpu_busy_ms"]),
            one(row["idle_ms"]),
            *(one(row[f"{k}_vs_above"], True) for k in ("wall_ms", "gpu_busy_ms", "idle_ms")),
            f"{len(row['errors'])} failed: {row['errors'][0]}" if row["errors"] else "",
        ]
        for row in rows
    ]
    return f"{grid(HEADERS, lines)}\n{NOTE}"
