"""What a mixture-of-experts attention model adds to `ModelConfig`: one frozen `MoeSpec`.

`ModelConfig.moe` holds it for the `llada2_moe`, `sdar_moe` and `llada_moe` families
(`moe_families.py` parses their configs into it) and is None for every other family. The shared
`ModelConfig` fields keep their meaning: heads, head dim, RoPE theta, q/k norm and biases for the
attention, `intermediate_size` for the dense MLP layers. This spec says, per layer, dense MLP or
sparse MoE block, and how a token is routed:

1. scores = softmax(router logits) or sigmoid(router logits), in fp32;
2. choice = scores + expert bias (when the checkpoint has one);
3. grouped top-k (`n_group` > 1): experts split into `n_group` equal groups, a group's score is the
   sum of its two best choice values, only the best `topk_group` groups stay eligible;
4. ids = top-`top_k` experts by choice;
5. weights = the chosen `scores` (or the chosen `choice` values, `bias_in_weights`, as LLaDA-MoE's
   published code does), renormalised to sum to 1 when `normalize` (+ `normalize_eps` in the
   denominator), times `routed_scaling`;
6. out = Σ weights · SwiGLU_expert(x) (+ a shared SwiGLU expert of `shared_intermediate_size`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MlpKind = Literal["moe", "dense"]


@dataclass(frozen=True)
class MoeSpec:
    mlp_kinds: tuple[MlpKind, ...]  # per layer
    num_experts: int
    top_k: int
    moe_intermediate_size: int
    shared_intermediate_size: int  # 0: no shared expert
    score: Literal["softmax", "sigmoid"]
    expert_bias: bool  # a per-expert score correction added before top-k
    bias_in_weights: bool  # weights taken from the biased scores (LLaDA-MoE's code)
    n_group: int  # 1: plain top-k
    topk_group: int
    normalize: bool
    normalize_eps: float
    routed_scaling: float
    rotary_dim: int  # leading dims of each head that RoPE rotates
    fused_qkv: bool  # one `query_key_value` projection (rows: q heads | k heads | v heads)

    def __post_init__(self) -> None:
        if "moe" in self.mlp_kinds and not 0 < self.top_k <= self.num_experts:
            raise ValueError(
                f"num_experts_per_tok ({self.top_k}) must lie in [1, num_experts = "
                f"{self.num_experts}]"
            )
        if self.n_group < 1 or self.num_experts % self.n_group:
            raise ValueError(
                f"n_group ({self.n_group}) must divide num_experts ({self.num_experts})"
            )
        if not 1 <= self.topk_group <= self.n_group:
            raise ValueError(f"topk_group ({self.topk_group}) must lie in [1, n_group]")
        if self.n_group > 1 and self.num_experts // self.n_group < 2:
            raise ValueError("grouped routing scores each group by its two best experts")
        if self.n_group > 1 and self.topk_group * (self.num_experts // self.n_group) < self.top_k:
            raise ValueError(
                f"topk_group ({self.topk_group}) groups of {self.num_experts // self.n_group} "
                f"experts cannot hold num_experts_per_tok ({self.top_k})"
            )
        if self.rotary_dim % 2 or self.rotary_dim < 0:
            raise ValueError(f"the rotary dims per head must be even, got {self.rotary_dim}")
