"""`gated_delta_rule`: the gated delta rule of Gated DeltaNet layers over ragged rows, from a state.

Entry point the engine calls in every GDN layer (Qwen3-Next, Clover). Contract: `q`, `k`
[B, L, Hk, Dk] and `v` [B, L, Hv, Dv] in one dtype (fp32, bf16 or fp16), Hv a multiple of Hk (value
head h reads query/key head h // (Hv / Hk)); `g` (log decay, ≤ 0) and `beta` [B, L, Hv] in any float
dtype; `initial_state` optional fp32 [B, Hv, Dk, Dv] (zeros when absent); `lengths` optional int
[B] in [0, L] (default L). Any strides. Row b runs the recurrence of `gated_delta_ref` for its first
`lengths[b]` positions: outputs there, zeros after, and the final state after exactly `lengths[b]`
steps, which is how a caller gets the state at a ragged commit point from one call. `qk_l2norm`
scales q and k to unit length in fp32 first (fused; Qwen3-Next's layers want it). `scale`
defaults to Dk ** −0.5. Returns `GatedDelta(out [B, L, Hv, Dv] in v's dtype, final_state fp32
[B, Hv, Dk, Dv] or None when `output_final_state=False`)`. Neither `initial_state` nor any other
input is modified.

Two algorithms: "recurrent" steps through the positions (cheap for a diffusion block of a few dozen
tokens), "chunk" processes a chunk of positions per sequential step with matmuls (prefixes);
`mode="auto"` picks chunk from `CHUNK_MIN_LENGTH[backend]` positions on. Both exist as a PyTorch
backend (`gated_delta_ref`) and a Triton kernel (`gated_delta_triton`), chosen by `backend` as for
every kernel (see `decide.kernels.dispatch`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import torch

from decide.kernels import checks, dispatch
from decide.kernels.gated_delta_ref import gated_delta_chunk_ref, gated_delta_recurrent_ref

KERNEL = dispatch.Kernel("gated_delta_rule", "decide.kernels.gated_delta_triton")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
LEN_DTYPES = (torch.int32, torch.int64)
# From these lengths on "auto" uses the chunked algorithm. In PyTorch one step of the recurrence is
# a handful of tiny ops (launch-bound), so chunking pays off early; the Triton recurrence keeps the
# state in registers and stays cheaper for a whole diffusion block.
CHUNK_MIN_LENGTH = {"torch": 16, "triton": 64}
Mode = Literal["auto", "recurrent", "chunk"]


class GatedDelta(NamedTuple):
    out: torch.Tensor  # [B, L, Hv, Dv], v's dtype
    final_state: torch.Tensor | None  # [B, Hv, Dk, Dv] fp32


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None,
    *,
    scale: float | None = None,
    qk_l2norm: bool = False,
    mode: Mode = "auto",
    output_final_state: bool = True,
    backend: dispatch.Backend = "auto",
) -> GatedDelta:
    """Outputs and final state of the gated delta rule; see the module docstring."""
    name = KERNEL.name
    checks.ndim(name, "q", q, 4, "[B, L, Hk, Dk]")
    checks.ndim(name, "k", k, 4, "[B, L, Hk, Dk]")
    checks.ndim(name, "v", v, 4, "[B, L, Hv, Dv]")
    checks.dtype(name, "q", q, DTYPES)
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"{name}: q, k, v dtypes differ: {q.dtype}, {k.dtype}, {v.dtype}")
    b, length, hk, dk = q.shape
    hv, dv = v.shape[2], v.shape[3]
    checks.shape(name, "k", k, tuple(q.shape), "same as q")
    checks.shape(name, "v", v, (b, length, hv, dv), f"q is {tuple(q.shape)}")
    if dk == 0 or dv == 0:
        raise ValueError(f"{name}: head dims must be positive, got Dk={dk}, Dv={dv}")
    if hk == 0 or hv % hk != 0:
        raise ValueError(f"{name}: {hv} value heads are not a multiple of {hk} key heads")
    for label, t in (("g", g), ("beta", beta)):
        checks.dtype(name, label, t, DTYPES)
        checks.shape(name, label, t, (b, length, hv), "[B, L, Hv]")
    if initial_state is not None:
        checks.dtype(name, "initial_state", initial_state, (torch.float32,))
        checks.shape(name, "initial_state", initial_state, (b, hv, dk, dv), "[B, Hv, Dk, Dv]")
    if lengths is not None:
        checks.ndim(name, "lengths", lengths, 1, "[B]")
        checks.dtype(name, "lengths", lengths, LEN_DTYPES)
        checks.shape(name, "lengths", lengths, (b,), "one per batch row")
    device = checks.same_device(
        name, q=q, k=k, v=v, g=g, beta=beta, initial_state=initial_state, lengths=lengths
    )
    if mode not in ("auto", "recurrent", "chunk"):
        raise ValueError(f"{name}: mode={mode!r}, expected 'auto', 'recurrent' or 'chunk'")
    if lengths is None:
        lengths = torch.full((b,), length, dtype=torch.int64, device=device)
    elif b > 0 and device.type == "cpu":
        ok = (lengths >= 0) & (lengths <= length)
        checks.value(name, ok, f"lengths must lie in [0, L={length}]", lengths)
    lengths = lengths.contiguous()
    scale = dk**-0.5 if scale is None else float(scale)
    grad = dispatch.needs_grad(q, k, v, g, beta, initial_state)
    chosen = KERNEL.select(backend, device, grad=grad)
    chunked = mode == "chunk" or (mode == "auto" and length >= CHUNK_MIN_LENGTH[chosen])
    if chosen == "triton":
        out = dispatch.scratch((b, length, hv, dv), v.dtype, device)
        state = (
            dispatch.scratch((b, hv, dk, dv), torch.float32, device) if output_final_state else None
        )
        if b > 0 and hv > 0 and length > 0:
            launch = KERNEL.triton().gated_delta_triton
            launch(
                q, k, v, g, beta, initial_state, lengths, scale, out, state,
                chunked=chunked, qk_l2norm=qk_l2norm,
            )  # fmt: skip
        elif state is not None:  # nothing to run: the state passes through unchanged
            state.copy_(initial_state if initial_state is not None else torch.zeros_like(state))
        return GatedDelta(out, state)
    reference = gated_delta_chunk_ref if chunked else gated_delta_recurrent_ref
    out, state = reference(q, k, v, g, beta, initial_state, lengths, scale, qk_l2norm)
    return GatedDelta(out, state if output_final_state else None)
