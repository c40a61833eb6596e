"""The levers on the scheduler's host time a round: the KDA ReplaySSM commit fed the verify's
prepared indices, the garbage collector frozen once up, the scheduler on the fastest cores.

Each one's patch (app/backend/engine/patches/host) records what it did in the scheduler and
reports it with its own `collect`; `patch_reader` is the lever's reader of that fact.
"""

from __future__ import annotations

from typing import Any

from app.levers.lever import Reader
from app.levers.live import Live


def patch_reader(patch: str) -> Reader:
    """The reader of the fact the scheduler-side patch `patch` collects itself."""

    def read(live: Live) -> dict[str, Any]:
        return dict(live.sources.patch(patch).collect())

    return read
