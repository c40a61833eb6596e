"""Where a resident engine is found: its state file, key and lock, private to the user.

A resident engine is `ling-chat serve` started detached by the chat (`keep_engine`). It
listens on 127.0.0.1 with a generated API key; the key file (0600) and the state file sit
in the user's runtime folder (0700, refused when another user owns it), so only the user
can read the key, and without it the server answers nothing but `/health`.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import stat
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from platformdirs import user_runtime_path

from app.backend.engine.config import EngineConfig
from app.core.errors import ConfigError
from app.files import private_dir, write_atomic

RUNTIME_DIR_ENV = "LING_CHAT_RUNTIME_DIR"
"""Moves the runtime folder (tests, or a system without one)."""
STATE_NAME = "engine.json"
KEY_NAME = "engine.key"
LOCK_NAME = "engine.lock"
"""Held (flock) by the chat attached to the engine: one window at a time, and not idle."""


def runtime_path() -> Path:
    """Where the user's runtime folder for ling-chat is (it may not exist). Without
    XDG_RUNTIME_DIR (a session without a login manager), platformdirs' /tmp/runtime-UID, whose
    owner and mode `runtime_dir` checks, without platformdirs' warning."""
    if override := os.environ.get(RUNTIME_DIR_ENV):
        return Path(override)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return user_runtime_path("ling-chat")


def runtime_dir() -> Path:
    """The user's runtime folder for ling-chat, created 0700.

    Raises:
        ConfigError: it belongs to another user or is open to others and cannot be closed.
    """
    folder = runtime_path()
    try:
        private_dir(folder)
        info = folder.stat()
        if info.st_uid != os.getuid():
            raise ConfigError(f"{folder} belongs to another user: ling-chat keeps no engine there")
        if stat.S_IMODE(info.st_mode) != 0o700:
            folder.chmod(0o700)
    except OSError as exc:
        raise ConfigError(f"cannot use the runtime folder {folder}: {exc.strerror}") from exc
    return folder


@dataclass(frozen=True, slots=True)
class ResidentState:
    """What the state file says about a resident engine."""

    pid: int
    url: str
    """http://127.0.0.1:PORT: loopback only."""
    key_file: str
    model_path: str
    profile: str
    settings_hash: str
    """`settings_hash` of its engine settings: only an equal hash attaches."""
    settings: Mapping[str, Any]
    """The settings hashed, to name what differs."""
    idle_s: float
    log_file: str
    version: str
    started_at: float
    ready: bool = False
    """True once the server proved itself; before that, it is still loading."""
    active: bool = False
    """A request is in flight or a chat window is attached."""
    active_at: float | None = None
    """When it was last seen active (wall clock): idle since then."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ResidentState:
        """Raises ValueError for anything but a state file's JSON."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not an object")
        try:
            state = cls(**data)
        except TypeError as exc:
            raise ValueError(str(exc)) from exc
        if not (isinstance(state.pid, int) and state.pid > 0 and isinstance(state.url, str)):
            raise ValueError("no pid or url")
        return state

    def key(self) -> str:
        """The API key (OSError when its file is gone)."""
        return Path(self.key_file).read_text(encoding="utf-8").strip()


SERVE_ONLY = ("host", "port", "api_key", "tp_size")
"""Server arguments of how it is reached, not of what it runs."""


def engine_settings(config: EngineConfig) -> dict[str, Any]:
    """The settings that decide whether a resident engine may be reused (JSON-plain): the
    same checkpoint, profile, memory share, draft and SGLang arguments."""
    local = Path(config.model_path).expanduser()
    chosen = {
        "model_path": str(local.resolve()) if local.is_dir() else config.model_path,
        "profile": config.profile,
        "mem_fraction": config.mem_fraction,
        "context_length": config.context_length,
        "draft_model": config.draft_model,
        "sglang_args": {k: v for k, v in config.overrides.items() if k not in SERVE_ONLY},
    }
    return json.loads(json.dumps(chosen, sort_keys=True, default=str))


def settings_hash(settings: Mapping[str, Any]) -> str:
    text = json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """`name: theirs -> mine` for each setting that differs."""
    names = sorted(set(mine) | set(theirs))
    return [
        f"{n}: {theirs.get(n)!r} -> {mine.get(n)!r}" for n in names if mine.get(n) != theirs.get(n)
    ]


def state_path(folder: Path) -> Path:
    return folder / STATE_NAME


def read_state(folder: Path) -> ResidentState | None:
    """The state file's record; None when there is none or it cannot be read as one."""
    try:
        return ResidentState.from_json(state_path(folder).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError):
        return None


def write_state(folder: Path, state: ResidentState) -> None:
    """Replace the state file whole (0600).

    Raises:
        ExportError: the file cannot be written.
    """
    write_atomic(state_path(folder), [state.to_json()], replace=True)


def remove_state(folder: Path, pid: int) -> None:
    """Remove the state file and key if they are still `pid`'s (a newer engine's stay)."""
    state = read_state(folder)
    if state is None or state.pid == pid:
        state_path(folder).unlink(missing_ok=True)
        (folder / KEY_NAME).unlink(missing_ok=True)


def new_key(folder: Path) -> Path:
    """A fresh random API key in `folder`'s key file, created 0600."""
    path = folder / KEY_NAME
    write_atomic(path, [secrets.token_urlsafe(32) + "\n"], replace=True)
    return path
