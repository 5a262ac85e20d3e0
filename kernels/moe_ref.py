"""PyTorch backends of `moe_experts`: a dense loop (the oracle) and the grouped-by-expert form.

Contract (checked in `decide.kernels.moe`): token n with routing choices `ids[n, j]` and weights
`weights[n, j]` (j < K) gets

    out[n] = Σ_j weights[n, j] · down[e] (silu(gate[e] x_n) ⊙ (up[e] x_n)),   e = ids[n, j],

where `gate_up[e]` `[2I, H]` stacks gate[e] (rows < I) over up[e] (rows ≥ I) and `down[e]` is
`[H, I]`: the SwiGLU experts of Qwen2/3-MoE and Qwen3-Next. Products accumulate in fp32; the result
has x's dtype.

`moe_experts_loop_ref` walks token by token and choice by choice, nothing shared: slow, obviously
right. `moe_experts_grouped_ref` is what the torch backend runs: the (token, choice) pairs are
sorted by expert so each expert that received tokens runs two matmuls over all of them at once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def moe_experts_loop_ref(
    x: torch.Tensor,  # [N, H]
    ids: torch.Tensor,  # [N, K]
    weights: torch.Tensor,  # [N, K]
    gate_up: torch.Tensor,  # [E, 2I, H]
    down: torch.Tensor,  # [E, H, I]
) -> torch.Tensor:
    inter = down.shape[2]
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for n in range(x.shape[0]):
        xn = x[n].float()
        for j in range(ids.shape[1]):
            e = int(ids[n, j])
            w = gate_up[e].float()
            hidden = F.silu(w[:inter] @ xn) * (w[inter:] @ xn)  # [I]
            out[n] += weights[n, j].float() * (down[e].float() @ hidden)
    return out.to(x.dtype)


def moe_experts_grouped_ref(
    x: torch.Tensor,
    ids: torch.Tensor,
    weights: torch.Tensor,
    gate_up: torch.Tensor,
    down: torch.Tensor,
) -> torch.Tensor:
    n, k = ids.shape
    inter = down.shape[2]
    flat = ids.reshape(-1)  # [N·K], pair p = (token p // K, choice p % K)
    order = torch.argsort(flat, stable=True)  # pairs grouped by expert
    counts = torch.bincount(flat, minlength=gate_up.shape[0]).tolist()
    pair_out = torch.empty(n * k, x.shape[1], dtype=torch.float32, device=x.device)
    start = 0
    for e, count in enumerate(counts):
        if count == 0:
            continue
        pairs = order[start : start + count]  # [P_e]
        start += count
        xe = x[pairs // k].float()  # [P_e, H]
        w = gate_up[e].float()
        hidden = F.silu(xe @ w[:inter].T) * (xe @ w[inter:].T)  # [P_e, I]
        pair_out[pairs] = (hidden @ down[e].float().T) * weights.reshape(-1)[pairs, None].float()
    # Summing each token's K contributions in a fixed order keeps the result batch-independent.
    return pair_out.view(n, k, x.shape[1]).sum(1).to(x.dtype)
