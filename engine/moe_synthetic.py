"""Tiny `config.json` files of the attention + MoE families in their published field names, for
`synthetic.write_random_checkpoint` (which writes the matching random weights under the real
tensor names from `moe_families`). Sizes are the caller's; the MoE shape is small and exercises
every routing feature the family's real checkpoints use: LLaDA2's sigmoid scores with expert bias,
4 groups of 2 experts (2 kept), top-3, one shared expert, a first dense layer and routed scaling
2.5; SDAR-MoE's renormalised softmax top-2 of 8; LLaDA-MoE's unnormalised softmax top-2 of 8 (the
tests switch on its expert bias and shared expert through `extra_config`).
"""

from __future__ import annotations

from typing import Any


def _synthetic_llada2(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return {
        "architectures": ["LLaDA2MoeModelLM"],
        "model_type": "llada2_moe",
        "hidden_size": c["hidden_size"],
        "num_hidden_layers": c["num_layers"],
        "num_attention_heads": c["num_heads"],
        "num_key_value_heads": c["num_kv_heads"],
        "head_dim": c["head_dim"],
        "intermediate_size": c["intermediate_size"],
        "vocab_size": rows,
        "max_position_embeddings": 4096,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": c["rope_theta"],
        "rope_scaling": None,
        "partial_rotary_factor": 0.5,
        "tie_word_embeddings": c["tie_word_embeddings"],
        "use_qkv_bias": c["attention_bias"],
        "use_bias": False,
        "use_qk_norm": True,
        "norm_head": False,
        "first_k_dense_replace": 1,
        "num_experts": 8,
        "num_experts_per_tok": 3,
        "num_shared_experts": 1,
        "moe_intermediate_size": 32,
        "n_group": 4,
        "topk_group": 2,
        "routed_scaling_factor": 2.5,
        "score_function": "sigmoid",
        "moe_router_enable_expert_bias": True,
        "norm_topk_prob": True,
        "use_sliding_window": False,
        "block_length": c["block_size"],
        "torch_dtype": "float32",
    }


def _synthetic_sdar_moe(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return {
        "architectures": ["SDARMoeForCausalLM"],
        "model_type": "sdar_moe",
        "hidden_size": c["hidden_size"],
        "num_hidden_layers": c["num_layers"],
        "num_attention_heads": c["num_heads"],
        "num_key_value_heads": c["num_kv_heads"],
        "head_dim": c["head_dim"],
        "intermediate_size": c["intermediate_size"],
        "vocab_size": rows,
        "max_position_embeddings": 4096,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "rope_theta": c["rope_theta"],
        "rope_scaling": None,
        "tie_word_embeddings": c["tie_word_embeddings"],
        "attention_bias": c["attention_bias"],
        "use_sliding_window": False,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 32,
        "norm_topk_prob": True,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "block_size": c["block_size"],
        "torch_dtype": "float32",
    }


def _synthetic_llada_moe(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return {
        "architectures": ["LLaDAMoEModelLM"],
        "model_type": "llada",  # as published; dllm renames it `lladamoe`
        "hidden_size": c["hidden_size"],
        "num_hidden_layers": c["num_layers"],
        "num_attention_heads": c["num_heads"],
        "num_key_value_heads": c["num_kv_heads"],
        "dense_intermediate_size": c["intermediate_size"],
        "expert_intermediate_size": 32,
        "shared_expert_intermediate_size": None,
        "vocab_size": rows,
        "max_position_embeddings": 4096,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": c["rope_theta"],
        "rope_scaling": None,
        "partial_rotary_factor": 1.0,
        "tie_word_embeddings": c["tie_word_embeddings"],
        "attention_bias": c["attention_bias"],
        "clip_qkv": None,
        "qk_layernorm": True,
        "num_experts": 8,
        "num_experts_per_tok": 2,
        "moe_layer_freq": [1] * c["num_layers"],
        "moe_router_enable_expert_bias": False,
        "moe_router_score_function": "softmax",
        "norm_topk_prob": False,
        "routed_scaling_factor": 1,
        "torch_dtype": "float32",
    }


SYNTHETIC_CONFIGS = {
    "llada2_moe": _synthetic_llada2,
    "sdar_moe": _synthetic_sdar_moe,
    "lladamoe": _synthetic_llada_moe,
}
