"""gated_delta_rule: every backend and algorithm against the step-by-step recurrence.

The oracle is `gated_delta_recurrent_ref` (the recurrence written one position at a time), itself
checked against `transformers`' Qwen3-Next fallback. Cases mix ragged lengths (full, not a multiple
of the chunk size, 0, 1), grouped heads (2 or 4 value heads per key head), head dims 64 and 128 and
odd ones (48 × 80), a given or absent initial state, and q/k/v as strided views into one projection
(as the engine passes them). Output buffers come NaN-poisoned (see conftest), so a lane the kernel
forgets, including the zeros owed past each row's length, fails. Errors are relative to the largest
magnitude of the expected tensor per (row, head): outputs are sums whose elements can be near zero.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from helpers.numerics import assert_rel_close

from decide.kernels.gated_delta import gated_delta_rule
from decide.kernels.gated_delta_ref import gated_delta_recurrent_ref

RTOL = 1e-4


def make_inputs(
    b: int,
    length: int,
    hk: int,
    hv: int,
    dk: int,
    dv: int,
    *,
    seed: int,
    dtype: torch.dtype = torch.float32,
    with_state: bool = True,
):
    """q, k (L2-normalised), v as views of one [B, L, 2·Hk·Dk + Hv·Dv + 3] projection; g, beta
    with slow and fast decaying heads; a random initial state."""
    gen = torch.Generator().manual_seed(seed)
    width = 2 * hk * dk + hv * dv
    mixed = torch.randn(b, length, width + 3, generator=gen)
    q = F.normalize(mixed[..., : hk * dk].reshape(b, length, hk, dk), dim=-1)
    k = F.normalize(mixed[..., hk * dk : 2 * hk * dk].reshape(b, length, hk, dk), dim=-1)
    mixed[..., : hk * dk] = q.reshape(b, length, hk * dk)
    mixed[..., hk * dk : 2 * hk * dk] = k.reshape(b, length, hk * dk)
    mixed = mixed.to(dtype)
    q = mixed[..., : hk * dk].unflatten(-1, (hk, dk))  # strided views, like the engine's split
    k = mixed[..., hk * dk : 2 * hk * dk].unflatten(-1, (hk, dk))
    v = mixed[..., 2 * hk * dk : width].unflatten(-1, (hv, dv))
    rate = torch.empty(hv).uniform_(-5.0, 1.0, generator=gen).exp()  # per head: slow to fast
    g = -rate * F.softplus(torch.randn(b, length, hv, generator=gen))
    beta = torch.sigmoid(torch.randn(b, length, hv, generator=gen))
    state = 0.5 * torch.randn(b, hv, dk, dv, generator=gen) if with_state else None
    return q, k, v, g, beta, state


def assert_close_per_head(got: torch.Tensor, want: torch.Tensor, rtol: float, what: str) -> None:
    """Outputs [B, L, H, D] or states [B, H, K, V]: error relative to each (row, head)'s largest
    magnitude."""
    assert torch.isfinite(got).all(), f"{what}: non-finite values (unwritten lanes?)"
    if want.numel() == 0:
        assert got.shape == want.shape, what
        return
    head_dim = 2 if what.startswith("out") else 1
    reduce = tuple(d for d in range(1, 4) if d != head_dim)
    scale = want.float().abs().amax(dim=reduce, keepdim=True).clamp_min(1e-30)
    assert_rel_close(got.float(), want.float(), rtol, scale=scale, what=what)


CASES = {
    # (B, L, Hk, Hv, Dk, Dv, lengths)
    "d64-grouped": (4, 37, 2, 4, 64, 64, [37, 21, 0, 1]),
    "d128": (3, 45, 1, 2, 128, 128, [45, 16, 33]),
    "odd-dims": (3, 29, 1, 4, 48, 80, [29, 0, 17]),
}


@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("case", list(CASES))
def test_matches_step_by_step_recurrence(case: str, backend: str, mode: str) -> None:
    b, length, hk, hv, dk, dv, lens = CASES[case]
    q, k, v, g, beta, state = make_inputs(b, length, hk, hv, dk, dv, seed=len(case))
    lengths = torch.tensor(lens)
    before = state.clone()
    got = gated_delta_rule(q, k, v, g, beta, state, lengths, mode=mode, backend=backend)
    want_out, want_state = gated_delta_recurrent_ref(q, k, v, g, beta, state, lengths, dk**-0.5)
    assert_close_per_head(got.out, want_out, RTOL, f"out ({backend}, {mode})")
    assert got.final_state is not None
    assert_close_per_head(got.final_state, want_state, RTOL, f"state ({backend}, {mode})")
    for row, n in enumerate(lens):
        assert (got.out[row, n:] == 0).all(), f"row {row}: outputs past its length must be 0"
    assert torch.equal(state, before), "the initial state must not be modified"
    zero_row = lens.index(0) if 0 in lens else None
    if zero_row is not None:  # no step at all: the state passes through unchanged
        assert torch.equal(got.final_state[zero_row], state[zero_row])


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_without_initial_state_and_final_state(backend: str) -> None:
    q, k, v, g, beta, _ = make_inputs(2, 40, 2, 2, 64, 64, seed=3, with_state=False)
    got = gated_delta_rule(
        q, k, v, g, beta, mode="chunk", output_final_state=False, backend=backend
    )
    want, _ = gated_delta_recurrent_ref(q, k, v, g, beta, None, torch.tensor([40, 40]), 0.125)
    assert got.final_state is None
    assert_close_per_head(got.out, want, RTOL, f"out ({backend})")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_split_at_ragged_points_equals_one_pass(backend: str) -> None:
    """Run [0, c_b) with lengths = c, then the rest of each row from the returned state: the same
    outputs and final state as one pass (what the engine does to commit ragged counts)."""
    b, length = 3, 41
    q, k, v, g, beta, state = make_inputs(b, length, 1, 2, 64, 64, seed=4)
    cut = torch.tensor([17, 0, 41])
    whole = gated_delta_rule(q, k, v, g, beta, state, mode="chunk", backend=backend)
    first = gated_delta_rule(q, k, v, g, beta, state, cut, mode="chunk", backend=backend)
    for row, c in enumerate(cut.tolist()):
        rest = gated_delta_rule(
            *(x[row : row + 1, c:] for x in (q, k, v, g, beta)),
            first.final_state[row : row + 1],
            mode="recurrent",
            backend=backend,
        )
        assert_close_per_head(rest.out, whole.out[row : row + 1, c:], RTOL, "out (rest)")
        assert_close_per_head(
            first.out[row : row + 1, :c], whole.out[row : row + 1, :c], RTOL, "out (first)"
        )
        assert_close_per_head(rest.final_state, whole.final_state[row : row + 1], RTOL, "state")


@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_fused_l2_normalisation(backend: str, mode: str) -> None:
    """`qk_l2norm=True` on raw q/k equals the recurrence on q/k normalised beforehand."""
    q, k, v, g, beta, state = make_inputs(3, 26, 2, 4, 64, 32, seed=10)
    raw_q, raw_k = 3.0 * q, 0.5 * k  # what the projections give: not unit length
    lengths = torch.tensor([26, 9, 0])
    got = gated_delta_rule(
        raw_q, raw_k, v, g, beta, state, lengths, qk_l2norm=True, mode=mode, backend=backend
    )
    want, want_state = gated_delta_recurrent_ref(q, k, v, g, beta, state, lengths, 0.125)
    assert_close_per_head(got.out, want, RTOL, f"out ({backend}, {mode})")
    assert_close_per_head(got.final_state, want_state, RTOL, f"state ({backend}, {mode})")


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
def test_half_precision_inputs(mode: str, dtype: torch.dtype) -> None:
    """Half inputs, fp32 state and arithmetic: close to the fp32 recurrence on the same (rounded)
    inputs."""
    q, k, v, g, beta, state = make_inputs(2, 33, 2, 4, 64, 64, seed=5, dtype=dtype)
    lengths = torch.tensor([33, 20])
    got = gated_delta_rule(q, k, v, g, beta, state, lengths, mode=mode, backend="triton")
    assert got.out.dtype == dtype
    want, want_state = gated_delta_recurrent_ref(
        q.float(), k.float(), v.float(), g, beta, state, lengths, 0.125
    )
    assert_close_per_head(got.out, want, 1e-2, f"out ({mode})")
    assert_close_per_head(got.final_state, want_state, 1e-3, f"state ({mode})")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["recurrent", "chunk"])
def test_long_sequence_many_chunks(mode: str) -> None:
    """300 positions (19 interpreter chunks) with fast and slow heads: errors do not build up."""
    q, k, v, g, beta, state = make_inputs(2, 300, 1, 2, 64, 64, seed=6)
    lengths = torch.tensor([300, 257])
    got = gated_delta_rule(q, k, v, g, beta, state, lengths, mode=mode, backend="triton")
    want, want_state = gated_delta_recurrent_ref(q, k, v, g, beta, state, lengths, 0.125)
    assert_close_per_head(got.out, want, RTOL, "out")
    assert_close_per_head(got.final_state, want_state, RTOL, "state")


def test_reference_matches_transformers_fallback() -> None:
    """The step-by-step oracle agrees with `transformers`' own recurrent and chunked fallbacks of
    Qwen3-Next (an independent implementation of the same recurrence)."""
    modeling = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    q, k, v, g, beta, state = make_inputs(2, 70, 2, 4, 64, 32, seed=7)
    ours, ours_state = gated_delta_recurrent_ref(
        q, k, v, g, beta, state, torch.tensor([70, 70]), 0.125
    )
    # Named here: transformers >= 5.25 wraps them in hub-kernel modules that have no __name__.
    fallbacks = {
        "recurrent": modeling.torch_recurrent_gated_delta_rule,
        "chunked": modeling.torch_chunk_gated_delta_rule,
    }
    for name, fn in fallbacks.items():
        theirs, theirs_state = fn(
            q, k, v, g=g, beta=beta, initial_state=state.clone(), output_final_state=True
        )
        assert_close_per_head(ours, theirs, RTOL, f"out vs transformers' {name} fallback")
        assert_close_per_head(ours_state, theirs_state, RTOL, f"state vs {name} fallback")


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_empty_inputs(backend: str) -> None:
    q, k, v, g, beta, state = make_inputs(2, 0, 1, 2, 64, 64, seed=8)
    got = gated_delta_rule(q, k, v, g, beta, state, backend=backend)
    assert got.out.shape == (2, 0, 2, 64)
    assert torch.equal(got.final_state, state)


def test_argument_checks_name_the_values() -> None:
    q, k, v, g, beta, state = make_inputs(2, 8, 2, 4, 64, 32, seed=9)
    with pytest.raises(ValueError, match=r"3 value heads are not a multiple of 2 key heads"):
        gated_delta_rule(q, k, v[:, :, :3], g[..., :3], beta[..., :3])
    with pytest.raises(TypeError, match=r"dtypes differ"):
        gated_delta_rule(q, k, v.bfloat16(), g, beta)
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, L=8\].*\[9\]"):
        gated_delta_rule(q, k, v, g, beta, lengths=torch.tensor([9, 3]))
    with pytest.raises(ValueError, match=r"initial_state\.shape is \(2, 4, 32, 64\)"):
        gated_delta_rule(q, k, v, g, beta, state.transpose(2, 3))
    with pytest.raises(TypeError, match=r"initial_state\.dtype is torch\.bfloat16"):
        gated_delta_rule(q, k, v, g, beta, state.bfloat16())
    with pytest.raises(ValueError, match=r"beta\.shape is \(2, 8, 2\)"):
        gated_delta_rule(q, k, v, g, beta[..., :2])
    with pytest.raises(ValueError, match=r"mode='fast'"):
        gated_delta_rule(q, k, v, g, beta, mode="fast")  # type: ignore[arg-type]
