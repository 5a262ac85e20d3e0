"""The Qwen3-Next hybrid family: gated DeltaNet and gated attention layers, MoE (no tensors).

Contract. `_parse_qwen3_next` reads a Qwen3-Next config (and block-diffusion hybrids built on it)
with `transformers`' Qwen3NextConfig defaults for missing fields, so a config that leaves a field
out means the same here; the result carries a `HybridSpec`. The weight map gives the exact tensor
set per layer kind; multi-token-prediction heads are ignored. `HYBRID_FAMILY` is registered in
`families.FAMILIES`.
"""

from __future__ import annotations

from typing import Any

from .errors import ModelLoadError
from .family import (
    Family,
    RawConfig,
    config_field,
    refuse_decoder_switches,
    require_positive,
    rope_settings,
)
from .hybrid_config import HybridSpec

LAYER_TYPES = ("linear_attention", "full_attention")


def _parse_qwen3_next(raw: RawConfig) -> dict[str, Any]:
    """Qwen3-Next's config (and block-diffusion hybrids built on it). Defaults are those of
    `transformers`' Qwen3NextConfig, so a config that leaves a field out means the same here."""
    refuse_decoder_switches(raw)
    rope = rope_settings(raw, default_partial=0.25, partial=True)
    partial = rope.partial_rotary_factor
    hidden = config_field(raw, "hidden_size", int)
    heads = config_field(raw, "num_attention_heads", int)
    head_dim = config_field(raw, "head_dim", int, 256)
    layers = config_field(raw, "num_hidden_layers", int)
    layer_types = config_field(raw, "layer_types", list, None)
    if layer_types is None:
        interval = config_field(raw, "full_attention_interval", int, 4)
        layer_types = [LAYER_TYPES[(i + 1) % interval == 0] for i in range(layers)]
    if len(layer_types) != layers or any(t not in LAYER_TYPES for t in layer_types):
        raise ModelLoadError(
            f"config.json: `layer_types` must list {layers} entries of {LAYER_TYPES}, got "
            f"{layer_types!r}"
        )
    experts = config_field(raw, "num_experts", int, 512)
    sparse_step = config_field(raw, "decoder_sparse_step", int, 1)
    dense_layers = set(config_field(raw, "mlp_only_layers", list, []))
    mlp_kinds = tuple(
        "moe" if i not in dense_layers and experts > 0 and (i + 1) % sparse_step == 0 else "dense"
        for i in range(layers)
    )
    try:
        spec = HybridSpec(
            layer_types=tuple(layer_types),
            mlp_kinds=mlp_kinds,  # type: ignore[arg-type]
            linear_num_key_heads=config_field(raw, "linear_num_key_heads", int, 16),
            linear_num_value_heads=config_field(raw, "linear_num_value_heads", int, 32),
            linear_key_head_dim=config_field(raw, "linear_key_head_dim", int, 128),
            linear_value_head_dim=config_field(raw, "linear_value_head_dim", int, 128),
            conv_kernel=config_field(raw, "linear_conv_kernel_dim", int, 4),
            rotary_dim=int(head_dim * partial),
            num_experts=experts,
            num_experts_per_tok=config_field(raw, "num_experts_per_tok", int, 10),
            moe_intermediate_size=config_field(raw, "moe_intermediate_size", int, 512),
            shared_expert_intermediate_size=config_field(
                raw, "shared_expert_intermediate_size", int, 512
            ),
            norm_topk_prob=config_field(raw, "norm_topk_prob", bool, True),
        )
    except ValueError as exc:
        raise ModelLoadError(f"config.json: {exc}") from exc
    vocab = config_field(raw, "vocab_size", int)
    bias = config_field(raw, "attention_bias", bool, False)
    return require_positive(
        {
            "vocab_size": vocab,
            "embedding_size": vocab,
            "hidden_size": hidden,
            "num_layers": layers,
            "num_heads": heads,
            "num_kv_heads": config_field(raw, "num_key_value_heads", int, 2),
            "head_dim": head_dim,
            "intermediate_size": config_field(raw, "intermediate_size", int, 5632),
            "rope_theta": rope.theta,
            "rope_theta_source": rope.theta_source,
            "norm_eps": config_field(raw, "rms_norm_eps", float, 1e-6),
            "max_position_embeddings": config_field(raw, "max_position_embeddings", int, 32768),
            "attention_bias": bias,
            "output_bias": bias,  # Qwen3-Next's o_proj follows the same flag
            "mlp_bias": False,
            "qk_norm": True,
            "tie_word_embeddings": config_field(raw, "tie_word_embeddings", bool, False),
            "architecture": "hybrid_gdn",
            "hybrid": spec,
        }
    )


def _qwen3_next_weights(f: dict[str, Any]) -> dict[str, str]:
    spec: HybridSpec = f["hybrid"]
    names = {"model.embed_tokens.weight": "embed.weight", "model.norm.weight": "norm.weight"}
    if not f["tie_word_embeddings"]:
        names["lm_head.weight"] = "lm_head.weight"
    gdn = ("dt_bias", "A_log", "conv1d.weight", "in_proj_qkvz.weight", "in_proj_ba.weight")
    gdn += ("norm.weight", "out_proj.weight")
    for i, kind in enumerate(spec.layer_types):
        own = ["input_layernorm.weight", "post_attention_layernorm.weight"]
        if kind == "linear_attention":
            own += [f"linear_attn.{n}" for n in gdn]
        else:
            own += [f"self_attn.{p}_proj.weight" for p in "qkvo"]
            own += ["self_attn.q_norm.weight", "self_attn.k_norm.weight"]
            if f["attention_bias"]:
                own += [f"self_attn.{p}_proj.bias" for p in "qkvo"]
        if spec.mlp_kinds[i] == "moe":
            own += ["mlp.gate.weight", "mlp.shared_expert_gate.weight"]
            own += [f"mlp.shared_expert.{p}_proj.weight" for p in ("gate", "up", "down")]
            own += [
                f"mlp.experts.{e}.{p}_proj.weight"
                for e in range(spec.num_experts)
                for p in ("gate", "up", "down")
            ]
        else:
            own += [f"mlp.{p}_proj.weight" for p in ("gate", "up", "down")]
        names |= {f"model.layers.{i}.{n}": f"layers.{i}.{n}" for n in own}
    return names


def _qwen3_next_ignore(name: str) -> bool:
    # Multi-token-prediction heads serve speculative decoding, not diffusion.
    return name.startswith("mtp.") or name.endswith("rotary_emb.inv_freq")


HYBRID_FAMILY = Family(
    name="hybrid_gdn",
    model_types=("qwen3_next",),
    attention="block_causal",
    logits_shift=False,
    default_mask_token_id=None,
    default_block_size=32,
    parse=_parse_qwen3_next,
    weight_names=_qwen3_next_weights,
    ignore=_qwen3_next_ignore,
)
