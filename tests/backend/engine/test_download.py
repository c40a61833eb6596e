"""Fetching a checkpoint with huggingface_hub over a fake Hub transport (never the network)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from huggingface_hub import constants, file_download

from app.backend import download
from app.backend.download import (
    DownloadFailed,
    HubPlace,
    NotEnoughDisk,
    Progress,
    bytes_missing,
    fetch_checkpoint,
)
from app.backend.engine.config import EngineConfig
from app.backend.engine.download_stage import (
    DOWNLOAD_STAGE,
    DRAFT_DOWNLOAD_STAGE,
    download_stages,
    engine_downloads,
)
from app.cli import main
from app.core.errors import ModelNotFound
from tests.fixtures.hub_double import COMMIT, FakeHubDouble, blob_name, serving
from tests.support.timeouts import scaled

REPO = "inclusionAI/Tiny-fp4"
FILES = {
    "config.json": b'{"architectures": ["BailingMoeV3ForCausalLM"]}',
    "tokenizer.json": b'{"model": {}}' * 50,
    "model-00001-of-00002.safetensors": bytes(range(256)) * 40,
    "model-00002-of-00002.safetensors": bytes(reversed(range(256))) * 30,
}
TOTAL = sum(len(content) for content in FILES.values())
SHARD = "model-00001-of-00002.safetensors"
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch):
    # Small reads, as a multi-GB shard gets from its 10 MB ones: a drop loses no whole file.
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1000)
    # huggingface_hub waits 1 s before it resumes a dropped transfer: 50 ms here.
    monkeypatch.setattr(
        file_download, "time", types.SimpleNamespace(sleep=lambda _: time.sleep(0.05))
    )
    with serving(FakeHubDouble(REPO, dict(FILES))) as hub:
        yield hub


@pytest.fixture
def place(tmp_path: Path) -> HubPlace:
    return HubPlace(tmp_path / "hub-cache", offline=False)


def _assert_whole(folder: Path) -> None:
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == FILES


def test_an_uncached_repo_downloads_whole_with_progress_up_to_its_size(hub, place):
    seen: list[Progress] = []
    assert bytes_missing(REPO, place=place) == TOTAL
    folder = fetch_checkpoint(REPO, seen.append, place=place)
    _assert_whole(folder)
    assert bytes_missing(REPO, place=place) == 0
    assert seen and seen[-1].done == seen[-1].total == TOTAL
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert "of" in seen[-1].line() and "/s" in seen[-1].line()


def test_a_dropped_connection_resumes_where_it_stopped(hub, place):
    hub.drop_at[SHARD] = 3000
    _assert_whole(fetch_checkpoint(REPO, place=place))
    first, again = hub.gets(SHARD)
    assert "Range" not in first.headers
    assert again.headers["Range"] == "bytes=3000-"


def test_a_stopped_run_keeps_its_finished_files_and_the_next_fetches_the_rest(hub, place):
    hub.fail_at[SHARD] = 3000
    with pytest.raises(DownloadFailed, match="run again to resume") as failed:
        fetch_checkpoint(REPO, place=place)
    assert "\n" not in str(failed.value)
    snapshot = place.cache_dir / "models--inclusionAI--Tiny-fp4" / "snapshots" / COMMIT
    whole = {name for name in FILES if (snapshot / name).is_file()}
    assert SHARD not in whole
    missing = bytes_missing(REPO, place=place)
    assert missing == sum(len(content) for name, content in FILES.items() if name not in whole)
    del hub.fail_at[SHARD]
    hub.requests.clear()
    _assert_whole(fetch_checkpoint(REPO, place=place))
    assert {name for name in FILES if hub.gets(name)} == set(FILES) - whole


def test_a_partial_file_left_by_a_killed_run_is_deleted(hub, place):
    blobs = place.cache_dir / "models--inclusionAI--Tiny-fp4" / "blobs"
    blobs.mkdir(parents=True)
    stale = blobs / f"{blob_name(SHARD, FILES[SHARD])}.0badc0de.incomplete"
    stale.write_bytes(b"x" * 5000)
    _assert_whole(fetch_checkpoint(REPO, place=place))
    assert not stale.exists()


def test_a_disk_too_small_for_the_missing_bytes_is_refused_before_any_transfer(hub, place):
    with pytest.raises(NotEnoughDisk, match=r"needs 18\.6 kB more .* has 1\.0 kB free"):
        fetch_checkpoint(REPO, place=place, disk_free=lambda _: 1000)
    assert not any(r.method == "GET" and "/resolve/" in r.url.path for r in hub.requests)


def test_the_disk_check_counts_only_what_the_cache_lacks(hub, place):
    hub.fail_at[SHARD] = 3000
    with pytest.raises(DownloadFailed):
        fetch_checkpoint(REPO, place=place)
    del hub.fail_at[SHARD]
    missing = bytes_missing(REPO, place=place)
    assert 0 < missing < TOTAL
    _assert_whole(fetch_checkpoint(REPO, place=place, disk_free=lambda _: missing))


def test_offline_a_cached_repo_needs_no_network(hub, place):
    folder = fetch_checkpoint(REPO, place=place)
    hub.requests.clear()
    offline = HubPlace(place.cache_dir, offline=True)
    assert fetch_checkpoint(REPO, place=offline) == folder
    assert hub.requests == []


def test_offline_and_not_cached_is_one_line(hub, place):
    offline = HubPlace(place.cache_dir, offline=True)
    with pytest.raises(ModelNotFound) as missing:
        fetch_checkpoint(REPO, place=offline)
    message = str(missing.value)
    assert "\n" not in message
    assert "not in the cache" in message and "HF_HUB_OFFLINE" in message
    assert f"ling-chat download {REPO}" in message
    assert hub.requests == []


def test_an_unreachable_hub_falls_back_to_the_cache(place):
    with serving(FakeHubDouble(REPO, dict(FILES))):
        folder = fetch_checkpoint(REPO, place=place)
    # Outside `serving`, every request fails to connect.
    assert fetch_checkpoint(REPO, place=place) == folder
    with pytest.raises(ModelNotFound, match="the Hub cannot be reached"):
        fetch_checkpoint("inclusionAI/Other", place=place)


def test_an_unknown_repo_is_one_line(hub, place):
    with pytest.raises(ModelNotFound, match="no such model"):
        fetch_checkpoint("inclusionAI/Nope", place=place)


def test_a_local_directory_is_used_as_it_is(hub, place, tmp_path):
    local = tmp_path / "checkpoint"
    local.mkdir()
    assert fetch_checkpoint(str(local), place=place) == local
    assert hub.requests == []


async def test_the_engine_start_shows_the_download_with_its_bytes(hub, place, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(place.cache_dir))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(download, "REPORT_EVERY_S", 0.0)
    hub.drop_at[SHARD] = 3000  # a retry after a pause: the stage reports while bytes arrive
    stages = [stage async for stage in download_stages(REPO, time.perf_counter())]
    assert {stage.name for stage in stages} == {DOWNLOAD_STAGE}
    assert not stages[0].done and stages[-1].done
    moving = [stage for stage in stages if stage.bytes_total]
    assert moving and moving[-1].bytes_total == TOTAL
    assert " left" in moving[-1].detail or "starting" in moving[-1].detail
    _assert_whole(fetch_checkpoint(REPO, place=place))


async def test_a_dspark_start_downloads_its_draft_as_a_stage_of_its_own(
    hub, place, monkeypatch, tmp_path
):
    monkeypatch.setenv("HF_HUB_CACHE", str(place.cache_dir))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    local = str(tmp_path / "ling")  # a local checkpoint: no stage of its own
    stack = EngineConfig(local, dspark_draft=REPO)
    assert [stage async for stage in engine_downloads(stack, time.perf_counter())] == []
    dspark = EngineConfig(local, profile="dspark", dspark_draft=REPO)
    stages = [stage async for stage in engine_downloads(dspark, time.perf_counter())]
    assert {stage.name for stage in stages} == {DRAFT_DOWNLOAD_STAGE}
    assert stages[-1].done and max(stage.bytes_total or 0 for stage in stages) == TOTAL
    _assert_whole(fetch_checkpoint(REPO, place=place))


def test_download_command_fetches_the_dspark_draft_of_the_configured_profile(
    hub, place, monkeypatch, capsys, tmp_path
):
    monkeypatch.setenv("HF_HUB_CACHE", str(place.cache_dir))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("LING_CHAT_MODEL_PATH", str(tmp_path))
    monkeypatch.setenv("LING_CHAT_PROFILE", "dspark")
    monkeypatch.setenv("LING_CHAT_DSPARK_DRAFT", REPO)
    assert main(["download"]) == 0
    checkpoint, draft = capsys.readouterr().out.split()
    assert checkpoint == str(tmp_path)
    _assert_whole(Path(draft))


def test_download_command_draws_a_text_bar_and_prints_the_folder(hub, place, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_CACHE", str(place.cache_dir))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["download", REPO]) == 0
    out, err = capsys.readouterr()
    _assert_whole(Path(out.strip()))
    assert re.search(r"^\[#{30}\] 18\.6 kB of 18\.6 kB · .*/s · 0:00 left$", err, re.M), err


def test_download_command_offline_and_not_cached_is_one_line(end_to_end: None, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "empty")}
    done = subprocess.run(
        [sys.executable, "-m", "app", "download", REPO],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "is not in the cache" in done.stderr
