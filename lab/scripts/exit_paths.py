"""Every way out of a chat mid-reply, each run N times: is the process gone within 2 s, the
reply stored as stopped, no temporary folder and no child process left?

The chat runs in a fresh process against the SGLang server double streaming 20 chunks a
second (`tests/support/slow_server.py`), on a pseudo-terminal that is its controlling
terminal, or in tmux as a user's window is; with `--source replay` it plays `--replay demo`
(its history lives in a temporary folder, so only the folder's removal is checked); with
`--source engine-double` the in-process engine on SGLang's test double, whose scheduler is a
child process that must go with the app.

    python lab/scripts/exit_paths.py                       # 20 runs of every path
    python lab/scripts/exit_paths.py --runs 3 --paths SIGTERM tmux-kill-window
    python lab/scripts/exit_paths.py --json lab/results/DATE-exit-paths.json
    python lab/scripts/exit_paths.py --from a.jsonl b.jsonl  # the table of runs printed before

Each run's data folder and TMPDIR are fresh; the time is from the exit's cause (the signal,
the closed terminal; for stdin from /dev/null, the start) to the process being gone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psutil  # noqa: E402

from tests.support.pty_app import (  # noqa: E402
    LING_CHAT,
    ROOT,
    PtyApp,
    app_on_a_pty,
    engine_double_chat,
    wait_for,
)
from tests.support.slow_server import SlowServer  # noqa: E402

GONE_WITHIN_S = 2.0
WAIT_GONE_S = 10.0
"""How long a run waits for the process before it counts as hung (and is killed)."""


@dataclass
class Run:
    path: str
    source: str
    gone_s: float | None
    """Seconds from the cause to the process gone; None: still running after WAIT_GONE_S."""
    status: int | None
    reply: str
    """The stored reply's status; `n/a` where none is kept (a replay, no reply sent)."""
    temp_left: list[str]
    children_left: list[str]
    """The app's child processes still running 2 s after it is gone."""


def _stored_reply(data: Path) -> str:
    db = data / "history.db"
    if not db.exists():
        return "none"
    with sqlite3.connect(db) as con:
        row = con.execute("SELECT status FROM messages WHERE role = 'assistant'").fetchone()
    return row[0] if row else "none"


def _gone_after(is_alive: Callable[[], bool]) -> float | None:
    start = time.monotonic()
    while time.monotonic() - start < WAIT_GONE_S:
        if not is_alive():
            return time.monotonic() - start
        time.sleep(0.01)
    return None


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _alive(procs: list[psutil.Process]) -> list[str]:
    """The commands of `procs` still running 2 s after the app is gone."""
    _, alive = psutil.wait_procs(procs, timeout=2)
    found = []
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            found.append(" ".join(proc.cmdline())[:120])
    return found


def _launch(source: str, url: str, work: Path) -> tuple[tuple[str, ...], list[str], dict[str, str]]:
    """The program, its arguments and its extra environment for `source`."""
    if source == "replay":
        return LING_CHAT, ["--replay", "demo"], {}
    if source == "server":
        return LING_CHAT, ["--server", url, "--allow-unoptimized"], {}
    return engine_double_chat(work)


STREAMING_MARK = {"replay": "●", "engine-double": "The user says"}
"""What the screen shows once a reply streams: the live mark of the speed strip or panel (a
replay's reply lasts 3 s), the engine double's first chunk (four more follow, 0.5 s apart)."""


def _send(
    write: Callable[[bytes], None], screen: Callable[[], str], server: SlowServer, source: str
) -> None:
    """Send a message and wait until its reply streams (`screen`: what is on it since)."""
    write(b"count")
    time.sleep(0.3)
    write(b"\x13")  # Ctrl+S
    if source == "server":
        first = server.chat_tokens
        wait_for(lambda: server.chat_tokens >= first + 5, 30, "the reply to stream")
    else:
        wait_for(lambda: STREAMING_MARK[source] in screen(), 30, "the reply to stream")


def pty_run(path: str, source: str, server: SlowServer, work: Path) -> Run:
    """One run on a pseudo-terminal."""
    data, tmp = work / "data", work / "tmp"
    data.mkdir()
    tmp.mkdir()
    program, args, env = _launch(source, server.url, work)
    started = time.monotonic()
    with app_on_a_pty(
        args,
        data,
        program=program,
        stdin_null=path == "stdin-devnull",
        stdout_to_closed_pipe=path.startswith("closed-pipe"),
        env={**env, "TMPDIR": str(tmp)},
    ) as app:
        if path == "stdin-devnull":
            gone = _gone_after(lambda: app.child.poll() is None)
            gone = None if gone is None else time.monotonic() - started
            children = []
        else:
            _wait_for_the_chat(lambda: b"Ask Ling" in app.screen, lambda: app.child.poll() is None)
            time.sleep(0.3)
            sent = len(app.screen)
            _send(
                lambda keys: os.write(app.leader, keys),
                lambda: app.screen[sent:].decode(errors="replace"),
                server,
                source,
            )
            children = _descendants(app.child.pid)
            gone = _exit_by(path, app)
        status = app.child.poll()
    reply = "n/a" if source == "replay" or path == "stdin-devnull" else _stored_reply(data)
    left = sorted(p.name for p in tmp.iterdir())
    return Run(path, source, gone, status, reply, left, _alive(children))


def _wait_for_the_chat(shown: Callable[[], bool], alive: Callable[[], bool]) -> None:
    """Wait until the chat shows; an app that ended first fails at once (see its log)."""

    def ready() -> bool:
        if not alive():
            raise AssertionError("the app ended before its chat showed")
        return shown()

    wait_for(ready, 120, "the chat")


def _exit_by(path: str, app: PtyApp) -> float | None:
    """Cause the exit `path` names; seconds until the process is gone."""
    alive = lambda: app.child.poll() is None  # noqa: E731
    if path == "hung-terminal+SIGTERM":
        app.stop_reading()
        time.sleep(1.5)  # the screen's writes fill the terminal, which takes no more
        app.child.send_signal(signal.SIGTERM)
        return _gone_after(alive)
    app.end_by("window" if path.endswith("window-closed") else path.removeprefix("closed-pipe+"))
    return _gone_after(alive)


def tmux_run(path: str, source: str, server: SlowServer, work: Path, size: str) -> Run:
    """One run in a tmux window, closed by `tmux kill-window` (or `kill-session`)."""
    data, tmp = work / "data", work / "tmp"
    data.mkdir()
    tmp.mkdir()
    (data / "config.toml").touch()
    session = f"exit-paths-{os.getpid()}-{work.name}"
    program, args, extra = _launch(source, server.url, work)
    env = {
        **extra,
        "LING_CHAT_DATA_DIR": str(data),
        "LING_CHAT_CONFIG": str(data / "config.toml"),
        "TMPDIR": str(tmp),
    }
    command = " ".join(
        [
            "env",
            *(f"{k}={shlex.quote(v)}" for k, v in env.items()),
            *map(shlex.quote, [*program, *args]),
        ]
    )
    if path == "tmux-kill-window+closed-pipe":
        command += " | head -c0"
    columns, rows = size.split("x")
    tmux = ["tmux", "-L", session]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", session, "-x", columns, "-y", rows, command],
        check=True,
        cwd=ROOT,
    )
    try:
        shell = int(_tmux(tmux, "display", "-p", "-t", session, "#{pane_pid}"))
        pid = _app_pid(shell, program[-1])
        chat = lambda: "Ask Ling" in _tmux(tmux, "capture-pane", "-p", "-t", session)  # noqa: E731
        _wait_for_the_chat(chat, lambda: _running(pid))
        time.sleep(0.3)
        screen = lambda: _tmux(tmux, "capture-pane", "-p", "-t", session)  # noqa: E731
        _send(lambda keys: _tmux_keys(tmux, session, keys), screen, server, source)
        children = _descendants(pid)
        kill = "kill-session" if path == "tmux-kill-session" else "kill-window"
        subprocess.run([*tmux, kill, "-t", session], check=False)
        gone = _gone_after(lambda: psutil.pid_exists(pid) and _running(pid))
    finally:
        subprocess.run([*tmux, "kill-server"], check=False, stderr=subprocess.DEVNULL)
    if gone is None:
        os.kill(pid, signal.SIGKILL)
    reply = "n/a" if source == "replay" else _stored_reply(data)
    left = sorted(p.name for p in tmp.iterdir())
    return Run(path, source, gone, None, reply, left, _alive(children))


def _tmux(tmux: list[str], *args: str) -> str:
    return subprocess.run([*tmux, *args], capture_output=True, text=True, check=True).stdout


def _tmux_keys(tmux: list[str], session: str, keys: bytes) -> None:
    key = "C-s" if keys == b"\x13" else keys.decode()
    subprocess.run([*tmux, "send-keys", "-t", session, *(["-l"] if key != "C-s" else []), key])


def _app_pid(shell: int, marker: str) -> int:
    """The app's pid: the pane's process or its descendant whose command holds `marker`
    (`app` of `-m app`, the double's script) before its arguments."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for proc in [psutil.Process(shell), *_descendants(shell)]:
            if marker in proc.cmdline()[1:3]:
                return proc.pid
        time.sleep(0.05)
    raise AssertionError("the app did not start in tmux")


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


PTY_PATHS = (
    "SIGTERM",
    "SIGHUP",
    "SIGINT",
    "window-closed",
    "hung-terminal+SIGTERM",
    "closed-pipe+SIGTERM",
    "closed-pipe+window-closed",
    "stdin-devnull",
)
TMUX_PATHS = ("tmux-kill-window", "tmux-kill-session", "tmux-kill-window+closed-pipe")


def table(runs: list[Run]) -> str:
    """One row per source and path: how many runs, how many ended within 2 s, the times,
    the stored replies' statuses, temporary folders and child processes left."""
    lines = [
        f"{'source':13} {'path':28} {'runs':>4} {'<=2 s':>5} {'median s':>8} {'max s':>6} "
        f"{'exit':>9}  {'reply':13} {'temp left':>9} {'children':>8}"
    ]
    keys = dict.fromkeys((r.source, r.path) for r in runs)
    for source, path in keys:
        rows = [r for r in runs if (r.source, r.path) == (source, path)]
        times = [r.gone_s for r in rows if r.gone_s is not None]
        within = sum(1 for t in times if t <= GONE_WITHIN_S)
        statuses = ",".join(sorted({str(r.status) for r in rows if r.status is not None})) or "-"
        replies = ",".join(f"{s} {n}" for s, n in _counts(r.reply for r in rows))
        temp = sum(1 for r in rows if r.temp_left)
        children = sum(len(r.children_left) for r in rows)
        median = f"{statistics.median(times):.2f}" if times else "-"
        worst = f"{max(times):.2f}" if len(times) == len(rows) else "hung"
        lines.append(
            f"{source:13} {path:28} {len(rows):>4} {within:>5} {median:>8} {worst:>6} "
            f"{statuses:>9}  {replies:13} {temp:>9} {children:>8}"
        )
    return "\n".join(lines)


def _machine() -> str:
    """The machine the runs took: its CPU, cores, memory and load when they started."""
    models = [
        line.split(":", 1)[1].strip()
        for line in Path("/proc/cpuinfo").read_text().splitlines()
        if line.startswith("model name")
    ]
    memory = psutil.virtual_memory().total / 2**30
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"machine: {models[0] if models else platform.machine()}, {os.cpu_count()} cores, "
        f"{memory:.0f} GiB, load average {load} at the start; Python {platform.python_version()}"
    )


def _counts(values: object) -> list[tuple[str, int]]:
    found: dict[str, int] = {}
    for value in values:  # type: ignore[attr-defined]
        found[value] = found.get(value, 0) + 1
    return sorted(found.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--paths", nargs="*", default=[*PTY_PATHS, *TMUX_PATHS])
    parser.add_argument(
        "--source", nargs="*", default=["server"], choices=["server", "replay", "engine-double"]
    )
    parser.add_argument("--size", default="100x30", help="the tmux window's size")
    parser.add_argument("--json", type=Path, help="write every run and the table here")
    parser.add_argument(
        "--from",
        dest="saved",
        nargs="*",
        type=Path,
        help="run nothing: the table of the runs these files hold (the JSON lines printed)",
    )
    args = parser.parse_args(argv)
    if args.saved:
        saved = [json.loads(line) for f in args.saved for line in f.read_text().splitlines()]
        print(table([Run(**run) for run in saved if isinstance(run, dict)]))
        return 0
    runs: list[Run] = []
    machine = _machine()
    with SlowServer(step_s=0.05) as server, tempfile.TemporaryDirectory() as scratch:
        for source in args.source:
            for path in args.paths:
                for index in range(args.runs):
                    work = Path(scratch) / f"{source}-{path}-{index}"
                    work.mkdir()
                    if path in TMUX_PATHS:
                        run = tmux_run(path, source, server, work, args.size)
                    else:
                        run = pty_run(path, source, server, work)
                    runs.append(run)
                    print(json.dumps(asdict(run)), file=sys.stderr, flush=True)
    shown = f"{machine}\n{table(runs)}"
    print(shown)
    if args.json:
        record = {"table": shown.splitlines(), "runs": [asdict(r) for r in runs]}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 1 if any(map(failed, runs)) else 0


def failed(run: Run) -> bool:
    """Not gone within 2 s, a reply kept otherwise than stopped, or something left behind."""
    slow = run.gone_s is None or run.gone_s > GONE_WITHIN_S
    return slow or run.reply not in ("stopped", "n/a") or bool(run.temp_left or run.children_left)


if __name__ == "__main__":
    sys.exit(main())
