"""Live reply metrics: TPOT, accept length, rolling windows, collapse detection. Pure, no I/O."""

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
    continued_stats,
    decode_tokens_per_second,
    reply_stats,
    time_per_output_token,
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
    "MIN_VERIFY_ROUNDS",
    "CollapseVerdict",
    "LiveRate",
    "LiveSnapshot",
    "ReplyStats",
    "RollingWindow",
    "SessionSummary",
    "SpecHealth",
    "check_collapse",
    "continued_stats",
    "decode_tokens_per_second",
    "judge_accept_length",
    "percentile",
    "reply_stats",
    "summarize_session",
    "time_per_output_token",
]
