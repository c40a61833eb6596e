"""The stack boots from safetensors files in the real checkpoint's layout, and broken copies of
them are refused by name before any engine boots.

Run on the GPU machine (agenda step `realckpt`): `LING_CHAT_TEST_CHECKPOINT=/root/ckpt6 python
-m pytest tests/gpu/test_checkpoint_gpu.py --run-gpu -s`. The 6-layer known-answer checkpoint
(about 11.6 GB, tests/gpu/checkpoint.py) is written there once and kept. The boot comes first
(the step's main result), with ling-chat's default load format; then broken copies, which link
to its files and rewrite one shard each beside it, are refused by `ling-chat doctor`'s
preflight before it imports SGLang.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.backend.checkpoint.verify import check_checkpoint
from app.backend.engine.config import EngineConfig
from app.backend.engine.engine import EngineBackend
from app.backend.engine.patches.load_watch import tensor_bytes
from app.backend.protocol import ReplyDone, TextChunk
from app.core.chat import ChatMessage, Role, Sampling
from app.core.proof_report import Verdict
from app.render.proof import format_report
from tests.gpu import models
from tests.gpu.checkpoint import write_checkpoint
from tests.support.broken_checkpoint import BREAKAGES, break_copy

pytestmark = pytest.mark.gpu
CHECKPOINT_ENV = "LING_CHAT_TEST_CHECKPOINT"
WRITTEN = "written-by-tests-gpu-checkpoint"
"""A file the writer's run leaves last, holding `writer_key()`: a folder without it (cut short)
or with another key (written by other code or at another depth) is written again."""
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The 6-layer known-answer checkpoint, written once (kept where CHECKPOINT_ENV says)."""
    return written_checkpoint(
        Path(os.environ.get(CHECKPOINT_ENV) or tmp_path_factory.mktemp("ckpt") / "ckpt6")
    )


def written_checkpoint(folder: Path) -> Path:
    """`folder` holding the known-answer checkpoint at the tests' depth, written unless its
    marker says this writer wrote it at this depth (also `gpu_agenda.sh ckpt-write`)."""
    key = writer_key(models.layers())
    marker = folder / WRITTEN
    if not marker.is_file() or marker.read_text() != key:
        shutil.rmtree(folder, ignore_errors=True)
        began = time.monotonic()
        write_checkpoint(folder, models.layers())
        marker.write_text(key)
        size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
        print(f"wrote {folder}: {size / 1e9:.1f} GB in {time.monotonic() - began:.0f} s")
    return folder


def writer_key(layers: int) -> str:
    """The depth and a digest of the code that writes the checkpoint."""
    sources = ["tests/gpu/checkpoint.py", "tests/gpu/checkpoint_bytes.py", "tests/gpu/models.py"]
    sources.append("app/backend/checkpoint/layout.py")
    digest = hashlib.sha256(b"".join((ROOT / s).read_bytes() for s in sources)).hexdigest()
    return f"{layers} layers, {digest}"


@pytest.fixture
def broken_dir(good: Path) -> Iterator[Path]:
    """Where a broken copy goes: beside `good` (hard links need the same disk), removed after."""
    place = good.parent / f"{good.name}-broken"
    shutil.rmtree(place, ignore_errors=True)
    yield place
    shutil.rmtree(place, ignore_errors=True)


async def test_the_stack_boots_from_the_files_passes_every_line_and_streams_the_known_answer(
    good: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    report = check_checkpoint(good)
    print(f"checkpoint: {report.line()}")
    assert report.ok
    monkeypatch.delenv("LING_CHAT_TEST_KNOWN_ANSWER", raising=False)
    config = EngineConfig(
        model_path=str(good),
        profile="stack",
        mem_fraction=models.mem_fraction(),
        log_dir=tmp_path / "logs",
        context_length=models.CONTEXT,
    )
    assert "load_format" not in config.overrides
    backend = EngineBackend(config)  # ling-chat's own scheduler entry: the weights are the files'
    try:
        async for stage in backend.start():
            print(f"[{stage.elapsed_s:6.1f}s] {stage.name} {'done' if stage.done else '...'}")
        load_format = backend.server_kwargs.get("load_format") or "auto"
        print(f"load format: {load_format} (ling-chat's default on this GPU)")
        assert load_format != "dummy"
        progress = backend.load_progress
        whole = tensor_bytes(sorted(str(shard) for shard in good.glob("*.safetensors")))
        assert progress is not None
        print(
            f"read {progress.bytes_all / 1e9:.2f} GB in {progress.passes} passes "
            f"({progress.reader}) for a checkpoint of {whole / 1e9:.2f} GB"
        )
        # the draft's pass read only the shards of its NEXTN layer, not the checkpoint again
        assert progress.passes == 2 and whole <= progress.bytes_all < 1.5 * whole
        proof = await backend.proof()
        print(format_report(proof))
        assert proof.ok and all(line.verdict is Verdict.PASS for line in proof.lines)
        messages = [ChatMessage(Role.USER, "What did each lever do?")]
        events = [e async for e in backend.stream_reply(messages, Sampling(temperature=0.0))]
        reasoning = "".join(e.reasoning for e in events if isinstance(e, TextChunk))
        answer = "".join(e.answer for e in events if isinstance(e, TextChunk))
        print(f"reasoning {reasoning!r}\nanswer {answer[:200]!r}... ({len(answer)} characters)")
        done = events[-1]
        assert isinstance(done, ReplyDone) and done.finish_reason == "stop"
        print(
            f"accept length {done.usage.accept_length:.2f}, {done.usage.completion_tokens} tokens"
        )
        want_reasoning, want_answer = models.expected_reply()
        assert (reasoning.strip(), answer.strip()) == (want_reasoning.strip(), want_answer.strip())
        assert done.usage.accept_length >= 3.5  # the NEXTN layer's weights came from the files too
    finally:
        await backend.shutdown()


@pytest.mark.parametrize("breakage", BREAKAGES)
def test_a_broken_copy_is_refused_by_the_preflight_naming_tensor_and_file(
    breakage: str, good: Path, broken_dir: Path
):
    tensor, file = break_copy(good, broken_dir, breakage)
    done = subprocess.run(
        [sys.executable, "-m", "app", "doctor", "--model", str(broken_dir)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    lines = done.stdout.splitlines()
    refusal = [line for line in lines if line.startswith("preflight: FAIL checkpoint")]
    print(f"{breakage}: exit {done.returncode}: {refusal or done.stdout[-2000:]}")
    print(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "")
    assert done.returncode == 3
    assert len(refusal) == 1 and file in refusal[0] and tensor in refusal[0]
    assert "Importing SGLang" not in done.stdout  # refused before any engine booted
