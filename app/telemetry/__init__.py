"""Pure telemetry: reply metrics, rolling windows, collapse detection, roofline. No I/O."""

from app.telemetry.checkpoint import LmHead, ModelShape, Precision, WeightFormat, matrix_bytes
from app.telemetry.health import (
    COLLAPSE_ACCEPT_LENGTH,
    COLLAPSE_WINDOW_REPLIES,
    MIN_VERIFY_ROUNDS,
    CollapseVerdict,
    SpecHealth,
    check_collapse,
    judge_accept_length,
)
from app.telemetry.metrics import (
    ReplyStats,
    decode_tokens_per_second,
    reply_stats,
    speed_parts,
    time_per_output_token,
)
from app.telemetry.mtp import (
    DraftBytes,
    MtpCycle,
    Routing,
    distinct_experts,
    draft_bytes,
    mtp_cycle,
    mtp_speedup_ceiling,
)
from app.telemetry.roofline import (
    DGX_SPARK_GBPS,
    Roofline,
    StepBytes,
    achieved_gbps,
    decode_step_bytes,
    floor_time_s,
    roofline,
    share_of_peak,
)
from app.telemetry.session import SessionSummary, summarize_session
from app.telemetry.windows import (
    LiveRate,
    LiveSnapshot,
    RollingWindow,
    percentile,
)

__all__ = [
    "COLLAPSE_ACCEPT_LENGTH",
    "COLLAPSE_WINDOW_REPLIES",
    "DGX_SPARK_GBPS",
    "DraftBytes",
    "MIN_VERIFY_ROUNDS",
    "CollapseVerdict",
    "LiveRate",
    "LiveSnapshot",
    "LmHead",
    "ModelShape",
    "MtpCycle",
    "Precision",
    "ReplyStats",
    "RollingWindow",
    "Roofline",
    "Routing",
    "SessionSummary",
    "SpecHealth",
    "StepBytes",
    "WeightFormat",
    "achieved_gbps",
    "check_collapse",
    "decode_step_bytes",
    "decode_tokens_per_second",
    "distinct_experts",
    "draft_bytes",
    "floor_time_s",
    "judge_accept_length",
    "matrix_bytes",
    "mtp_cycle",
    "mtp_speedup_ceiling",
    "percentile",
    "reply_stats",
    "roofline",
    "share_of_peak",
    "speed_parts",
    "summarize_session",
    "time_per_output_token",
]
