"""The one setting that scales every end-to-end wait in the tests.

`LING_CHAT_TEST_TIMEOUT_SCALE` (default 1) multiplies each deadline a test sets on a
subprocess or on an app reaching a state; a slow or loaded machine (CI) sets it higher.
"""

from __future__ import annotations

import os

SCALE_ENV = "LING_CHAT_TEST_TIMEOUT_SCALE"


def scaled(seconds: float) -> float:
    """`seconds` times the scale in `LING_CHAT_TEST_TIMEOUT_SCALE` (1 when unset)."""
    raw = os.environ.get(SCALE_ENV, "1")
    try:
        scale = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_ENV} must be a number, not {raw!r}") from None
    if not scale > 0:
        raise ValueError(f"{SCALE_ENV} must be above 0, not {raw!r}")
    return seconds * scale
