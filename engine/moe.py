"""Attention + mixture-of-experts decoders: LLaDA2.0 (`llada2_moe`), SDAR-MoE (`sdar_moe`) and
LLaDA-MoE, run natively with the shared layers.

Contract. `MoeLM` is a `DiffusionLM` (same trunk, window/cache `forward`, `KVCache`, `logits`,
`token_logits`) with its own layers, configured by `ModelConfig.moe` (`MoeSpec`, `moe_config.py`).
Per layer: RMSNorm → GQA attention → residual → RMSNorm → dense SwiGLU or sparse MoE block →
residual; final RMSNorm and head. Attention (`model.SelfAttention`): q/k/v as three projections or
one fused `query_key_value` (rows q heads | k heads | v heads, LLaDA2's layout), optional per-head
q/k RMSNorm before RoPE, RoPE on the leading `rotary_dim` dims of each head (partial rotary),
masking by the family (`attention.py`: bidirectional or block-causal). MoE block: routing exactly as
the `MoeSpec` docstring states (softmax or sigmoid scores in fp32, expert bias, grouped top-k,
renormalisation, routed scaling), routed SwiGLU experts through `decide.kernels.moe_experts`, plus
an optional shared SwiGLU expert added unscaled. Routing is per token, so results never depend on
which other tokens share the batch.

Parameter names (the family's weight map translates checkpoint names to these): `embed`, `norm`,
`lm_head`, `layers.{i}.attn_norm`, `layers.{i}.mlp_norm`, `layers.{i}.attn.{q_proj,k_proj,v_proj |
qkv_proj, o_proj, q_norm, k_norm}`, dense `layers.{i}.mlp.{gate,up,down}_proj`, MoE
`layers.{i}.mlp.router.weight`, `layers.{i}.mlp.expert_bias`, `layers.{i}.mlp.experts.{e}.
{gate,up,down}_proj.weight` (stacked in memory, per expert in `state_dict`, as `hybrid.Experts`),
`layers.{i}.mlp.shared.{gate,up,down}_proj`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from decide.kernels.moe import moe_experts

from .config import ModelConfig
from .hybrid import Experts
from .layers import RMSNorm, SwiGLU
from .model import DiffusionLM, SelfAttention
from .moe_config import MoeSpec


def route(
    logits: torch.Tensor, spec: MoeSpec, bias: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Expert ids `[N, K]` and weights `[N, K]` (fp32) for router logits `[N, E]`."""
    logits = logits.float()
    scores = torch.sigmoid(logits) if spec.score == "sigmoid" else torch.softmax(logits, dim=-1)
    choice = scores if bias is None else scores + bias.float()
    if spec.n_group > 1:
        n = choice.shape[0]
        grouped = choice.view(n, spec.n_group, -1)
        group_scores = grouped.topk(2, dim=-1).values.sum(-1)  # [N, G]
        keep = group_scores.topk(spec.topk_group, dim=-1).indices
        allowed = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, keep, True)
        allowed = allowed[:, :, None].expand_as(grouped).reshape(n, -1)
        ids = choice.masked_fill(~allowed, float("-inf")).topk(spec.top_k, dim=-1).indices
    else:
        ids = choice.topk(spec.top_k, dim=-1).indices
    weights = torch.gather(choice if spec.bias_in_weights else scores, 1, ids)
    if spec.normalize:
        weights = weights / (weights.sum(-1, keepdim=True) + spec.normalize_eps)
    return ids, weights * spec.routed_scaling


class SparseMoeBlock(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        s = c.moe
        assert s is not None
        self.spec = s
        self.router = nn.Linear(c.hidden_size, s.num_experts, bias=False)
        self.expert_bias = nn.Parameter(torch.zeros(s.num_experts)) if s.expert_bias else None
        self.experts = Experts(s.num_experts, c.hidden_size, s.moe_intermediate_size)
        inter = s.shared_intermediate_size
        self.shared = SwiGLU(c.hidden_size, inter, bias=False) if inter else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])  # [N, H]
        logits = F.linear(flat.float(), self.router.weight.float())  # routing in fp32
        ids, weights = route(logits, self.spec, self.expert_bias)
        out = moe_experts(
            flat, ids, weights.to(flat.dtype), self.experts.gate_up_proj, self.experts.down_proj
        )
        if self.shared is not None:
            out = out + self.shared(flat)
        return out.view_as(x)


class MoeLayer(nn.Module):
    def __init__(self, c: ModelConfig, index: int) -> None:
        super().__init__()
        assert c.moe is not None
        self.attn_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.attn = SelfAttention(c, c.moe.rotary_dim, c.moe.fused_qkv)
        self.mlp_norm = RMSNorm(c.hidden_size, c.norm_eps)
        dense = c.moe.mlp_kinds[index] == "dense"
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size, bias=False) if dense else None
        if self.mlp is None:
            self.mlp = SparseMoeBlock(c)


class MoeLM(DiffusionLM):
    """Attention + MoE decoder of the `llada2_moe`, `sdar_moe` and `llada_moe` families: the
    LLaMA-style trunk of `DiffusionLM` with `MoeLayer`s and partial RoPE."""

    def __init__(self, config: ModelConfig) -> None:
        assert config.moe is not None, "a MoE model needs config.moe"
        super().__init__(config)

    def _layer(self, config: ModelConfig, index: int) -> nn.Module:
        return MoeLayer(config, index)

    @property
    def rotary_dim(self) -> int:
        assert self.config.moe is not None
        return self.config.moe.rotary_dim
