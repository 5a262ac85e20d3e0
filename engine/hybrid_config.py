"""What a hybrid Gated-DeltaNet + attention model adds to `ModelConfig`: one frozen `HybridSpec`.

`ModelConfig.hybrid` holds it for the `hybrid_gdn` family (Qwen3-Next layout; the seed model Clover
follows it) and is None for every other family. The shared `ModelConfig` fields keep their meaning
for the full-attention layers (heads, head dim, q/k norm, RoPE theta, attention bias) and for the
dense MLP layers (`intermediate_size`); this spec describes the per-layer mix, the GDN layers, the
partial rotary embedding and the mixture of experts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

LayerType = Literal["linear_attention", "full_attention"]
MlpKind = Literal["moe", "dense"]


@dataclass(frozen=True)
class HybridSpec:
    layer_types: tuple[LayerType, ...]  # per layer: GDN ("linear_attention") or gated attention
    mlp_kinds: tuple[MlpKind, ...]  # per layer: sparse MoE block or dense SwiGLU
    linear_num_key_heads: int  # GDN query/key heads
    linear_num_value_heads: int  # GDN value heads (a multiple of the key heads)
    linear_key_head_dim: int
    linear_value_head_dim: int
    conv_kernel: int  # width of the causal depthwise convolution over q/k/v
    rotary_dim: int  # leading dims of each attention head that RoPE rotates (partial RoPE)
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int
    norm_topk_prob: bool  # renormalise the top-k routing weights to sum to 1

    def __post_init__(self) -> None:
        if len(self.mlp_kinds) != len(self.layer_types):
            raise ValueError(
                f"{len(self.layer_types)} layer types but {len(self.mlp_kinds)} MLP kinds"
            )
        if (
            self.linear_num_key_heads <= 0
            or self.linear_num_value_heads % self.linear_num_key_heads
        ):
            raise ValueError(
                f"linear_num_value_heads ({self.linear_num_value_heads}) must be a multiple of "
                f"linear_num_key_heads ({self.linear_num_key_heads})"
            )
        if self.conv_kernel < 1:
            raise ValueError(f"linear_conv_kernel_dim must be ≥ 1, got {self.conv_kernel}")
        if self.rotary_dim % 2 or self.rotary_dim < 0:
            raise ValueError(f"the rotary dims per head must be even, got {self.rotary_dim}")
        if "moe" in self.mlp_kinds and not 0 < self.num_experts_per_tok <= self.num_experts:
            raise ValueError(
                f"num_experts_per_tok ({self.num_experts_per_tok}) must lie in [1, num_experts "
                f"= {self.num_experts}]"
            )

    @property
    def gdn_layers(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.layer_types) if t == "linear_attention")

    @property
    def attention_layers(self) -> tuple[int, ...]:
        return tuple(i for i, t in enumerate(self.layer_types) if t == "full_attention")

    @property
    def conv_dim(self) -> int:
        """Channels of the convolution: q, k and v of every GDN head, concatenated."""
        key = self.linear_num_key_heads * self.linear_key_head_dim
        return 2 * key + self.linear_num_value_heads * self.linear_value_head_dim
