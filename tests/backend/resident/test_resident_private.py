"""The resident engine is private to its user: a 0700 runtime folder, a 0600 key and state
file, and without the key the engine answers nothing but `/health`. Another user is played
by a subprocess that drops to `nobody` (needs root: skipped otherwise, with the reason)."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from app.backend.resident.state import new_key, read_state, runtime_dir
from app.core.errors import ConfigError
from tests.support import resident
from tests.support.resident import plan_for

world = resident.world
AS_ROOT = pytest.mark.skipif(
    os.getuid() != 0, reason="playing another local user needs root (setuid to nobody)"
)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_runtime_folder_is_0700_and_its_files_0600_whatever_the_umask(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)  # opened by someone: closed again
    monkeypatch.setenv("LING_CHAT_RUNTIME_DIR", str(folder))
    old = os.umask(0)
    try:
        assert runtime_dir() == folder
        key = new_key(folder)
    finally:
        os.umask(old)
    assert mode(folder) == 0o700 and mode(key) == 0o600
    assert len(key.read_text().strip()) >= 40, "a generated key, 32 random bytes"


def test_the_state_file_and_key_of_a_running_engine_are_the_users_alone(world: Path) -> None:
    import asyncio

    from app import launch

    backend = launch.resident_backend(plan_for(world))
    asyncio.run(backend.shutdown())
    state = None
    while state is None or not state.ready:
        state = read_state(world / "run")
    assert mode(world / "run") == 0o700
    for name in ("engine.json", "engine.key", "engine.lock"):
        assert mode(world / "run" / name) == 0o600, name
    assert state.url.startswith("http://127.0.0.1:"), "loopback only"


@AS_ROOT
def test_a_runtime_folder_another_user_owns_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    nobody = pwd.getpwnam("nobody")
    os.chown(folder, nobody.pw_uid, nobody.pw_gid)
    monkeypatch.setenv("LING_CHAT_RUNTIME_DIR", str(folder))
    with pytest.raises(ConfigError, match="belongs to another user: ling-chat keeps no engine"):
        runtime_dir()


OTHER_USER = """
# Every module imported before turning into nobody, to whom root's Python is closed.
import encodings.idna, json, os, sys, urllib.error, urllib.request
os.setgid({gid}); os.setuid({uid})
for path in sys.argv[1:3]:
    try:
        open(path).read()
        print("READ", path)
    except PermissionError:
        print("refused", os.path.basename(path))
body = {{"messages": [{{"role": "user", "content": "hi"}}], "stream": True,
        "max_completion_tokens": 8, "rid": "other"}}
request = urllib.request.Request(sys.argv[3] + "/v1/chat/completions",
                                 data=json.dumps(body).encode(), method="POST")
try:
    status = urllib.request.urlopen(request, timeout=10).status
except urllib.error.HTTPError as error:
    status = error.code
print("chat without the key: HTTP", status)
"""


@AS_ROOT
def test_another_local_user_cannot_read_the_key_nor_chat(world: Path) -> None:
    import asyncio

    from app import launch

    # Every folder above the runtime folder is open to others: only its own modes guard it.
    top = Path(tempfile.gettempdir())
    for folder in (world, *world.parents):
        if folder == top or top not in folder.parents:
            break
        folder.chmod(folder.stat().st_mode | 0o005)
    backend = launch.resident_backend(plan_for(world))
    asyncio.run(backend.shutdown())
    state = read_state(world / "run")
    while state is None or not state.ready:
        state = read_state(world / "run")
    nobody = pwd.getpwnam("nobody")
    code = OTHER_USER.format(uid=nobody.pw_uid, gid=nobody.pw_gid)
    done = subprocess.run(
        [sys.executable, "-c", code, state.key_file, str(world / "run" / "engine.json"), state.url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == [
        "refused engine.key",
        "refused engine.json",
        "chat without the key: HTTP 401",
    ], done.stderr
