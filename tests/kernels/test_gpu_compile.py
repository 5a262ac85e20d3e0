"""The Triton kernels compile for real GPUs (sm_90 H100/H200, sm_80 A100) on a machine without one.

The interpreter runs kernel bodies as Python, so it accepts code the GPU compiler rejects (a plain
global inside a kernel, a type clash in a loop-carried value, a dot on mismatched dtypes). This
test lowers every kernel variant the launchers can produce through Triton's whole pipeline down to
a cubin with the ptxas that ships in the triton wheel; it needs no driver. It runs in a fresh
interpreter because this one imported the kernel modules in interpreter mode.
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
from decide.kernels import block_attention_triton as bat, masked_confidence_triton as mct

def build(fn, types, consts, target, **options):
    options["enable_fp_fusion"] = True  # what the launchers pass
    sig = {n: "constexpr" if n in consts else types.get(n, "i32") for n in fn.arg_names}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts)
    kernel = triton.compile(src, target=target, options=options)
    assert kernel.asm["cubin"], fn.__name__

H100, A100 = GPUTarget("cuda", 90, 32), GPUTarget("cuda", 80, 32)
F32 = "*fp32"
BOOLS = (False, True)
for dtype, entropy, final in itertools.product(("fp32", "bf16", "fp16"), BOOLS, BOOLS):
    if dtype == "fp16" and not (final and entropy):
        continue
    types = dict(logits="*" + dtype, bitmask="*i32", rows="*i64", token_out="*i64",
                 prob_out=F32, margin_out=F32, entropy_out=F32, part_f=F32, part_i="*i32")
    consts = dict(HAS_ROWS=True, ENTROPY=entropy, FINAL=final, UNROLL=2, BLOCK_W=128, LANE=False)
    for target in (H100, A100) if (dtype, entropy, final) == ("bf16", False, True) else (H100,):
        build(mct._masked_confidence_kernel, types, consts, target, num_warps=8)
# Groups of four tiles, as `benchmarks/kernels.py --sweep` times them.
for lane in BOOLS:
    build(mct._masked_confidence_kernel, dict(types, logits="*bf16"),
          dict(HAS_ROWS=False, ENTROPY=False, FINAL=False, UNROLL=4, BLOCK_W=64, LANE=lane), H100,
          num_warps=4)
build(mct._masked_confidence_kernel, dict(types, logits="*bf16"),
      dict(HAS_ROWS=True, ENTROPY=True, FINAL=True, UNROLL=1, BLOCK_W=32, LANE=True), H100,
      num_warps=2)
# The default launch (`launch_config`): 1,024-token tiles, 2 warps, one tile per step.
for target in (H100, A100):
    build(mct._masked_confidence_kernel, dict(types, logits="*bf16"),
          dict(HAS_ROWS=False, ENTROPY=False, FINAL=False, UNROLL=1, BLOCK_W=32, LANE=False), target,
          num_warps=2)
for entropy in (False, True):
    types = dict(part_f=F32, part_i="*i32", token_out="*i64", prob_out=F32, margin_out=F32,
                 entropy_out=F32)
    build(mct._combine_kernel, types, dict(ENTROPY=entropy, BLOCK_S=4), H100, num_warps=1)
for (name, dtype), head_dim in itertools.product(
    (("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)), (64, 80, 128)
):
    cfg = bat.launch_config(head_dim, dtype, torch.device("cuda"))
    ptr = "*" + name
    types = dict(q=ptr, k=ptr, v=ptr, o=ptr, prefix_lens="*i64", block_lens="*i32",
                 qk_scale="fp32")
    consts = dict(HEAD_DIM=head_dim, HAS_BLOCK_LENS=True, UPCAST=False,
                  DOT_PRECISION="ieee" if name == "fp32" else "tf32",
                  BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n,
                  BLOCK_D=triton.next_power_of_2(head_dim))
    for target in (H100, A100) if (name, head_dim) == ("bf16", 128) else (H100,):
        build(bat._block_attention_kernel, types, consts, target,
              num_warps=cfg.num_warps, num_stages=cfg.num_stages)
print("compiled")
"""


@pytest.mark.slow
def test_kernels_compile_for_gpus() -> None:
    pytest.importorskip("triton.backends.nvidia", reason="triton without its NVIDIA backend")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", COMPILE], env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip().endswith("compiled")
