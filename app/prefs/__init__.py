"""Files the user keeps beside the config file: presets and the remembered theme."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_config_path

from app.settings import APP_NAME, config_file


def config_dir() -> Path:
    """The config file's folder (the default one when `LING_CHAT_CONFIG` is /dev/null)."""
    path = config_file()
    return user_config_path(APP_NAME) if path == Path(os.devnull) else path.parent
