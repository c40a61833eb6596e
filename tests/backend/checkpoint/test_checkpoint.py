"""The test checkpoint writer's folders, and the header check that refuses broken ones.

Real files on disk: a shrunk Ling-3.0-flash (small vocabulary, hidden size and expert count;
the real layer plan, quantization and NEXTN layer) written by tests/gpu/checkpoint.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from app.backend.checkpoint.layout import expected_tensors
from app.backend.checkpoint.verify import check_checkpoint
from tests.gpu import checkpoint_bytes as raw
from tests.gpu import models
from tests.gpu.checkpoint import inverse_permutation, write_checkpoint
from tests.support import broken_checkpoint as broken
from tests.support.timeouts import scaled

ROOT = Path(__file__).resolve().parents[3]
DOUBLE = ROOT / "tests" / "fixtures" / "engine_double"
VOCAB = 2560
"""Room for the known answer's 2,322 tokens."""


def small_config() -> dict[str, Any]:
    config = models.ling_config(6)
    config.update(
        vocab_size=VOCAB,
        hidden_size=256,
        intermediate_size=256,
        num_attention_heads=2,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        n_group=2,
        topk_group=1,
        moe_intermediate_size=128,
        moe_shared_expert_intermediate_size=128,
        kv_lora_rank=128,
    )
    return config


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("checkpoint") / "ling-small"
    return write_checkpoint(folder, config=small_config(), tokenizer=False)


def tensor_bytes(folder: Path, name: str) -> tuple[dict[str, Any], bytes]:
    """A tensor's header entry and data, read back from its shard."""
    shard = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"][name]
    header, start = broken.read_entries(folder / shard)
    begin, end = header[name]["data_offsets"]
    with (folder / shard).open("rb") as data:
        data.seek(start + begin)
        return header[name], data.read(end - begin)


def test_a_written_checkpoint_holds_every_tensor_the_loader_reads(good: Path):
    report = check_checkpoint(good)
    assert report.ok, report.problems
    assert report.tensors == len(expected_tensors(small_config()))
    assert report.shards == 9  # embeddings, 6 layers, NEXTN, final norm and head
    assert report.line().endswith("each as SGLang 0.5.23's BailingMoeV3 loader reads it")
    index = json.loads((good / "model.safetensors.index.json").read_text())
    shards = sorted(good.glob("model-*.safetensors"))
    assert [s.name for s in shards][0] == "model-00001-of-00009.safetensors"
    data = sum(s.stat().st_size - broken.read_entries(s)[1] for s in shards)
    assert index["metadata"]["total_size"] == data


def test_the_known_answer_is_in_the_bytes(good: Path):
    hidden, width = 256, 512
    _, embed = tensor_bytes(good, "model.word_embeddings.weight")
    entry, head = tensor_bytes(good, "lm_head.weight")
    assert entry["dtype"] == "BF16" and entry["shape"] == [VOCAB, hidden]
    rows = [embed[x * width : (x + 1) * width] for x in range(VOCAB)]
    assert len(set(rows)) == VOCAB  # every token its own row
    assert set(embed[0::2]) == {0x80} and set(embed[1::2]) == {0x3F, 0xBF}  # +1 and -1
    walk = models.cycle()
    for here, there in zip(walk, walk[1:] + walk[:1], strict=True):  # head[P(x)] = E[x]
        assert head[there * width : (there + 1) * width] == rows[here]
    off_cycle = VOCAB - 1
    assert inverse_permutation(VOCAB)[off_cycle] == off_cycle
    assert head[off_cycle * width :] == rows[off_cycle]
    for name, value in [
        ("model.layers.3.input_layernorm.weight", 0.0),
        ("model.layers.6.post_attention_layernorm.weight", 0.0),
        ("model.norm.weight", 1.0),
        ("model.layers.6.enorm.weight", 1.0),
        ("model.layers.6.final_layernorm.weight", 1.0),
    ]:
        assert tensor_bytes(good, name)[1] == raw.bf16_fill(hidden, value), name
    entry, eh = tensor_bytes(good, "model.layers.6.eh_proj.weight")
    assert entry["dtype"] == "F8_E4M3" and entry["shape"] == [hidden, 2 * hidden]
    identity = b"".join(bytes(row) + b"\x38" + bytes(2 * hidden - row - 1) for row in range(hidden))
    assert eh == identity
    _, scale = tensor_bytes(good, "model.layers.6.eh_proj.weight_scale_inv")
    assert scale == raw.f32([1.0] * 8)


def test_the_filler_is_finite_in_every_format(good: Path):
    seen = set()
    for shard in good.glob("model-*.safetensors"):
        header, start = broken.read_entries(shard)
        header.pop("__metadata__")
        data = shard.read_bytes()
        for entry in header.values():
            begin, end = entry["data_offsets"]
            body, dtype = data[start + begin : start + end], entry["dtype"]
            seen.add(dtype)
            if dtype == "F8_E4M3":
                assert not {0x7F, 0xFF} & set(body)
            elif dtype == "F8_E8M0":
                assert max(body) <= 127 and min(body) >= 120  # 2^-7 .. 1
            elif dtype == "BF16":
                assert all(b & 0x7F != 0x7F for b in body[1::2])  # no Inf or NaN exponent
    assert seen == {"BF16", "F32", "F8_E4M3", "F8_E8M0", "I8"}


@pytest.mark.parametrize("breakage", broken.BREAKAGES)
def test_a_broken_copy_is_refused_in_one_line_naming_the_tensor_and_file(
    breakage: str, good: Path, tmp_path: Path
):
    tensor, file = broken.break_copy(good, tmp_path / "broken", breakage)
    report = check_checkpoint(tmp_path / "broken")
    assert not report.ok
    line = report.line()
    assert "\n" not in line
    assert file in line and tensor in line, line
    assert check_checkpoint(good).ok  # the good folder's linked files were not touched


def test_the_refusals_say_what_is_wrong(good: Path, tmp_path: Path):
    said = {}
    for breakage in broken.BREAKAGES:
        broken.break_copy(good, tmp_path / breakage, breakage)
        said[breakage] = check_checkpoint(tmp_path / breakage).line()
    assert "lacks model.layers.2.mlp.experts.1.down_proj.weight_scale_inv" in said["missing_tensor"]
    assert (
        "is U8; SGLang 0.5.23's BailingMoeV3 loader reads F32 or F8_E8M0"
        in (said["scale_as_raw_bytes"])
    )
    assert (
        "has shape [256, 2]; SGLang 0.5.23's BailingMoeV3 loader needs [256, 4]"
        in (said["scale_shape"])
    )
    assert "which is missing (an interrupted download?)" in said["shard_deleted"]
    assert ": truncated: " in said["shard_truncated"]
    assert "the safetensors header is not valid JSON" in said["header_garbage"]


def shard_of(folder: Path, name: str) -> str:
    return json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"][name]


def test_o_proj_stored_as_dense_is_read_by_that_name(good: Path, tmp_path: Path):
    folder = broken.linked_copy(good, tmp_path / "dense")
    shard = shard_of(good, "model.layers.5.attention.o_proj.weight")
    (folder / shard).unlink()
    broken.rewrite(
        good / shard,
        folder / shard,
        lambda e: (e[0].replace("attention.o_proj.", "attention.dense."), *e[1:]),
    )
    assert "model.layers.5.attention.dense.weight" in broken.read_entries(folder / shard)[0]
    assert check_checkpoint(folder).ok


def test_tensors_the_loader_ignores_are_allowed(good: Path, tmp_path: Path):
    folder = broken.linked_copy(good, tmp_path / "extra")
    shard = shard_of(good, "model.layers.3.input_layernorm.weight")
    (folder / shard).unlink()
    inv_freq = ("model.layers.3.attention.rotary_emb.inv_freq", "F32", [2], bytes(8))
    broken.rewrite(good / shard, folder / shard, lambda e: e, extra=[inv_freq])
    report = check_checkpoint(folder)
    assert report.ok, report.problems
    assert report.tensors == check_checkpoint(good).tensors + 1


def test_doctor_refuses_a_broken_checkpoint_in_the_preflight_and_exits_3(
    end_to_end: None, good: Path, tmp_path: Path
):
    tensor, file = broken.break_copy(good, tmp_path / "broken", "scale_as_raw_bytes")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(DOUBLE), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-m", "app", "doctor", "--model", str(tmp_path / "broken")],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120),
    )
    assert done.returncode == 3, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("preflight: FAIL checkpoint")]
    assert f"{file}: {tensor} is U8" in line
    assert "Importing SGLang" not in done.stdout


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"hidden_size": "wide"}, "config.json has a value of the wrong type (invalid literal"),
        ({"num_experts": None}, "config.json has a value of the wrong type (int() argument"),
        ({"layer_group_size": "six"}, "config.json has a value of the wrong type ('>' not"),
    ],
)
def test_a_config_the_loader_cannot_read_is_one_line(
    change: dict[str, Any], says: str, good: Path, tmp_path: Path
):
    folder = broken.linked_copy(good, tmp_path / "config")
    (folder / "config.json").unlink()
    (folder / "config.json").write_text(json.dumps({**small_config(), **change}))
    report = check_checkpoint(folder)
    assert report.line().startswith(says), report.line()


def test_another_architecture_is_read_but_not_compared(good: Path, tmp_path: Path):
    folder = broken.linked_copy(good, tmp_path / "other")
    (folder / "config.json").unlink()
    other = {**small_config(), "architectures": ["Qwen3ForCausalLM"]}
    (folder / "config.json").write_text(json.dumps(other))
    report = check_checkpoint(folder)
    assert report.ok
    assert report.line().endswith(
        "names not checked: architecture Qwen3ForCausalLM, not BailingMoeV3ForCausalLM"
    )
