"""A downloaded checkpoint checked before SGLang reads it (a local folder is the preflight's)."""

from __future__ import annotations

from app.backend.checkpoint.verify import check_checkpoint
from app.backend.engine.config import EngineConfig
from app.backend.engine.download import cached_snapshot, is_hub_id
from app.core.errors import CheckpointRefused


def refuse_unloadable_download(config: EngineConfig) -> None:
    """Check the Hugging Face snapshot `config` loads, from its safetensors headers.

    Raises:
        CheckpointRefused: a tensor the loader reads is missing or of the wrong dtype or shape,
            or a shard is missing, truncated or malformed (one line naming file and tensor).
        ModelNotFound: the snapshot is not in the cache.
    """
    if not is_hub_id(config.model_path) or config.overrides.get("load_format") == "dummy":
        return
    folder = cached_snapshot(config.model_path)
    report = check_checkpoint(folder)
    if not report.ok:
        raise CheckpointRefused(f"checkpoint {folder}: {report.line()}")
