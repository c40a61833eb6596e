"""The DSpark lever's patch: count the draft's head projections made in graph capture, by the
head's quant method, and the FP8 head's calls inside them (app/levers/draft/dspark.py reads
`PROJECTIONS` and `COUNTS` through `Sources.patch`; why no patch is needed to make the draft
use the FP8 head is told there).

Wrapped: `models.dspark.project_through_lm_head`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.backend.engine.patches.boundary import PatchPlan

PROJECTIONS: Counter[str] = Counter()
"""Draft head projections during graph capture, by the head's quant method."""
COUNTS: Counter[str] = Counter()
"""`fp8_calls_in_draft_capture`."""


def install(plan: PatchPlan) -> None:
    """Count the draft's head projections in capture."""
    import torch
    from sglang.srt.models import dspark

    from app.backend.engine.patches import fp8_head

    project = dspark.project_through_lm_head

    def project_through_lm_head(hidden: Any, lm_head: Any) -> Any:
        if not torch.cuda.is_current_stream_capturing():
            return project(hidden, lm_head)
        before = fp8_head.method_class().captured_calls
        out = project(hidden, lm_head)
        PROJECTIONS[type(getattr(lm_head, "quant_method", None)).__name__] += 1
        COUNTS["fp8_calls_in_draft_capture"] += fp8_head.method_class().captured_calls - before
        return out

    dspark.project_through_lm_head = project_through_lm_head
