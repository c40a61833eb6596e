"""The FP8 head's Triton kernels against exact references, in every tiling the head times
and every tiling of the sweep, and compiled for the Spark's GB10 (sm_121a) within its
shared memory.

On the GPU machine: `python -m pytest tests/gpu/test_fp8_gemv.py --run-gpu`. Without a GPU,
`TRITON_INTERPRET=1` runs the same checks in Triton's interpreter (torch and triton
installed), all but the check of the quantization's rounding, which Triton 3.6's
interpreter gets wrong across a power of two. The sm_121a compile needs no GPU:
`python -m pytest tests/gpu/test_fp8_gemv.py --run-gpu -k spark`.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch", reason="needs torch and Triton")
triton = pytest.importorskip("triton", reason="needs torch and Triton")
from app.backend.engine.patches import fp8_gemv  # noqa: E402

pytestmark = pytest.mark.gpu
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRETED else "cuda"
N, K = 1120, 512
"""Rows that no tile divides (masked tails) and a K of whole steps for every tiling."""


def head(n: int = N, k: int = K) -> tuple[torch.Tensor, torch.Tensor]:
    """FP8 rows [n, k] with per-row scales, as the head's online quantization makes them."""
    gen = torch.Generator().manual_seed(1)
    weight = torch.randn(n, k, generator=gen) * 0.02
    scale = weight.abs().amax(1) / fp8_gemv.FP8_MAX
    rows = (weight / scale[:, None]).to(torch.float8_e4m3fn)
    return rows.to(DEVICE), scale.to(DEVICE)


def tokens(m: int, k: int = K) -> torch.Tensor:
    gen = torch.Generator().manual_seed(m)
    return torch.randn(m, k, generator=gen).to(torch.bfloat16).to(DEVICE)


def test_tokens_are_quantized_with_one_scale_each():
    if INTERPRETED:
        pytest.skip(
            "Triton 3.6's interpreter rounds FP8 wrongly across a power of two (125.7 -> 64)"
        )
    x = tokens(4)
    q, scales = fp8_gemv.quantize_tokens(x)
    expected = x.float().abs().amax(1) / fp8_gemv.FP8_MAX
    assert torch.equal(scales, expected)
    error = (q.float() * scales[:, None] - x.float()).abs()
    # e4m3 keeps 3 mantissa bits: half an ulp is 1/16 of a value, 2^-10 of the scale below it
    assert bool((error <= x.float().abs() / 16 + scales[:, None] / 2**9).all())


def assert_matches_the_exact_product(
    config: fp8_gemv.GemvConfig, x: torch.Tensor, rows: torch.Tensor, scale: torch.Tensor
) -> None:
    """`gemv` is the exact product of what it multiplies (the FP8 activations, quantized
    once per token, times the FP8 rows), within BF16 and the tensor cores."""
    q, x_scales = fp8_gemv.quantize_tokens(x)
    scales = scale[None, :] * x_scales[:, None]
    reference = (q.float() @ rows.float().t()) * scales
    magnitude = (q.float().abs() @ rows.float().abs().t()) * scales
    out = fp8_gemv.gemv(x, rows, scale, config)
    assert out.dtype == torch.bfloat16
    assert out.shape == reference.shape
    # Left: the BF16 rounding of each logit (8 bits of mantissa), and the tensor cores' sums.
    # Hopper's FP8 MMA keeps about 14 bits of its running sum, one addition a 32-wide K step:
    # K / 32 roundings (2^4 at K = 512) of 2^-14 of the sum of |products| at most.
    bound = reference.abs() / 128 + magnitude * (x.shape[1] // 32) * 2**-14 + 1e-6
    assert bool(((out.float() - reference).abs() <= bound).all())


@pytest.mark.parametrize(
    "config", dict.fromkeys(fp8_gemv.CONFIGS + fp8_gemv.SWEEP), ids=lambda c: c.name
)
@pytest.mark.parametrize("m", [1, 3, 8])
def test_each_tiling_matches_the_exact_product(config, m):
    rows, scale = head()
    assert_matches_the_exact_product(config, tokens(m), rows, scale)


def test_sweep_names_are_unique():
    names = [c.name for c in fp8_gemv.SWEEP]
    assert len(set(names)) == len(names)


def test_more_tokens_than_a_call_serves_are_refused():
    rows, scale = head()
    with pytest.raises(ValueError, match="do not fit"):
        fp8_gemv.gemv(tokens(fp8_gemv.MAX_M + 1), rows, scale, fp8_gemv.CONFIGS[0])


GB10_SHARED_BYTES = 101_376
"""The most shared memory one program may use on the DGX Spark's GB10 (sm_121a): 99 KB."""
QDOT_SIGNATURE = {
    "q_ptr": "*fp8e4nv",
    "xs_ptr": "*fp32",
    "w_ptr": "*fp8e4nv",
    "scale_ptr": "*fp32",
    "out_ptr": "*bf16",
    "m": "i32",
    "n": "i32",
    "stride_wn": "i32",
    "stride_om": "i32",
}


def compile_for_the_spark(kernel, signature, constants, aligned, **options):
    """`kernel` compiled for sm_121a, its args at the positions `aligned` multiples of 16."""
    if INTERPRETED:
        pytest.skip("compiles the kernel: run without TRITON_INTERPRET (no GPU needed)")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    source = ASTSource(
        kernel,
        {**signature, **dict.fromkeys(constants, "constexpr")},
        constexprs=constants,
        attrs={(i,): [["tt.divisibility", 16]] for i in aligned},
    )
    return triton.compile(source, target=GPUTarget("cuda", 121, 32), options=options)


def assert_streams_on_the_spark(kernel, config) -> None:
    """A GEMV compiled for sm_121a fits its shared memory, streams the weight through a
    pipeline, and waits for the quantization where it is launched as its dependent."""
    assert kernel.metadata.shared <= GB10_SHARED_BYTES
    assert "cp.async" in kernel.asm["ptx"]
    assert ("griddepcontrol.wait" in kernel.asm["ptx"]) == config.pdl


@pytest.mark.parametrize(
    "config", [c for c in fp8_gemv.CONFIGS if c.kernel == "qdot"], ids=lambda c: c.name
)
def test_qdot_compiles_for_the_spark_within_its_shared_memory(config):
    constants = {
        "K": 2560,
        "BLOCK_M": fp8_gemv.BLOCK_M,
        "BLOCK_N": config.block_n,
        "BLOCK_K": config.block_k,
        "PDL": config.pdl,
    }
    # as at run time: the head's pointers and its stride of 2,560 are multiples of 16
    kernel = compile_for_the_spark(
        fp8_gemv._fp8_head_qdot, QDOT_SIGNATURE, constants, (0, 1, 2, 3, 4, 7, 8),
        num_warps=config.warps, num_stages=config.stages, launch_pdl=config.pdl,
    )  # fmt: skip
    assert_streams_on_the_spark(kernel, config)
