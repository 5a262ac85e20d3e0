"""The attention + mixture-of-experts families: config parsing and weight names (no tensors).

Contract. Each parser turns a published `config.json` (real field names, defaults of the
publisher's own config class where a field is missing) into `ModelConfig` fields with
`architecture="moe"` and a `MoeSpec`; every switch the engine does not implement is refused with a
`ModelLoadError` naming the field. Each weight map gives the exact checkpoint tensor set for that
config (checkpoint name → `MoeLM` parameter). `MOE_FAMILIES` is registered in `families.FAMILIES`.
`random_configs.py` writes the same field names at tiny sizes.

- `llada2_moe` (family llada2_moe; inclusionAI/LLaDA2.0-mini, -flash): sigmoid scores + expert
  bias, grouped top-k, renormalised, × `routed_scaling_factor`, shared experts, first dense layers,
  fused `query_key_value`, partial RoPE; block-causal (`block_length`, default 32).
- `sdar_moe` (family sdar_moe; JetLM/SDAR-30B-A3B-Chat): Qwen3-MoE layout, softmax top-k,
  `norm_topk_prob`; block-causal (`block_size`, default 4).
- `llada` with MoE fields, or `lladamoe` (family llada_moe; inclusionAI/LLaDA-MoE-7B-A1B-Base,
  -Instruct): softmax (+ optional expert bias, kept in the weights), never renormalised, as the
  published code does; bidirectional.
"""

from __future__ import annotations

from typing import Any

from .errors import ModelLoadError
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
from .moe_config import MoeSpec

LLADA2_MASK_ID = 156895  # LLaDA2.0's `generate(mask_id=156895)`; LLaDA-MoE shares the tokenizer
SDAR_MASK_ID = 151669  # SDAR's <|MASK|> (lmdeploy's `dllm_mask_token` for sdar and sdar_moe)


def _spec(**fields: Any) -> MoeSpec:
    try:
        return MoeSpec(**fields)
    except ValueError as exc:
        raise ModelLoadError(f"config.json: {exc}") from exc


def _common(raw: RawConfig, head_dim: int, **fields: Any) -> dict[str, Any]:
    sizes = hf_sizes(raw)
    sizes["num_kv_heads"] = sizes["num_kv_heads"] or sizes["num_heads"]  # LLaDA2's default is 0
    return require_positive(
        {
            **sizes,
            "head_dim": head_dim,
            "max_position_embeddings": config_field(raw, "max_position_embeddings", int, 32768),
            "mlp_bias": False,
            "tie_word_embeddings": config_field(raw, "tie_word_embeddings", bool, False),
            "architecture": "moe",
            **fields,
        }
    )


def _head_dim(raw: RawConfig) -> int:
    heads = config_field(raw, "num_attention_heads", int)
    return config_field(
        raw, "head_dim", int, config_field(raw, "hidden_size", int) // heads if heads else 0
    )


# --- LLaDA2.0 (`llada2_moe`): LLaDA2MoeConfig / modeling_llada2_moe.py --------------------------


def _parse_llada2(raw: RawConfig) -> dict[str, Any]:
    refuse_decoder_switches(raw)
    rope = rope_settings(raw, default_partial=0.5, partial=True)
    refuse(raw, "norm_head", lambda v: v is False, "a normalised LM head")
    refuse(raw, "score_function", lambda v: v == "sigmoid", "LLaDA2 routes with sigmoid scores")
    refuse(raw, "norm_topk_prob", lambda v: v is True, "the published router always renormalises")
    refuse(raw, "using_split_qkv_in_self_attention", lambda v: v is False, "split q/k/v weights")
    head_dim = _head_dim(raw)
    rotary = int(head_dim * rope.partial_rotary_factor)
    refuse(raw, "rotary_dim", lambda v: v in (None, rotary), f"partial_rotary_factor: {rotary}")
    layers = config_field(raw, "num_hidden_layers", int)
    experts = config_field(raw, "num_experts", int, 0)
    first_dense = config_field(raw, "first_k_dense_replace", int, 0)
    kinds = tuple("moe" if experts and i >= first_dense else "dense" for i in range(layers))
    moe_inter = config_field(raw, "moe_intermediate_size", int, 0)
    top_k = config_field(raw, "num_experts_per_tok", int, 2)
    spec = _spec(
        mlp_kinds=kinds,
        num_experts=experts,
        top_k=top_k,
        moe_intermediate_size=moe_inter,
        shared_intermediate_size=moe_inter * config_field(raw, "num_shared_experts", int, 0),
        score="sigmoid",
        # LLaDA2MoeGate always registers (and saves) `expert_bias`, whatever
        # `moe_router_enable_expert_bias` says; a bias of zeros routes like none.
        expert_bias=True,
        bias_in_weights=False,
        n_group=config_field(raw, "n_group", int, 8),
        topk_group=config_field(raw, "topk_group", int, 4),
        normalize=top_k > 1,
        normalize_eps=1e-20,
        routed_scaling=config_field(raw, "routed_scaling_factor", float, 2.5),
        rotary_dim=rotary,
        fused_qkv=True,
    )
    return _common(
        raw,
        head_dim,
        intermediate_size=config_field(raw, "intermediate_size", int, 0),
        rope_theta=rope.theta,
        rope_theta_source=rope.theta_source,
        norm_eps=config_field(raw, "rms_norm_eps", float, 1e-5),
        attention_bias=config_field(raw, "use_qkv_bias", bool, False),
        output_bias=config_field(raw, "use_bias", bool, True),
        qk_norm=config_field(raw, "use_qk_norm", bool, True),
        moe=spec,
    )


def _dense(src: str, dst: str) -> dict[str, str]:
    return {f"{src}{p}_proj.weight": f"{dst}{p}_proj.weight" for p in ("gate", "up", "down")}


def _experts(src: str, count: int) -> dict[str, str]:
    names = {}
    for e in range(count):
        names |= _dense(f"{src}{e}.", f"MOE.experts.{e}.")
    return names


def _layer_map(i: int, own: dict[str, str]) -> dict[str, str]:
    return {
        f"model.layers.{i}.{k}": f"layers.{i}." + v.replace("MOE.", "mlp.") for k, v in own.items()
    }


def _head(f: dict[str, Any], embed: str) -> dict[str, str]:
    names = {embed: "embed.weight", "model.norm.weight": "norm.weight"}
    if not f["tie_word_embeddings"]:
        names["lm_head.weight"] = "lm_head.weight"
    return names


def _llada2_weights(f: dict[str, Any]) -> dict[str, str]:
    spec: MoeSpec = f["moe"]
    names = _head(f, "model.word_embeddings.weight")
    for i, kind in enumerate(spec.mlp_kinds):
        own = {
            "input_layernorm.weight": "attn_norm.weight",
            "post_attention_layernorm.weight": "mlp_norm.weight",
            "attention.query_key_value.weight": "attn.qkv_proj.weight",
            "attention.dense.weight": "attn.o_proj.weight",
        }
        if f["attention_bias"]:
            own["attention.query_key_value.bias"] = "attn.qkv_proj.bias"
        if f["output_bias"]:
            own["attention.dense.bias"] = "attn.o_proj.bias"
        if f["qk_norm"]:
            own["attention.query_layernorm.weight"] = "attn.q_norm.weight"
            own["attention.key_layernorm.weight"] = "attn.k_norm.weight"
        if kind == "dense":
            own |= _dense("mlp.", "MOE.")
        else:
            own["mlp.gate.weight"] = "MOE.router.weight"
            if spec.expert_bias:
                own["mlp.gate.expert_bias"] = "MOE.expert_bias"
            own |= _experts("mlp.experts.", spec.num_experts)
            if spec.shared_intermediate_size:
                own |= _dense("mlp.shared_experts.", "MOE.shared.")
        names |= _layer_map(i, own)
    return names


# --- SDAR-MoE (`sdar_moe`): Qwen3-MoE layout ----------------------------------------------------


def _parse_sdar_moe(raw: RawConfig) -> dict[str, Any]:
    refuse_decoder_switches(raw)
    rope = rope_settings(raw)
    layers = config_field(raw, "num_hidden_layers", int)
    experts = config_field(raw, "num_experts", int, 128)
    step = config_field(raw, "decoder_sparse_step", int, 1)
    dense = set(config_field(raw, "mlp_only_layers", list, []))
    kinds = tuple(
        "moe" if i not in dense and experts > 0 and (i + 1) % step == 0 else "dense"
        for i in range(layers)
    )
    head_dim = _head_dim(raw)
    bias = config_field(raw, "attention_bias", bool, False)
    spec = _spec(
        mlp_kinds=kinds,
        num_experts=experts,
        top_k=config_field(raw, "num_experts_per_tok", int, 8),
        moe_intermediate_size=config_field(raw, "moe_intermediate_size", int, 768),
        shared_intermediate_size=0,
        score="softmax",
        expert_bias=False,
        bias_in_weights=False,
        n_group=1,
        topk_group=1,
        normalize=config_field(raw, "norm_topk_prob", bool, False),
        normalize_eps=0.0,
        routed_scaling=1.0,
        rotary_dim=head_dim,
        fused_qkv=False,
    )
    return _common(
        raw,
        head_dim,
        intermediate_size=config_field(raw, "intermediate_size", int, 6144),
        rope_theta=rope.theta,
        rope_theta_source=rope.theta_source,
        norm_eps=config_field(raw, "rms_norm_eps", float, 1e-6),
        attention_bias=bias,
        output_bias=bias,  # Qwen3-MoE's o_proj follows the same flag
        qk_norm=True,
        moe=spec,
    )


def _split_attention(f: dict[str, Any]) -> dict[str, str]:
    own = {
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "mlp_norm.weight",
    }
    for p in "qkvo":
        own[f"self_attn.{p}_proj.weight"] = f"attn.{p}_proj.weight"
        if f["attention_bias"] and (p != "o" or f["output_bias"]):
            own[f"self_attn.{p}_proj.bias"] = f"attn.{p}_proj.bias"
    if f["qk_norm"]:
        own["self_attn.q_norm.weight"] = "attn.q_norm.weight"
        own["self_attn.k_norm.weight"] = "attn.k_norm.weight"
    return own


def _sdar_moe_weights(f: dict[str, Any]) -> dict[str, str]:
    spec: MoeSpec = f["moe"]
    names = _head(f, "model.embed_tokens.weight")
    for i, kind in enumerate(spec.mlp_kinds):
        own = _split_attention(f)
        if kind == "dense":
            own |= _dense("mlp.", "MOE.")
        else:
            own["mlp.gate.weight"] = "MOE.router.weight"
            own |= _experts("mlp.experts.", spec.num_experts)
        names |= _layer_map(i, own)
    return names


# --- LLaDA-MoE: LLaDAMoEConfig / modeling_lladamoe.py (published with model_type "llada") ------


def _claims_llada_moe(raw: RawConfig) -> bool:
    """LLaDA-MoE's published config says `model_type: "llada"`; its MoE fields tell it apart."""
    return "expert_intermediate_size" in raw or "moe_layer_freq" in raw


def _parse_llada_moe(raw: RawConfig) -> dict[str, Any]:
    refuse_decoder_switches(raw)
    rope = rope_settings(raw, default_theta=None, partial=True)
    refuse(raw, "clip_qkv", lambda v: v is None, "q/k/v clipping")
    score = "`moe_router_score_function`"
    refuse(raw, "moe_router_score_function", lambda v: v in (None, "softmax"), f"{score}: softmax")
    why = "the published LLaDA-MoE router does not use it"
    refuse(raw, "routed_scaling_factor", lambda v: v in (None, 1, 1.0), why)
    refuse(raw, "router_num_group", lambda v: v is None or v <= 1, why)
    hidden = config_field(raw, "hidden_size", int)
    heads = config_field(raw, "num_attention_heads", int)
    head_dim = hidden // heads if heads else 0
    refuse(raw, "head_dim", lambda v: v in (None, head_dim), "its head dim is hidden / heads")
    partial = rope.partial_rotary_factor
    if not 0.0 < partial <= 1.0:
        raise ModelLoadError(
            f"config.json: `partial_rotary_factor` must lie in (0, 1], got {partial}"
        )
    layers = config_field(raw, "num_hidden_layers", int)
    freq = config_field(raw, "moe_layer_freq", list)
    if len(freq) != layers or any(v not in (0, 1) for v in freq):
        raise ModelLoadError(
            f"config.json: `moe_layer_freq` must list {layers} entries of 0 (dense) or 1 (MoE), "
            f"got {freq!r}"
        )
    shared = config_field(raw, "shared_expert_intermediate_size", int, 0)
    bias = config_field(raw, "attention_bias", bool, False)
    spec = _spec(
        mlp_kinds=tuple("moe" if v else "dense" for v in freq),
        num_experts=config_field(raw, "num_experts", int),
        top_k=config_field(raw, "num_experts_per_tok", int),
        moe_intermediate_size=config_field(raw, "expert_intermediate_size", int),
        shared_intermediate_size=max(shared, 0),
        score="softmax",
        expert_bias=config_field(raw, "moe_router_enable_expert_bias", bool, False),
        bias_in_weights=True,  # the published block adds the bias to the probabilities it keeps
        n_group=1,
        topk_group=1,
        normalize=False,  # the published block hard-codes norm_topk_prob = False
        normalize_eps=0.0,
        routed_scaling=1.0,
        rotary_dim=int(head_dim * partial),
        fused_qkv=False,
    )
    return _common(
        raw,
        head_dim,
        intermediate_size=config_field(raw, "dense_intermediate_size", int, 0),
        rope_theta=rope.theta,
        rope_theta_source=rope.theta_source,
        norm_eps=config_field(raw, "rms_norm_eps", float, 1e-5),
        attention_bias=bias,
        output_bias=bias,
        qk_norm=config_field(raw, "qk_layernorm", bool, False),
        max_position_embeddings=config_field(raw, "max_position_embeddings", int, 4096),
        moe=spec,
    )


def _llada_moe_weights(f: dict[str, Any]) -> dict[str, str]:
    spec: MoeSpec = f["moe"]
    names = _head(f, "model.embed_tokens.weight")
    for i, kind in enumerate(spec.mlp_kinds):
        own = _split_attention(f)
        if kind == "dense":
            own |= _dense("mlp.", "MOE.")
        else:
            own["mlp.gate.weight"] = "MOE.router.weight"
            if spec.expert_bias:
                own["mlp.expert_bias"] = "MOE.expert_bias"
            own |= _experts("mlp.experts.", spec.num_experts)
            if spec.shared_intermediate_size:  # beside the block in the checkpoint
                own |= _dense("shared_expert.", "MOE.shared.")
        names |= _layer_map(i, own)
    return names


MOE_FAMILIES: tuple[Family, ...] = (
    Family(
        name="llada2_moe",
        model_types=("llada2_moe",),
        attention="block_causal",
        logits_shift=False,
        default_mask_token_id=LLADA2_MASK_ID,
        default_block_size=32,  # LLaDA2's `generate(block_length=32)`
        parse=_parse_llada2,
        weight_names=_llada2_weights,
    ),
    Family(
        name="sdar_moe",
        model_types=("sdar_moe",),
        attention="block_causal",
        logits_shift=False,
        default_mask_token_id=SDAR_MASK_ID,
        default_block_size=4,
        parse=_parse_sdar_moe,
        weight_names=_sdar_moe_weights,
    ),
    Family(
        name="llada_moe",
        model_types=("lladamoe", "llada"),
        attention="bidirectional",
        logits_shift=False,
        default_mask_token_id=LLADA2_MASK_ID,
        default_block_size=None,
        parse=_parse_llada_moe,
        weight_names=_llada_moe_weights,
        claims=_claims_llada_moe,
    ),
)

MOE_BLOCK_SIZE_FIELDS: dict[str, tuple[str, ...]] = {
    "llada2_moe": ("block_length", "block_size"),
    "sdar_moe": ("block_size", "block_length"),
}
