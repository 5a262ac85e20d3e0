"""moe_experts: the grouped torch backend and the Triton kernel against the token-by-token loop.

Shapes are awkward on purpose: hidden and intermediate sizes that are not multiples of the tiles,
experts that receive no token, experts that receive more tokens than one tile holds, a strided `x`,
K = 1 and K = 3. The pair buffers the kernel writes come NaN-poisoned (see conftest), so a pair it
forgets fails. Errors are relative to the largest output magnitude of each token.
"""

from __future__ import annotations

import pytest
import torch
from helpers.numerics import assert_rel_close

from decide.kernels.moe import moe_experts
from decide.kernels.moe_ref import moe_experts_loop_ref


def make_inputs(
    n: int, hidden: int, inter: int, experts: int, k: int, *, seed: int, dtype=torch.float32
):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, hidden + 5, generator=gen)[:, 3 : 3 + hidden]  # strided view
    logits = torch.randn(n, experts, generator=gen)
    logits[:, experts - 1] -= 100.0  # the last expert is never chosen
    logits[: n // 2, 0] += 100.0  # expert 0 gets more tokens than one tile
    probs = torch.softmax(logits, -1)
    weights, ids = torch.topk(probs, k, dim=-1)
    gate_up = 0.2 * torch.randn(experts, 2 * inter, hidden, generator=gen)
    down = 0.2 * torch.randn(experts, hidden, inter, generator=gen)
    return x.to(dtype), ids, weights, gate_up.to(dtype), down.to(dtype)


def assert_close_per_token(got: torch.Tensor, want: torch.Tensor, rtol: float) -> None:
    assert torch.isfinite(got).all(), "non-finite output (an unwritten pair?)"
    scale = want.float().abs().amax(dim=1, keepdim=True)
    assert_rel_close(got.float(), want.float(), rtol, scale=scale, what="moe output")


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize(
    ("n", "hidden", "inter", "experts", "k"), [(37, 72, 40, 6, 3), (20, 48, 24, 4, 1)]
)
def test_matches_token_by_token_loop(n, hidden, inter, experts, k, backend) -> None:
    x, ids, weights, gate_up, down = make_inputs(n, hidden, inter, experts, k, seed=n)
    got = moe_experts(x, ids, weights, gate_up, down, backend=backend)
    want = moe_experts_loop_ref(x, ids, weights, gate_up, down)
    assert got.shape == (n, hidden) and got.dtype == x.dtype
    assert_close_per_token(got, want, 1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_half_precision(dtype: torch.dtype) -> None:
    x, ids, weights, gate_up, down = make_inputs(29, 64, 48, 5, 2, seed=3, dtype=dtype)
    got = moe_experts(x, ids, weights, gate_up, down, backend="triton")
    want = moe_experts_loop_ref(x.float(), ids, weights, gate_up.float(), down.float())
    assert got.dtype == dtype
    assert_close_per_token(got, want, 2e-2)


def test_rows_do_not_depend_on_the_batch() -> None:
    """A token's output is the same alone as in a batch: its pairs are computed from its own row
    only and summed in a fixed order."""
    x, ids, weights, gate_up, down = make_inputs(23, 40, 24, 5, 2, seed=4)
    batch = moe_experts(x, ids, weights, gate_up, down, backend="triton")
    for row in (0, 11, 22):
        alone = moe_experts(
            x[row : row + 1],
            ids[row : row + 1],
            weights[row : row + 1],
            gate_up,
            down,
            backend="triton",
        )
        assert_rel_close(
            alone[0], batch[row], 1e-6, scale=batch[row].abs().max(), what=f"row {row}"
        )


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_no_tokens(backend: str) -> None:
    x, ids, weights, gate_up, down = make_inputs(0, 16, 8, 3, 2, seed=5)
    assert moe_experts(x, ids, weights, gate_up, down, backend=backend).shape == (0, 16)


def test_argument_checks_name_the_values() -> None:
    x, ids, weights, gate_up, down = make_inputs(4, 16, 8, 3, 2, seed=6)
    with pytest.raises(ValueError, match=r"expert ids must lie in \[0, 3\).*values there: \[3,"):
        moe_experts(x, torch.where(ids == ids[0, 0], 3, ids), weights, gate_up, down)
    with pytest.raises(TypeError, match=r"x, gate_up, down dtypes differ"):
        moe_experts(x, ids, weights, gate_up.bfloat16(), down)
    with pytest.raises(
        ValueError, match=r"gate_up\.shape is \(3, 12, 16\), expected \(3, 16, 16\)"
    ):
        moe_experts(x, ids, weights, gate_up[:, :12], down)
    with pytest.raises(ValueError, match=r"weights\.shape is \(4, 1\)"):
        moe_experts(x, ids, weights[:, :1], gate_up, down)
