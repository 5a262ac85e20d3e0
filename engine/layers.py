"""The building blocks every supported family shares: RMSNorm, rotary embeddings, SwiGLU MLP.

Numerics follow the reference implementations the families were trained with: normalisation in
fp32 and cast back before the weight multiplies, RoPE angles in fp32 with the "rotate half" layout
(first half of each head's dims paired with the second half).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

# Position-wise work over many tokens on a CPU runs in chunks of this many tokens: an MLP's
# intermediate activations of a whole batch (16 rows x 330 tokens x 1,536 = 32 MB for the bundled
# model) leave the caches between the matrix product that writes them, the activation and the
# product that reads them; chunks of 512 stay in cache (the bundled model's MLP 98 -> 81 ms on
# 5,280 tokens, an Intel Xeon; docs/benchmarks.md). Each token's result is computed exactly as
# unchunked.
CPU_TOKEN_CHUNK = 512


def by_token_chunks(fn: Callable[..., torch.Tensor], *xs: torch.Tensor) -> torch.Tensor:
    """`fn(*xs)` for a position-wise `fn` (each token's output depends on that token's entries of
    `xs` alone; every `x` `[..., H_x]` with the same leading dims), run in chunks of
    `CPU_TOKEN_CHUNK` tokens on a CPU outside autograd (whole elsewhere: GPUs want the large
    product, training the graph)."""
    x = xs[0]
    tokens = x.numel() // x.shape[-1] if x.shape[-1] else 0
    if x.device.type != "cpu" or tokens <= 2 * CPU_TOKEN_CHUNK or torch.is_grad_enabled():
        return fn(*xs)
    flats = [y.reshape(tokens, y.shape[-1]) for y in xs]
    parts = [
        fn(*(f[s : s + CPU_TOKEN_CHUNK] for f in flats)) for s in range(0, tokens, CPU_TOKEN_CHUNK)
    ]
    return torch.cat(parts).view(*x.shape[:-1], parts[0].shape[-1])


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables `[B, L, head_dim]` for integer `positions` `[B, L]`."""
    exponent = torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float()
    inv_freq = 1.0 / (theta ** (exponent / head_dim))  # [D/2]
    angles = positions.float()[..., None] * inv_freq  # [B, L, D/2]
    angles = torch.cat((angles, angles), dim=-1)  # [B, L, D]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` `[B, H, L, D]` by the tables `[B, L, D]`."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


def apply_partial_rope(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, rotary_dim: int
) -> torch.Tensor:
    """Rotate the leading `rotary_dim` dims of `x` `[B, H, L, D]` by the tables
    `[B, L, rotary_dim]` and pass the rest (partial rotary; all dims when `rotary_dim == D`)."""
    if rotary_dim == x.shape[-1]:
        return apply_rope(x, cos, sin)
    if rotary_dim == 0:
        return x
    return torch.cat((apply_rope(x[..., :rotary_dim], cos, sin), x[..., rotary_dim:]), dim=-1)


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int, bias: bool) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.up_proj = nn.Linear(hidden, intermediate, bias=bias)
        self.down_proj = nn.Linear(intermediate, hidden, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
