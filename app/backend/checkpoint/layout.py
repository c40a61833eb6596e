"""The tensors SGLang 0.5.23's BailingMoeV3 loader reads from a checkpoint, from its config.json.

`expected_tensors` names each tensor as the checkpoint holds it (before the loader fuses q/k/v
or gate/up, or stacks the experts), with the shape and the safetensors dtypes the loader turns
into the right values. Read from SGLang 0.5.23's loader and model classes: tests/gpu/README.md
("Where the checkpoint layout comes from") names the source of each fact.

Loaders copy by value (`Tensor.copy_`), so a float tensor may be BF16, F16 or F32 and a scale
F32 or F8_E8M0; a scale stored as raw U8 exponents would become the numbers 0..255, and an FP8
or packed weight in another dtype would lose its bytes: those are refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

FLOAT = ("BF16", "F16", "F32")
"""Unquantized tensors, cast into the parameter's dtype on load (the first one is written)."""
FP8 = ("F8_E4M3",)
PACKED_FP4 = ("I8", "U8")
"""Two E2M1 values a byte, copied bit for bit into SGLang's int8 parameter."""
SCALE = ("F32", "F8_E8M0")
"""Block scales, read into float32 by value."""
ARCHITECTURE = "BailingMoeV3ForCausalLM"


class TensorSpec(NamedTuple):
    """One tensor the loader needs: its checkpoint name, shape and accepted dtypes (a tuple:
    a checkpoint has 127,000)."""

    name: str
    shape: tuple[int, ...]
    dtypes: tuple[str, ...]
    aliases: tuple[str, ...] = ()
    """Other names the loader reads it by (`attention.dense` for `attention.o_proj`)."""


class UnsupportedLayout(ValueError):
    """config.json describes a model or quantization this check does not know, or lacks what
    the loader needs (`unsupported` tells the two apart)."""


def unsupported(config: Mapping[str, Any]) -> str | None:
    """Why `config` is outside what `expected_tensors` knows, or None."""
    arch = (config.get("architectures") or [None])[0]
    if arch != ARCHITECTURE:
        return f"architecture {arch}, not {ARCHITECTURE}"
    quant = config.get("quantization_config") or {}
    if quant.get("quant_method") != "fp8" or quant.get("routed_experts_quant_method") != "mxfp4":
        return "quantization is not FP8 with MXFP4 routed experts"
    if config.get("full_attention_type", "mla") != "mla":
        return "full attention is not MLA"
    if not config.get("no_kda_lora", False):
        return "KDA with LoRA gates (no_kda_lora is not true)"
    return None


def expected_tensors(config: Mapping[str, Any]) -> list[TensorSpec]:
    """Every tensor the BailingMoeV3 loader and its NEXTN layer read, in checkpoint order.

    Raises:
        UnsupportedLayout: `unsupported(config)` is not None, or config.json lacks a key or
            holds a value of the wrong type.
    """
    if why := unsupported(config):
        raise UnsupportedLayout(why)
    try:
        return _Model(config).tensors()
    except KeyError as exc:
        raise UnsupportedLayout(f"config.json has no {exc.args[0]}") from exc
    except (TypeError, ValueError) as exc:
        raise UnsupportedLayout(f"config.json has a value of the wrong type ({exc})") from exc


def nextn_layer(config: Mapping[str, Any]) -> int | None:
    """The NEXTN layer's index among `model.layers`, or None without one."""
    if not config.get("num_nextn_predict_layers"):
        return None
    layers = int(config["num_hidden_layers"])
    return 0 if layers == 1 else layers


def is_kda_layer(index: int, group: int | list[int]) -> bool:
    """Layer `index` is linear attention (KDA); the others are MLA."""
    if isinstance(group, list):
        return group[index] == 1
    return group > 0 and (index + 1) % group != 0


class _Model:
    """config.json's shapes, and the tensors they give."""

    def __init__(self, c: Mapping[str, Any]) -> None:
        self.c = c
        self.hidden = int(c["hidden_size"])
        self.heads = int(c["num_attention_heads"])
        quant = c["quantization_config"]
        self.block_n, self.block_k = (int(b) for b in quant["weight_block_size"])
        self.group = int(quant.get("routed_experts_group_size", 32))
        self.not_converted = [
            str(m).removeprefix("model.") for m in quant.get("modules_to_not_convert") or []
        ]

    def tensors(self) -> list[TensorSpec]:
        c, hidden = self.c, self.hidden
        vocab = int(c["vocab_size"])
        found = [TensorSpec("model.word_embeddings.weight", (vocab, hidden), FLOAT)]
        group = c.get("layer_group_size", 1)
        first_moe = int(c.get("first_k_dense_replace", 0))
        for i in range(int(c["num_hidden_layers"])):
            kda = is_kda_layer(i, group)
            found += self.layer(f"model.layers.{i}", kda=kda, moe=i >= first_moe)
        found.append(self.norm("model.norm.weight", hidden))
        if not c.get("tie_word_embeddings", False):
            found.append(TensorSpec("lm_head.weight", (vocab, hidden), FLOAT))
        nextn = nextn_layer(c)
        if nextn is not None:
            prefix = f"model.layers.{nextn}"
            found.append(self.norm(f"{prefix}.enorm.weight", hidden))
            found.append(self.norm(f"{prefix}.hnorm.weight", hidden))
            found += self.linear(f"{prefix}.eh_proj", hidden, 2 * hidden)
            found += self.layer(prefix, kda=False, moe=True)
            found.append(self.norm(f"{prefix}.final_layernorm.weight", hidden))
        return list({spec.name: spec for spec in found}.values())

    def norm(self, name: str, size: int) -> TensorSpec:
        return TensorSpec(name, (size,), FLOAT)

    def skipped(self, module: str) -> bool:
        """SGLang's `_module_path_match` of modules_to_not_convert, on the checkpoint name."""
        path = "." + module.removeprefix("model.") + "."
        return any(f".{m.rstrip('.')}." in path for m in self.not_converted)

    def linear(self, module: str, out: int, into: int, *, alias: str = "") -> list[TensorSpec]:
        """An FP8 block-scaled linear (BF16 when not converted): weight and scale."""
        aliases = (f"{alias}.weight",) if alias else ()
        if self.skipped(module):
            return [TensorSpec(f"{module}.weight", (out, into), FLOAT, aliases)]
        scale = (-(-out // self.block_n), -(-into // self.block_k))
        scale_aliases = (f"{alias}.weight_scale_inv",) if alias else ()
        return [
            TensorSpec(f"{module}.weight", (out, into), FP8, aliases),
            TensorSpec(f"{module}.weight_scale_inv", scale, SCALE, scale_aliases),
        ]

    def layer(self, prefix: str, *, kda: bool, moe: bool) -> list[TensorSpec]:
        hidden = self.hidden
        found = [self.norm(f"{prefix}.input_layernorm.weight", hidden)]
        found += self.kda(f"{prefix}.attention") if kda else self.mla(f"{prefix}.attention")
        found.append(self.norm(f"{prefix}.post_attention_layernorm.weight", hidden))
        dense = int(self.c["intermediate_size"])
        found += self.moe(f"{prefix}.mlp") if moe else self.mlp(f"{prefix}.mlp", dense)
        return found

    def kda(self, at: str) -> list[TensorSpec]:
        c, hidden, heads = self.c, self.hidden, self.heads
        head_dim = int(c["head_dim"])
        size = heads * head_dim  # KimiDeltaAttention's projection_size, for q, k, v, f and g
        kernel = int(c["short_conv_kernel_size"])
        found = [t for p in "qkvfg" for t in self.linear(f"{at}.{p}_proj", size, hidden)]
        found.append(TensorSpec(f"{at}.b_proj.weight", (heads, hidden), FLOAT))
        found += [TensorSpec(f"{at}.{p}_conv1d.weight", (size, 1, kernel), FLOAT) for p in "qkv"]
        found.append(TensorSpec(f"{at}.A_log", (heads,), FLOAT))
        found.append(TensorSpec(f"{at}.dt_bias", (size,), FLOAT))
        found.append(self.norm(f"{at}.o_norm.weight", head_dim))
        return found + self.linear(f"{at}.o_proj", hidden, size, alias=f"{at}.dense")

    def mla(self, at: str) -> list[TensorSpec]:
        c, hidden, heads = self.c, self.hidden, self.heads
        nope, rope = int(c["qk_nope_head_dim"]), int(c["qk_rope_head_dim"])
        v_dim, kv_rank = int(c["v_head_dim"]), int(c["kv_lora_rank"])
        q_rank = c.get("q_lora_rank")
        if q_rank is None:
            found = self.linear(f"{at}.q_proj", heads * (nope + rope), hidden)
        else:
            found = self.linear(f"{at}.q_a_proj", int(q_rank), hidden)
            found.append(self.norm(f"{at}.q_a_layernorm.weight", int(q_rank)))
            found += self.linear(f"{at}.q_b_proj", heads * (nope + rope), int(q_rank))
        found += self.linear(f"{at}.kv_a_proj_with_mqa", kv_rank + rope, hidden)
        found.append(self.norm(f"{at}.kv_a_layernorm.weight", kv_rank))
        found += self.linear(f"{at}.kv_b_proj", heads * (nope + v_dim), kv_rank)
        gate = c.get("gated_attention_proj_granularity_type")
        if gate in ("head_wise", "element_wise"):  # unquantized in DsV3MLA
            rows = heads if gate == "head_wise" else heads * v_dim
            found.append(TensorSpec(f"{at}.g_proj.weight", (rows, hidden), FLOAT))
        return found + self.linear(f"{at}.o_proj", hidden, heads * v_dim, alias=f"{at}.dense")

    def mlp(self, at: str, inner: int) -> list[TensorSpec]:
        hidden = self.hidden
        return [
            *self.linear(f"{at}.gate_proj", inner, hidden),
            *self.linear(f"{at}.up_proj", inner, hidden),
            *self.linear(f"{at}.down_proj", hidden, inner),
        ]

    def moe(self, at: str) -> list[TensorSpec]:
        c, hidden = self.c, self.hidden
        experts, inner = int(c["num_experts"]), int(c["moe_intermediate_size"])
        found = [TensorSpec(f"{at}.gate.weight", (experts, hidden), FLOAT)]
        if c.get("moe_router_enable_expert_bias", False):
            found.append(TensorSpec(f"{at}.gate.expert_bias", (experts,), FLOAT))
        new = tuple.__new__  # 126,000 expert tensors at 42 layers: NamedTuple's __new__ is slow
        for proj, rows, cols in (
            ("gate_proj", inner, hidden),
            ("up_proj", inner, hidden),
            ("down_proj", hidden, inner),
        ):
            packed, scale = (rows, cols // 2), (rows, cols // self.group)
            for e in range(experts):
                name = f"{at}.experts.{e}.{proj}"
                found.append(new(TensorSpec, (f"{name}.weight", packed, PACKED_FP4, ())))
                found.append(new(TensorSpec, (f"{name}.weight_scale_inv", scale, SCALE, ())))
        shared = _shared_size(c, inner)
        if shared:
            found += self.mlp(f"{at}.shared_experts", shared)
        return found


def _shared_size(c: Mapping[str, Any], inner: int) -> int:
    """The shared expert's intermediate size, 0 without one (`_get_bailing_num_shared_experts`)."""
    count = int(c.get("num_shared_experts") or 0)
    size = c.get("moe_shared_expert_intermediate_size")
    if size is None:
        return inner * count
    return int(size) if int(size) > 0 else 0
