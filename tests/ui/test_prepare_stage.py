"""The start-up screen shows the first start's kernel builds: stage, elapsed, what compiles."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import Static

from app.backend.engine.config import EngineConfig
from app.backend.firststart.first_start import PreparedBackend
from app.backend.firststart.prepare import PREPARE_STAGE, PrepareSpec, build_env
from app.backend.protocol import LoadStage
from app.bench.bytemodel.ling_config import LING_3_FLASH_CONFIG
from app.ui import LingChatApp
from tests.support.clock import FakeClock
from tests.support.pilot import SIZE, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble

BUILDING = "flashinfer.jit: Building JIT module sampling; this can take several minutes"


async def test_the_prepare_stage_names_the_builder_then_a_failure_is_one_line(
    make_app: Callable[..., LingChatApp],
    clock: FakeClock,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SGLANG_CACHE_DIR", str(tmp_path / "cache"))
    for name in build_env(1):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(LING_3_FLASH_CONFIG))
    spec = PrepareSpec(
        EngineConfig("inclusionAI/Ling-3.0-flash-fp4"),
        tmp_path / "ckpt",
        None,
        "GB10",
        build_env(2),
    )
    dummy = ScriptedBackendDouble(
        clock=clock, stages=[LoadStage("Loading weights", False, 1.0, BUILDING)], hold_start=True
    )
    real = ScriptedBackendDouble(clock=clock)
    app = make_app(PreparedBackend(real, lambda: spec, lambda config: dummy))
    async with app.run_test(size=SIZE) as pilot:
        stages = app.screen.query_one("#stages", Static)
        await wait_until(pilot, lambda: "FlashInfer: sampling" in text_of(stages))
        assert PREPARE_STAGE in text_of(stages) and "2 compile jobs" in text_of(stages)
        clock.advance(75)
        await wait_until(pilot, lambda: "1 m 15 s" in text_of(stages))  # it ticks
        dummy.release()  # its start ends without the warm-up: the prepare failed
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 1
    assert dummy.shutdown_calls == 1 and not spec.marker().exists()
    printed = capsys.readouterr().err.strip()
    assert printed == "ling-chat: error: preparing the kernels stopped before the warm-up ran"
