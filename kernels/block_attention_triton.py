"""Triton kernel for `block_attention`: flash-style attention of a block over its ragged prefix.

Program (m, b·Hkv + h) stacks the queries of the `group` query heads that share kv head h into one
[group·L, D] matrix and takes its m-th BLOCK_M rows, so each key/value tile is loaded once per group
instead of once per query head. It walks keys [0, prefix_lens[b] + block_lens[b]) in BLOCK_N tiles
with an online softmax (exp2, scale folded into log2 units), accumulates in fp32 and stops at the
row's own length, so padding is neither read nor attended and a short row costs only its length.
Every query of the block sees the same keys: bidirectional inside the block. A row without keys
writes zeros. q/k/v/out may have any strides. In the CPU interpreter, tl.dot on bf16 operands is
wrong (triton 3.x multiplies the raw uint16 storage), so there half-precision operands are widened
to fp32 after the same rounding the GPU path applies, which keeps the tested arithmetic identical.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from decide.kernels.dispatch import FP_FUSION
from decide.kernels.triton_common import reduce_max, reduce_sum

LOG2E = 1.4426950408889634
MAX_HEAD_DIM = 256


class AttentionConfig(NamedTuple):
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


@triton.jit
def _block_attention_kernel(
    q, k, v, o,
    prefix_lens, block_lens,
    qk_scale,
    stride_qb, stride_qh, stride_ql, stride_qd,
    stride_kb, stride_kh, stride_ks, stride_kd,
    stride_vb, stride_vh, stride_vs, stride_vd,
    stride_ob, stride_oh, stride_ol, stride_od,
    n_kv_heads, group, block_len, seq_len,
    HEAD_DIM: tl.constexpr,
    HAS_BLOCK_LENS: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // n_kv_heads).to(tl.int64)
    hk = (pid_bh % n_kv_heads).to(tl.int64)

    r = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # [BM], row of the stacked [group·L] queries
    row_ok = r < group * block_len
    head = hk * group + (r // block_len)  # [BM] query head
    i = r % block_len  # [BM] position in the block
    d = tl.arange(0, BLOCK_D)  # [BD]
    d_ok = d < HEAD_DIM  # a compile-time constant, so D == BLOCK_D loads stay vectorised

    q_ptr = q + b * stride_qb + head[:, None] * stride_qh + i[:, None] * stride_ql
    qt = tl.load(q_ptr + d[None, :] * stride_qd, mask=row_ok[:, None] & d_ok[None, :], other=0.0)
    if UPCAST:
        qt = qt.to(tl.float32)  # [BM, BD]

    kv_len = tl.load(prefix_lens + b)
    if HAS_BLOCK_LENS:
        kv_len += tl.load(block_lens + b)
    else:
        kv_len += block_len
    kv_len = tl.minimum(kv_len, seq_len)  # never read past S, even if a caller breaks the contract
    k_base = k + b * stride_kb + hk * stride_kh
    v_base = v + b * stride_vb + hk * stride_vh

    m_i = tl.full((BLOCK_M,), float("-inf"), tl.float32)
    l_i = tl.full((BLOCK_M,), 0.0, tl.float32)
    acc = tl.full((BLOCK_M, BLOCK_D), 0.0, tl.float32)
    for start in range(0, kv_len, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)  # [BN]
        n_ok = n < kv_len
        kt = tl.load(
            k_base + n[None, :].to(tl.int64) * stride_ks + d[:, None] * stride_kd,
            mask=n_ok[None, :] & d_ok[:, None],
            other=0.0,
        )  # [BD, BN]
        if UPCAST:
            kt = kt.to(tl.float32)
        scores = tl.dot(qt, kt, input_precision=DOT_PRECISION) * qk_scale  # [BM, BN], log2 units
        scores = tl.where(n_ok[None, :], scores, float("-inf"))
        # Every tile holds at least one valid key (start < kv_len), so m_new is finite.
        m_new = tl.maximum(m_i, reduce_max(scores, 1))
        p = tl.exp2(scores - m_new[:, None])  # [BM, BN]
        alpha = tl.exp2(m_i - m_new)  # [BM]
        l_i = l_i * alpha + reduce_sum(p, 1)
        vt = tl.load(
            v_base + n[:, None].to(tl.int64) * stride_vs + d[None, :] * stride_vd,
            mask=n_ok[:, None] & d_ok[None, :],
            other=0.0,
        )  # [BN, BD]
        p_op = p.to(vt.dtype)  # the tensor-core operand dtype, as in flash attention
        if UPCAST:
            p_op = p_op.to(tl.float32)
            vt = vt.to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p_op, vt, input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # l_i == 0 only when the row has no keys
    o_ptr = o + b * stride_ob + head[:, None] * stride_oh + i[:, None] * stride_ol
    tl.store(
        o_ptr + d[None, :] * stride_od,
        out.to(o.dtype.element_ty),
        mask=row_ok[:, None] & d_ok[None, :],
    )


def _is_interpreted() -> bool:
    return type(_block_attention_kernel).__name__ == "InterpretedFunction"


def launch_config(head_dim: int, dtype: torch.dtype, device: torch.device) -> AttentionConfig:
    """Tile sizes: fixed per (head dim, dtype), not autotuned, so results are bitwise repeatable."""
    if device.type != "cuda":
        # The interpreter: small tiles so modest test shapes still cross tile boundaries.
        return AttentionConfig(32, 32, 4, 1)
    # Chosen from sm_90 compiles (no spills, ≤ 128 KiB shared memory), not yet from timings:
    # `benchmarks/kernels.py --sweep` measures the alternatives. fp32 is not the hot path and
    # takes twice the registers and shared memory, hence its smaller tiles.
    if dtype == torch.float32:
        return AttentionConfig(64, 32, 8, 3)
    if head_dim <= 64:
        return AttentionConfig(128, 64, 4, 3)
    if head_dim <= 128:
        return AttentionConfig(128, 64, 8, 3)
    return AttentionConfig(64, 32, 8, 2)


def block_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    prefix_lens: torch.Tensor,
    block_lens: torch.Tensor | None,
    scale: float,
    out: torch.Tensor,
    *,
    config: AttentionConfig | None = None,
) -> None:
    """Fill `out` [B, Hq, L, D] on already-checked arguments; `config` overrides the tile sizes."""
    if q.device.type != "cuda" and not _is_interpreted():
        raise RuntimeError(
            "block_attention: Triton kernels were compiled for the GPU but got CPU tensors; "
            "set TRITON_INTERPRET=1 before decide.kernels.block_attention_triton is imported"
        )
    b, hq, length, head_dim = q.shape
    hkv, seq_len = k.shape[1], k.shape[2]
    if head_dim > MAX_HEAD_DIM:
        raise ValueError(f"block_attention: head dim {head_dim} > {MAX_HEAD_DIM} (Triton backend)")
    if b == 0 or hq == 0 or length == 0:
        return
    group = hq // hkv
    cfg = config or launch_config(head_dim, q.dtype, q.device)
    block_d = max(16, triton.next_power_of_2(head_dim))
    half = q.dtype != torch.float32
    grid = (triton.cdiv(group * length, cfg.block_m), b * hkv)
    _block_attention_kernel[grid](
        q, k, v, out,
        prefix_lens, block_lens if block_lens is not None else prefix_lens,
        scale * LOG2E,
        *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        hkv, group, length, seq_len,
        HEAD_DIM=head_dim,
        HAS_BLOCK_LENS=block_lens is not None,
        UPCAST=half and _is_interpreted(),
        # fp32 inputs get true fp32 products; tf32 would cost ~1e-3 relative error.
        DOT_PRECISION="ieee" if not half or _is_interpreted() else "tf32",
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_D=block_d,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages, enable_fp_fusion=FP_FUSION,
    )  # fmt: skip
