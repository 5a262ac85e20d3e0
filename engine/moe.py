"""Attention + mixture-of-experts decoders: LLaDA2.0 (`llada2_moe`), SDAR-MoE (`sdar_moe`) and
LLaDA-MoE, run natively with the shared layers.

Contract. `MoeLM` is a `WindowedModel` (same window/cache `forward`, `KVCache`, `logits`,
`token_logits` as `DiffusionLM`) configured by `ModelConfig.moe` (`MoeSpec`, `moe_config.py`).
Per layer: RMSNorm → GQA attention → residual → RMSNorm → dense SwiGLU or sparse MoE block →
residual; final RMSNorm and head. Attention: q/k/v as three projections or one fused
`query_key_value` (rows q heads | k heads | v heads, LLaDA2's layout), optional per-head q/k RMSNorm
before RoPE, RoPE on the leading `rotary_dim` dims of each head (partial rotary), masking by the
family (`attention.py`: bidirectional or block-causal). MoE block: routing exactly as the
`MoeSpec` docstring states (softmax or sigmoid scores in fp32, expert bias, grouped top-k,
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

from .attention import AttentionPlan, attend
from .cache import KVCache
from .config import ModelConfig
from .hybrid import Experts
from .layers import RMSNorm, SwiGLU, apply_rope, rope_cos_sin
from .model import LinearHead, WindowedModel
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


class MoeAttention(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        assert c.moe is not None
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.rotary_dim = c.moe.rotary_dim
        q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        self.sizes = (q, kv, kv)
        self.qkv_proj = (
            nn.Linear(c.hidden_size, q + 2 * kv, bias=c.attention_bias) if c.moe.fused_qkv else None
        )
        if self.qkv_proj is None:
            self.q_proj = nn.Linear(c.hidden_size, q, bias=c.attention_bias)
            self.k_proj = nn.Linear(c.hidden_size, kv, bias=c.attention_bias)
            self.v_proj = nn.Linear(c.hidden_size, kv, bias=c.attention_bias)
        self.o_proj = nn.Linear(q, c.hidden_size, bias=c.output_bias)
        self.q_norm = RMSNorm(c.head_dim, c.norm_eps) if c.qk_norm else None
        self.k_norm = RMSNorm(c.head_dim, c.norm_eps) if c.qk_norm else None

    def _rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rot = self.rotary_dim
        if rot == self.head_dim:
            return apply_rope(x, cos, sin)
        return torch.cat((apply_rope(x[..., :rot], cos, sin), x[..., rot:]), dim=-1)

    def forward(
        self,
        x: torch.Tensor,  # [B, Lw, H]
        cos: torch.Tensor,  # [B, Lw, rotary_dim]
        sin: torch.Tensor,
        cache: KVCache | None,
        layer: int,
        plan: AttentionPlan,
    ) -> torch.Tensor:
        b, lw, _ = x.shape
        if self.qkv_proj is not None:
            q, k, v = self.qkv_proj(x).split(self.sizes, dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q = q.reshape(b, lw, self.num_heads, self.head_dim)
        k = k.reshape(b, lw, self.num_kv_heads, self.head_dim)
        v = v.reshape(b, lw, self.num_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = self._rope(q.transpose(1, 2), cos, sin)  # [B, Hq, Lw, D]
        k = self._rope(k.transpose(1, 2), cos, sin)  # [B, Hkv, Lw, D]
        keys, values = (k, v) if cache is None else cache.write(layer, k, v, plan.span)
        out = attend(q, keys, values, plan)  # [B, Hq, Lw, D]
        return self.o_proj(out.transpose(1, 2).reshape(b, lw, -1))


class MoeLayer(nn.Module):
    def __init__(self, c: ModelConfig, index: int) -> None:
        super().__init__()
        assert c.moe is not None
        self.attn_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.attn = MoeAttention(c)
        self.mlp_norm = RMSNorm(c.hidden_size, c.norm_eps)
        dense = c.moe.mlp_kinds[index] == "dense"
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size, bias=False) if dense else None
        if self.mlp is None:
            self.mlp = SparseMoeBlock(c)


class MoeLM(LinearHead, WindowedModel):
    """Attention + MoE decoder of the `llada2_moe`, `sdar_moe` and `llada_moe` families."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        assert config.moe is not None, "a MoE model needs config.moe"
        self.config = config
        self.embed = nn.Embedding(config.embedding_size, config.hidden_size)
        self.layers = nn.ModuleList(MoeLayer(config, i) for i in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.norm_eps)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.embedding_size, bias=False)
        )

    def _trunk(
        self, input_ids: torch.Tensor, plan: AttentionPlan, cache: KVCache | None
    ) -> torch.Tensor:
        c = self.config
        assert c.moe is not None
        x = self.embed(input_ids)  # [B, Lw, H]
        cos, sin = rope_cos_sin(plan.positions, c.moe.rotary_dim, c.rope_theta, x.dtype)
        for i, layer in enumerate(self.layers):
            x = x + layer.attn(layer.attn_norm(x), cos, sin, cache, i, plan)
            x = x + layer.mlp(layer.mlp_norm(x))
        return self.norm(x)
