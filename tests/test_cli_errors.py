"""Unreadable config and unwritable stdout through the real CLI: one line, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from app.settings import load_settings
from app.storage import ChatStore
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parent.parent


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `ling-chat` printed to stderr, without the `ling-chat: error: ` prefix."""
    err = capsys.readouterr().err
    assert err.startswith("ling-chat: error: ") and err.count("\n") == 1, err
    return err.removeprefix("ling-chat: error: ").rstrip("\n")


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_a_config_file_that_cannot_be_read_is_one_line(monkeypatch, capsys):
    """/proc/self/mem is a regular file that fails to read (EIO), even for root."""
    monkeypatch.setenv("LING_CHAT_CONFIG", "/proc/self/mem")
    assert main(["history"]) == 1
    assert error_line(capsys) == "/proc/self/mem: cannot read (Input/output error)"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_a_config_file_without_read_permission_is_one_line(capsys):
    path = Path(os.environ["LING_CHAT_CONFIG"])
    path.write_text('profile = "stack"\n')
    path.chmod(0)
    assert main(["history"]) == 1
    assert error_line(capsys) == f"{path}: cannot read (Permission denied)"


def test_a_config_path_that_is_a_directory_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("LING_CHAT_CONFIG", str(tmp_path))
    assert main(["history"]) == 1
    assert error_line(capsys) == f"{tmp_path}: not a regular file (from LING_CHAT_CONFIG)"


def test_dev_null_as_the_config_means_the_defaults(monkeypatch, capsys):
    monkeypatch.setenv("LING_CHAT_CONFIG", os.devnull)
    assert main(["history"]) == 0
    assert capsys.readouterr().err == ""


def test_a_config_path_that_names_no_file_is_one_line(monkeypatch, capsys, tmp_path):
    missing = tmp_path / "typo.toml"  # without this, the defaults were used in silence
    monkeypatch.setenv("LING_CHAT_CONFIG", str(missing))
    assert main(["history"]) == 1
    assert error_line(capsys) == f"{missing}: no such file (from LING_CHAT_CONFIG)"


def test_a_bad_value_in_a_whole_table_variable_names_that_variable(monkeypatch, capsys):
    monkeypatch.setenv("LING_CHAT_SAMPLING", '{"temperature": 9}')
    assert main(["history"]) == 1
    assert error_line(capsys).startswith("LING_CHAT_SAMPLING: sampling.temperature = 9 is invalid")


def test_an_unknown_key_in_a_table_variable_names_that_variable(monkeypatch, capsys):
    monkeypatch.setenv("LING_CHAT_SAMPLING", '{"colour": 1}')
    assert main(["history"]) == 1
    assert error_line(capsys).startswith("LING_CHAT_SAMPLING: sampling.colour = 1 is invalid")


@pytest.fixture
def long_history() -> None:
    """Enough conversations that `history` and `export` write many lines."""
    with ChatStore.open(load_settings().db_path) as store:
        for n in range(200):
            store.create_conversation(f"conversation {n}")


def ling_chat(*argv: str, stdout: object) -> subprocess.CompletedProcess[bytes]:
    """`python -m app ARGV` with LING_CHAT_* from the isolated_dirs fixture."""
    return subprocess.run(
        [sys.executable, "-m", "app", *argv],
        stdout=stdout,  # type: ignore[arg-type]
        stderr=subprocess.PIPE,
        cwd=ROOT,
        timeout=scaled(60),
        check=False,
    )


@pytest.mark.usefixtures("long_history")
def test_history_into_a_closed_pipe_ends_quietly(end_to_end: None):
    """`ling-chat history | head -1`: the reader leaving early is no error."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "history"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    proc.stdout.close()  # before ling-chat has written anything
    _, err = proc.communicate(timeout=scaled(60))
    assert (proc.returncode, err.decode()) == (0, "")


@pytest.mark.usefixtures("long_history")
@pytest.mark.parametrize("argv", [["history"], ["export", "-o", "-"]])
def test_a_full_stdout_is_one_line(end_to_end: None, argv: list[str]):
    with open("/dev/full", "w") as full:
        proc = ling_chat(*argv, stdout=full)
    assert proc.returncode == 1
    assert proc.stderr.decode() == (
        "ling-chat: error: cannot write to standard output: No space left on device\n"
    )


@pytest.mark.usefixtures("keys_from_a_terminal")
def test_a_locked_database_is_reported_before_the_model_starts(
    end_to_end: None, monkeypatch, capsys, tmp_path
):
    from app.ui import LingChatApp
    from tests.support.storage import write_locked

    def model_started(*args: object, **kwargs: object) -> None:
        raise AssertionError("the app (and the model) started before the database was checked")

    monkeypatch.setattr(LingChatApp, "run_async", model_started)
    db_path = load_settings(data_dir=str(tmp_path)).db_path
    ChatStore.open(db_path).close()  # an existing, migrated history: opening it writes nothing
    with write_locked(db_path):
        # A remote chat: nothing is contacted before the app starts (a replay plays into a
        # throwaway history, so it would not meet the lock).
        assert main(["--server", "http://127.0.0.1:9", "--data-dir", str(tmp_path)]) == 1
    # The chat waits for a lock only briefly: its UI stands still while it waits.
    assert error_line(capsys).startswith(f"{db_path} is locked by another process (waited 0.5 s)")


def test_an_unexpected_error_is_one_line_naming_the_log_with_its_traceback(
    monkeypatch, capsys, isolated_dirs
):
    from app.commands import history

    def broken_run(args: object) -> int:
        secret = "a local variable that must not reach the terminal"
        raise RuntimeError(f"a bug\non two lines ({len(secret)})")

    monkeypatch.setattr(history, "run", broken_run)
    assert main(["history"]) == 1
    log = isolated_dirs / "data" / "logs" / "ling-chat.log"
    assert capsys.readouterr().err == (
        "ling-chat: unexpected error (RuntimeError: a bug on two lines (49)); "
        f"the details are in {log}\n"
    )
    assert 'raise RuntimeError(f"a bug\\non two lines' in log.read_text()
    assert (log.stat().st_mode & 0o777, log.parent.stat().st_mode & 0o777) == (0o600, 0o700)


HEAVY = ("pydantic", "pydantic_settings", "sqlite_utils", "textual", "httpx", "rich", "asyncio")
"""Packages `ling-chat --help` has no use for: together they take seconds to import."""


def test_help_imports_no_heavy_package_and_lists_every_command(end_to_end: None) -> None:
    code = (
        "import sys\nfrom app.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n"
        f"    pass\nprint(sorted(name for name in {HEAVY!r} if name in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=scaled(60)
    )
    assert done.stdout.splitlines()[-1] == "[]"
    for command in ("doctor", "history", "export", "import", "bench", "serve", "prepare"):
        assert f"    {command} " in done.stdout
    assert "List past conversations" in done.stdout


@pytest.mark.parametrize("argv", [["bench", "--help"], ["history", "show", "--help"]])
def test_a_command_s_help_lists_its_own_arguments(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ling-chat {' '.join(argv[:-1])}")
    assert ("--profiles" if argv[0] == "bench" else "ID") in out
