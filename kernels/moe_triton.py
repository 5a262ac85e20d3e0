"""Triton kernel for `moe_experts`: a grouped matmul over (token, choice) pairs sorted by expert.

Routing is laid out once per call in PyTorch (`expert_blocks`): the N·K (token, choice) pairs are
sorted by expert and each expert's run is padded to a multiple of BLOCK_M with −1, so every BLOCK_M
rows of the sorted list belong to one expert (`block_expert`). `_grouped_matmul_kernel` then runs
program (m, n) over those rows: it gathers their input rows (row = pair // row_div), multiplies by
the transposed tile of that one expert's weight, optionally scales each row by its routing weight,
and scatters the fp32 result to the pair's own output row. One launch computes every expert's
gate/up projection ([P, 2I]), SwiGLU runs in PyTorch, a second launch computes the down projection
scaled by the routing weights ([P, H]), and each token's K rows are summed in a fixed order, so the
result does not depend on how tokens are batched. Padding rows are neither read nor written.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from decide.kernels.dispatch import FP_FUSION, scratch


@triton.jit
def _grouped_matmul_kernel(
    a, w, out, pairs, block_expert, scales,
    n_out, n_in, row_div,
    stride_am, stride_ak,
    stride_we, stride_wn, stride_wk,
    stride_om, stride_on,
    HAS_SCALE: tl.constexpr,
    UPCAST: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):  # fmt: skip
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    e = tl.load(block_expert + pid_m).to(tl.int64)
    pair = tl.load(pairs + pid_m * BLOCK_M + tl.arange(0, BLOCK_M)).to(tl.int64)  # [BM]
    valid = pair >= 0
    row = tl.where(valid, pair // row_div, 0)  # [BM] input row of each pair
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # [BN] output features
    col_ok = cols < n_out
    kk = tl.arange(0, BLOCK_K)
    w_base = w + e * stride_we
    acc = tl.full((BLOCK_M, BLOCK_N), 0.0, tl.float32)
    for k0 in range(0, n_in, BLOCK_K):
        k_ok = (k0 + kk) < n_in
        at = tl.load(
            a + row[:, None] * stride_am + (k0 + kk)[None, :] * stride_ak,
            mask=valid[:, None] & k_ok[None, :],
            other=0.0,
        )  # [BM, BK]
        wt = tl.load(
            w_base + cols[None, :] * stride_wn + (k0 + kk)[:, None] * stride_wk,
            mask=k_ok[:, None] & col_ok[None, :],
            other=0.0,
        )  # [BK, BN]: W[e]ᵀ tile
        if UPCAST:
            at = at.to(tl.float32)
            wt = wt.to(tl.float32)
        acc += tl.dot(at, wt, input_precision=DOT_PRECISION)
    if HAS_SCALE:
        acc *= tl.load(scales + pair, mask=valid, other=0.0).to(tl.float32)[:, None]
    tl.store(
        out + pair[:, None] * stride_om + cols[None, :] * stride_on,
        acc,
        mask=valid[:, None] & col_ok[None, :],
    )


def _is_interpreted() -> bool:
    return type(_grouped_matmul_kernel).__name__ == "InterpretedFunction"


def expert_blocks(
    ids: torch.Tensor, num_experts: int, block_m: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(pairs [num_blocks · block_m] int64, −1 = padding; block_expert [num_blocks] int64)."""
    flat = ids.reshape(-1).to(torch.int64)  # [P]
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=num_experts)  # [E]
    blocks = (counts + block_m - 1) // block_m  # [E]
    num_blocks = int(blocks.sum())
    block_expert = torch.repeat_interleave(torch.arange(num_experts, device=ids.device), blocks)
    padded_start = torch.cumsum(blocks * block_m, 0) - blocks * block_m  # [E]
    run_start = torch.cumsum(counts, 0) - counts  # [E] first sorted index of each expert
    experts = flat[order]  # [P] sorted
    rank = torch.arange(flat.numel(), device=ids.device) - run_start[experts]
    pairs = torch.full((num_blocks * block_m,), -1, dtype=torch.int64, device=ids.device)
    pairs[padded_start[experts] + rank] = order
    return pairs, block_expert


def _tiles(device: torch.device) -> tuple[int, int, int]:
    if device.type != "cuda":
        return 16, 32, 32  # the interpreter: small tiles so test shapes cross tile edges
    return 64, 64, 32


def _grouped_matmul(
    a: torch.Tensor,  # [R, n_in]
    w: torch.Tensor,  # [E, n_out, n_in]
    pairs: torch.Tensor,
    block_expert: torch.Tensor,
    num_pairs: int,
    row_div: int,
    scales: torch.Tensor | None,  # [P] or None
    block_m: int,
) -> torch.Tensor:
    """[P, n_out] fp32: row p = a[p // row_div] @ w[expert of p]ᵀ (· scales[p])."""
    n_out, n_in = w.shape[1], w.shape[2]
    out = scratch((num_pairs, n_out), torch.float32, a.device)
    _, block_n, block_k = _tiles(a.device)
    half = w.dtype != torch.float32
    grid = (block_expert.numel(), triton.cdiv(n_out, block_n))
    _grouped_matmul_kernel[grid](
        a, w, out, pairs, block_expert, scales if scales is not None else out,
        n_out, n_in, row_div,
        *a.stride(), *w.stride(), *out.stride(),
        HAS_SCALE=scales is not None,
        UPCAST=half and _is_interpreted(),
        DOT_PRECISION="ieee" if not half or _is_interpreted() else "tf32",
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
        num_warps=4, num_stages=2, enable_fp_fusion=FP_FUSION,
    )  # fmt: skip
    return out


def moe_experts_triton(
    x: torch.Tensor,
    ids: torch.Tensor,
    weights: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
) -> torch.Tensor:
    """`moe_experts` on already-checked, non-empty arguments; returns [N, H] in x's dtype."""
    if x.device.type != "cuda" and not _is_interpreted():
        raise RuntimeError(
            "moe_experts: Triton kernels were compiled for the GPU but got CPU tensors; set "
            "TRITON_INTERPRET=1 before decide.kernels.moe_triton is imported"
        )
    n, k = ids.shape
    inter = down.shape[2]
    block_m = _tiles(x.device)[0]
    pairs, block_expert = expert_blocks(ids, gate_up.shape[0], block_m)
    xw = x.to(gate_up.dtype)
    gate_up_out = _grouped_matmul(xw, gate_up, pairs, block_expert, n * k, k, None, block_m)
    hidden = F.silu(gate_up_out[:, :inter]) * gate_up_out[:, inter:]  # [P, I] fp32
    scales = weights.reshape(-1).float().contiguous()  # [P]
    hidden = hidden.to(down.dtype)
    pair_out = _grouped_matmul(hidden, down, pairs, block_expert, n * k, 1, scales, block_m)
    return pair_out.view(n, k, x.shape[1]).sum(1).to(x.dtype)  # [N, H]
