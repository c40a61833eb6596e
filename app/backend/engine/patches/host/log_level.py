"""The log level ling-chat asks SGLang for (`log_level`), in force once the scheduler is up.

ling-chat routes SGLang's logging through a config file (`SGLANG_LOGGING_CONFIG_PATH`, whose
root level is INFO: the start screen shows SGLang's start-up lines as its steps). SGLang 0.5.23
then takes that config whole and never reads `log_level` (`configure_logger`,
`srt/utils/common.py`). So as the scheduler reports ready the root logger takes the level the
server arguments ask for: a running engine's rounds log at that level (at INFO a decode-stats
line every `decode_log_interval` rounds).
"""

from __future__ import annotations

import logging
from typing import Any


def apply(server_args: Any) -> None:
    """Set this process's root logger to `server_args.log_level`."""
    logging.getLogger().setLevel(str(server_args.log_level).upper())


def install() -> None:
    """Apply the level as the scheduler reports ready (after the start-up lines)."""
    from sglang.srt.managers.scheduler import Scheduler

    stock = Scheduler.get_init_info

    def get_init_info(self: Any) -> dict[str, Any]:
        apply(self.server_args)
        return stock(self)

    Scheduler.get_init_info = get_init_info


def collect(server_args: Any) -> dict[str, Any]:
    """The `log_level` fact: the level asked for, and the root logger's in this process."""
    return {
        "asked": str(server_args.log_level),
        "in_force": logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower(),
    }
