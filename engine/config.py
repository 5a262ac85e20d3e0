"""The engine's model configuration: one frozen dataclass that every family parses into.

A family (`families.py`) reads its own `config.json` field names and produces a `ModelConfig`; the
layers and the model read only this object. Fields describe the transformer the LLaMA-style
families share (RMSNorm, RoPE, GQA attention, SwiGLU MLP), or, with `architecture="bert"`, a BERT
encoder (post-LayerNorm, learned absolute positions, GELU MLP, tied MLM head), or, with
`architecture="hybrid_gdn"` and a `HybridSpec` in `hybrid`, a Gated-DeltaNet + attention hybrid
(`hybrid_config.py`); plus the two properties that differ at inference time: how attention is
masked and whether logits are shifted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .hybrid_config import HybridSpec
from .moe_config import MoeSpec

AttentionKind = Literal["bidirectional", "block_causal"]


@dataclass(frozen=True)
class ModelConfig:
    family: str  # the engine family ("llada", "dream", "sdar", "fast_dllm")
    model_type: str  # config.json `model_type`, as written by the checkpoint
    vocab_size: int  # tokenizer vocabulary (config `vocab_size`)
    embedding_size: int  # rows of the embedding / logits width (>= vocab_size when padded)
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float  # 0.0 for architectures without RoPE (bert)
    norm_eps: float  # RMSNorm eps (llama architecture) or LayerNorm eps (bert)
    max_position_embeddings: int
    attention_bias: bool  # bias on q/k/v projections
    output_bias: bool  # bias on the attention output projection
    mlp_bias: bool
    qk_norm: bool  # per-head RMSNorm on q and k before RoPE (Qwen3)
    tie_word_embeddings: bool
    attention: AttentionKind
    block_size: int | None  # block length of block-causal families, None for bidirectional ones
    logits_shift: bool  # True: the output at position i predicts token i+1
    mask_token_id: int
    mask_token_source: str  # where the mask id came from (config field, tokenizer, family default)
    architecture: str = "llama"  # "llama": pre-RMSNorm, RoPE, SwiGLU; "bert": post-LN, absolute
    type_vocab_size: int = 0  # bert: token type embeddings (type 0 is used throughout)
    hybrid: HybridSpec | None = None  # architecture "hybrid_gdn": GDN layers, partial RoPE, MoE
    # Resolved from several files (`resolution.py`); each with the file and field it came from.
    block_size_source: str = ""
    end_of_turn_ids: tuple[int, ...] = ()  # stop ids; the first ends an answer
    end_of_turn_source: str = ""
    context_length: int = 0  # tokens a packed sequence may hold; 0 = max_position_embeddings
    context_source: str = ""
    moe: MoeSpec | None = None  # architecture "moe": attention + MoE (moe_config.py)
    # The config field RoPE theta came from (top level or `rope_parameters`), or the default.
    rope_theta_source: str = ""

    def __post_init__(self) -> None:
        if not self.context_length:
            object.__setattr__(self, "context_length", self.max_position_embeddings)
            object.__setattr__(self, "context_source", self.context_source or "positions")
        if self.context_length > self.max_position_embeddings:
            raise ValueError(
                f"context length {self.context_length} ({self.context_source}) exceeds the "
                f"model's {self.max_position_embeddings} positions"
            )
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})"
            )
        if (self.architecture == "hybrid_gdn") != (self.hybrid is not None):
            raise ValueError("architecture 'hybrid_gdn' and a HybridSpec come together")
        if (self.architecture == "moe") != (self.moe is not None):
            raise ValueError("architecture 'moe' and a MoeSpec come together")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if self.attention == "block_causal" and not self.block_size:
            raise ValueError("a block-causal model needs a positive block_size")
        if not 0 <= self.mask_token_id < self.embedding_size:
            raise ValueError(
                f"mask token id {self.mask_token_id} ({self.mask_token_source}) is outside the "
                f"model's {self.embedding_size} embedding rows"
            )
