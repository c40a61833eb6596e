"""Project each profile's DGX Spark speed from kernel profiles (a projection, not a measurement).

Reads kernel-profile JSON files (one per profile and phase, at the real model's 42 layers;
format in app/bench/bytemodel/kernels.py), fits one sustained bandwidth and one fixed cost per
kernel call to NVIDIA's published Spark TPOTs, writes the projection and prints a table.

With `--host FILE` (lab/scripts/gpu_host_time.py's JSON) each measured engine's stack and dspark
rounds get a host term of their own (lab/research/host_time.py), the Spark's host taken
`--cpu-factor` times as slow as the H200's (default: the stated assumption, 1.0).

    python lab/scripts/spark_projection.py PROFILE.json ...
        [--out lab/results/spark-projection.json] [--host HOST.json [--cpu-factor 1.0]]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from app.bench.bytemodel.kernels import KernelProfile  # noqa: E402
from lab.research.host_time import CPU_FACTOR, HostRun  # noqa: E402
from lab.research.projection import SparkProjection, spark_projection  # noqa: E402


def read_profile(path: Path) -> KernelProfile:
    """One profile file; ValueError names the file."""
    try:
        return KernelProfile.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, ValueError, AttributeError) as err:
        raise ValueError(f"{path}: {err}") from None


def read_host(path: Path) -> HostRun:
    """A host-time file; ValueError names the file."""
    try:
        return HostRun.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, json.JSONDecodeError, ValueError, AttributeError) as err:
        raise ValueError(f"{path}: {err}") from None


def table(result: SparkProjection) -> str:
    """Every profile's projected and published times, and the NEXTN verdict."""
    fit = result.fit
    held = " (c held at 0)" if fit.constrained else ""
    lines = [
        f"PROJECTION, not a measurement: context {result.context_tokens} tokens; fitted "
        f"bandwidth {fit.bandwidth_gbps:.1f} GB/s, fixed cost {fit.fixed_us:.2f} us a kernel{held}",
        f"{'profile':<15} {'phase':<7} {'GB':>6} {'kernels':>8} {'bw ms':>7} {'fixed ms':>8} "
        f"{'projected':>9} {'published':>9} {'residual':>8}",
    ]
    for p in result.profiles:
        published = f"{p.published_ms:9.2f}" if p.published_ms is not None else f"{'-':>9}"
        residual = f"{p.residual_ms:+8.2f}" if p.residual_ms is not None else f"{'-':>8}"
        lines.append(
            f"{p.profile:<15} {p.phase:<7} {p.bytes / 1e9:6.3f} {p.calls:8.0f} "
            f"{p.bandwidth_ms:7.2f} {p.fixed_ms:8.2f} {p.projected_ms:9.2f} {published} {residual}"
        )
        if p.unmapped:
            lines.append(f"  {len(p.unmapped)} unmapped kernel(s), counted as fixed cost")
    if result.nextn is not None:
        n = result.nextn
        lines.append(
            f"NEXTN round (recurrent verify) {n.fp8_round_ms:.2f} ms = "
            f"{n.round_step_ratio:.2f}x a step (NVIDIA {n.nvidia_round_step_ratio}x); "
            f"BF16-head round {n.bf16_round_ms:.2f} ms "
            f"({n.bf16_round_source})"
        )
        for row in n.accept:
            lines.append(
                f"  accept {row.accept_length}: TPOT {row.fp8_head_tpot_ms:.2f} ms FP8 head, "
                f"{row.bf16_head_tpot_ms:.2f} ms BF16 head, {row.speedup:.3f}x "
                f"({'meets' if row.meets_target else 'misses'} 1.10x); NVIDIA's stack "
                f"{row.published_stack_tpot_ms} ms"
            )
    if result.replayssm is not None:
        r = result.replayssm
        lines.append(
            f"ReplaySSM verify: round {r.replayssm_round_ms:.2f} ms against "
            f"{r.recurrent_round_ms:.2f} ms recurrent, {r.speedup:.3f}x; on the profiled GPU "
            f"{r.gpu_replayssm_round_ms:.3f} against {r.gpu_recurrent_round_ms:.3f} ms "
            f"({'the same direction' if r.gpu_direction_agrees else 'the other direction'})"
        )
    if result.dspark is not None:
        d = result.dspark
        lines.append(
            f"DSpark round {d.round_ms:.2f} ms against the stack's {d.stack_round_ms:.2f} ms: it "
            f"needs {d.break_even:.2f}x the stack's accept length to match it; at its published "
            f"{d.published_accept}: TPOT {d.tpot_ms_at_published_accept:.2f} ms (on the profiled "
            f"GPU: {d.gpu_round_ms:.3f} against {d.gpu_stack_round_ms:.3f} ms a round)"
        )
    if result.host is not None:
        h = result.host
        lines.append(
            f"Host term a round (measured on {h.gpu}, host CPU {h.cpu}; Spark host "
            f"{h.cpu_factor:g}x its time: {h.cpu_factor_why})"
        )
        w = max(len(t.label) for t in h.terms)
        lines.append(
            f"  {'engine':<{w}} {'accept':>6} {'GPU ms':>7} {'host ms':>7} {'round':>7} "
            f"{'TPOT':>6} {'no host':>7} {'H200 idle':>9} {'H200 loop':>9}"
        )
        for t in h.terms:
            lines.append(
                f"  {t.label:<{w}} {t.accept_length:6.2f} {t.gpu_round_ms:7.2f} {t.host_ms:7.2f} "
                f"{t.round_ms:7.2f} {t.tpot_ms:6.2f} {t.tpot_without_host_ms:7.2f} "
                f"{t.h200_idle_ms:9.2f} {t.h200_host_loop_ms:9.2f}"
            )
    for lever in result.levers:
        lines.append(
            f"{lever.profile} round {lever.round_ms:.2f} ms against {lever.base}'s "
            f"{lever.base_round_ms:.2f} ms: {lever.saving:+.1%} saved at equal accept length "
            f"({lever.bytes / 1e9:.3f} against {lever.base_bytes / 1e9:.3f} GB; on the profiled "
            f"GPU {lever.gpu_round_ms:.3f} against {lever.gpu_base_round_ms:.3f} ms)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the projection; 0 on success, 2 on bad input (one line on stderr)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path, help="kernel-profile JSON files")
    parser.add_argument("--out", type=Path, default=Path("lab/results/spark-projection.json"))
    parser.add_argument("--host", type=Path, help="gpu_host_time.py's JSON: add the host term")
    parser.add_argument("--cpu-factor", type=float, default=CPU_FACTOR)
    args = parser.parse_args(argv)
    try:
        result = spark_projection([read_profile(path) for path in args.profiles])
        if args.host is not None:
            result = result.with_host(read_host(args.host), args.cpu_factor)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result.to_dict(), indent=1) + "\n", encoding="utf-8")
    print(table(result))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
