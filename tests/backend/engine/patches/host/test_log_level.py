"""The log level ling-chat asks SGLang for is the one its running scheduler logs at."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from app.backend.engine.config import EngineConfig, GpuFacts, server_args
from app.backend.engine.patches.host import log_level
from app.backend.engine.sglang_log import SGLangLog

H200 = GpuFacts(sm=90, has_fa3=False, has_flashinfer=True, has_xgrammar=True)
DECODE_LOGGER = "sglang.srt.managers.scheduler_components.metrics_reporter"
"""The logger of SGLang's decode-stats line, written every `decode_log_interval` rounds."""


@pytest.fixture
def root_logging() -> Iterator[None]:
    """The root logger's level and handlers put back after the test."""
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    yield
    for handler in root.handlers:
        if handler not in handlers:
            handler.close()
    root.handlers[:] = handlers
    root.setLevel(level)


def asked() -> SimpleNamespace:
    """The server arguments' log level as ling-chat starts every engine."""
    return SimpleNamespace(log_level=server_args(EngineConfig("/m"), H200)["log_level"])


def configured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ling-chat's logging config, as the engine points SGLang at it; the log's path."""
    log = SGLangLog(tmp_path / "sglang.log")
    for name, value in log.prepare().items():
        monkeypatch.setenv(name, value)
    return log.path


def test_sglang_alone_logs_every_round_line_at_info_whatever_ling_chat_asks(
    tmp_path, monkeypatch, root_logging
):
    pytest.importorskip("sglang", reason="needs SGLang (the engine extra)")
    from sglang.srt.utils.common import configure_logger

    path = configured(tmp_path, monkeypatch)
    assert asked().log_level == "warning"
    configure_logger(asked())  # SGLang's own, in each of its processes
    logging.getLogger(DECODE_LOGGER).info("Decode batch, #running-req: 1 (before)")
    log_level.apply(asked())  # ling-chat's, as the scheduler reports ready
    logging.getLogger(DECODE_LOGGER).info("Decode batch, #running-req: 1 (after)")
    logging.getLogger(DECODE_LOGGER).warning("a warning still goes in")
    text = path.read_text(encoding="utf-8")
    assert "(before)" in text and "(after)" not in text and "a warning still goes in" in text


def test_the_start_up_logs_at_info_and_the_running_scheduler_at_the_level_asked(
    tmp_path, monkeypatch, root_logging
):
    import json
    import logging.config

    path = configured(tmp_path, monkeypatch)
    logging.config.dictConfig(
        json.loads(Path(os.environ["SGLANG_LOGGING_CONFIG_PATH"]).read_text())
    )
    assert log_level.collect(asked()) == {"asked": "warning", "in_force": "info"}
    log_level.apply(asked())
    assert log_level.collect(asked()) == {"asked": "warning", "in_force": "warning"}
    logging.getLogger(DECODE_LOGGER).info("Decode batch")
    assert "Decode batch" not in path.read_text(encoding="utf-8")
