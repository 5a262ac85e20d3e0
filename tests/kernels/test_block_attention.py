"""block_attention: Triton (interpreted) against the reference, the reference against float64.

Every case mixes rows with a prefix of 0, ragged prefixes that end mid-tile and past a tile, a full
block, a short block and an empty block (prefix 0 and block 0: no key at all, output zeros), with
head dims 64, 80 and 128 and query/kv head ratios 1, 4 and 7. The kv cache is passed the way
engines store it, [B, S, H, D] transposed to [B, H, S, D], so strides are not the contiguous ones;
`out` is a strided, NaN-poisoned view. Padding key positions hold large values, so a kernel that
attended them would be far off; a second run with NaN padding proves padding is never even read.
Errors are relative to the largest |v| a head attends (outputs are convex combinations of v).
Half-precision results are judged against the reference evaluated in fp32 on the same (already
rounded) inputs, ≤ 1e-2.
"""

from __future__ import annotations

import math

import pytest
import torch
from helpers.numerics import assert_rel_close

from decide.kernels import block_attention
from decide.kernels.block_attention_ref import block_attention_ref

RTOL = {torch.float32: 1e-5, torch.bfloat16: 1e-2, torch.float16: 1e-2}
GARBAGE = 300.0


def make_inputs(
    b_prefix: list[int],
    b_block: list[int],
    length: int,
    hkv: int,
    group: int,
    head_dim: int,
    dtype: torch.dtype,
    seed: int,
    pad: float = GARBAGE,
):
    """q [B, Hq, L, D] and k, v [B, Hkv, S, D] (strided views of [B, S, Hkv, D]), lengths."""
    gen = torch.Generator().manual_seed(seed)
    b = len(b_prefix)
    s = max(p + length for p in b_prefix) + 5
    q = torch.randn(b, hkv * group, length, head_dim, generator=gen).to(dtype)
    k = torch.randn(b, s, hkv, head_dim, generator=gen)
    v = torch.randn(b, s, hkv, head_dim, generator=gen)
    for row, (p, n) in enumerate(zip(b_prefix, b_block, strict=True)):
        k[row, p + n :] = pad  # beyond the row's valid keys: must not be attended
        v[row, p + n :] = pad
    k = k.to(dtype).transpose(1, 2)  # [B, Hkv, S, D], stride of S is Hkv·D
    v = v.to(dtype).transpose(1, 2)
    # Length tensors as strided views too: the kernel must not assume they are contiguous.
    prefix = torch.tensor(b_prefix).repeat_interleave(2)[::2]
    block = torch.tensor(b_block, dtype=torch.int32).repeat_interleave(3)[::3]
    return q, k, v, prefix, block


def poisoned_out(q: torch.Tensor) -> torch.Tensor:
    """A NaN-filled [B, Hq, L, D] view with the L and Hq strides swapped."""
    b, h, length, d = q.shape
    return torch.full((b, length, h, d), math.nan, dtype=q.dtype).transpose(1, 2)


def assert_valid_close(
    got: torch.Tensor,
    want: torch.Tensor,
    v: torch.Tensor,
    prefix: torch.Tensor,
    block: torch.Tensor,
    rtol: float,
) -> None:
    """Compare queries i < block[b] only (the others need only be finite), each error measured
    against the largest |v| its head attends: an output is a convex combination of those rows."""
    assert torch.isfinite(got).all(), "non-finite output (unwritten or attended padding?)"
    group = got.shape[1] // v.shape[1]
    for row, (p, n) in enumerate(zip(prefix.tolist(), block.tolist(), strict=True)):
        if n == 0:
            continue
        g, w = got[row, :, :n].float(), want[row, :, :n].float()  # [Hq, n, D]
        vmax = v[row, :, : p + n].float().abs().amax(dim=(1, 2))  # [Hkv]
        scale = vmax.repeat_interleave(group)[:, None, None]  # [Hq, 1, 1]
        assert_rel_close(g, w, rtol, scale=scale, what=f"row {row}")


ROWS = {"prefix": [0, 37, 100, 0, 64], "block": [16, 5, 16, 0, 1]}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("group", [1, 4, 7])
@pytest.mark.parametrize("head_dim", [64, 80, 128])
def test_triton_matches_reference(head_dim: int, group: int, dtype: torch.dtype) -> None:
    hkv = 2 if group < 7 else 1
    q, k, v, prefix, block = make_inputs(
        ROWS["prefix"], ROWS["block"], 16, hkv, group, head_dim, dtype, head_dim * group
    )
    got = block_attention(q, k, v, prefix, block, backend="triton", out=poisoned_out(q))
    want = block_attention_ref(q.float(), k.float(), v.float(), prefix, block, head_dim**-0.5)
    assert_valid_close(got, want, v, prefix, block, RTOL[dtype])
    assert (got[3] == 0).all()  # the row without a single key


def test_padding_is_never_read() -> None:
    args = ROWS["prefix"], [13, 5, 13, 0, 1], 13, 2, 4, 80, torch.bfloat16, 5
    q, k, v, prefix, block = make_inputs(*args)
    finite = block_attention(q, k, v, prefix, block, backend="triton")
    q, k, v, prefix, block = make_inputs(*args, pad=math.nan)
    with_nan = block_attention(q, k, v, prefix, block, backend="triton")
    assert torch.equal(finite, with_nan)


def test_default_block_lens_and_scale() -> None:
    """block_lens=None means the full block; an explicit scale is honoured."""
    q, k, v, prefix, _ = make_inputs([0, 70, 33], [24, 24, 24], 24, 1, 4, 64, torch.float32, 9)
    got = block_attention(q, k, v, prefix, scale=0.3, backend="triton")
    want = block_attention_ref(q, k, v, prefix, torch.full_like(prefix, 24), 0.3)
    assert_valid_close(got, want, v, prefix, torch.full_like(prefix, 24), RTOL[torch.float32])


@pytest.mark.slow
def test_triton_matches_reference_engine_sized_block() -> None:
    """A 64-token block over prefixes up to 300 with Qwen3-like heads (D 128, 4 queries per kv)."""
    q, k, v, prefix, block = make_inputs(
        [0, 300, 129, 64], [64, 64, 17, 0], 64, 2, 4, 128, torch.bfloat16, 3
    )
    got = block_attention(q, k, v, prefix, block, backend="triton", out=poisoned_out(q))
    want = block_attention_ref(q.float(), k.float(), v.float(), prefix, block, 128**-0.5)
    assert_valid_close(got, want, v, prefix, block, RTOL[torch.bfloat16])


def naive(q, k, v, prefix: list[int], block: list[int], scale: float) -> torch.Tensor:
    """Independent oracle: float64, the mask written out entry by entry, softmax by hand."""
    b, hq, length, _ = q.shape
    hkv, s = k.shape[1], k.shape[2]
    out = torch.zeros(q.shape, dtype=torch.float64)
    for row in range(b):
        mask = torch.zeros(length, s, dtype=torch.bool)
        for i in range(length):
            for j in range(s):
                mask[i, j] = j < prefix[row] + block[row]
        for h in range(hq):
            kh = h // (hq // hkv)
            scores = q[row, h].double() @ k[row, kh].double().T * scale  # [L, S]
            scores = scores.masked_fill(~mask, -math.inf)
            if mask.any():
                weights = torch.exp(scores - scores.max(dim=1, keepdim=True).values)
                weights = weights / weights.sum(dim=1, keepdim=True)
                out[row, h] = weights @ v[row, kh].double()
    return out


@pytest.mark.parametrize(("group", "head_dim"), [(1, 64), (4, 80), (7, 128)])
def test_reference_matches_naive_oracle(group: int, head_dim: int) -> None:
    prefix, block = [0, 37, 0, 9], [8, 3, 0, 8]
    q, k, v, p, n = make_inputs(prefix, block, 8, 1, group, head_dim, torch.float32, group)
    got = block_attention(q, k, v, p, n, backend="torch", out=poisoned_out(q))
    want = naive(q, k, v, prefix, block, head_dim**-0.5)
    assert_valid_close(got, want, v, p, n, RTOL[torch.float32])
    assert (got[2] == 0).all()


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_empty_batch(backend: str) -> None:
    q = torch.randn(0, 4, 8, 64)
    kv = torch.randn(0, 2, 8, 64)
    out = block_attention(q, kv, kv, torch.zeros(0, dtype=torch.int64), backend=backend)
    assert out.shape == (0, 4, 8, 64)


def test_argument_checks_name_the_values() -> None:
    q = torch.randn(2, 6, 8, 64)
    k = torch.randn(2, 4, 20, 64)
    prefix = torch.tensor([3, 12])
    with pytest.raises(ValueError, match=r"6 query heads are not a multiple of 4 kv heads"):
        block_attention(q, k, k, prefix)
    k = k[:, :3]
    with pytest.raises(TypeError, match=r"dtypes differ: torch\.float32, torch\.bfloat16"):
        block_attention(q, k.bfloat16(), k.bfloat16(), prefix)
    with pytest.raises(ValueError, match=r"prefix_lens \+ block_lens must be ≤ S=20.*\[21\]"):
        block_attention(q, k, k, torch.tensor([3, 13]))
    with pytest.raises(ValueError, match=r"block_lens must lie in \[0, L=8\].*\[9\]"):
        block_attention(q, k, k, prefix, torch.tensor([9, 0]))
    with pytest.raises(ValueError, match=r"prefix_lens must be ≥ 0.*\[-1\]"):
        block_attention(q, k, k, torch.tensor([-1, 0]))
    with pytest.raises(ValueError, match=r"k\.shape is \(2, 3, 20, 32\), expected"):
        block_attention(q, k[..., :32], k, prefix)
    with pytest.raises(TypeError, match=r"prefix_lens\.dtype is torch\.float32"):
        block_attention(q, k, k, prefix.float())
    with pytest.raises(ValueError, match=r"out\.shape is \(2, 6, 8, 32\)"):
        block_attention(q, k, k, prefix, out=torch.empty(2, 6, 8, 32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_cpu_path_matches_reference_and_never_reads_padding(dtype: torch.dtype) -> None:
    """The CPU path (each row over its valid keys, SDPA without a mask) against the masked
    reference, GQA included; NaN padding changes nothing, the keyless row is zeros."""
    args = ROWS["prefix"], [13, 5, 13, 0, 1], 13, 2, 4, 32, dtype, 11
    q, k, v, prefix, block = make_inputs(*args)
    got = block_attention(q, k, v, prefix, block, backend="torch", out=poisoned_out(q))
    want = block_attention_ref(q.float(), k.float(), v.float(), prefix, block, 32**-0.5)
    assert_valid_close(got, want, v, prefix, block, RTOL[dtype])
    assert (got[3] == 0).all()
    q, k, v, prefix, block = make_inputs(*args, pad=math.nan)
    assert torch.equal(block_attention(q, k, v, prefix, block, backend="torch"), got)
