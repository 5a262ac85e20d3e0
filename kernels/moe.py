"""`moe_experts`: the routed SwiGLU experts of a mixture-of-experts block, grouped by expert.

Entry point the engine calls in every sparse MoE layer after routing (softmax, top-k, optional
renormalisation happen in the layer). Contract: `x` [N, H]; `ids` int32/int64 [N, K] with values in
[0, E); `weights` float [N, K]; `gate_up` [E, 2I, H] (gate rows over up rows) and `down` [E, H, I]
in x's dtype (fp32, bf16 or fp16); any strides. Returns [N, H] in x's dtype:
out[n] = Σ_j weights[n, j] · down[ids[n, j]] (silu(gate x_n) ⊙ up x_n), accumulated in fp32 (see
`moe_ref`). Backends: "torch" runs `moe_experts_grouped_ref` (one pair of matmuls per expert that
received tokens), "triton" the grouped matmul of `moe_triton`; the choice follows
`decide.kernels.dispatch`. Expert ids are checked on CPU; on CUDA an id out of range is a contract
bug (see `decide.kernels.checks`).
"""

from __future__ import annotations

import torch

from decide.kernels import checks, dispatch
from decide.kernels.moe_ref import moe_experts_grouped_ref

KERNEL = dispatch.Kernel("moe_experts", "decide.kernels.moe_triton")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
ID_DTYPES = (torch.int32, torch.int64)


def moe_experts(
    x: torch.Tensor,
    ids: torch.Tensor,
    weights: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
    *,
    backend: dispatch.Backend = "auto",
) -> torch.Tensor:
    """Σ over each token's routed experts of weight · SwiGLU expert output; see the docstring."""
    name = KERNEL.name
    checks.ndim(name, "x", x, 2, "[N, H]")
    checks.ndim(name, "ids", ids, 2, "[N, K]")
    checks.ndim(name, "gate_up", gate_up, 3, "[E, 2I, H]")
    checks.ndim(name, "down", down, 3, "[E, H, I]")
    checks.dtype(name, "x", x, DTYPES)
    checks.dtype(name, "ids", ids, ID_DTYPES)
    checks.dtype(name, "weights", weights, DTYPES)
    if gate_up.dtype != x.dtype or down.dtype != x.dtype:
        raise TypeError(
            f"{name}: x, gate_up, down dtypes differ: {x.dtype}, {gate_up.dtype}, {down.dtype}"
        )
    n, hidden = x.shape
    experts, inter = down.shape[0], down.shape[2]
    checks.shape(name, "weights", weights, tuple(ids.shape), "same as ids")
    checks.shape(name, "ids", ids, (n, ids.shape[1]), f"one row per token of x {tuple(x.shape)}")
    checks.shape(
        name, "gate_up", gate_up, (experts, 2 * inter, hidden), f"down is {tuple(down.shape)}"
    )
    checks.shape(name, "down", down, (experts, hidden, inter), f"x is {tuple(x.shape)}")
    device = checks.same_device(name, x=x, ids=ids, weights=weights, gate_up=gate_up, down=down)
    if ids.numel() and device.type == "cpu":
        ok = (ids >= 0) & (ids < experts)
        checks.value(name, ok, f"expert ids must lie in [0, {experts})", ids)
    grad = dispatch.needs_grad(x, weights, gate_up, down)
    if KERNEL.select(backend, device, grad=grad) == "triton":
        if ids.numel() == 0:
            return torch.zeros_like(x)
        return KERNEL.triton().moe_experts_triton(x, ids, weights, gate_up, down)
    return moe_experts_grouped_ref(x, ids, weights, gate_up, down)
