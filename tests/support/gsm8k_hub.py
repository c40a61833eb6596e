"""A stand-in for `hf_hub_download` that serves the shipped GSM8K samples as parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from app.bench.inputs import datasets

FIXTURES = Path(__file__).parent.parent / "fixtures"


def write_gsm8k_parquet(jsonl: Path, out: Path) -> Path:
    """The rows of a GSM8K JSONL file as a parquet file with the Hub's two columns."""
    rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out


class HubDouble:
    """Stands in for hf_hub_download: serves the shipped samples as the Hub's parquet files."""

    def __init__(self, folder: Path) -> None:
        self.files = {
            datasets.GSM8K_FILES["test"]: write_gsm8k_parquet(
                FIXTURES / "gsm8k_small.jsonl", folder / "test.parquet"
            ),
            datasets.GSM8K_FILES["train"]: write_gsm8k_parquet(
                FIXTURES / "gsm8k_train_small.jsonl", folder / "train.parquet"
            ),
        }
        self.asked: list[tuple[str, str, str]] = []

    def __call__(self, repo_id: str, filename: str, *, repo_type: str) -> str:
        self.asked.append((repo_id, filename, repo_type))
        return str(self.files[filename])
