"""A quit that does not end in time ends the process at once, undoing what must not outlive it.

A fresh process holds a `SignalStop` whose app never quits, registers an undo (as an engine's
processes and a replay's folder do), and gets SIGTERM.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.timeouts import scaled

SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from pathlib import Path
    from app.plumbing.abrupt_end import on_abrupt_end
    from app.ui.signal_stop import SignalStop

    class AppThatNeverQuits:
        terminal = None
        def stop_for_signal(self, signum):
            Path(sys.argv[1], "asked").write_text(str(signum))

    async def main(stop):
        stop.attach(AppThatNeverQuits())
        on_abrupt_end(lambda: Path(sys.argv[1], "undone").write_text("yes"))
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.sleep(30)

    with SignalStop(deadline_s=0.3) as stop:
        asyncio.run(main(stop))
    """
)


def test_a_quit_past_its_deadline_ends_the_process_with_the_undos_run(
    end_to_end: None, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(20),
    )
    assert done.returncode == 143, done.stderr
    assert (tmp_path / "asked").read_text() == "15"  # the quit was handed to the app first
    assert (tmp_path / "undone").read_text() == "yes"
