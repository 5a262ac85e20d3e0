"""The dense LLaMA/Qwen-style families: LLaDA, Dream, SDAR and Fast-dLLM v2 (no tensors).

Contract. `_parse_qwen` reads Qwen2/Qwen3-layout configs (Dream, SDAR, Fast-dLLM v2), `_parse_llada`
LLaDA's OLMo-style config, refusing every switch that changes the math the engine implements
(RoPE theta in either spelling, RoPE scaling refused: `family.rope_settings`);
the weight maps give each layout's exact checkpoint tensor set. `DENSE_FAMILIES` is registered
in `families.FAMILIES`, `DENSE_BLOCK_SIZE_FIELDS` names the config fields that carry the block
length of the block-causal ones.
"""

from __future__ import annotations

from typing import Any

from .family import (
    Family,
    RawConfig,
    config_field,
    hf_sizes,
    refuse,
    refuse_decoder_switches,
    require_positive,
    rope_settings,
)


def _parse_qwen(raw: RawConfig, *, qk_norm: bool, default_bias: bool) -> dict[str, Any]:
    refuse_decoder_switches(raw)
    rope = rope_settings(raw)
    sizes = hf_sizes(raw)
    hidden, heads = sizes["hidden_size"], sizes["num_heads"]
    return require_positive(
        {
            **sizes,
            "head_dim": config_field(raw, "head_dim", int, hidden // heads if heads else 0),
            "intermediate_size": config_field(raw, "intermediate_size", int),
            "rope_theta": rope.theta,
            "rope_theta_source": rope.theta_source,
            "norm_eps": config_field(raw, "rms_norm_eps", float, 1e-6),
            "max_position_embeddings": config_field(raw, "max_position_embeddings", int, 32768),
            "attention_bias": config_field(raw, "attention_bias", bool, default_bias),
            "output_bias": False,
            "mlp_bias": False,
            "qk_norm": qk_norm,
            "tie_word_embeddings": config_field(raw, "tie_word_embeddings", bool, False),
        }
    )


def _qwen_weights(f: dict[str, Any]) -> dict[str, str]:
    names = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight"}
    if not f["tie_word_embeddings"]:
        names["lm_head.weight"] = "lm_head.weight"
    for i in range(f["num_layers"]):
        src, dst = f"model.layers.{i}.", f"layers.{i}."
        names[src + "input_layernorm.weight"] = dst + "attn_norm.weight"
        names[src + "post_attention_layernorm.weight"] = dst + "mlp_norm.weight"
        for p in ("q", "k", "v", "o"):
            names[f"{src}self_attn.{p}_proj.weight"] = f"{dst}attn.{p}_proj.weight"
        if f["attention_bias"]:
            for p in ("q", "k", "v"):
                names[f"{src}self_attn.{p}_proj.bias"] = f"{dst}attn.{p}_proj.bias"
        if f["qk_norm"]:
            names[src + "self_attn.q_norm.weight"] = dst + "attn.q_norm.weight"
            names[src + "self_attn.k_norm.weight"] = dst + "attn.k_norm.weight"
        for p in ("gate", "up", "down"):
            names[f"{src}mlp.{p}_proj.weight"] = f"{dst}mlp.{p}_proj.weight"
    return names


def _parse_llada(raw: RawConfig) -> dict[str, Any]:
    # LLaDA reuses OLMo's config; refuse every switch that changes the math we implement.
    refuse(raw, "alibi", lambda v: v is False, "ALiBi")
    refuse(raw, "rope", lambda v: v is True, "LLaDA without RoPE")
    refuse(raw, "block_type", lambda v: v == "llama", "only the llama block")
    refuse(raw, "activation_type", lambda v: v == "silu", "only SwiGLU with silu")
    refuse(raw, "layer_norm_type", lambda v: v == "rms", "only RMSNorm")
    refuse(raw, "include_bias", lambda v: v is False, "bias on every linear layer")
    refuse(raw, "attention_layer_norm", lambda v: v is False, "q/k LayerNorm")
    refuse(raw, "input_emb_norm", lambda v: v is False, "input embedding norm")
    refuse(raw, "scale_logits", lambda v: v is False, "scaled logits")
    refuse(raw, "multi_query_attention", lambda v: v in (None, False), "multi-query flag")
    refuse(raw, "layer_norm_with_affine", lambda v: v is True, "norms without weights")
    rope = rope_settings(raw)  # LLaDA's OLMo config spells theta top level; scaling is refused
    d_model = config_field(raw, "d_model", int)
    heads = config_field(raw, "n_heads", int)
    vocab = config_field(raw, "vocab_size", int)
    mlp = config_field(raw, "mlp_hidden_size", int, None)
    if mlp is None:
        mlp = config_field(raw, "mlp_ratio", int, 4) * d_model
    return require_positive(
        {
            "vocab_size": vocab,
            "embedding_size": config_field(raw, "embedding_size", int, vocab),
            "hidden_size": d_model,
            "num_layers": config_field(raw, "n_layers", int),
            "num_heads": heads,
            "num_kv_heads": config_field(raw, "n_kv_heads", int, heads),
            "head_dim": d_model // heads if heads else 0,
            "intermediate_size": mlp,
            "rope_theta": rope.theta,
            "rope_theta_source": rope.theta_source,
            "norm_eps": config_field(raw, "rms_norm_eps", float, 1e-5),
            "max_position_embeddings": config_field(raw, "max_sequence_length", int, 4096),
            "attention_bias": config_field(raw, "include_qkv_bias", bool, False),
            "output_bias": False,
            "mlp_bias": False,
            "qk_norm": False,
            "tie_word_embeddings": config_field(raw, "weight_tying", bool, False),
        }
    )


def _llada_weights(f: dict[str, Any]) -> dict[str, str]:
    names = {
        "model.transformer.wte.weight": "embed.weight",
        "model.transformer.ln_f.weight": "norm.weight",
    }
    if not f["tie_word_embeddings"]:
        names["model.transformer.ff_out.weight"] = "lm_head.weight"
    own = {
        "attn_norm.weight": "attn_norm.weight",
        "ff_norm.weight": "mlp_norm.weight",
        "q_proj.weight": "attn.q_proj.weight",
        "k_proj.weight": "attn.k_proj.weight",
        "v_proj.weight": "attn.v_proj.weight",
        "attn_out.weight": "attn.o_proj.weight",
        "ff_proj.weight": "mlp.gate_proj.weight",  # LLaDA applies the activation to ff_proj
        "up_proj.weight": "mlp.up_proj.weight",
        "ff_out.weight": "mlp.down_proj.weight",
    }
    if f["attention_bias"]:
        own |= {f"{p}_proj.bias": f"attn.{p}_proj.bias" for p in ("q", "k", "v")}
    for i in range(f["num_layers"]):
        for src, dst in own.items():
            names[f"model.transformer.blocks.{i}.{src}"] = f"layers.{i}.{dst}"
    return names


DENSE_FAMILIES: tuple[Family, ...] = (
    Family(
        name="llada",
        model_types=("llada",),
        attention="bidirectional",
        logits_shift=False,
        default_mask_token_id=126336,
        default_block_size=None,
        parse=_parse_llada,
        weight_names=_llada_weights,
    ),
    Family(
        name="dream",
        model_types=("Dream",),
        attention="bidirectional",
        logits_shift=True,
        default_mask_token_id=151666,
        default_block_size=None,
        parse=lambda raw: _parse_qwen(raw, qk_norm=False, default_bias=True),
        weight_names=_qwen_weights,
    ),
    Family(
        name="sdar",
        model_types=("sdar",),
        attention="block_causal",
        logits_shift=False,
        default_mask_token_id=151669,
        default_block_size=4,
        parse=lambda raw: _parse_qwen(raw, qk_norm=True, default_bias=False),
        weight_names=_qwen_weights,
    ),
    Family(
        name="fast_dllm",
        model_types=("Fast_dLLM_Qwen",),
        attention="block_causal",
        logits_shift=True,
        default_mask_token_id=151665,
        default_block_size=32,
        parse=lambda raw: _parse_qwen(raw, qk_norm=False, default_bias=True),
        weight_names=_qwen_weights,
    ),
)

# Config fields that carry the block length, per family (first present wins).
DENSE_BLOCK_SIZE_FIELDS: dict[str, tuple[str, ...]] = {
    "sdar": ("block_size", "block_length"),
    "fast_dllm": ("bd_size", "block_size"),
}
