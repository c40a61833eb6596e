"""The NEXTN draft reads only the shards that hold its layer, not the whole checkpoint again.

SGLang 0.5.23 loads the Bailing NEXTN draft through the same loader as the target: it hands
the draft every shard of the checkpoint and the draft's `load_weights` keeps only the names
that start with `model.layers.{N}` (N: the NEXTN layer), dropping the rest after reading it.
So a start reads the checkpoint twice. Here the draft's file list is cut, before reading, to
the shards that `model.safetensors.index.json` places such a name in: every tensor the draft
keeps is still read, nothing else. Without an index, or where it does not place the layer,
the list stays whole and the log says so in one line.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from collections.abc import Sequence
from typing import Any

INDEX = "model.safetensors.index.json"
DRAFT_ARCHITECTURE = "BailingMoeForCausalLMNextN"
"""The name SGLang 0.5.23 gives every Bailing NEXTN draft (`ModelConfig`)."""

log = logging.getLogger(__name__)


def own_shards(folder: str, files: Sequence[str], prefix: str) -> tuple[list[str], str]:
    """The `files` that hold a tensor named `prefix...`, by the folder's index, and why.

    Returns (files, reason): the shards the index places such a tensor in, or every file
    with the reason the list could not be cut ('' when it was)."""
    try:
        with open(os.path.join(folder, INDEX), encoding="utf-8") as file:
            weight_map = json.load(file)["weight_map"]
        wanted = {shard for name, shard in weight_map.items() if name.startswith(prefix)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
        return list(files), f"{INDEX} unreadable ({type(err).__name__})"
    if not wanted:
        return list(files), f"{INDEX} places no tensor named {prefix}*"
    kept = [path for path in files if os.path.basename(path) in wanted]
    if len(kept) != len(wanted):
        return list(files), f"{INDEX} names shards of {prefix}* that are not among the files"
    return kept, ""


def nextn_prefix(hf_config: Any) -> str:
    """The name prefix of the tensors the NEXTN draft loads (SGLang's `load_weights`)."""
    from sglang.srt.models.bailing_moe_v3 import resolve_nextn_layer_id

    return f"model.layers.{resolve_nextn_layer_id(hf_config)}"


def install() -> None:
    """Cut the Bailing NEXTN draft's file list in SGLang's default loader."""
    from sglang.srt.model_loader.loader import DefaultModelLoader

    stock = DefaultModelLoader._get_weights_iterator

    def _get_weights_iterator(self: Any, source: Any, **kwargs: Any) -> Any:
        config = source.model_config
        if (
            config is None
            or not getattr(config, "is_draft_model", False)
            or config.hf_config.architectures[0] != DRAFT_ARCHITECTURE
        ):
            return stock(self, source, **kwargs)
        resolved = kwargs.get("resolved_source")
        if resolved is None:
            folder, files, safetensors = self._prepare_weights(
                source.model_or_path,
                source.revision,
                source.fall_back_to_pt,
                source.allow_patterns_overrides,
            )
            resolved = DefaultModelLoader.ResolvedSource(source, folder, tuple(files), safetensors)
        kept, reason = own_shards(
            resolved.hf_folder, resolved.weight_files, nextn_prefix(config.hf_config)
        )
        if reason:
            log.warning("the NEXTN draft reads every shard: %s", reason)
        else:
            log.info("the NEXTN draft reads %d of %d shards", len(kept), len(resolved.weight_files))
        kwargs["resolved_source"] = dataclasses.replace(resolved, weight_files=tuple(kept))
        return stock(self, source, **kwargs)

    DefaultModelLoader._get_weights_iterator = _get_weights_iterator
