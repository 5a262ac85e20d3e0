"""Tiny `config.json` contents of every supported model type, in each family's published field
names, for `random_checkpoint.write_random_checkpoint` (which writes the matching random weights
under the real tensor names from the family modules).

Contract. `config_json(model_type, fields, vocab, rows)` returns the config dict a real checkpoint
of that type would carry at the caller's sizes (`fields`: hidden_size, num_layers, num_heads,
num_kv_heads, head_dim, intermediate_size, rope_theta, tie_word_embeddings, attention_bias,
block_size; `rows`: embedding rows, `vocab`: the tokenizer's size). The MoE shapes are small and
exercise every routing feature the family's real checkpoints use: LLaDA2's sigmoid scores with
expert bias, 4 groups of 2 experts (2 kept), top-3, one shared expert, a first dense layer and
routed scaling 2.5; SDAR-MoE's renormalised softmax top-2 of 8; LLaDA-MoE's unnormalised softmax
top-2 of 8 (tests switch on its expert bias and shared expert through `extra_config`); the
Qwen3-Next hybrid alternates GDN and attention layers with 8 experts.
"""

from __future__ import annotations

from typing import Any


def _decoder(c: dict[str, Any], rows: int, eps: float, **fields: Any) -> dict[str, Any]:
    """The fields every LLaMA/Qwen-style decoder config spells the same way, then `fields`."""
    return {
        "hidden_size": c["hidden_size"],
        "num_hidden_layers": c["num_layers"],
        "num_attention_heads": c["num_heads"],
        "num_key_value_heads": c["num_kv_heads"],
        "vocab_size": rows,
        "max_position_embeddings": 4096,
        "hidden_act": "silu",
        "rms_norm_eps": eps,
        "tie_word_embeddings": c["tie_word_embeddings"],
        "torch_dtype": "float32",
        **fields,
    }


def _llada2_moe(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return _decoder(
        c,
        rows,
        1e-6,
        architectures=["LLaDA2MoeModelLM"],
        model_type="llada2_moe",
        head_dim=c["head_dim"],
        intermediate_size=c["intermediate_size"],
        rope_theta=c["rope_theta"],
        rope_scaling=None,
        partial_rotary_factor=0.5,
        use_qkv_bias=c["attention_bias"],
        use_bias=False,
        use_qk_norm=True,
        norm_head=False,
        first_k_dense_replace=1,
        num_experts=8,
        num_experts_per_tok=3,
        num_shared_experts=1,
        moe_intermediate_size=32,
        n_group=4,
        topk_group=2,
        routed_scaling_factor=2.5,
        score_function="sigmoid",
        moe_router_enable_expert_bias=True,
        norm_topk_prob=True,
        use_sliding_window=False,
        block_length=c["block_size"],
    )


def _sdar_moe(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return _decoder(
        c,
        rows,
        1e-6,
        architectures=["SDARMoeForCausalLM"],
        model_type="sdar_moe",
        head_dim=c["head_dim"],
        intermediate_size=c["intermediate_size"],
        rope_theta=c["rope_theta"],
        rope_scaling=None,
        attention_bias=c["attention_bias"],
        use_sliding_window=False,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        block_size=c["block_size"],
    )


def _llada_moe(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return _decoder(
        c,
        rows,
        1e-5,
        architectures=["LLaDAMoEModelLM"],
        model_type="llada",  # as published; dllm renames it `lladamoe`
        dense_intermediate_size=c["intermediate_size"],
        expert_intermediate_size=32,
        shared_expert_intermediate_size=None,
        rope_theta=c["rope_theta"],
        rope_scaling=None,
        partial_rotary_factor=1.0,
        attention_bias=c["attention_bias"],
        clip_qkv=None,
        qk_layernorm=True,
        num_experts=8,
        num_experts_per_tok=2,
        moe_layer_freq=[1] * c["num_layers"],
        moe_router_enable_expert_bias=False,
        moe_router_score_function="softmax",
        norm_topk_prob=False,
        routed_scaling_factor=1,
    )


def _qwen3_next(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return _decoder(
        c,
        rows,
        1e-6,
        architectures=["Qwen3NextForCausalLM"],
        model_type="qwen3_next",
        head_dim=c["head_dim"],
        intermediate_size=c["intermediate_size"],
        attention_bias=c["attention_bias"],
        rope_parameters={
            "rope_type": "default",
            "rope_theta": c["rope_theta"],
            "partial_rotary_factor": 0.25,
        },
        layer_types=[
            "full_attention" if i % 2 else "linear_attention" for i in range(c["num_layers"])
        ],
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        linear_conv_kernel_dim=4,
        num_experts=8,
        num_experts_per_tok=2,
        moe_intermediate_size=32,
        shared_expert_intermediate_size=32,
        norm_topk_prob=True,
        decoder_sparse_step=1,
        mlp_only_layers=[],
        block_size=c["block_size"],
    )


def _bert(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return {
        "architectures": ["BertForMaskedLM"],
        "model_type": "bert",
        "hidden_size": c["hidden_size"],
        "num_hidden_layers": c["num_layers"],
        "num_attention_heads": c["num_heads"],
        "intermediate_size": c["intermediate_size"],
        "vocab_size": rows,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "hidden_act": "gelu",
        "position_embedding_type": "absolute",
    }


def _llada(c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    return {
        "architectures": ["LLaDAModelLM"],
        "model_type": "llada",
        "d_model": c["hidden_size"],
        "n_layers": c["num_layers"],
        "n_heads": c["num_heads"],
        "n_kv_heads": c["num_kv_heads"],
        "mlp_hidden_size": c["intermediate_size"],
        "mlp_ratio": 4,
        "vocab_size": vocab,
        "embedding_size": rows,
        "rope": True,
        "rope_theta": c["rope_theta"],
        "rms_norm_eps": 1e-5,
        "max_sequence_length": 4096,
        "weight_tying": c["tie_word_embeddings"],
        "include_bias": False,
        "include_qkv_bias": c["attention_bias"],
        "alibi": False,
        "block_type": "llama",
        "activation_type": "silu",
        "layer_norm_type": "rms",
        "attention_layer_norm": False,
        "input_emb_norm": False,
        "scale_logits": False,
    }


_QWEN_ARCHITECTURES = {
    "sdar": "SDARForCausalLM",
    "Dream": "DreamModel",
    "Fast_dLLM_Qwen": "Fast_dLLM_QwenForCausalLM",
}


def _qwen(model_type: str, c: dict[str, Any], rows: int) -> dict[str, Any]:
    """Dream, SDAR and Fast-dLLM v2: Qwen2/Qwen3 layouts."""
    out = _decoder(
        c,
        rows,
        1e-6,
        model_type=model_type,
        intermediate_size=c["intermediate_size"],
        rope_theta=c["rope_theta"],
        rope_scaling=None,
        use_sliding_window=False,
        architectures=[_QWEN_ARCHITECTURES[model_type]],
    )
    if model_type == "sdar":
        out |= {"head_dim": c["head_dim"], "attention_bias": c["attention_bias"]}
        out |= {"block_size": c["block_size"]}
    elif model_type == "Fast_dLLM_Qwen":
        out |= {"bd_size": c["block_size"]}
    return out


_BUILDERS = {
    "llada2_moe": _llada2_moe,
    "sdar_moe": _sdar_moe,
    "lladamoe": _llada_moe,
    "qwen3_next": _qwen3_next,
    "bert": _bert,
    "llada": _llada,
}


def config_json(model_type: str, c: dict[str, Any], vocab: int, rows: int) -> dict[str, Any]:
    """The tiny config.json of `model_type`; see the module docstring."""
    if model_type in _BUILDERS:
        return _BUILDERS[model_type](c, vocab, rows)
    if model_type in _QWEN_ARCHITECTURES:
        return _qwen(model_type, c, rows)
    raise ValueError(
        f"no random config for model_type {model_type!r}; known: "
        + ", ".join([*_BUILDERS, *_QWEN_ARCHITECTURES])
    )
