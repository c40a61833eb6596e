"""Start-up: load stages with ticking times, the proof report, refusals and early quits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import ProgressBar, Static
from textual.worker import WorkerFailed

from app.backend.protocol import LoadStage
from app.core.errors import BackendError, ProofFailed
from app.core.proof_report import ProofReport
from app.storage import ChatStore
from app.ui import LingChatApp
from app.ui.screens.startup import StartupScreen
from tests.support.clock import FakeClock
from tests.support.pilot import SIZE, chat_screen, text_of, wait_until
from tests.support.scripted_backend import ScriptedBackendDouble, failing_report
from tests.support.storage import write_locked

MakeApp = Callable[..., LingChatApp]


async def test_passing_proof_opens_the_chat_and_records_the_engine_run(
    chat_app: LingChatApp, backend: ScriptedBackendDouble, store: ChatStore
) -> None:
    async with chat_app.run_test(size=SIZE) as pilot:
        await chat_screen(pilot)
        assert chat_app.engine_run_id is not None
        run = store.get_engine_run(chat_app.engine_run_id)
    assert (run.kind, run.profile, run.sglang_version) == ("engine", "stack", "0.5.23")
    assert ProofReport.from_dict(run.proof) == backend.report
    assert run.proof_summary == "stack: 3 pass, 0 fail, 0 off"


async def test_stages_show_their_times_and_the_running_one_ticks(
    make_app: MakeApp, clock: FakeClock
) -> None:
    backend = ScriptedBackendDouble(
        clock=clock,
        stages=[
            LoadStage("Importing SGLang", False, 0.0),
            LoadStage("Importing SGLang", True, 4.2),
            LoadStage("Loading weights", False, 4.2, "shard 3/12"),
        ],
        hold_start=True,
    )
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        stages = app.screen.query_one("#stages", Static)
        await wait_until(pilot, lambda: "Loading weights" in text_of(stages))
        assert "Importing SGLang" in text_of(stages) and "4.20 s" in text_of(stages)
        assert "shard 3/12" in text_of(stages)
        clock.advance(12.5)
        await wait_until(pilot, lambda: "12.5 s" in text_of(stages))
        assert "Elapsed 16.7 s" in text_of(stages)
        backend.release()
        await chat_screen(pilot)


async def test_failed_proof_shows_the_fixes_and_exits_2_after_enter(
    make_app: MakeApp, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = ScriptedBackendDouble(clock=clock, report=failing_report())
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, StartupScreen)
        report = screen.query_one("#report", Static)
        await wait_until(pilot, lambda: "fix:" in text_of(report))
        assert "✗ FAIL FP8 LM head" in text_of(report)
        assert "fix: install the FP8 head patch" in text_of(report)
        assert "Enter exits" in text_of(screen.query_one("#startup-hint", Static))
        assert backend.shutdown_calls == 1
        await pilot.press("x")
        await pilot.pause()
        assert app.is_running
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 2
    printed = capsys.readouterr().err
    assert "Proof FAILED" in printed and "fix: install the FP8 head patch" in printed


@pytest.mark.parametrize(
    ("kind", "way"),
    [
        ("engine", "Apply the fixes above, then try again."),
        (
            "server",
            "Apply the fixes above, then try again, or chat anyway with --allow-unoptimized.",
        ),
    ],
)
async def test_proof_refused_by_start_shows_the_report_and_the_way_on(
    make_app: MakeApp, clock: FakeClock, capsys: pytest.CaptureFixture[str], kind: str, way: str
) -> None:
    refusal = ProofFailed("http://gpu:30000 is not proven optimized")
    backend = ScriptedBackendDouble(
        clock=clock, report=failing_report(), start_error=refusal, kind=kind
    )
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        report = app.screen.query_one("#report", Static)
        await wait_until(pilot, lambda: "fix:" in text_of(report))
        assert way in text_of(app.screen.query_one("#startup-hint", Static))
        await pilot.press("enter")
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 2
    assert backend.shutdown_calls == 1
    assert capsys.readouterr().err.rstrip().endswith(way)


async def test_unoptimized_server_may_chat_when_allowed(
    make_app: MakeApp, clock: FakeClock
) -> None:
    backend = ScriptedBackendDouble(clock=clock, report=failing_report(), kind="server")
    app = make_app(backend, allow_unoptimized=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await chat_screen(pilot)
        banner = screen.query_one("#banner", Static)
        assert banner.display
        assert "Optimizations not proven (stack: 1 pass, 1 fail, 1 off)" in text_of(banner)
    assert backend.shutdown_calls == 0


async def test_backend_error_at_start_is_one_line_and_exit_1(
    make_app: MakeApp, clock: FakeClock, capsys: pytest.CaptureFixture[str]
) -> None:
    error = BackendError("model path /models/ling does not exist")
    backend = ScriptedBackendDouble(clock=clock, start_error=error)
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 1
    assert backend.shutdown_calls == 1
    printed = capsys.readouterr().err.strip()
    assert printed == "ling-chat: error: model path /models/ling does not exist"


async def test_an_unexpected_error_is_one_line_naming_its_log_not_a_traceback(
    make_app: MakeApp, clock: FakeClock, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    backend = ScriptedBackendDouble(clock=clock, start_error=RecursionError("too deep"))
    app = make_app(backend, log_dir=tmp_path / "logs")
    with pytest.raises(WorkerFailed):  # Pilot re-raises it; `ling-chat` exits 1
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 1
    assert capsys.readouterr().err == ""  # Textual's traceback, with locals, is not printed
    log = tmp_path / "logs" / "ling-chat.log"
    assert app.crash_message == (
        f"ling-chat: unexpected error (RecursionError: too deep); the details are in {log}"
    )
    assert "RecursionError: too deep" in log.read_text()


async def loading(pilot: Pilot[None]) -> None:
    """Wait until the start-up screen shows the (held) graph-capture stage."""
    stages = pilot.app.screen.query_one("#stages", Static)
    await wait_until(pilot, lambda: "Capturing CUDA graphs" in text_of(stages))


async def test_a_locked_database_at_start_is_one_line_and_exit_1(
    make_app: MakeApp,
    clock: FakeClock,
    db_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backend = ScriptedBackendDouble(clock=clock, hold_start=True)
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await loading(pilot)
        with write_locked(db_path):
            backend.release()
            await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 1
    assert backend.shutdown_calls == 1
    printed = capsys.readouterr().err.strip().replace("\n", "")  # undo Rich's wrapping
    assert printed.startswith(f"ling-chat: error: {db_path} is locked by another process")
    assert app.engine_run_id is None


async def test_ctrl_c_while_loading_shuts_down_and_exits_cleanly(
    make_app: MakeApp, clock: FakeClock
) -> None:
    backend = ScriptedBackendDouble(clock=clock, hold_start=True)
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await loading(pilot)
        await pilot.press("ctrl+c")
        await wait_until(pilot, lambda: not app.is_running)
    assert app.return_code == 0
    assert backend.shutdown_calls == 1


async def test_a_download_shows_a_progress_bar_with_bytes_rate_and_time_left(
    make_app: MakeApp, clock: FakeClock
) -> None:
    name = "Downloading the checkpoint"
    line = "35.0 GB of 70.0 GB · 85.0 MB/s · 6:51 left"
    backend = ScriptedBackendDouble(
        clock=clock,
        stages=[
            LoadStage("Importing SGLang", True, 4.2),
            LoadStage(name, False, 4.2, "checking the cache"),
            LoadStage(name, False, 9.0, line, 35_000_000_000, 70_000_000_000),
        ],
        hold_start=True,
    )
    app = make_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        stages = app.screen.query_one("#stages", Static)
        bar = app.screen.query_one("#download", ProgressBar)
        await wait_until(pilot, lambda: line in text_of(stages))
        assert bar.display and bar.percentage == 0.5
        app.screen.show_stage(LoadStage(name, True, 420.0, "in the cache"))
        await pilot.pause()
        assert not bar.display
        backend.release()
        await chat_screen(pilot)
