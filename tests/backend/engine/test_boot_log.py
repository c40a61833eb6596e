"""Reading SGLang's start-up log: whole lines only, named as steps, never a clipped fragment."""

from __future__ import annotations

import pytest

from app.backend.engine.boot.boot_log import DETAIL_CHARS, BootLog, describe, shorten

PREFIX = "2026-11-29 17:40:14,236 2188 sglang.srt.mem_cache.kv_cache_configurator: "
SCHEDULER = "2026-11-29 17:40:14,236 2188 sglang.srt.managers.scheduler: "


@pytest.mark.parametrize(
    ("line", "step"),
    [
        (PREFIX + "Memory pool end. avail mem=69.67 GB", "Allocating the KV cache"),
        (
            "2026-11-29 17:40:18,543 2188 sglang.srt.speculative.eagle_worker_v2: Capture draft"
            " decode CUDA graph begin. backend=full, num_tokens_per_req=1",
            "Capturing CUDA graphs",
        ),
        (
            "Capturing batches (bs=1):   0%|   | 0/1\rCapturing batches (bs=1): 100%|█| 1/1",
            "Capturing CUDA graphs",
        ),
        ("[2026-11-29 17:40:10 TP0] Load weight begin. avail mem=139.20 GB", "Loading the weights"),
        (
            "[2026-11-29 17:40:10 TP0] Init torch distributed ends. mem usage=0.00 GB",
            "Starting the GPU worker",
        ),
        (SCHEDULER + "Nothing known here.", "Nothing known here."),
        # Tails of lines that were cut or wrapped: no step, no text.
        ("21093e8b480e709447d5e. This will lead to incorrect tokenization.", None),
        ("pe_scaling (type=deepseek_yarn) missing key 'original_max_position_embeddings'", None),
        ("", None),
    ],
)
def test_a_log_line_is_named_as_a_step_or_not_shown(line: str, step: str | None) -> None:
    assert describe(line) == step


def test_an_unknown_long_message_is_cut_at_a_word() -> None:
    words = "the scheduler reports something long about its queue and its many settings " * 3
    shown = describe(SCHEDULER + words)
    assert shown is not None and shown.endswith("…") and len(shown) <= DETAIL_CHARS
    assert words.startswith(shown[:-1]) and words[len(shown) - 1] == " "
    assert shorten("a" * 100).endswith("…") and len(shorten("a" * 100)) == DETAIL_CHARS


def test_a_line_counts_once_it_is_whole_and_shows_as_its_step() -> None:
    log = BootLog()
    log.feed(PREFIX + "Memory pool ")
    assert log.latest is None
    log.feed("end. avail mem=69.67 GB\n, scheduler_e2e=16.62, cuda_gr")
    assert log.latest == "Allocating the KV cache"
    log.feed("aph={prefill=0.00}\nwrapped tail of a warning\n")
    assert log.latest == "Engine ready"
    assert log.text.endswith("wrapped tail of a warning\n")
