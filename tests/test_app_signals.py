"""Every way out mid-reply: `ling-chat --server` in a fresh process on a pseudo-terminal (its
controlling terminal), against a test double of an SGLang server streaming 20 chunks a
second; `--replay demo` for its temporary folder.

The reply must be stored as stopped with what arrived, the process must end (how fast is
measured 20 times a path by `lab/scripts/exit_paths.py`, not here), the full-screen UI must
leave a terminal that is still there, and the exit status is 128 + the signal.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

import psutil
import pytest

from tests.support.pty_app import PtyApp, app_on_a_pty, engine_double_chat, wait_for
from tests.support.slow_server import TOKEN, SlowServer
from tests.support.timeouts import scaled

LEAVE_ALT_SCREEN = b"\x1b[?1049l"


def send_and_stream(app: PtyApp, server: SlowServer) -> None:
    wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
    os.write(app.leader, b"count")
    time.sleep(0.3)
    os.write(app.leader, b"\x13")  # Ctrl+S: send
    wait_for(lambda: server.chat_tokens >= 5, 30, "the reply to stream")


def stored_reply(data: Path) -> tuple[str, str]:
    with sqlite3.connect(data / "history.db") as db:
        (reply, status) = db.execute(
            "SELECT content, status FROM messages WHERE role = 'assistant'"
        ).fetchone()
    return reply, status


@pytest.mark.parametrize(
    ("signum", "terminal"),
    [
        (signal.SIGTERM, "there"),
        (signal.SIGHUP, "there"),
        (signal.SIGINT, "there"),
        (signal.SIGHUP, "closed"),  # the window closed: the kernel sends the SIGHUP
        (signal.SIGTERM, "hung"),  # the terminal takes no more writes
    ],
)
def test_a_signal_mid_reply_stores_it_as_stopped_and_ends_the_process(
    end_to_end: None, tmp_path: Path, signum: int, terminal: str
) -> None:
    with (
        SlowServer(step_s=0.05) as server,
        app_on_a_pty(["--server", server.url, "--allow-unoptimized"], tmp_path) as app,
    ):
        send_and_stream(app, server)
        if terminal == "closed":
            app.hang_up()
        else:
            if terminal == "hung":
                app.stop_reading()
                time.sleep(1.5)  # the app's writes fill the terminal
            app.child.send_signal(signum)
        status = app.child.wait(timeout=scaled(30))

    assert status == 128 + signum
    if terminal == "there":
        name = signal.Signals(signum).name
        assert app.screen.rstrip().endswith(f"ling-chat: stopped by {name}".encode())
        assert LEAVE_ALT_SCREEN in app.screen[app.screen.rindex(b"\x1b[?1049h") :]
    reply, status_text = stored_reply(tmp_path)
    assert status_text == "stopped"
    assert reply.startswith(TOKEN * 5)


@pytest.mark.parametrize("closed_by", ["window", "SIGTERM"])
def test_standard_output_on_a_closed_pipe_changes_nothing(
    end_to_end: None, tmp_path: Path, closed_by: str
) -> None:
    """`ling-chat | head -c0`: the chat draws on the terminal (stderr) all the same."""
    with (
        SlowServer(step_s=0.05) as server,
        app_on_a_pty(
            ["--server", server.url, "--allow-unoptimized"], tmp_path, stdout_to_closed_pipe=True
        ) as app,
    ):
        send_and_stream(app, server)
        app.end_by(closed_by)
        status = app.child.wait(timeout=scaled(30))

    assert status == (129 if closed_by == "window" else 143)
    assert stored_reply(tmp_path)[1] == "stopped"


def test_standard_input_from_dev_null_is_one_line_and_the_model_side_never_starts(
    end_to_end: None, tmp_path: Path
) -> None:
    with (
        SlowServer(step_s=0.05) as server,
        app_on_a_pty(
            ["--server", server.url, "--allow-unoptimized"], tmp_path, stdin_null=True
        ) as app,
    ):
        status = app.child.wait(timeout=scaled(30))
        wait_for(lambda: b"ling-chat: error: the chat reads" in app.screen, 5, "the line")

    assert status == 1
    assert server.requests == 0  # the model side never started


@pytest.mark.parametrize("closed_by", ["window", "SIGTERM"])
def test_a_replay_ended_mid_reply_leaves_no_temporary_folder(
    end_to_end: None, tmp_path: Path, closed_by: str
) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    with app_on_a_pty(
        ["--replay", "demo"], tmp_path / "data", env={"TMPDIR": str(temporary)}
    ) as app:
        wait_for(lambda: b"Ask Ling" in app.screen, 60, "the chat")
        assert [p.name.startswith("ling-chat-replay-") for p in temporary.iterdir()] == [True]
        os.write(app.leader, b"hello\x13")
        wait_for(lambda: b"streaming" in app.screen.rpartition(b"hello")[2], 30, "the reply")
        app.end_by(closed_by)
        status = app.child.wait(timeout=scaled(30))

    assert status == (129 if closed_by == "window" else 143)
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("closed_by", ["window", "SIGTERM"])
def test_the_in_process_engine_and_its_processes_stop_with_the_app(
    end_to_end: None, tmp_path: Path, closed_by: str
) -> None:
    """`ling-chat --model` on SGLang's test double: its scheduler process is a child of the
    app in the terminal's process group, as SGLang's is."""
    program, args, env = engine_double_chat(tmp_path)
    data = tmp_path / "data"
    with app_on_a_pty(args, data, program=program, env=env) as app:
        wait_for(lambda: b"Ask Ling" in app.screen, 120, "the chat")
        children = psutil.Process(app.child.pid).children(recursive=True)
        os.write(app.leader, b"hello\x13")
        wait_for(lambda: b"The user says hello" in app.screen, 30, "the reply")
        app.end_by(closed_by)
        status = app.child.wait(timeout=scaled(30))

    assert status == (129 if closed_by == "window" else 143)
    assert len(children) >= 1  # the scheduler was up
    _, alive = psutil.wait_procs(children, timeout=scaled(5))
    assert alive == []
    assert stored_reply(data)[1] == "stopped"
    with sqlite3.connect(data / "history.db") as db:
        query = "SELECT reasoning FROM messages WHERE role = 'assistant'"
        (thought,) = db.execute(query).fetchone()
    assert thought.startswith("The user says hello.")
