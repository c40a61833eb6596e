"""Pure telemetry: reply metrics, rolling windows, collapse detection. No I/O."""

from app.telemetry.metrics import (
    ReplyStats,
    accept_length,
    accept_rate,
    decode_tokens_per_second,
    reply_stats,
    time_per_output_token,
)

__all__ = [
    "ReplyStats",
    "accept_length",
    "accept_rate",
    "decode_tokens_per_second",
    "reply_stats",
    "time_per_output_token",
]
