"""The roofline columns of a benchmark row, from app.telemetry's byte model.

Plain rows: bytes per decode step at the row's mean context, achieved GB/s = bytes /
median TPOT. Speculative rows: bytes per emitted token = one draft+verify cycle's bytes /
the aggregate accept length a, and the ceiling a / r, r taken with independently routed
verify tokens (the conservative bound; docs/byte-model.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from app.bench.bytemodel.checkpoint import ModelShape, Precision
from app.bench.bytemodel.kernels import Phase
from app.bench.bytemodel.mtp import mtp_cycle, mtp_speedup_ceiling
from app.bench.bytemodel.roofline import achieved_gbps, roofline, share_of_peak
from app.bench.bytemodel.unit_bytes import lm_head, served_config, terms, unit_bytes
from app.bench.results import RooflineColumns, WorkloadSummary
from app.levers.draft.nextn import STEPS as NEXTN_STEPS


def roofline_columns(
    profile: str, summary: WorkloadSummary, facts: Mapping[str, Any], *, peak_gbps: float
) -> RooflineColumns | None:
    """The row's columns; None without a config.json in `facts` or a usable one.

    Args:
        profile: decides the LM head's format, the config's overrides (the BF16 router) and
            the round's bytes (a ReplaySSM verify writes no KDA state snapshots, a hot
            draft head reads its rows only; a DSpark round is `unit_bytes`').
        summary: the measured workload.
        facts: the engine's `describe()`: `model_config` and `config` are read.
        peak_gbps: the memory system's peak bandwidth.
    """
    checkpoint = facts.get("model_config")
    if not checkpoint or summary.context_tokens is None:
        return None
    model_config = served_config(profile, checkpoint)
    head, context = lm_head(profile), round(summary.context_tokens)
    term = terms(profile)
    try:
        line = roofline(model_config, context_tokens=context, peak_gbps=peak_gbps, head=head)
        per_token: float | None = line.step.total
        ceiling = None
        if summary.accept_length is not None and term.round == "dspark":
            nbytes = unit_bytes(profile, Phase.VERIFY, context_tokens=context, config=model_config)
            round_bytes = math.fsum(nbytes.values())
            per_token = round_bytes / summary.accept_length
            ceiling = mtp_speedup_ceiling(summary.accept_length, round_bytes / line.step.total)
        elif summary.accept_length is not None:
            steps = (facts.get("config") or {}).get("speculative_num_steps") or NEXTN_STEPS
            cycle = mtp_cycle(
                ModelShape.from_config(model_config),
                Precision.from_config(model_config, head),
                context_tokens=context,
                draft_steps=int(steps),
                state_snapshots=term.kda_snapshots is not False,
                draft_head_rows=term.draft_head_rows,
            )
            per_token = cycle.bytes_per_token(summary.accept_length)
            ceiling = cycle.speedup_ceiling(summary.accept_length)
    except ValueError:
        return None  # not a Ling-3.0 config: the byte model does not apply
    achieved = share = None
    if per_token is not None and (tpot := summary.tpot_s):
        achieved = achieved_gbps(per_token, tpot)
        share = share_of_peak(per_token, tpot, peak_gbps)
    return RooflineColumns(
        context_tokens=context,
        bytes_per_step=line.step.total,
        ceiling_tps=line.ceiling_tps,
        achieved_gbps=achieved,
        peak_share=share,
        mtp_ceiling=ceiling,
    )
