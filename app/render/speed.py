"""How decoding slowed as the conversations grew, over the whole history, as text.

Shown by `ling-chat history stats` and by the chat's speed-by-context view.
"""

from __future__ import annotations

from app.render.bars import bar
from app.storage.models import MessageStatus
from app.storage.store import ChatStore
from app.telemetry import ReplyStats
from app.telemetry.context import ContextBucket, by_context

BAR_WIDTH = 32
COUNTED = (MessageStatus.COMPLETE, MessageStatus.STOPPED, MessageStatus.CUT)
"""Replies whose speed counts; a failed reply's numbers describe the failure."""


def speed_by_context(store: ChatStore) -> str:
    """One table per model, profile and engine kind: decode tok/s (with a bar), TTFT and
    accept length of the counted replies in each context bucket that has any."""
    groups: dict[str, list[ReplyStats]] = {}
    for reply in store.measured_replies():
        if reply.status in COUNTED:
            run = reply.run
            key = f"{run.model} · {run.profile_label} · {run.kind}" if run else "engine unknown"
            groups.setdefault(key, []).append(reply.stats)
    if not groups:
        return "No measured replies yet."
    return "\n\n".join(
        _context_table(key, len(replies), by_context(replies)) for key, replies in groups.items()
    )


def _context_table(title: str, replies: int, buckets: list[ContextBucket]) -> str:
    scale = max((b.summary.decode_tps or 0.0 for b in buckets), default=0.0) or 1.0
    lines = [
        f"{title}: {replies} repl{'y' if replies == 1 else 'ies'}",
        f"{'context':9}{'replies':>7}  {'decode tok/s':{BAR_WIDTH + 9}}{'TTFT s':>7}{'accept':>8}",
    ]
    for bucket in buckets:
        s = bucket.summary
        speed = bar(s.decode_tps or 0.0, scale, BAR_WIDTH).ljust(BAR_WIDTH)
        lines.append(
            f"{bucket.label:9}{s.replies:>7}  {speed} {_num(s.decode_tps, 1):>7} "
            f"{_num(s.ttft_s, 2):>7}{_num(s.accept_length, 2):>8}"
        )
    return "\n".join(lines)


def _num(value: float | None, digits: int) -> str:
    return "—" if value is None else f"{value:.{digits}f}"
