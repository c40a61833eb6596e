"""Settings: one pydantic-settings model read from config.toml, LING_CHAT_* and CLI flags.

Precedence, highest first: CLI flags (passed as keyword arguments), environment
variables (`LING_CHAT_MODEL_PATH`, `LING_CHAT_SAMPLING__TEMPERATURE`, ...; an empty one is
unset), the TOML
file in the platformdirs config dir (`LING_CHAT_CONFIG` points elsewhere), defaults.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_config_path, user_data_path
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    SettingsError,
    TomlConfigSettingsSource,
)

from app.core.chat import Sampling
from app.core.duration import parse_duration
from app.core.errors import ConfigError
from app.core.server_wait import DEFAULT_SERVER_WAIT_S
from app.levers.checks.accept_length import DEFAULT_MIN as DEFAULT_MIN_ACCEPT_LENGTH
from app.levers.draft.dspark import DRAFT as DSPARK_DRAFT
from app.levers.profiles import DEFAULT_MEM_FRACTION, DEFAULT_PROFILE, PROFILES, USER_PROFILES

APP_NAME = "ling-chat"
DEFAULT_MODEL = "inclusionAI/Ling-3.0-flash-fp4"


def config_file() -> Path:
    """Where the TOML config lives (`LING_CHAT_CONFIG` overrides)."""
    override = os.environ.get("LING_CHAT_CONFIG")
    return Path(override).expanduser() if override else user_config_path(APP_NAME) / "config.toml"


_SAMPLING = Sampling()
"""Ling-3.0-flash's recommended sampling, defined once in app.core.chat."""


class SamplingSettings(BaseModel):
    """Default sampling for new conversations (Ling-3.0-flash's recommended values)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    temperature: float = Field(default=_SAMPLING.temperature, ge=0.0, le=2.0)
    top_p: float = Field(default=_SAMPLING.top_p, gt=0.0, le=1.0)
    top_k: int = Field(default=_SAMPLING.top_k, ge=-1)
    """-1 disables top-k."""
    max_new_tokens: int = Field(default=_SAMPLING.max_new_tokens, ge=1, le=131072)

    def to_sampling(self) -> Sampling:
        """The plain dataclass the backends take."""
        return Sampling(**self.model_dump())


class Settings(BaseSettings):
    """Everything a user can configure."""

    model_config = SettingsConfigDict(
        env_prefix="LING_CHAT_",
        env_nested_delimiter="__",
        env_ignore_empty=True,  # `LING_CHAT_DATA_DIR=` is unset, not the current folder
        extra="forbid",
        frozen=True,
    )

    model_path: str = DEFAULT_MODEL
    """Local checkpoint directory or Hugging Face id of the MXFP4 checkpoint."""
    profile: str = DEFAULT_PROFILE
    """Which optimizations the engine turns on: a name in `PROFILES`."""
    dspark_draft: str = DSPARK_DRAFT
    """Local folder or Hugging Face id of the `dspark` profile's draft model."""
    sampling: SamplingSettings = SamplingSettings()
    mem_fraction: float = Field(default=DEFAULT_MEM_FRACTION, gt=0.05, lt=0.98)
    """Share of GPU memory SGLang may take; 0.65 leaves room on the Spark's unified memory."""
    data_dir: Path = Field(default_factory=lambda: user_data_path(APP_NAME))
    """Where history.db, logs and traces live."""
    min_accept_length: float = Field(default=DEFAULT_MIN_ACCEPT_LENGTH, ge=1.0, le=4.0)
    """The warm-up accept length below which the proof refuses to start."""
    server_wait: float = Field(default=DEFAULT_SERVER_WAIT_S, ge=1.0, le=3600.0)
    """With --server: the longest ling-chat waits for one answer, a reply's first token or
    its next token, before it gives up with one line."""
    keep_engine: str = "0"
    """How long the engine stays loaded after the chat quits and nothing uses it (`30m`,
    `2h`); `0` stops it with the chat. While kept, it holds its GPU memory."""
    reply_notice: Literal["off", "bell", "osc9"] = "off"
    """How a reply that ends while the terminal is not focused is announced: `bell` rings the
    terminal's bell, `osc9` sends a desktop notification (OSC 9: iTerm2, WezTerm, kitty,
    Windows Terminal, foot, ...), `off` nothing."""
    keymap: dict[str, str] = Field(default_factory=dict)
    """Binding id -> keys, e.g. {"stop_reply" = "ctrl+x"}; ids are listed in the help screen."""

    @field_validator("profile")
    @classmethod
    def _known_profile(cls, value: str) -> str:
        if value not in PROFILES:
            *rest, last = (repr(name) for name in USER_PROFILES)
            names = f"{', '.join(rest)} or {last}"
            raise PydanticCustomError("profile", "Input should be {names}", {"names": names})
        return value

    @field_validator("keep_engine", mode="before")
    @classmethod
    def _duration(cls, value: object) -> object:
        text = (
            str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value
        )
        if isinstance(text, str):
            try:
                parse_duration(text)
            except ValueError as exc:
                raise PydanticCustomError("keep_engine", "{why}", {"why": str(exc)}) from None
        return text

    @field_validator("data_dir", mode="before")
    @classmethod
    def _named_data_dir(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise PydanticCustomError("data_dir", "Input should name a folder, not be empty")
        return value

    @field_validator("data_dir")
    @classmethod
    def _expand_data_dir(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("model_path", "dspark_draft")
    @classmethod
    def _expand_model_path(cls, value: str) -> str:
        return str(Path(value).expanduser()) if value.startswith("~") else value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (
            init_settings,
            env_settings,
            _ConfigFile(settings_cls, toml_file=config_file()),
        )

    @property
    def db_path(self) -> Path:
        """The SQLite history file."""
        return self.data_dir / "history.db"

    @property
    def keep_engine_s(self) -> float:
        """`keep_engine` in seconds (0: the engine lives and dies with the chat)."""
        return parse_duration(self.keep_engine)

    @property
    def log_dir(self) -> Path:
        """Where SGLang's and ling-chat's logs go."""
        return self.data_dir / "logs"


class _ConfigFile(TomlConfigSettingsSource):
    """The TOML file; a relative `data_dir` in it is relative to the file's folder."""

    def _read_file(self, file_path: Any) -> dict[str, Any]:
        data = super()._read_file(file_path)
        data_dir = data.get("data_dir")
        if isinstance(data_dir, str) and not data_dir.startswith("~"):
            data["data_dir"] = str(Path(file_path).parent / data_dir)  # absolute stays
        return data


def source_of(loc: list[str]) -> str:
    """Where the setting at `loc` came from: the variable that set it, else the file."""
    return _env_source(loc) or str(config_file())


def load_settings(**overrides: Any) -> Settings:
    """Build Settings from all sources; a bad file or value raises a one-line ConfigError.

    Args:
        overrides: values from CLI flags; None values are ignored.
    """
    path = config_file()
    _check_given_config(path)
    given = {key: value for key, value in overrides.items() if value is not None}
    try:
        return Settings(**given)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from exc
    except OSError as exc:  # only the TOML file is read from disk
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from exc
    except SettingsError as exc:  # an environment variable that does not parse
        raise ConfigError(f"{exc}: {exc.__cause__}" if exc.__cause__ else str(exc)) from exc
    except ValidationError as exc:
        raise ConfigError(_describe(exc, path, flags=set(given))) from exc


def _check_given_config(path: Path) -> None:
    """A LING_CHAT_CONFIG that names no regular file is an error, not silently ignored.

    /dev/null, the usual way to say "no config file", is allowed.
    """
    if not os.environ.get("LING_CHAT_CONFIG") or path.is_file() or path == Path(os.devnull):
        return
    problem = "no such file" if not path.exists() else "not a regular file"
    raise ConfigError(f"{path}: {problem} (from LING_CHAT_CONFIG)")


def _describe(exc: ValidationError, path: Path, flags: set[str]) -> str:
    """The first validation problem as one line naming where it came from and what is allowed."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    where = ".".join(loc) or "settings"
    if where in flags:
        source = "--" + where.replace("_", "-").replace("model-path", "model")
    else:
        source = _env_source(loc) or str(path)
    allowed = error["msg"]
    if error["type"] == "extra_forbidden":
        table: type[BaseModel] = Settings
        for part in loc[:-1]:
            field = table.model_fields.get(part)
            inner = field.annotation if field else None
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                table = inner
        allowed = f"unknown setting; allowed: {', '.join(sorted(table.model_fields))}"
    return f"{source}: {where} = {error.get('input')!r} is invalid: {allowed}"


def _env_source(loc: list[str]) -> str | None:
    """The variable that set the field at `loc`: LING_CHAT_A__B, or LING_CHAT_A holding B."""
    for depth in range(len(loc), 0, -1):
        name = "LING_CHAT_" + "__".join(loc[:depth]).upper()
        if name in os.environ and _holds(os.environ[name], loc[depth:]):
            return name
    return None


def _holds(value: str, rest: list[str]) -> bool:
    """Whether the JSON in `value` has the nested key path `rest` (trivially, when empty)."""
    if not rest:
        return True
    try:
        node = json.loads(value)
    except json.JSONDecodeError:
        return False
    for key in rest:
        if not isinstance(node, dict) or key not in node:
            return False
        node = node[key]
    return True
