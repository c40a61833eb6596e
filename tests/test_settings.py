"""Settings: file < environment < flags, and one clear line for anything broken."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.backend.engine.config import EngineConfig
from app.backend.remote.remote import RemoteBackend
from app.core.errors import ConfigError
from app.levers.profiles import PROFILES
from app.settings import load_settings


def config_file() -> Path:
    return Path(os.environ["LING_CHAT_CONFIG"])


def test_defaults_are_ling_3_flash_recommended_values():
    settings = load_settings()
    assert settings.model_path == "inclusionAI/Ling-3.0-flash-fp4"
    assert settings.profile == "stack"
    sampling = settings.sampling.to_sampling()
    assert (sampling.temperature, sampling.top_p, sampling.top_k) == (0.6, 0.95, 29)
    assert settings.mem_fraction == 0.65


def test_the_settings_engine_and_remote_client_share_each_default():
    settings, engine = load_settings(), EngineConfig(model_path="m")
    remote = RemoteBackend("http://127.0.0.1:1")
    assert (settings.profile, settings.mem_fraction, settings.min_accept_length) == (
        engine.profile,
        engine.mem_fraction,
        engine.min_accept_length,
    )
    assert (remote.profile, remote.min_accept_length) == (engine.profile, engine.min_accept_length)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_engine_profile_is_a_setting(profile):
    assert load_settings(profile=profile).profile == profile


def test_flags_beat_environment_beat_file(monkeypatch):
    config_file().write_text(
        'model_path = "/from/file"\nprofile = "humming"\n[sampling]\ntemperature = 0.3\n'
    )
    monkeypatch.setenv("LING_CHAT_PROFILE", "baseline")
    monkeypatch.setenv("LING_CHAT_SAMPLING__TOP_K", "5")
    settings = load_settings(model_path="/from/flag", profile=None)
    assert settings.model_path == "/from/flag"
    assert settings.profile == "baseline"
    assert (settings.sampling.temperature, settings.sampling.top_k) == (0.3, 5)


def test_malformed_toml_names_the_file_and_leaves_it_alone():
    config_file().write_text("[sampling\n")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    message = str(exc.value)
    assert str(config_file()) in message and "not valid TOML" in message
    assert "\n" not in message
    assert config_file().read_text() == "[sampling\n"


@pytest.mark.parametrize(
    ("toml", "field", "allowed"),
    [
        ('profile = "turbo"', "profile", "Input should be 'stack', 'dspark' or 'baseline'"),
        ("[sampling]\ntemperature = 9", "sampling.temperature", "less than or equal to 2"),
        ("mem_fraction = 0.99", "mem_fraction", "less than 0.98"),
        ("colour = 1", "colour", "allowed: data_dir"),
        (
            "[sampling]\ntemprature = 0.5",
            "sampling.temprature",
            "unknown setting; allowed: max_new_tokens, temperature, top_k, top_p",
        ),
    ],
)
def test_a_bad_value_names_file_field_and_what_is_allowed(toml, field, allowed):
    config_file().write_text(toml + "\n")
    with pytest.raises(ConfigError) as exc:
        load_settings()
    message = str(exc.value)
    assert message.startswith(f"{config_file()}: {field} = ")
    assert allowed in message


def test_an_unknown_profile_is_offered_the_user_profiles_and_a_rig_is_still_taken():
    config_file().write_text('profile = "turbo"\n')
    with pytest.raises(ConfigError) as exc:
        load_settings()
    assert "humming" not in str(exc.value) and "bf16" not in str(exc.value)
    config_file().write_text('profile = "stack+bf16-router"\n')
    assert load_settings().profile == "stack+bf16-router"


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("LING_CHAT_MEM_FRACTION", "2")
    with pytest.raises(ConfigError, match=r"^LING_CHAT_MEM_FRACTION: mem_fraction = '2'"):
        load_settings()


def test_data_paths_follow_the_data_dir(tmp_path):
    settings = load_settings(data_dir=str(tmp_path))
    assert settings.db_path == tmp_path / "history.db"
    assert settings.log_dir == tmp_path / "logs"


def test_a_config_file_that_is_not_text_is_one_line():
    config_file().write_bytes(b"model_path = \xff\xfe\n")
    with pytest.raises(ConfigError, match="not valid TOML") as exc:
        load_settings()
    assert "\n" not in str(exc.value)


def test_an_environment_value_that_does_not_parse_is_one_line(monkeypatch):
    monkeypatch.setenv("LING_CHAT_KEYMAP", "notjson")
    with pytest.raises(ConfigError, match='field "keymap"') as exc:
        load_settings()
    assert "\n" not in str(exc.value)


def test_a_bad_flag_value_names_the_flag():
    with pytest.raises(ConfigError, match=r"^--mem-fraction: mem_fraction = 2"):
        load_settings(mem_fraction=2)


def test_home_is_expanded_in_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("LING_CHAT_DATA_DIR", "~/chats")
    config_file().write_text('model_path = "~/models/ling"\n')
    settings = load_settings()
    assert settings.data_dir == tmp_path / "chats"
    assert settings.model_path == str(tmp_path / "models" / "ling")


def test_a_relative_data_dir_in_the_file_is_relative_to_the_file(monkeypatch, tmp_path):
    config_file().write_text('data_dir = "ling-data"\n')
    monkeypatch.delenv("LING_CHAT_DATA_DIR")
    monkeypatch.chdir(tmp_path)
    assert load_settings().data_dir == config_file().parent / "ling-data"
    monkeypatch.setenv("LING_CHAT_DATA_DIR", "from-env")  # a variable or flag: the working dir
    assert load_settings().data_dir == Path("from-env")


def test_the_gpu_tests_depth_and_memory_knobs_reach_the_tests():
    from tests.gpu import models

    assert models.layers() == 42 and models.mem_fraction() == 0.65


@pytest.fixture(autouse=True, scope="module")
def _gpu_test_knobs():
    """Set before the autouse isolation fixture runs, as gpu_agenda.sh sets them."""
    import os

    saved = {k: os.environ.get(k) for k in ("LING_CHAT_TEST_LAYERS", "LING_CHAT_TEST_MEM_FRACTION")}
    os.environ["LING_CHAT_TEST_LAYERS"] = "42"
    os.environ["LING_CHAT_TEST_MEM_FRACTION"] = "0.65"
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def test_an_empty_data_dir_variable_is_unset_not_the_current_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from platformdirs import user_data_path

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("LING_CHAT_DATA_DIR", "")
    settings = load_settings()
    assert settings.data_dir == user_data_path("ling-chat")
    assert settings.db_path.parent != Path.cwd()


def test_an_empty_data_dir_flag_is_one_line() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(data_dir="")
    assert str(caught.value) == (
        "--data-dir: data_dir = '' is invalid: Input should name a folder, not be empty"
    )
