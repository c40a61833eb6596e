"""The host-time table of a run (`bench --host-time`): per engine, a round's wall time
(median over its boots, with their range), its GPU-busy time and what the GPU idled."""

from __future__ import annotations

from collections.abc import Sequence

from app.bench.host.rounds import spread
from app.bench.results import ProfileResult
from app.render.grid import grid

NOTE = (
    "host time: ms a verify round, each the long request's less the short one's over the "
    "rounds between (prefill and fixed costs cancel); wall: median over boots (their range), "
    "each boot's the median of its pairs; GPU busy: under SGLang's profiler on the first boot; "
    "idle: wall - busy, the round's host share"
)


HEADERS = ("engine", "boots", "wall ms", "GPU busy", "GPU idle", "idle share", "")


def render(profiles: Sequence[ProfileResult]) -> str | None:
    """The table and its note, or None when no engine measured its host time."""
    measured = [p for p in profiles if p.host is not None]
    if not measured:
        return None
    lines = []
    for result in measured:
        host = result.host
        assert host is not None
        share = (
            f"{host.idle_ms / host.wall_ms:.0%}"
            if host.idle_ms is not None and host.wall_ms
            else "—"
        )
        failed = [b.error for b in host.boots if b.error]
        lines.append(
            [
                result.profile,
                str(len(host.boots)),
                spread(host.walls),
                spread([host.gpu_busy_ms] if host.gpu_busy_ms is not None else []),
                spread([host.idle_ms] if host.idle_ms is not None else []),
                share,
                f"{len(failed)} failed: {failed[0]}" if failed else "",
            ]
        )
    return f"{grid(HEADERS, lines)}\n{NOTE}"
