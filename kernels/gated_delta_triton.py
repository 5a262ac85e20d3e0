"""Triton kernels for `gated_delta_rule`: recurrent for short blocks, chunked for long prefixes.

Both run one program per (row b, value head h, tile of BV value dims) and keep that slice of the
state, S[:, tile] `[Dk, BV]`, in fp32 registers for the whole sequence: the state never touches
memory between positions, and value tiles are independent because every product in the recurrence
contracts over the key dimension only. Row b stops at `lengths[b]`: positions past it are loaded as
exact no-ops (q = k = 0, g = 0, beta = 0), so they write zero outputs and leave the state alone, and
the final state is the state after exactly `lengths[b]` steps. With L2NORM, q and k are scaled
to unit length in fp32 right after loading, eps 1e-6 as `gated_delta_ref.L2_EPS` (dead positions
stay 0: 0 · rsqrt(eps) = 0).

- `_recurrent_kernel`: per position, S ← e^g S; S ← S + k (beta (v − Sᵀk))ᵀ; o = scale Sᵀq, as
  elementwise products and reductions over Dk (a block of ≤ 64 tokens is latency, not FLOPs).
- `_chunk_kernel`: BT positions per step (the UT transform, as `gated_delta_chunk_ref`): the
  strictly lower matrix N[i, j] = beta_i (k_i·k_j) e^{G_i − G_j} (G the in-chunk cumulative log
  decay), T = (I + N)⁻¹ by forward substitution in registers, U = T (beta v), W = T (beta e^G k),
  V' = U − W S, O = scale ((e^G q) S + causal(q kᵀ e^{G_i − G_j}) V'),
  S ← e^{G_last} S + (e^{G_last − G} k)ᵀ V'. The cumulative sums are masked row reductions (a
  [BT, BT] triangle), which also run in the CPU interpreter.

fp32 inputs get IEEE fp32 products (TF32 would cost ~1e-3 relative error); half inputs use TF32 on
the GPU. Tile sizes are fixed, not autotuned, and have not been timed on a GPU yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from decide.kernels.dispatch import FP_FUSION
from decide.kernels.triton_common import reduce_sum

MAX_HEAD_DIM = 256


@triton.jit
def _recurrent_kernel(
    q, k, v, g, beta, h0, out, ht, lengths,
    scale,
    stride_qb, stride_ql, stride_qh, stride_qd,
    stride_kb, stride_kl, stride_kh, stride_kd,
    stride_vb, stride_vl, stride_vh, stride_vd,
    stride_gb, stride_gl, stride_gh,
    stride_bb, stride_bl, stride_bh,
    stride_sb, stride_sh, stride_sk, stride_sv,
    stride_ob, stride_ol, stride_oh, stride_od,
    stride_tb, stride_th, stride_tk, stride_tv,
    seq_len, n_v_heads, group,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    HAS_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    L2NORM: tl.constexpr,
):  # fmt: skip
    pid_bh = tl.program_id(0)
    pid_v = tl.program_id(1)
    b = (pid_bh // n_v_heads).to(tl.int64)
    h = (pid_bh % n_v_heads).to(tl.int64)
    hk = h // group
    dk = tl.arange(0, BK)  # [BK]
    dv = pid_v * BV + tl.arange(0, BV)  # [BV]
    mk = dk < DK
    mv = dv < DV
    m_state = mk[:, None] & mv[None, :]

    state = tl.full((BK, BV), 0.0, tl.float32)
    if HAS_H0:
        h0_ptr = h0 + b * stride_sb + h * stride_sh
        state = tl.load(
            h0_ptr + dk[:, None] * stride_sk + dv[None, :] * stride_sv, mask=m_state, other=0.0
        )
    n = tl.load(lengths + b)
    q_base = q + b * stride_qb + hk * stride_qh
    k_base = k + b * stride_kb + hk * stride_kh
    v_base = v + b * stride_vb + h * stride_vh
    o_base = out + b * stride_ob + h * stride_oh
    for t in range(0, n):
        qt = tl.load(q_base + t * stride_ql + dk * stride_qd, mask=mk, other=0.0).to(tl.float32)
        kt = tl.load(k_base + t * stride_kl + dk * stride_kd, mask=mk, other=0.0).to(tl.float32)
        if L2NORM:
            qt = qt * tl.rsqrt(reduce_sum(qt * qt, 0) + 1e-6)
            kt = kt * tl.rsqrt(reduce_sum(kt * kt, 0) + 1e-6)
        vt = tl.load(v_base + t * stride_vl + dv * stride_vd, mask=mv, other=0.0).to(tl.float32)
        gt = tl.load(g + b * stride_gb + t * stride_gl + h * stride_gh).to(tl.float32)
        bt = tl.load(beta + b * stride_bb + t * stride_bl + h * stride_bh).to(tl.float32)
        state = state * tl.exp(gt)
        predicted = reduce_sum(state * kt[:, None], 0)  # [BV] what the state recalls for k_t
        delta = (vt - predicted) * bt
        state = state + kt[:, None] * delta[None, :]
        ot = reduce_sum(state * qt[:, None], 0) * scale  # [BV]
        tl.store(o_base + t * stride_ol + dv * stride_od, ot.to(out.dtype.element_ty), mask=mv)
    zeros = tl.full((BV,), 0.0, tl.float32).to(out.dtype.element_ty)
    for t in range(n, seq_len):
        tl.store(o_base + t * stride_ol + dv * stride_od, zeros, mask=mv)
    if STORE_HT:
        ht_ptr = ht + b * stride_tb + h * stride_th
        tl.store(ht_ptr + dk[:, None] * stride_tk + dv[None, :] * stride_tv, state, mask=m_state)


@triton.jit
def _chunk_kernel(
    q, k, v, g, beta, h0, out, ht, lengths,
    scale,
    stride_qb, stride_ql, stride_qh, stride_qd,
    stride_kb, stride_kl, stride_kh, stride_kd,
    stride_vb, stride_vl, stride_vh, stride_vd,
    stride_gb, stride_gl, stride_gh,
    stride_bb, stride_bl, stride_bh,
    stride_sb, stride_sh, stride_sk, stride_sv,
    stride_ob, stride_ol, stride_oh, stride_od,
    stride_tb, stride_th, stride_tk, stride_tv,
    seq_len, n_v_heads, group,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BT: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    HAS_H0: tl.constexpr,
    STORE_HT: tl.constexpr,
    L2NORM: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):  # fmt: skip
    pid_bh = tl.program_id(0)
    pid_v = tl.program_id(1)
    b = (pid_bh // n_v_heads).to(tl.int64)
    h = (pid_bh % n_v_heads).to(tl.int64)
    hk = h // group
    dk = tl.arange(0, BK)  # [BK]
    dv = pid_v * BV + tl.arange(0, BV)  # [BV]
    mk = dk < DK
    mv = dv < DV
    m_state = mk[:, None] & mv[None, :]
    tt = tl.arange(0, BT)  # [BT] position inside the chunk
    rows = tt[:, None]  # [BT, 1] i
    cols = tt[None, :]  # [1, BT] j
    causal = cols <= rows  # [BT, BT] j ≤ i
    strictly = cols < rows
    eye = tl.where(rows == cols, 1.0, 0.0)

    state = tl.full((BK, BV), 0.0, tl.float32)
    if HAS_H0:
        h0_ptr = h0 + b * stride_sb + h * stride_sh
        state = tl.load(
            h0_ptr + dk[:, None] * stride_sk + dv[None, :] * stride_sv, mask=m_state, other=0.0
        )
    n = tl.load(lengths + b)
    q_base = q + b * stride_qb + hk * stride_qh
    k_base = k + b * stride_kb + hk * stride_kh
    v_base = v + b * stride_vb + h * stride_vh
    o_base = out + b * stride_ob + h * stride_oh
    for start in range(0, seq_len, BT):
        pos = start + tt  # [BT]
        live = pos < n  # dead positions load as exact no-ops
        m_qk = live[:, None] & mk[None, :]
        qc = tl.load(
            q_base + pos[:, None] * stride_ql + dk[None, :] * stride_qd, mask=m_qk, other=0.0
        ).to(tl.float32)  # [BT, BK]
        kc = tl.load(
            k_base + pos[:, None] * stride_kl + dk[None, :] * stride_kd, mask=m_qk, other=0.0
        ).to(tl.float32)  # [BT, BK]
        if L2NORM:
            qc = qc * tl.rsqrt(reduce_sum(qc * qc, 1) + 1e-6)[:, None]
            kc = kc * tl.rsqrt(reduce_sum(kc * kc, 1) + 1e-6)[:, None]
        vc = tl.load(
            v_base + pos[:, None] * stride_vl + dv[None, :] * stride_vd,
            mask=live[:, None] & mv[None, :],
            other=0.0,
        ).to(tl.float32)  # [BT, BV]
        gc = tl.load(g + b * stride_gb + pos * stride_gl + h * stride_gh, mask=live, other=0.0)
        bc = tl.load(beta + b * stride_bb + pos * stride_bl + h * stride_bh, mask=live, other=0.0)
        gc = gc.to(tl.float32)
        bc = bc.to(tl.float32)
        cum = reduce_sum(tl.where(causal, gc[None, :], 0.0), 1)  # [BT] G_i = Σ_{j≤i} g_j
        last = reduce_sum(tl.where(tt == BT - 1, cum, 0.0), 0)  # G of the chunk's last position
        # e^{G_i − G_j} below the diagonal; −inf above it so exp never overflows.
        decay = tl.exp(tl.where(causal, cum[:, None] - cum[None, :], float("-inf")))  # [BT, BT]

        kk = tl.dot(kc, tl.trans(kc), input_precision=DOT_PRECISION)  # [BT, BT]
        lower = tl.where(strictly, kk * decay * bc[:, None], 0.0)  # N
        # T = (I + N)⁻¹, row by row: X_i = −N_i − N_i X with X = T − I (rows < i already final).
        x = tl.full((BT, BT), 0.0, tl.float32)
        for i in range(1, BT):
            n_i = reduce_sum(tl.where(rows == i, lower, 0.0), 0)  # [BT] row i of N
            x_i = -n_i - reduce_sum(n_i[:, None] * x, 0)  # [BT]
            x = tl.where(rows == i, x_i[None, :], x)
        solve = x + eye  # [BT, BT]

        u = tl.dot(solve, vc * bc[:, None], input_precision=DOT_PRECISION)  # [BT, BV]
        w = tl.dot(
            solve, kc * (bc * tl.exp(cum))[:, None], input_precision=DOT_PRECISION
        )  # [BT, BK]
        v_new = u - tl.dot(w, state, input_precision=DOT_PRECISION)  # [BT, BV]
        qs = qc * scale
        scores = tl.dot(qs, tl.trans(kc), input_precision=DOT_PRECISION)  # [BT, BT]
        scores = tl.where(causal, scores * decay, 0.0)
        oc = tl.dot(qs * tl.exp(cum)[:, None], state, input_precision=DOT_PRECISION)
        oc += tl.dot(scores, v_new, input_precision=DOT_PRECISION)  # [BT, BV]
        tl.store(
            o_base + pos[:, None] * stride_ol + dv[None, :] * stride_od,
            oc.to(out.dtype.element_ty),
            mask=(pos < seq_len)[:, None] & mv[None, :],
        )
        k_end = kc * tl.exp(last - cum)[:, None]  # [BT, BK] decayed to the chunk's end
        state = state * tl.exp(last) + tl.dot(tl.trans(k_end), v_new, input_precision=DOT_PRECISION)
    if STORE_HT:
        ht_ptr = ht + b * stride_tb + h * stride_th
        tl.store(ht_ptr + dk[:, None] * stride_tk + dv[None, :] * stride_tv, state, mask=m_state)


def _is_interpreted() -> bool:
    return type(_recurrent_kernel).__name__ == "InterpretedFunction"


def chunk_tiles(head_k_dim: int, device: torch.device) -> tuple[int, int]:
    """(BT, BV) of the chunked kernel: small in the interpreter so test shapes cross chunks."""
    if device.type != "cuda":
        return 16, 16
    return (32, 32) if head_k_dim > 64 else (64, 32)


def gated_delta_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None,
    lengths: torch.Tensor,
    scale: float,
    out: torch.Tensor,
    final_state: torch.Tensor | None,
    *,
    chunked: bool,
    qk_l2norm: bool = False,
) -> None:
    """Fill `out` (and `final_state`) on already-checked, non-empty arguments."""
    if q.device.type != "cuda" and not _is_interpreted():
        raise RuntimeError(
            "gated_delta_rule: Triton kernels were compiled for the GPU but got CPU tensors; set "
            "TRITON_INTERPRET=1 before decide.kernels.gated_delta_triton is imported"
        )
    b, length, _, dk = q.shape
    hv, dv = v.shape[2], v.shape[3]
    if max(dk, dv) > MAX_HEAD_DIM:
        raise ValueError(f"gated_delta_rule: head dims {dk}, {dv} > {MAX_HEAD_DIM} (Triton)")
    group = hv // q.shape[2]
    block_k = max(16, triton.next_power_of_2(dk))
    # The pointers of absent tensors are never read (HAS_H0 / STORE_HT are compile-time off).
    h0 = initial_state if initial_state is not None else out
    ht = final_state if final_state is not None else out
    h0_strides = initial_state.stride() if initial_state is not None else (0, 0, 0, 0)
    ht_strides = final_state.stride() if final_state is not None else (0, 0, 0, 0)
    common = (
        q, k, v, g, beta, h0, out, ht, lengths, scale,
        *q.stride(), *k.stride(), *v.stride(), *g.stride(), *beta.stride(),
        *h0_strides, *out.stride(), *ht_strides,
        length, hv, group,
    )  # fmt: skip
    if chunked:
        bt, bv = chunk_tiles(dk, q.device)
        half = q.dtype != torch.float32
        grid = (b * hv, triton.cdiv(dv, bv))
        _chunk_kernel[grid](
            *common,
            DK=dk, DV=dv, BT=bt, BK=block_k, BV=bv,
            HAS_H0=initial_state is not None, STORE_HT=final_state is not None, L2NORM=qk_l2norm,
            DOT_PRECISION="tf32" if half and not _is_interpreted() else "ieee",
            num_warps=4, num_stages=1, enable_fp_fusion=FP_FUSION,
        )  # fmt: skip
        return
    bv = 16 if q.device.type != "cuda" else min(64, max(16, triton.next_power_of_2(dv)))
    grid = (b * hv, triton.cdiv(dv, bv))
    _recurrent_kernel[grid](
        *common,
        DK=dk, DV=dv, BK=block_k, BV=bv,
        HAS_H0=initial_state is not None, STORE_HT=final_state is not None, L2NORM=qk_l2norm,
        num_warps=4, num_stages=1, enable_fp_fusion=FP_FUSION,
    )  # fmt: skip
