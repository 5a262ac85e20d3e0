"""`block_attention`: a diffusion block's queries over its cached prefix plus the block itself.

Entry point the engine calls in every attention layer while denoising a block. Contract: `q`
[B, Hq, L, D]; `k`, `v` [B, Hkv, S, D] with Hq % Hkv == 0 (grouped-query heads: query head h reads
kv head h // (Hq / Hkv)); all three fp32, bf16 or fp16, one dtype, any strides (a cache stored
[B, S, H, D] and passed as `.transpose(1, 2)` is fine). Row b's cached prefix occupies key positions
[0, prefix_lens[b]) and the block's keys follow at [prefix_lens[b], prefix_lens[b] + L); positions
after that are padding. `block_lens` (default L) is each row's number of valid block positions:
every query of row b attends exactly the keys j < prefix_lens[b] + block_lens[b], so the block is
bidirectional and nothing attends padding; queries at i ≥ block_lens[b] produce finite values of no
meaning, and a row with no valid key outputs zeros. Requires 0 ≤ block_lens ≤ L, prefix_lens ≥ 0 and
prefix_lens + block_lens ≤ S, checked for CPU tensors (see below why not for CUDA ones). Softmax
scale defaults to 1/sqrt(D); accumulation is fp32 and the output has q's dtype, written into `out`
when given (any strides).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from decide.kernels import checks, dispatch
from decide.kernels.block_attention_ref import _HAS_ENABLE_GQA, block_attention_ref

KERNEL = dispatch.Kernel("block_attention", "decide.kernels.block_attention_triton")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
LEN_DTYPES = (torch.int32, torch.int64)


def block_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    prefix_lens: torch.Tensor,
    block_lens: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    backend: dispatch.Backend = "auto",
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """softmax(q kᵀ · scale) v over each row's valid keys; returns [B, Hq, L, D] in q's dtype."""
    name = KERNEL.name
    checks.ndim(name, "q", q, 4, "[B, Hq, L, D]")
    checks.ndim(name, "k", k, 4, "[B, Hkv, S, D]")
    checks.ndim(name, "v", v, 4, "[B, Hkv, S, D]")
    checks.dtype(name, "q", q, DTYPES)
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"{name}: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    b, hq, length, head_dim = q.shape
    hkv, seq_len = k.shape[1], k.shape[2]
    checks.shape(name, "k", k, (b, hkv, seq_len, head_dim), f"q is {tuple(q.shape)}")
    checks.shape(name, "v", v, tuple(k.shape), "same as k")
    if head_dim == 0:
        raise ValueError(f"{name}: head dim is 0 (q.shape {tuple(q.shape)})")
    if hkv == 0 or hq % hkv != 0:
        raise ValueError(f"{name}: {hq} query heads are not a multiple of {hkv} kv heads")
    checks.ndim(name, "prefix_lens", prefix_lens, 1, "[B]")
    checks.dtype(name, "prefix_lens", prefix_lens, LEN_DTYPES)
    checks.shape(name, "prefix_lens", prefix_lens, (b,), "one per batch row")
    if block_lens is not None:
        checks.ndim(name, "block_lens", block_lens, 1, "[B]")
        checks.dtype(name, "block_lens", block_lens, LEN_DTYPES)
        checks.shape(name, "block_lens", block_lens, (b,), "one per batch row")
    device = checks.same_device(
        name, q=q, k=k, v=v, prefix_lens=prefix_lens, block_lens=block_lens, out=out
    )
    if out is not None:
        checks.dtype(name, "out", out, (q.dtype,))
        checks.shape(name, "out", out, tuple(q.shape), "same as q")
    # The lengths are checked where that is free (CPU). On CUDA this entry point runs once per
    # attention layer, and a dozen tiny check kernels would cost more than some layers; the
    # kernel never reads outside k/v whatever the lengths, so a violation gives wrong numbers,
    # not a crash.
    if b > 0 and device.type == "cpu":
        checks.value(name, prefix_lens >= 0, "prefix_lens must be ≥ 0", prefix_lens)
        kv_len = prefix_lens.to(torch.int64) + (length if block_lens is None else block_lens)
        if block_lens is not None:
            ok = (block_lens >= 0) & (block_lens <= length)
            checks.value(name, ok, f"block_lens must lie in [0, L={length}]", block_lens)
        checks.value(
            name, kv_len <= seq_len, f"prefix_lens + block_lens must be ≤ S={seq_len}", kv_len
        )
    prefix_lens = prefix_lens.contiguous()  # the kernel reads element b at offset b
    block_lens = None if block_lens is None else block_lens.contiguous()
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    if out is None:
        out = dispatch.scratch(tuple(q.shape), q.dtype, device)

    if KERNEL.select(backend, device, grad=dispatch.needs_grad(q, k, v)) == "triton":
        KERNEL.triton().block_attention_triton(q, k, v, prefix_lens, block_lens, scale, out)
        return out
    if block_lens is None:
        block_lens = torch.full_like(prefix_lens, length)
    if device.type == "cpu" and not dispatch.needs_grad(q, k, v):
        return _rows_cpu(q, k, v, prefix_lens + block_lens, scale, out)
    out.copy_(block_attention_ref(q, k, v, prefix_lens, block_lens, scale))
    return out


def _rows_cpu(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    kv_lens: torch.Tensor,
    scale: float,
    out: torch.Tensor,
) -> torch.Tensor:
    """The CPU path: each row's queries over just its valid keys, through SDPA without a mask
    (its flash kernel skips the mask reads and the padding keys: 49 -> 37 ms a layer for 16 rows
    of 330 tokens of the bundled model on an Intel Xeon, docs/benchmarks.md), written into `out`.
    Equal to `block_attention_ref` up to rounding (tests/kernels)."""
    gqa = q.shape[1] != k.shape[1]
    for b, n in enumerate(kv_lens.tolist()):
        if n == 0:
            out[b].zero_()
            continue
        kb, vb = k[b : b + 1, :, :n], v[b : b + 1, :, :n]
        if gqa and not _HAS_ENABLE_GQA:
            group = q.shape[1] // k.shape[1]
            kb, vb = kb.repeat_interleave(group, dim=1), vb.repeat_interleave(group, dim=1)
            out[b] = F.scaled_dot_product_attention(q[b : b + 1], kb, vb, scale=scale)[0]
        else:
            out[b] = F.scaled_dot_product_attention(
                q[b : b + 1], kb, vb, scale=scale, enable_gqa=gqa
            )[0]
    return out
