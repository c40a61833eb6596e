"""The collapse detector: flags accept length near 1.0 only when it can tell."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from app.telemetry import (
    COLLAPSE_ACCEPT_LENGTH,
    MIN_VERIFY_ROUNDS,
    ReplyStats,
    SpecHealth,
    check_collapse,
)

FAST = settings(max_examples=60, deadline=None)


def _reply(completion: int, verify: int) -> ReplyStats:
    return ReplyStats(
        prompt_tokens=10,
        completion_tokens=completion,
        ttft_s=0.1,
        latency_s=1.0,
        tpot_s=None,
        decode_tps=None,
        accept_length=completion / verify if verify else None,
        verify_rounds=verify or None,
    )


def test_collapsed_long_reply_flags() -> None:
    verdict = check_collapse([_reply(201, 200)], speculative=True)
    assert verdict.status is SpecHealth.COLLAPSED
    assert verdict.flagged
    assert verdict.verify_rounds == 200
    assert verdict.accept_length is not None and verdict.accept_length < 1.01
    assert "collapsed" in verdict.message


def test_short_collapsed_reply_does_not_flag() -> None:
    verdict = check_collapse([_reply(3, 3)], speculative=True)
    assert verdict.status is SpecHealth.WARMING
    assert not verdict.flagged


def test_short_replies_add_up_to_a_verdict() -> None:
    replies = [_reply(12, 11), _reply(12, 11), _reply(12, 11)]  # 33 rounds at 1.09
    assert check_collapse(replies, speculative=True).status is SpecHealth.COLLAPSED
    assert check_collapse(replies[:2], speculative=True).status is SpecHealth.WARMING


def test_healthy_accept_length_is_ok() -> None:
    verdict = check_collapse([_reply(300, 100)], speculative=True)
    assert verdict.status is SpecHealth.OK
    assert not verdict.flagged
    assert verdict.accept_length == 3.0


def test_threshold_is_inclusive() -> None:
    at = check_collapse([_reply(120, 100)], speculative=True)
    above = check_collapse([_reply(121, 100)], speculative=True)
    assert COLLAPSE_ACCEPT_LENGTH == 1.2
    assert at.status is SpecHealth.COLLAPSED
    assert above.status is SpecHealth.OK


def test_only_the_latest_replies_count() -> None:
    old_collapse = [_reply(1000, 990)]
    healthy = [_reply(90, 30), _reply(90, 30), _reply(90, 30)]
    assert check_collapse(old_collapse + healthy, speculative=True).status is SpecHealth.OK
    assert check_collapse(healthy + old_collapse, speculative=True).flagged


def test_no_verify_rounds_on_a_long_reply_is_flagged() -> None:
    verdict = check_collapse([_reply(MIN_VERIFY_ROUNDS, 0)], speculative=True)
    assert verdict.status is SpecHealth.NO_STATS
    assert verdict.flagged
    early = check_collapse([_reply(MIN_VERIFY_ROUNDS - 1, 0)], speculative=True)
    assert early.status is SpecHealth.WARMING


@FAST
@given(
    replies=st.lists(
        st.tuples(st.integers(0, 5000), st.integers(0, 5000)), min_size=0, max_size=10
    ),
    window=st.integers(1, 10),
)
def test_never_flags_when_speculative_is_off(replies: list[tuple[int, int]], window: int) -> None:
    stats = [_reply(c, v) for c, v in replies]
    verdict = check_collapse(stats, speculative=False, window=window)
    assert verdict.status is SpecHealth.OFF
    assert not verdict.flagged
