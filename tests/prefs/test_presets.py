"""Presets in a real `presets.json`: saved and read back by a fresh reader (a restart), the
default kept, a bad file one line naming it and left as it was, and the file private."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from app.core.chat import Sampling, Thinking
from app.core.errors import ConfigError, ExportError
from app.prefs import config_dir
from app.prefs.presets import Preset, PresetFile, Presets

TERSE = Preset("terse", "Answer briefly.", Sampling(temperature=0.2), Thinking(False, None))
LONG = Preset("long", "Explain.", Sampling(max_new_tokens=8192), Thinking(True, 4096))


def test_presets_survive_a_restart_with_their_default(tmp_path: Path) -> None:
    folder = tmp_path / "config"
    PresetFile(folder).save(Presets().saved(TERSE, default=True).saved(LONG, default=False))
    again = PresetFile(folder).load()
    assert again == Presets((TERSE, LONG), "terse")
    assert stat.S_IMODE((folder / "presets.json").stat().st_mode) == 0o600
    assert json.loads((folder / "presets.json").read_text())["default"] == "terse"


def test_saving_a_name_again_replaces_that_preset_and_may_change_the_default() -> None:
    presets = Presets().saved(TERSE, default=True).saved(LONG, default=False)
    changed = Preset("terse", "Shorter.", Sampling(), Thinking())
    assert presets.saved(changed, default=False) == Presets((LONG, changed), "terse")
    assert presets.saved(changed, default=True).default == "terse"
    assert presets.saved(LONG, default=True).default == "long"


def test_no_file_is_no_presets(tmp_path: Path) -> None:
    assert PresetFile(tmp_path).load() == Presets()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "the presets do not read: the file: Invalid JSON"),
        ('{"presets": [{"name": ""}]}', "presets.0.name: String should have at least 1"),
        (
            '{"presets": [{"name": "x", "sampling": {"temperature": 9}}]}',
            "presets.0.sampling.temperature: Input should be less than or equal to 2",
        ),
        ('{"default": "gone", "presets": []}', "the default 'gone' is none of them"),
        ('{"presets": [{"name": "a"}, {"name": "a"}]}', "two share a name"),
        ('{"colour": "red"}', "colour: Extra inputs are not permitted"),
    ],
)
def test_a_bad_file_is_one_line_naming_it_and_is_left_as_it_was(
    tmp_path: Path, text: str, why: str
) -> None:
    path = tmp_path / "presets.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        PresetFile(tmp_path).load()
    message = str(error.value)
    assert message.startswith(f"{path}: ")
    assert why in message
    assert "\n" not in message
    assert path.read_text(encoding="utf-8") == text


def test_a_link_in_the_presets_place_is_never_written_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    target.write_text("{}", encoding="utf-8")
    (tmp_path / "presets.json").symlink_to(target)
    with pytest.raises(ExportError, match="symbolic link"):
        PresetFile(tmp_path).save(Presets().saved(TERSE, default=False))
    assert target.read_text(encoding="utf-8") == "{}"


def test_the_presets_live_beside_the_config_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LING_CHAT_CONFIG", str(tmp_path / "conf" / "config.toml"))
    assert PresetFile(config_dir()).path == tmp_path / "conf" / "presets.json"
