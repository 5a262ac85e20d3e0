"""The building blocks every supported family shares: RMSNorm, rotary embeddings, SwiGLU MLP.

Numerics follow the reference implementations the families were trained with: normalisation in
fp32 and cast back before the weight multiplies, RoPE angles in fp32 with the "rotate half" layout
(first half of each head's dims paired with the second half).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


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
