"""The hybrid Gated-DeltaNet + attention block-diffusion model (Qwen3-Next layout; the seed model).

Layers follow `config.hybrid.layer_types`: GDN layers (`gdn.py`) or gated full-attention layers
(q_proj gives each head's query and an output gate, per-head q/k RMSNorm, RoPE on the leading
`rotary_dim` dims only, output · sigmoid(gate)); each followed by a sparse MoE block (router
softmax, top-k, optional renormalisation, SwiGLU experts through `decide.kernels.moe_experts`, plus
a shared expert scaled by sigmoid(shared_expert_gate)) or a dense SwiGLU. Every RMSNorm except
the GDN output norm computes x̂ · (1 + w), with w stored around 0.

Block diffusion: attention layers are block-causal (bidirectional inside a `block_size` block,
causal across blocks, the same `AttentionPlan` as SDAR); GDN layers are causal. The window/cache
contract is `WindowedModel`'s, with a `HybridCache`: the committed prefix's attention keys/values
and, per GDN layer, its conv and recurrent state. A forward starts every GDN layer from the
committed state and only stages the state after the tokens it commits, so recomputing a block over
the same prefix is exact; `forward` overrides the base class only to tell the cache which counts
this forward commits before the layers run.

Expert weights live stacked (`experts.gate_up_proj` [E, 2I, H], `experts.down_proj` [E, H, I]) for
the grouped kernel; `state_dict` presents and `load_state_dict` accepts them per expert
(`experts.{e}.gate_proj.weight`, ...), the names checkpoints store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from decide.kernels.moe import moe_experts

from .attention import AttentionPlan, attend
from .config import ModelConfig
from .gdn import GatedDeltaNet
from .hybrid_cache import HybridCache
from .layers import SwiGLU, apply_partial_rope, rope_cos_sin
from .model import LinearHead, WindowedModel

EXPERT_PARTS = ("gate_proj", "up_proj", "down_proj")


class OffsetRMSNorm(nn.Module):
    """RMSNorm computing x̂ · (1 + w) in fp32 (Qwen3-Next's decoder norms; w is stored around 0)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * (1.0 + self.weight.float())).to(x.dtype)


class GatedAttention(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        assert c.hybrid is not None
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.rotary_dim = c.hybrid.rotary_dim
        q, kv = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, 2 * q, bias=c.attention_bias)  # query | gate
        self.k_proj = nn.Linear(c.hidden_size, kv, bias=c.attention_bias)
        self.v_proj = nn.Linear(c.hidden_size, kv, bias=c.attention_bias)
        self.o_proj = nn.Linear(q, c.hidden_size, bias=c.output_bias)
        self.q_norm = OffsetRMSNorm(c.head_dim, c.norm_eps)
        self.k_norm = OffsetRMSNorm(c.head_dim, c.norm_eps)

    def forward(
        self,
        x: torch.Tensor,  # [B, Lw, H]
        cos: torch.Tensor,  # [B, Lw, rotary_dim]
        sin: torch.Tensor,
        cache: HybridCache | None,
        slot: int,
        plan: AttentionPlan,
    ) -> torch.Tensor:
        b, lw, _ = x.shape
        # Per head the projection holds [query (D) | gate (D)].
        q, gate = self.q_proj(x).view(b, lw, self.num_heads, 2 * self.head_dim).chunk(2, dim=-1)
        gate = gate.reshape(b, lw, -1)  # [B, Lw, Hq·D]
        k = self.k_proj(x).view(b, lw, self.num_kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, lw, self.num_kv_heads, self.head_dim).transpose(1, 2)
        rot = self.rotary_dim
        q = apply_partial_rope(self.q_norm(q).transpose(1, 2), cos, sin, rot)  # [B, Hq, Lw, D]
        k = apply_partial_rope(self.k_norm(k).transpose(1, 2), cos, sin, rot)  # [B, Hkv, Lw, D]
        keys, values = (k, v) if cache is None else cache.write(slot, k, v, plan.span)
        out = attend(q, keys, values, plan).transpose(1, 2).reshape(b, lw, -1)  # [B, Lw, Hq·D]
        return self.o_proj(out * torch.sigmoid(gate))


def _split_experts(module: nn.Module, state: dict[str, Any], prefix: str, _meta: Any) -> None:
    """state_dict post-hook: stacked expert tensors → one entry per expert and projection."""
    gate_up = state.pop(prefix + "gate_up_proj")  # [E, 2I, H]
    down = state.pop(prefix + "down_proj")  # [E, H, I]
    inter = down.shape[2]
    for e in range(down.shape[0]):
        state[f"{prefix}{e}.gate_proj.weight"] = gate_up[e, :inter]
        state[f"{prefix}{e}.up_proj.weight"] = gate_up[e, inter:]
        state[f"{prefix}{e}.down_proj.weight"] = down[e]


def _stack_experts(module: nn.Module, state: dict[str, Any], prefix: str, *_: Any) -> None:
    """load_state_dict pre-hook: per-expert entries → the stacked tensors (the inverse)."""
    count = module.gate_up_proj.shape[0]
    names = [f"{prefix}{e}.{part}.weight" for e in range(count) for part in EXPERT_PARTS]
    if not all(name in state for name in names):
        return  # already stacked (or incomplete: strict loading reports what is missing)
    parts = {
        part: [state.pop(f"{prefix}{e}.{part}.weight") for e in range(count)]
        for part in EXPERT_PARTS
    }
    state[prefix + "gate_up_proj"] = torch.cat(
        (torch.stack(parts["gate_proj"]), torch.stack(parts["up_proj"])), dim=1
    )
    state[prefix + "down_proj"] = torch.stack(parts["down_proj"])


class Experts(nn.Module):
    def __init__(self, num_experts: int, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_up_proj = nn.Parameter(torch.empty(num_experts, 2 * intermediate, hidden))
        self.down_proj = nn.Parameter(torch.empty(num_experts, hidden, intermediate))
        self.register_state_dict_post_hook(_split_experts)
        self.register_load_state_dict_pre_hook(_stack_experts)


class SparseMoe(nn.Module):
    def __init__(self, c: ModelConfig) -> None:
        super().__init__()
        s = c.hybrid
        assert s is not None
        self.top_k, self.norm_topk_prob = s.num_experts_per_tok, s.norm_topk_prob
        self.gate = nn.Linear(c.hidden_size, s.num_experts, bias=False)  # the router
        self.experts = Experts(s.num_experts, c.hidden_size, s.moe_intermediate_size)
        self.shared_expert = SwiGLU(c.hidden_size, s.shared_expert_intermediate_size, bias=False)
        self.shared_expert_gate = nn.Linear(c.hidden_size, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.reshape(-1, x.shape[-1])  # [N, H]
        router = self.gate(flat)  # [N, E]
        probs = torch.softmax(router, dim=-1, dtype=torch.float32)
        weights, ids = torch.topk(probs, self.top_k, dim=-1)  # [N, K]
        if self.norm_topk_prob:
            weights = weights / weights.sum(-1, keepdim=True)
        routed = moe_experts(
            flat, ids, weights.to(router.dtype), self.experts.gate_up_proj, self.experts.down_proj
        )
        shared = torch.sigmoid(self.shared_expert_gate(flat)) * self.shared_expert(flat)
        return (routed + shared).view_as(x)


class HybridLayer(nn.Module):
    def __init__(self, c: ModelConfig, index: int) -> None:
        super().__init__()
        s = c.hybrid
        assert s is not None
        self.input_layernorm = OffsetRMSNorm(c.hidden_size, c.norm_eps)
        self.post_attention_layernorm = OffsetRMSNorm(c.hidden_size, c.norm_eps)
        self.linear_attn = GatedDeltaNet(c) if s.layer_types[index] == "linear_attention" else None
        self.self_attn = GatedAttention(c) if self.linear_attn is None else None
        moe = s.mlp_kinds[index] == "moe"
        self.mlp = SparseMoe(c) if moe else SwiGLU(c.hidden_size, c.intermediate_size, bias=False)


class HybridLM(LinearHead, WindowedModel):
    """Qwen3-Next-style hybrid run as a block-diffusion model; see the module docstring."""

    supports_queries = False  # its Gated DeltaNet layers carry a state along the window

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        assert config.hybrid is not None, "a hybrid model needs config.hybrid"
        self.config = config
        self.spec = config.hybrid
        self.embed = nn.Embedding(config.embedding_size, config.hidden_size)
        self.layers = nn.ModuleList(HybridLayer(config, i) for i in range(config.num_layers))
        self.norm = OffsetRMSNorm(config.hidden_size, config.norm_eps)
        self.lm_head = (
            None
            if config.tie_word_embeddings
            else nn.Linear(config.hidden_size, config.embedding_size, bias=False)
        )
        # Model layer → its index among the cache's attention layers or among its GDN layers.
        self.slots = {
            i: n
            for group in (self.spec.attention_layers, self.spec.gdn_layers)
            for n, i in enumerate(group)
        }

    def new_cache(self, batch_size: int, capacity: int = 0) -> HybridCache:  # type: ignore[override]
        c, s = self.config, self.spec
        return HybridCache.empty(
            batch_size=batch_size,
            capacity=capacity,
            num_attention_layers=len(s.attention_layers),
            num_kv_heads=c.num_kv_heads,
            head_dim=c.head_dim,
            hidden_size=c.hidden_size,
            num_gdn_layers=len(s.gdn_layers),
            conv_dim=s.conv_dim,
            conv_kernel=s.conv_kernel,
            state_shape=(s.linear_num_value_heads, s.linear_key_head_dim, s.linear_value_head_dim),
            dtype=self.dtype,
            device=self.device,
            limit=c.max_position_embeddings,
        )

    def forward(  # type: ignore[override]
        self,
        input_ids: torch.Tensor,
        cache: HybridCache | None = None,
        window_lens: torch.Tensor | None = None,
        commit: torch.Tensor | int | None = None,
        position_shift: torch.Tensor | None = None,
        outputs: Sequence[Sequence[int]] | None = None,
    ) -> torch.Tensor:
        """`WindowedModel.forward`; the GDN layers need the commit counts before they run.
        `outputs` is accepted and not used: every position's state is computed."""
        if cache is not None and input_ids.dim() == 2:
            b = input_ids.shape[0]
            counts = torch.as_tensor(0 if commit is None else commit, dtype=torch.long)
            cache.begin(counts.to(input_ids.device).expand(b).clone())
        return super().forward(  # type: ignore[arg-type]
            input_ids, cache, window_lens, commit, position_shift
        )

    def _trunk(
        self,
        input_ids: torch.Tensor,
        plan: AttentionPlan,
        cache: HybridCache | None,  # type: ignore[override]
    ) -> torch.Tensor:
        c = self.config
        x = self.embed(input_ids)  # [B, Lw, H]
        cos, sin = rope_cos_sin(plan.encoded_positions, self.spec.rotary_dim, c.rope_theta, x.dtype)
        counts = None if cache is None else cache.pending_counts
        for i, layer in enumerate(self.layers):
            slot = self.slots[i]
            h = layer.input_layernorm(x)
            if layer.linear_attn is not None:
                committed = None if cache is None else (cache.conv[slot], cache.state[slot])
                h, staged = layer.linear_attn(h, committed, plan.window_lens, counts)
                if staged is not None:
                    assert cache is not None
                    cache.stage(slot, *staged)
            else:
                h = layer.self_attn(h, cos, sin, cache, slot, plan)
            x = x + h
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return self.norm(x)
