"""GSM8K from the Hub: parquet rows read into items, and the one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.bench.inputs import datasets
from app.bench.inputs.gsm8k import load_gsm8k
from app.core.errors import ConfigError
from tests.support.gsm8k_hub import HubDouble
from tests.support.timeouts import scaled

FIXTURES = Path(__file__).parent.parent.parent / "fixtures"
ROOT = Path(__file__).parent.parent.parent.parent


def test_each_split_is_read_from_the_hub_parquet_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hub = HubDouble(tmp_path)
    monkeypatch.setattr(datasets, "hf_hub_download", hub)
    assert datasets.load_gsm8k_split("test") == load_gsm8k(FIXTURES / "gsm8k_small.jsonl")
    assert datasets.load_gsm8k_split("train") == load_gsm8k(FIXTURES / "gsm8k_train_small.jsonl")
    assert hub.asked == [
        ("openai/gsm8k", "main/test-00000-of-00001.parquet", "dataset"),
        ("openai/gsm8k", "main/train-00000-of-00001.parquet", "dataset"),
    ]


def test_a_file_that_is_not_gsm8k_parquet_is_one_line(tmp_path: Path) -> None:
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"text": ["hello"]}), other)
    broken = tmp_path / "broken.parquet"
    broken.write_text("not parquet")
    for path in (other, broken):
        with pytest.raises(ConfigError, match="is not a GSM8K parquet file") as caught:
            datasets.read_parquet_items(path, "openai/gsm8k test")
        assert "\n" not in str(caught.value)


def test_a_row_without_the_final_answer_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"question": ["q"], "answer": ["no number here"]}), path)
    with pytest.raises(ConfigError, match="openai/gsm8k test row 0: the answer does not end"):
        datasets.read_parquet_items(path, "openai/gsm8k test")


def test_offline_with_an_empty_cache_the_cli_says_so_in_one_line(
    end_to_end: None, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(tmp_path / "hf"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "app", "bench", "--suite", "nvidia", "--model", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=scaled(120),
    )
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("ling-chat: error: openai/gsm8k test: not in the Hugging Face cache")
