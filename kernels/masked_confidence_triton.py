"""Triton kernel for `masked_confidence`: one streaming pass over the logits, no masked copy.

Program (n, k) reads output row n's logits row (`rows[n]` or n) over the k-th contiguous chunk of
the first `vocab` columns, tile by tile, and never writes a masked copy. Each tile is viewed as
[BLOCK_W, 32] so that one int32 bitmask word broadcasts along its 32 tokens. State is kept per lane
(the tile's [BLOCK_W, 32] positions) so a tile costs one block reduction (its maximum, which the
online softmax needs) instead of five: per lane the rescaled exp-sum `s`, the entropy accumulator
`t` = Σ e·(x − m), and the lane's best logit, its id (the lane's first, hence lowest) and its
runner-up. The main loop loads two (or four) tiles before folding any (more bytes in flight for the
same lane state). With `LANE` (`_lane_scan`) each lane's running maximum is its own softmax shift
instead: no reduction per tile at all, one exp per token, the lanes merged at the end. With one
chunk per row the same program finishes the row; with several, each writes a partial (max, s, t,
best id, runner-up) and `_combine_kernel` merges them in chunk order, which keeps "lowest id wins"
exact. Semantics (empty rows, ties, −inf logits) are those of `masked_confidence_ref`; arguments
arrive checked by `masked_confidence.masked_confidence`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from decide.kernels import dispatch
from decide.kernels.dispatch import FP_FUSION
from decide.kernels.masked_confidence_ref import MaskedConfidence
from decide.kernels.triton_common import reduce_max, reduce_min, reduce_sum

INT32_MAX: tl.constexpr = tl.constexpr(2**31 - 1)

# A chunk should span several tiles, or the partials and the second launch stop paying for
# themselves; a GPU wants a few resident programs per SM to keep enough loads in flight.
MIN_TILES_PER_SPLIT = 4
PROGRAMS_PER_SM = 8  # 256 rows on 132 SMs: 4 programs per row, as measured fastest


@triton.jit
def _finish(
    n,
    best,
    token,
    second,
    total,
    ent_acc,
    token_out,
    prob_out,
    margin_out,
    entropy_out,
    ENTROPY: tl.constexpr,
):
    # `best` is also the softmax shift, so exp(best - shift) == 1 and prob == 1 / total.
    empty = best == float("-inf")
    total = tl.where(empty, 1.0, total)
    prob = 1.0 / total
    second_p = tl.exp(second - tl.where(empty, 0.0, best)) / total
    nan = float("nan")
    tl.store(token_out + n, tl.where(empty, -1, token).to(tl.int64))
    tl.store(prob_out + n, tl.where(empty, nan, prob))
    tl.store(margin_out + n, tl.where(empty, nan, prob - second_p))
    if ENTROPY:
        entropy = tl.log(total) - ent_acc / total
        tl.store(entropy_out + n, tl.where(empty, nan, entropy))


@triton.jit
def _load_tile(
    x_row, stride_lv, b_row, stride_bw, v0, end, MASKED: tl.constexpr, BLOCK_W: tl.constexpr
):
    """Logits of tokens [v0, v0 + 32·BLOCK_W) as fp32 [BW, 32], −inf where not allowed; ids."""
    neg_inf = float("-inf")
    word = v0 // 32 + tl.arange(0, BLOCK_W)[:, None]  # [BW, 1]
    bit = tl.arange(0, 32)[None, :]  # [1, 32]
    cols = v0 + tl.arange(0, BLOCK_W)[:, None] * 32 + bit  # [BW, 32]
    if MASKED:
        in_range = cols < end
        w = tl.load(b_row + word.to(tl.int64) * stride_bw, mask=word * 32 < end, other=0)
        x = tl.load(x_row + cols.to(tl.int64) * stride_lv, mask=in_range, other=neg_inf)
        allowed = (((w >> bit) & 1) != 0) & in_range
    else:
        # Full tiles carry no bounds mask, so the compiler can vectorise the logits load.
        w = tl.load(b_row + word.to(tl.int64) * stride_bw)
        x = tl.load(x_row + cols.to(tl.int64) * stride_lv)
        allowed = ((w >> bit) & 1) != 0
    return tl.where(allowed, x.to(tl.float32), neg_inf), cols


@triton.jit
def _load_pair(x_row, stride_lv, b_row, stride_bw, v0, end, BLOCK_W: tl.constexpr):
    """Two full tiles from `v0`, both loads issued before either is used."""
    BLOCK_V: tl.constexpr = BLOCK_W * 32
    xa, ca = _load_tile(x_row, stride_lv, b_row, stride_bw, v0, end, False, BLOCK_W)
    xb, cb = _load_tile(x_row, stride_lv, b_row, stride_bw, v0 + BLOCK_V, end, False, BLOCK_W)
    return xa, ca, xb, cb


@triton.jit
def _rescale(m, m_new, s, t, ENTROPY: tl.constexpr):
    """Move the lane sums from shift m to shift m_new (≥ m); returns the new shift, s, t."""
    neg_inf = float("-inf")
    # While nothing allowed has been seen m_new is -inf; shift by 0 so exp() stays 0, not NaN.
    m_safe = tl.where(m_new == neg_inf, 0.0, m_new)
    alpha = tl.exp(m - m_safe)
    if ENTROPY:
        moved = tl.where(m == neg_inf, 0.0, m - m_safe)
        t = alpha * (t + moved * s)
    return m_safe, s * alpha, t


@triton.jit
def _accumulate(x, cols, m_safe, s, t, top1, id1, top2, ENTROPY: tl.constexpr):
    """Add one tile (already covered by the shift m_safe) to the lane state."""
    neg_inf = float("-inf")
    e = tl.exp(x - m_safe)  # [BW, 32], 0 where not allowed
    if ENTROPY:
        # Allowed tokens with −inf logits have e == 0 and must add 0, not 0 · −inf.
        t += e * tl.where(x == neg_inf, 0.0, x - m_safe)
    s += e
    # Strict ">" keeps a lane's earliest (lowest) id on ties; a tie still lands in top2.
    gt = x > top1
    top2 = tl.where(gt, top1, tl.maximum(top2, x))
    id1 = tl.where(gt, cols, id1)
    top1 = tl.where(gt, x, top1)
    return s, t, top1, id1, top2


@triton.jit
def _step(x_row, stride_lv, b_row, stride_bw, v0, end, m, s, t, top1, id1, top2,
          MASKED: tl.constexpr, ENTROPY: tl.constexpr, BLOCK_W: tl.constexpr):  # fmt: skip
    """Fold one tile into the running state."""
    x, cols = _load_tile(x_row, stride_lv, b_row, stride_bw, v0, end, MASKED, BLOCK_W)
    m_new = tl.maximum(m, reduce_max(x, None))
    m_safe, s, t = _rescale(m, m_new, s, t, ENTROPY)
    s, t, top1, id1, top2 = _accumulate(x, cols, m_safe, s, t, top1, id1, top2, ENTROPY)
    return m_new, s, t, top1, id1, top2


@triton.jit
def _shared_scan(
    x_row, stride_lv, b_row, stride_bw, start, end,
    ENTROPY: tl.constexpr, UNROLL: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    """One chunk `[start, end)` of a row, with one softmax shift for the program: (best logit,
    its lowest id, runner-up, Σ exp(x − best), Σ exp(x − best)·(x − best))"""
    BLOCK_V: tl.constexpr = BLOCK_W * 32
    neg_inf = float("-inf")
    m = tl.full((), neg_inf, tl.float32)  # running max of the allowed logits seen so far
    s = tl.full((BLOCK_W, 32), 0.0, tl.float32)  # per lane Σ exp(x - m)
    t = tl.full((BLOCK_W, 32), 0.0, tl.float32)  # per lane Σ exp(x - m) * (x - m)
    top1 = tl.full((BLOCK_W, 32), neg_inf, tl.float32)
    id1 = tl.full((BLOCK_W, 32), INT32_MAX, tl.int32)
    top2 = tl.full((BLOCK_W, 32), neg_inf, tl.float32)

    # Unrolled tiles: UNROLL loads are issued before any is used, multiplying the bytes in flight
    # per register of lane state, and the group shares one rescale. Groups of four leave a
    # remainder that pairs, then single tiles, finish.
    group_end = start
    if UNROLL == 4:
        group_end = start + (end - start) // (4 * BLOCK_V) * (4 * BLOCK_V)
        for v0 in range(start, group_end, 4 * BLOCK_V):
            xa, ca, xb, cb = _load_pair(x_row, stride_lv, b_row, stride_bw, v0, end, BLOCK_W)
            xc, cc, xd, cd = _load_pair(
                x_row, stride_lv, b_row, stride_bw, v0 + 2 * BLOCK_V, end, BLOCK_W
            )
            m_ab = tl.maximum(reduce_max(xa, None), reduce_max(xb, None))
            m_cd = tl.maximum(reduce_max(xc, None), reduce_max(xd, None))
            m_new = tl.maximum(m, tl.maximum(m_ab, m_cd))
            m_safe, s, t = _rescale(m, m_new, s, t, ENTROPY)
            # Tiles in id order: each lane meets its ids in increasing order.
            s, t, top1, id1, top2 = _accumulate(xa, ca, m_safe, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _accumulate(xb, cb, m_safe, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _accumulate(xc, cc, m_safe, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _accumulate(xd, cd, m_safe, s, t, top1, id1, top2, ENTROPY)
            m = m_new
    pair_end = group_end
    if UNROLL >= 2:
        pair_end = group_end + (end - group_end) // (2 * BLOCK_V) * (2 * BLOCK_V)
        for v0 in range(group_end, pair_end, 2 * BLOCK_V):
            xa, ca, xb, cb = _load_pair(x_row, stride_lv, b_row, stride_bw, v0, end, BLOCK_W)
            m_new = tl.maximum(m, tl.maximum(reduce_max(xa, None), reduce_max(xb, None)))
            m_safe, s, t = _rescale(m, m_new, s, t, ENTROPY)
            s, t, top1, id1, top2 = _accumulate(xa, ca, m_safe, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _accumulate(xb, cb, m_safe, s, t, top1, id1, top2, ENTROPY)
            m = m_new
    full_end = start + (end - start) // BLOCK_V * BLOCK_V
    for v0 in range(pair_end, full_end, BLOCK_V):
        m, s, t, top1, id1, top2 = _step(
            x_row, stride_lv, b_row, stride_bw, v0, end, m, s, t, top1, id1, top2,
            MASKED=False, ENTROPY=ENTROPY, BLOCK_W=BLOCK_W,
        )  # fmt: skip
    if full_end < end:
        m, s, t, top1, id1, top2 = _step(
            x_row, stride_lv, b_row, stride_bw, full_end, end, m, s, t, top1, id1, top2,
            MASKED=True, ENTROPY=ENTROPY, BLOCK_W=BLOCK_W,
        )  # fmt: skip

    best = reduce_max(top1, None)  # equals m
    token = reduce_min(tl.where(top1 == best, id1, INT32_MAX), None)
    # Lane ids are distinct, so `id1 == token` singles out the winning lane; the others' bests and
    # every lane's runner-up compete for second place.
    second = tl.maximum(
        reduce_max(top2, None), reduce_max(tl.where(id1 == token, neg_inf, top1), None)
    )
    total = reduce_sum(s, None)
    ent_acc = reduce_sum(t, None) if ENTROPY else 0.0

    return best, token, second, total, ent_acc


@triton.jit
def _lane_fold(x, v0, s, t, top1, id1, top2, ENTROPY: tl.constexpr):
    """Fold one tile into lane state whose softmax shift is each lane's own maximum (`top1`):
    one exp per token and no reduction across the tile. `id1` keeps the tile start of the lane's
    maximum (the lane's offset is added once at the end)."""
    neg_inf = float("-inf")
    live = x != neg_inf
    # 0 where either side is −inf: a lane's first live token then gets d = 1 on s = t = 0.
    diff = tl.where(live & (top1 != neg_inf), x - top1, 0.0)
    d = tl.where(live, tl.exp(-tl.abs(diff)), 0.0)  # exp(x − top1), or exp(top1 − x) if x wins
    gt = x > top1  # strict: the earlier (lower) id keeps a tie, which lands in top2
    if ENTROPY:
        # A new maximum moves t to the new shift (t·d − diff·s·d) and adds itself at 0.
        t = tl.where(gt, d * (t - diff * s), t + d * diff)
    s = tl.where(gt, s * d + 1.0, s + d)
    top2 = tl.where(gt, top1, tl.maximum(top2, x))
    id1 = tl.where(gt, v0, id1)
    top1 = tl.where(gt, x, top1)
    return s, t, top1, id1, top2


@triton.jit
def _lane_scan(
    x_row, stride_lv, b_row, stride_bw, start, end,
    ENTROPY: tl.constexpr, UNROLL: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    """`_shared_scan` with a shift per lane instead of one per program: no block reduction or
    barrier per tile, one exp per token; the lanes merge once at the end"""
    BLOCK_V: tl.constexpr = BLOCK_W * 32
    neg_inf = float("-inf")
    s = tl.full((BLOCK_W, 32), 0.0, tl.float32)  # per lane Σ exp(x − top1)
    t = tl.full((BLOCK_W, 32), 0.0, tl.float32)  # per lane Σ exp(x − top1) · (x − top1)
    top1 = tl.full((BLOCK_W, 32), neg_inf, tl.float32)
    id1 = tl.full((BLOCK_W, 32), 0, tl.int32)
    top2 = tl.full((BLOCK_W, 32), neg_inf, tl.float32)

    group_end = start
    if UNROLL == 4:
        group_end = start + (end - start) // (4 * BLOCK_V) * (4 * BLOCK_V)
        for v0 in range(start, group_end, 4 * BLOCK_V):
            xa, _, xb, _ = _load_pair(x_row, stride_lv, b_row, stride_bw, v0, end, BLOCK_W)
            xc, _, xd, _ = _load_pair(
                x_row, stride_lv, b_row, stride_bw, v0 + 2 * BLOCK_V, end, BLOCK_W
            )
            s, t, top1, id1, top2 = _lane_fold(xa, v0, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _lane_fold(xb, v0 + BLOCK_V, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _lane_fold(xc, v0 + 2 * BLOCK_V, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _lane_fold(xd, v0 + 3 * BLOCK_V, s, t, top1, id1, top2, ENTROPY)
    pair_end = group_end
    if UNROLL >= 2:
        pair_end = group_end + (end - group_end) // (2 * BLOCK_V) * (2 * BLOCK_V)
        for v0 in range(group_end, pair_end, 2 * BLOCK_V):
            xa, _, xb, _ = _load_pair(x_row, stride_lv, b_row, stride_bw, v0, end, BLOCK_W)
            s, t, top1, id1, top2 = _lane_fold(xa, v0, s, t, top1, id1, top2, ENTROPY)
            s, t, top1, id1, top2 = _lane_fold(xb, v0 + BLOCK_V, s, t, top1, id1, top2, ENTROPY)
    full_end = start + (end - start) // BLOCK_V * BLOCK_V
    for v0 in range(pair_end, full_end, BLOCK_V):
        x, _ = _load_tile(x_row, stride_lv, b_row, stride_bw, v0, end, False, BLOCK_W)
        s, t, top1, id1, top2 = _lane_fold(x, v0, s, t, top1, id1, top2, ENTROPY)
    if full_end < end:
        x, _ = _load_tile(x_row, stride_lv, b_row, stride_bw, full_end, end, True, BLOCK_W)
        s, t, top1, id1, top2 = _lane_fold(x, full_end, s, t, top1, id1, top2, ENTROPY)

    lane = tl.arange(0, BLOCK_W)[:, None] * 32 + tl.arange(0, 32)[None, :]  # [BW, 32]
    empty_lane = top1 == neg_inf
    ids = tl.where(empty_lane, INT32_MAX, id1 + lane)
    best = reduce_max(top1, None)
    shift = tl.where(best == neg_inf, 0.0, best)
    w = tl.where(empty_lane, 0.0, tl.exp(top1 - shift))
    total = reduce_sum(w * s, None)
    ent_acc = 0.0
    if ENTROPY:
        moved = tl.where(empty_lane, 0.0, top1 - shift)
        ent_acc = reduce_sum(w * (t + moved * s), None)
    token = reduce_min(tl.where(top1 == best, ids, INT32_MAX), None)
    second = tl.maximum(
        reduce_max(top2, None), reduce_max(tl.where(ids == token, neg_inf, top1), None)
    )
    return best, token, second, total, ent_acc


@triton.jit
def _masked_confidence_kernel(
    logits,
    stride_lm,
    stride_lv,
    bitmask,
    stride_bn,
    stride_bw,
    rows,
    vocab,
    tiles_per_split,
    token_out,
    prob_out,
    margin_out,
    entropy_out,
    part_f,
    part_i,
    HAS_ROWS: tl.constexpr,
    ENTROPY: tl.constexpr,
    FINAL: tl.constexpr,
    UNROLL: tl.constexpr,
    BLOCK_W: tl.constexpr,
    LANE: tl.constexpr,
):
    n = tl.program_id(0)
    split = tl.program_id(1)
    n_splits = tl.num_programs(1)
    BLOCK_V: tl.constexpr = BLOCK_W * 32
    row = tl.load(rows + n).to(tl.int64) if HAS_ROWS else n.to(tl.int64)
    x_row = logits + row * stride_lm
    b_row = bitmask + n.to(tl.int64) * stride_bn

    start = split * tiles_per_split * BLOCK_V
    end = tl.minimum(start + tiles_per_split * BLOCK_V, vocab)

    if LANE:
        best, token, second, total, ent_acc = _lane_scan(
            x_row, stride_lv, b_row, stride_bw, start, end, ENTROPY, UNROLL, BLOCK_W
        )
    else:
        best, token, second, total, ent_acc = _shared_scan(
            x_row, stride_lv, b_row, stride_bw, start, end, ENTROPY, UNROLL, BLOCK_W
        )
    if FINAL:
        _finish(n, best, token, second, total, ent_acc, token_out, prob_out, margin_out,
                entropy_out, ENTROPY)  # fmt: skip
    else:
        at = (n * n_splits + split).to(tl.int64)
        plane = tl.num_programs(0).to(tl.int64) * n_splits
        tl.store(part_f + at, best)
        tl.store(part_f + plane + at, total)
        tl.store(part_f + 2 * plane + at, ent_acc)
        tl.store(part_f + 3 * plane + at, second)
        tl.store(part_i + at, token)


@triton.jit
def _combine_kernel(
    part_f,
    part_i,
    n_splits,
    token_out,
    prob_out,
    margin_out,
    entropy_out,
    ENTROPY: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    n = tl.program_id(0)
    k = tl.arange(0, BLOCK_S)
    ok = k < n_splits
    at = n.to(tl.int64) * n_splits + k
    plane = tl.num_programs(0).to(tl.int64) * n_splits
    neg_inf = float("-inf")
    m_k = tl.load(part_f + at, mask=ok, other=neg_inf)  # [BS]
    s_k = tl.load(part_f + plane + at, mask=ok, other=0.0)
    second_k = tl.load(part_f + 3 * plane + at, mask=ok, other=neg_inf)
    id_k = tl.load(part_i + at, mask=ok, other=INT32_MAX)

    best = reduce_max(m_k, None)
    shift = tl.where(best == neg_inf, 0.0, best)
    w = tl.exp(m_k - shift)  # 0 for chunks without an allowed token
    total = reduce_sum(w * s_k, None)
    ent_acc = 0.0
    if ENTROPY:
        t_k = tl.load(part_f + 2 * plane + at, mask=ok, other=0.0)
        moved = tl.where(m_k == neg_inf, 0.0, m_k - shift)
        ent_acc = reduce_sum(w * (t_k + moved * s_k), None)
    # Chunks cover increasing ids, so the smallest id among the tied maxima is the lowest token.
    token = reduce_min(tl.where(m_k == best, id_k, INT32_MAX), None)
    second = tl.maximum(
        reduce_max(second_k, None), reduce_max(tl.where(id_k == token, neg_inf, m_k), None)
    )
    _finish(n, best, token, second, total, ent_acc, token_out, prob_out, margin_out, entropy_out,
            ENTROPY)  # fmt: skip


@functools.cache
def _sm_count(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _is_interpreted() -> bool:
    return type(_masked_confidence_kernel).__name__ == "InterpretedFunction"


class ConfidenceConfig(NamedTuple):
    block_w: int  # bitmask words per tile: a tile is 32·block_w tokens
    splits: int  # programs per row, each over one contiguous chunk of the vocabulary
    num_warps: int
    unroll: int  # tiles loaded per main-loop step: 1, 2 or 4
    lane_shift: bool = False  # one softmax shift per lane (no per-tile block reduction)


def launch_config(n_rows: int, vocab: int, device: torch.device) -> ConfidenceConfig:
    """Tile and grid for `n_rows` rows of `vocab` tokens, from the H200 sweep of 2026-12-04.

    At 256 × 151,936 bf16 (`benchmarks/kernels.py --sweep`, each config replayed from a CUDA
    graph) 1,024-token tiles on 2 warps, one tile per loop step and 4 programs per row took
    55.5 µs; the earlier choice made from register counts (2,048-token tiles, 4 warps, paired
    loads, 3 programs per row) took 92.5 µs. Tile size, warps and splits moved the time by up to
    1.7×, the loops' pipelining depth not at all. Small tiles leave more programs resident, each
    with less lane state. The lane-shift variant had not been timed on a GPU when this was chosen.
    """
    block_w = min(32, triton.next_power_of_2(max(1, triton.cdiv(vocab, 32))))
    tiles = triton.cdiv(vocab, 32 * block_w)
    splits = 1
    if device.type == "cuda":
        wanted = PROGRAMS_PER_SM * _sm_count(device.index or 0) // max(n_rows, 1)
        splits = max(1, min(wanted, tiles // MIN_TILES_PER_SPLIT))
    return ConfidenceConfig(block_w, splits, 2, 1)


def masked_confidence_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None,
    vocab: int,
    out: MaskedConfidence,
    *,
    config: ConfidenceConfig | None = None,
) -> None:
    """Fill `out` (token/prob/margin[/entropy], contiguous [N]); `config` overrides the choice."""
    if logits.device.type != "cuda" and not _is_interpreted():
        raise RuntimeError(
            "masked_confidence: Triton kernels were compiled for the GPU but got CPU tensors; "
            "set TRITON_INTERPRET=1 before decide.kernels.masked_confidence_triton is imported"
        )
    n = bitmask.shape[0]
    if n == 0:
        return
    cfg = config or launch_config(n, vocab, logits.device)
    if cfg.unroll not in (1, 2, 4):
        raise ValueError(f"masked_confidence: unroll must be 1, 2 or 4 tiles, got {cfg.unroll}")
    tiles = max(1, triton.cdiv(vocab, 32 * cfg.block_w))
    splits = min(cfg.splits, tiles)
    tiles_per_split = triton.cdiv(tiles, splits)
    splits = triton.cdiv(tiles, tiles_per_split)  # no chunk starts past the vocabulary

    want_entropy = out.entropy is not None
    entropy_out = out.entropy if want_entropy else out.prob  # never written when not wanted
    rows_arg = rows if rows is not None else out.token  # never read when there are no rows
    final = splits == 1
    part_shape = (4, n, splits) if not final else (1,)
    part_f = dispatch.scratch(part_shape, torch.float32, logits.device)
    part_i = dispatch.scratch(part_shape[1:] or (1,), torch.int32, logits.device)

    _masked_confidence_kernel[(n, splits)](
        logits, logits.stride(0), logits.stride(1),
        bitmask, bitmask.stride(0), bitmask.stride(1),
        rows_arg, vocab, tiles_per_split,
        out.token, out.prob, out.margin, entropy_out,
        part_f, part_i,
        HAS_ROWS=rows is not None, ENTROPY=want_entropy, FINAL=final, UNROLL=cfg.unroll,
        BLOCK_W=cfg.block_w,
        LANE=cfg.lane_shift,
        num_warps=cfg.num_warps,
        enable_fp_fusion=FP_FUSION,
    )  # fmt: skip
    if not final:
        _combine_kernel[(n,)](
            part_f, part_i, splits,
            out.token, out.prob, out.margin, entropy_out,
            ENTROPY=want_entropy, BLOCK_S=triton.next_power_of_2(splits),
            num_warps=1,
            enable_fp_fusion=FP_FUSION,
        )  # fmt: skip
