"""GSM8K from the Hugging Face Hub (`openai/gsm8k`, config `main`), as NVIDIA's protocol reads it.

The parquet files are downloaded once into huggingface_hub's cache and read from there
afterwards, also offline. Reading parquet needs pyarrow (the `engine` extra).
"""

from __future__ import annotations

from pathlib import Path

from huggingface_hub import hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

from app.bench.inputs.gsm8k import GsmItem, item_from_row
from app.core.errors import ConfigError

GSM8K_REPO = "openai/gsm8k"
GSM8K_FILES = {
    "test": "main/test-00000-of-00001.parquet",
    "train": "main/train-00000-of-00001.parquet",
}


def load_gsm8k_split(split: str) -> list[GsmItem]:
    """Every item of GSM8K's `test` or `train` split, in the dataset's order.

    Raises:
        ConfigError: the file is neither cached nor downloadable, or is not GSM8K.
    """
    name = f"{GSM8K_REPO} {split}"
    try:
        path = hf_hub_download(GSM8K_REPO, GSM8K_FILES[split], repo_type="dataset")
    except LocalEntryNotFoundError as exc:
        raise ConfigError(
            f"{name}: not in the Hugging Face cache and the Hub cannot be reached"
            " (run once online, or point HF_HOME at a cache that has it)"
        ) from exc
    except (HfHubHTTPError, OSError) as exc:
        raise ConfigError(f"{name}: cannot download ({_first_line(exc)})") from exc
    return read_parquet_items(Path(path), name)


def read_parquet_items(path: Path, name: str) -> list[GsmItem]:
    """The `{question, answer}` rows of a GSM8K parquet file.

    Raises:
        ConfigError: pyarrow is missing, or the file is not a GSM8K parquet file.
    """
    try:
        import pyarrow.parquet as pq
    except ModuleNotFoundError as exc:
        raise ConfigError(
            f"{name}: reading parquet needs pyarrow (pip install 'ling-chat[engine]')"
        ) from exc
    try:
        rows = pq.read_table(path, columns=["question", "answer"]).to_pylist()
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{name}: {path} is not a GSM8K parquet file ({_first_line(exc)})"
        ) from exc
    return [item_from_row(row, f"{name} row {i}") for i, row in enumerate(rows)]


def _first_line(exc: BaseException) -> str:
    """The first line of an error's message (pyarrow's and the Hub's run to several)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
