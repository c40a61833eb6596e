"""Kernel profiles of one decode step or NEXTN round, and which bytes each kernel reads.

A profile file is what torch.profiler gave inside SGLang's scheduler for `rounds` steps
(phase "decode") or draft+verify rounds (phase "verify"):

    {"gpu": "NVIDIA H200", "layers": 42, "profile": "humming+fp8", "phase": "decode",
     "rounds": 64, "accept_length": null, "context_tokens": 2048,
     "kernels": [{"name": "...", "calls": 1234, "total_us": 5678.9}, ...]}

A verify profile also names its NEXTN depth, "draft_steps" (files without it ran the
default 3), and whether its KDA verify ran ReplaySSM, "replayssm" (files without it did not).
`rounds` counts the target's forwards in the kernels themselves (`target_forwards`);
"sglang_rounds", where present, is SGLang's own count when it differed.

Each kernel is put in the byte category whose weights or state it streams, by its name;
a kernel that streams none of the byte model's bytes costs only its fixed cost. Names no
rule knows also go there, and are listed (`KernelMap.unmapped`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from app.levers.draft.nextn import STEPS as NEXTN_STEPS
from app.levers.profiles import PROFILES, same_levers


class Phase(StrEnum):
    """What one profiled unit is."""

    DECODE = "decode"
    """One plain decode step: one forward."""
    VERIFY = "verify"
    """One NEXTN round: the verify, the draft extend and the other draft forwards."""


class Category(StrEnum):
    """Where a kernel's bytes come from in the byte model."""

    ROUTED_EXPERTS = "routed_experts"
    FP8_LINEAR = "fp8_linear"
    """FP8 block linears: KDA and MLA projections, shared experts, dense MLP, eh_proj."""
    BF16_LINEAR = "bf16_linear"
    """BF16 GEMMs: KDA beta, the MLA output gate, the MLA w_kc/w_vc; a DSpark draft's layers."""
    LM_HEAD = "lm_head"
    KDA_STATE = "kda_state"
    MLA_KV = "mla_kv"
    ROUTER = "router"
    FIXED = "fixed"
    """No weight or state bytes of their own: norms, activations, copies, sampling."""


HEAD_KERNEL_PREFIX: Final = "_fp8_head_"
"""ling-chat's Triton FP8 head kernels are named so (app/backend/engine/patches/fp8_gemv.py)."""
KDA_UPDATE_KERNEL: Final = "fused_sigmoid_gating_delta_rule_update"
"""SGLang's KDA state update at decode and verify: once a KDA layer in each target forward
(prefill runs chunked kernels instead; neither draft has KDA layers)."""

_RULES: Final[tuple[tuple[Category, re.Pattern[str]], ...]] = tuple(
    (category, re.compile(pattern))
    for category, pattern in (
        (Category.LM_HEAD, rf"{HEAD_KERNEL_PREFIX}|_quantize_tokens|per_token_quant_fp8"),
        (Category.ROUTED_EXPERTS, r"humming<|MoeFCGemm|moe_gemm|fused_moe_kernel|cutlass_moe"),
        (Category.ROUTER, r"router"),
        (
            Category.KDA_STATE,
            r"delta_rule|chunk_kda|kda_gate|chunk_gla|causal_conv1d|mamba_state|conv_window"
            r"|fused_recurrent|replayssm",
        ),
        (
            Category.MLA_KV,
            r"^_fwd_kernel$|^_fwd_grouped_kernel_stage1$|^_fwd_kernel_stage2$"
            r"|flashinfer::(mla|BatchMLA|BatchDecode|BatchPrefill|PersistentKernel)|flashmla",
        ),
        (Category.FP8_LINEAR, r"_w8a8_block_fp8_matmul|deep_gemm|fp8_blockwise|blockwise"),
    )
)
"""Names whose category is plain from the name alone, first match wins."""

_GEMM: Final = re.compile(r"nvjet|cutlass|cublas|gemm|gemv|_scaled_mm|sm90_xl")
"""Other GEMMs: the LM head, the FP8 linears (when not Triton's) or the small BF16 GEMMs."""
_NOT_GEMM: Final = re.compile(r"splitKreduce|Memcpy|Memset")
_FP8: Final = re.compile(r"fp8|e4m3", re.IGNORECASE)
_KNOWN_FIXED: Final = re.compile(
    r"norm|act_and_mul|silu|quant|rope|Memcpy|Memset|memcpy|copy|Copy|elementwise|Fill|fill"
    r"|reduce_kernel|argmax|topk|softmax|SoftMax|softcap|index|Index|gather|scatter|Cat"
    r"|scan|Scan|arange|sort|align_block_size|mul_sum|kv_indices|kv_splits|req_to_token"
    r"|draft|verify|Verify|build_tree|position|slot|cache_locs|replay_state|sampling"
    r"|alloc_extend|get_last_loc",
)
"""Fixed-cost kernels a rule already knows (not listed as unmapped)."""


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One kernel's totals over a profile's units."""

    name: str
    calls: int
    total_us: float


@dataclass(frozen=True, slots=True)
class KernelProfile:
    """One profile file: per-kernel totals over `rounds` decode steps or NEXTN rounds."""

    gpu: str
    layers: int
    profile: str
    phase: Phase
    rounds: int
    accept_length: float | None
    context_tokens: int
    kernels: tuple[KernelRecord, ...]
    draft_steps: int = NEXTN_STEPS
    """NEXTN draft steps a round (phase verify; a decode step has none)."""
    replayssm: bool = False
    """The round verified with KDA ReplaySSM (no KDA state snapshot per verified token)."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KernelProfile:
        """Read a loaded profile file.

        Raises:
            ValueError: One line naming the first field that is missing or wrong.
        """
        try:
            phase = Phase(data["phase"])
            rounds = _positive_int("rounds", data["rounds"])
            layers = _positive_int("layers", data["layers"])
            steps = _positive_int("draft_steps", data.get("draft_steps", NEXTN_STEPS))
            accept = data.get("accept_length")
            replayssm = data.get("replayssm", False)
            if not isinstance(replayssm, bool):
                raise ValueError(f"replayssm must be true or false, got {replayssm!r}")
            round_profile(str(data["profile"]), replayssm)
            kernels = tuple(
                KernelRecord(str(k["name"]), int(k["calls"]), float(k["total_us"]))
                for k in data["kernels"]
            )
            if any(k.calls < 1 for k in kernels):
                raise ValueError("kernels: every kernel needs at least one call")
            return cls(
                gpu=str(data["gpu"]),
                layers=layers,
                profile=str(data["profile"]),
                phase=phase,
                rounds=rounds,
                accept_length=None if accept is None else float(accept),
                context_tokens=int(data["context_tokens"]),
                kernels=kernels,
                draft_steps=steps,
                replayssm=replayssm,
            )
        except KeyError as missing:
            raise ValueError(f"kernel profile lacks {missing}") from None
        except (TypeError, ValueError) as err:
            raise ValueError(f"kernel profile is malformed: {err}") from None

    @property
    def label(self) -> str:
        """The profile whose unit this is (`round_profile`)."""
        return round_profile(self.profile, self.replayssm)

    @property
    def forwards(self) -> int:
        """Forwards a unit runs, hence LM head calls: 1 a step, 1 + draft steps a round."""
        return 1 if self.phase is Phase.DECODE else self.draft_steps + 1

    @property
    def unit_ms(self) -> float:
        """GPU time of one step or round, ms: all its kernels' time over the rounds."""
        return math.fsum(k.total_us for k in self.kernels) / self.rounds / 1e3

    def per_unit(self, kernel: KernelRecord) -> tuple[float, float]:
        """(calls, microseconds) a kernel takes per step or round."""
        return kernel.calls / self.rounds, kernel.total_us / self.rounds


REPLAYSSM_VERIFY = ("replayssm", "prepared_commit")
"""The levers that come and go with a NEXTN profile's ReplaySSM verify: its ring, and its
commit fed the verify's prepared indices."""


def round_profile(profile: str, replayssm: bool) -> str:
    """The profile whose round a file of `profile` holds: that NEXTN profile with its KDA
    verify as `replayssm` says (a `stack` round without ReplaySSM is `stack-recurrent`'s);
    any other profile, or one not known, is itself.

    Raises:
        ValueError: No profile verifies that NEXTN profile's rounds so.
    """
    levers = PROFILES.get(profile)
    if levers is None or not levers.has("nextn") or levers.has("replayssm") == replayssm:
        return profile
    others = tuple(name for name in levers.names if name not in REPLAYSSM_VERIFY)
    if ran := same_levers((*others, *REPLAYSSM_VERIFY) if replayssm else others):
        return ran
    verify = "with" if replayssm else "without"
    raise ValueError(f"no profile verifies {profile}'s rounds {verify} ReplaySSM")


def target_forwards(kernels: Iterable[KernelRecord], kda_layers: int) -> int:
    """How many forwards of the target a span of kernels ran: the KDA update's calls over
    the KDA layers. A decode step and a NEXTN or DSpark round each run one, so this counts
    the units the GPU ran, where SGLang's verify count can be one off for a request.

    Raises:
        ValueError: No KDA update among the kernels, or calls that are not a whole number of
            forwards.
    """
    calls = sum(k.calls for k in kernels if k.name.startswith(KDA_UPDATE_KERNEL))
    if kda_layers < 1 or calls == 0 or calls % kda_layers:
        raise ValueError(
            f"{calls} calls of {KDA_UPDATE_KERNEL} are not a whole number of forwards of "
            f"{kda_layers} KDA layers"
        )
    return calls // kda_layers


def _positive_int(key: str, raw: Any) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError(f"{key} must be at least 1, got {value}")
    return value


@dataclass(frozen=True, slots=True)
class KernelMap:
    """Each kernel name of a profile with its byte category."""

    categories: Mapping[str, Category]
    unmapped: tuple[str, ...]
    """Names no rule knows: counted as fixed cost; look at them."""


def map_kernels(profile: KernelProfile) -> KernelMap:
    """Categorize every kernel of `profile`.

    The LM head is the one GEMM kernel called at most once a forward with the longest time
    a call, unless a kernel is named as the head (ling-chat's Triton FP8 head kernel). Other
    GEMMs are FP8 linears when their name says FP8, else small BF16 GEMMs.
    """
    categories: dict[str, Category] = {}
    gemms: list[KernelRecord] = []
    for kernel in profile.kernels:
        category = next((c for c, rule in _RULES if rule.search(kernel.name)), None)
        if category is not None:
            categories[kernel.name] = category
        elif _GEMM.search(kernel.name) and not _NOT_GEMM.search(kernel.name):
            gemms.append(kernel)
    head_named = any(
        c is Category.LM_HEAD and HEAD_KERNEL_PREFIX in name for name, c in categories.items()
    )
    once = [k for k in gemms if profile.per_unit(k)[0] <= profile.forwards]
    head = None if head_named or not once else max(once, key=lambda k: k.total_us / k.calls)
    for kernel in gemms:
        if kernel is head:
            categories[kernel.name] = Category.LM_HEAD
        elif _FP8.search(kernel.name):
            categories[kernel.name] = Category.FP8_LINEAR
        else:
            categories[kernel.name] = Category.BF16_LINEAR
    unmapped = []
    for kernel in profile.kernels:
        if kernel.name not in categories:
            categories[kernel.name] = Category.FIXED
            if not _KNOWN_FIXED.search(kernel.name):
                unmapped.append(kernel.name)
    return KernelMap(categories=categories, unmapped=tuple(unmapped))
