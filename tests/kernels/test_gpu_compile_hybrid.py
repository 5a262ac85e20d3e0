"""The hybrid model's Triton kernels (gated delta rule, grouped MoE matmul) compile for real GPUs.

As `test_gpu_compile.py`: the interpreter accepts code the GPU compiler rejects, so every variant
the launchers can produce (fp32 with IEEE products, bf16/fp16 with TF32; head dims 64 and 128; with
and without initial state, final state and fused L2 norm) is lowered through Triton's whole
pipeline to a cubin for sm_90 (and the bf16 Qwen3-Next shapes for sm_80) with the ptxas in the
triton wheel, in a fresh interpreter without TRITON_INTERPRET.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

COMPILE = r"""
import itertools, torch, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from decide.kernels import gated_delta_triton as gdt, moe_triton as mt

def build(fn, types, consts, target, **options):
    options["enable_fp_fusion"] = True  # what the launchers pass
    sig = {n: "constexpr" if n in consts else types.get(n, "i32") for n in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts)
    kernel = triton.compile(src, target=target, options=options)
    assert kernel.asm["cubin"], fn.__name__

H100, A100 = GPUTarget("cuda", 90, 32), GPUTarget("cuda", 80, 32)
cuda = torch.device("cuda")
for name, dk, flags in itertools.product(("fp32", "bf16", "fp16"), (64, 128), (True, False)):
    ptr = "*" + name
    types = dict(q=ptr, k=ptr, v=ptr, g="*fp32", beta=ptr, h0="*fp32", out=ptr, ht="*fp32",
                 lengths="*i64", scale="fp32")
    state = dict(HAS_H0=flags, STORE_HT=flags, L2NORM=flags)
    targets = (H100, A100) if (name, dk, flags) == ("bf16", 128, True) else (H100,)
    bt, bv = gdt.chunk_tiles(dk, cuda)
    precision = "ieee" if name == "fp32" else "tf32"
    for target in targets:
        build(gdt._chunk_kernel, types, dict(DK=dk, DV=dk, BT=bt, BK=dk, BV=bv,
              DOT_PRECISION=precision, **state), target, num_warps=4, num_stages=1)
        build(gdt._recurrent_kernel, types, dict(DK=dk, DV=dk, BK=dk, BV=min(64, dk), **state),
              target, num_warps=4, num_stages=1)
bm, bn, bk = mt._tiles(cuda)
for name, scale in itertools.product(("fp32", "bf16", "fp16"), (False, True)):
    types = dict(a="*" + name, w="*" + name, out="*fp32", pairs="*i64", block_expert="*i64",
                 scales="*fp32")
    consts = dict(HAS_SCALE=scale, UPCAST=False, DOT_PRECISION="ieee" if name == "fp32" else "tf32",
                  BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk)
    for target in (H100, A100) if name == "bf16" else (H100,):
        build(mt._grouped_matmul_kernel, types, consts, target, num_warps=4, num_stages=2)
print("compiled")
"""


@pytest.mark.slow
def test_hybrid_kernels_compile_for_gpus() -> None:
    pytest.importorskip("triton.backends.nvidia", reason="triton without its NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("compiled")
