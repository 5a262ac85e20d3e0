"""Model families: how each supported `config.json` maps onto the engine's one architecture.

A family knows its checkpoints' config field names, their weight names, where their mask token id
lives and how they run at inference (bidirectional or block-causal attention, shifted logits). It
turns a raw config dict into a `ModelConfig` and gives, for that config, the exact set of tensors a
checkpoint must hold (checkpoint name → engine parameter name). Nothing here touches tensors.

| model_type       | family    | base                 | attention     | logits      | mask default |
|------------------|-----------|----------------------|---------------|-------------|--------------|
| `llada`          | llada     | LLaMA, own names     | bidirectional | unshifted   | 126336       |
| `Dream`          | dream     | Qwen2 (QKV bias)     | bidirectional | shifted     | 151666       |
| `sdar`           | sdar      | Qwen3 (q/k norm)     | block-causal  | unshifted   | 151669       |
| `Fast_dLLM_Qwen` | fast_dllm | Qwen2.5 (QKV bias)   | block-causal  | shifted     | 151665       |
| `bert`           | bert      | BERT MLM (post-LN)   | bidirectional | unshifted   | tokenizer    |
| `qwen3_next`     | hybrid_gdn| GDN + gated attn, MoE| block-causal  | unshifted   | config/tok.  |
| `llada2_moe`     | llada2_moe| LLaDA2.0 MoE         | block-causal  | unshifted   | 156895       |
| `sdar_moe`       | sdar_moe  | Qwen3-MoE            | block-causal  | unshifted   | 151669       |
| `llada` + MoE    | llada_moe | LLaDA-MoE (OLMoE)    | bidirectional | unshifted   | 156895       |

The MoE families live in `moe_families.py` and are appended to `FAMILIES` below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ModelLoadError
from .hybrid_config import HybridSpec

RawConfig = Mapping[str, Any]


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]
    attention: str  # "bidirectional" | "block_causal"
    logits_shift: bool
    default_mask_token_id: int | None
    default_block_size: int | None
    parse: Callable[[RawConfig], dict[str, Any]]  # raw config -> ModelConfig fields (no mask id)
    weight_names: Callable[[dict[str, Any]], dict[str, str]]  # fields -> {checkpoint: engine}
    # Checkpoint tensors the engine never reads (exporters' buffers, heads of other tasks).
    ignore: Callable[[str], bool] = lambda name: name.endswith("rotary_emb.inv_freq")
    # A stored tensor name → the name `weight_names` uses (layouts of one family that differ only
    # in spelling); identity for most families.
    rename: Callable[[str], str] | None = None
    # Set when the family shares a model_type with another: True for the configs that are its own.
    claims: Callable[[RawConfig], bool] | None = None


def _field(raw: RawConfig, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    """Read one config field with its type checked; the message names the field."""
    if name not in raw or raw[name] is None:
        if default is ...:
            raise ModelLoadError(f"config.json: required field `{name}` is missing")
        return default
    value = raw[name]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    # bool is an int subclass; an int field given `true` is a broken config, not the number 1.
    if isinstance(value, bool) and bool not in kinds:
        raise ModelLoadError(f"config.json: field `{name}` must be {kinds}, got {value!r}")
    if not isinstance(value, kinds):
        if float in kinds and isinstance(value, int):
            return float(value)
        raise ModelLoadError(f"config.json: field `{name}` must be {kinds}, got {value!r}")
    return value


def _refuse(raw: RawConfig, name: str, allowed: Callable[[Any], bool], why: str) -> None:
    if name in raw and not allowed(raw[name]):
        raise ModelLoadError(f"config.json: `{name}` = {raw[name]!r} is not supported ({why})")


def _positive(fields: dict[str, Any]) -> dict[str, Any]:
    for key in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads"):
        if fields[key] <= 0:
            raise ModelLoadError(f"config.json: `{key}` must be positive, got {fields[key]}")
    return fields


def _parse_qwen(raw: RawConfig, *, qk_norm: bool, default_bias: bool) -> dict[str, Any]:
    _refuse(raw, "rope_scaling", lambda v: v in (None, {}), "RoPE scaling")
    _refuse(raw, "use_sliding_window", lambda v: v is False, "sliding-window attention")
    _refuse(raw, "hidden_act", lambda v: v == "silu", "only SwiGLU with silu")
    hidden = _field(raw, "hidden_size", int)
    heads = _field(raw, "num_attention_heads", int)
    vocab = _field(raw, "vocab_size", int)
    return _positive(
        {
            "vocab_size": vocab,
            "embedding_size": vocab,
            "hidden_size": hidden,
            "num_layers": _field(raw, "num_hidden_layers", int),
            "num_heads": heads,
            "num_kv_heads": _field(raw, "num_key_value_heads", int, heads),
            "head_dim": _field(raw, "head_dim", int, hidden // heads if heads else 0),
            "intermediate_size": _field(raw, "intermediate_size", int),
            "rope_theta": _field(raw, "rope_theta", float, 10000.0),
            "norm_eps": _field(raw, "rms_norm_eps", float, 1e-6),
            "max_position_embeddings": _field(raw, "max_position_embeddings", int, 32768),
            "attention_bias": _field(raw, "attention_bias", bool, default_bias),
            "output_bias": False,
            "mlp_bias": False,
            "qk_norm": qk_norm,
            "tie_word_embeddings": _field(raw, "tie_word_embeddings", bool, False),
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
    _refuse(raw, "alibi", lambda v: v is False, "ALiBi")
    _refuse(raw, "rope", lambda v: v is True, "LLaDA without RoPE")
    _refuse(raw, "block_type", lambda v: v == "llama", "only the llama block")
    _refuse(raw, "activation_type", lambda v: v == "silu", "only SwiGLU with silu")
    _refuse(raw, "layer_norm_type", lambda v: v == "rms", "only RMSNorm")
    _refuse(raw, "include_bias", lambda v: v is False, "bias on every linear layer")
    _refuse(raw, "attention_layer_norm", lambda v: v is False, "q/k LayerNorm")
    _refuse(raw, "input_emb_norm", lambda v: v is False, "input embedding norm")
    _refuse(raw, "scale_logits", lambda v: v is False, "scaled logits")
    _refuse(raw, "multi_query_attention", lambda v: v in (None, False), "multi-query flag")
    _refuse(raw, "layer_norm_with_affine", lambda v: v is True, "norms without weights")
    d_model = _field(raw, "d_model", int)
    heads = _field(raw, "n_heads", int)
    vocab = _field(raw, "vocab_size", int)
    mlp = _field(raw, "mlp_hidden_size", int, None)
    if mlp is None:
        mlp = _field(raw, "mlp_ratio", int, 4) * d_model
    return _positive(
        {
            "vocab_size": vocab,
            "embedding_size": _field(raw, "embedding_size", int, vocab),
            "hidden_size": d_model,
            "num_layers": _field(raw, "n_layers", int),
            "num_heads": heads,
            "num_kv_heads": _field(raw, "n_kv_heads", int, heads),
            "head_dim": d_model // heads if heads else 0,
            "intermediate_size": mlp,
            "rope_theta": _field(raw, "rope_theta", float, 10000.0),
            "norm_eps": _field(raw, "rms_norm_eps", float, 1e-5),
            "max_position_embeddings": _field(raw, "max_sequence_length", int, 4096),
            "attention_bias": _field(raw, "include_qkv_bias", bool, False),
            "output_bias": False,
            "mlp_bias": False,
            "qk_norm": False,
            "tie_word_embeddings": _field(raw, "weight_tying", bool, False),
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


def _parse_bert(raw: RawConfig) -> dict[str, Any]:
    _refuse(raw, "hidden_act", lambda v: v in ("gelu", "gelu_python"), "only exact GELU")
    _refuse(raw, "position_embedding_type", lambda v: v == "absolute", "relative positions")
    _refuse(raw, "is_decoder", lambda v: v is False, "a causal BERT decoder")
    hidden = _field(raw, "hidden_size", int)
    heads = _field(raw, "num_attention_heads", int)
    vocab = _field(raw, "vocab_size", int)
    return _positive(
        {
            "vocab_size": vocab,
            "embedding_size": vocab,
            "hidden_size": hidden,
            "num_layers": _field(raw, "num_hidden_layers", int),
            "num_heads": heads,
            "num_kv_heads": heads,
            "head_dim": hidden // heads if heads else 0,
            "intermediate_size": _field(raw, "intermediate_size", int),
            "rope_theta": 0.0,
            "norm_eps": _field(raw, "layer_norm_eps", float, 1e-12),
            "max_position_embeddings": _field(raw, "max_position_embeddings", int, 512),
            "attention_bias": True,
            "output_bias": True,
            "mlp_bias": True,
            "qk_norm": False,
            "tie_word_embeddings": True,
            "architecture": "bert",
            "type_vocab_size": _field(raw, "type_vocab_size", int, 2),
        }
    )


def _bert_weights(f: dict[str, Any]) -> dict[str, str]:
    names = {
        "bert.embeddings.word_embeddings.weight": "embed.weight",
        "bert.embeddings.position_embeddings.weight": "positions.weight",
        "bert.embeddings.token_type_embeddings.weight": "token_types.weight",
        "cls.predictions.bias": "head_bias",
    }
    pairs = {
        "bert.embeddings.LayerNorm": "embed_norm",
        "cls.predictions.transform.dense": "head_dense",
        "cls.predictions.transform.LayerNorm": "head_norm",
    }
    own = {
        "attention.self.query": "query",
        "attention.self.key": "key",
        "attention.self.value": "value",
        "attention.output.dense": "attn_out",
        "attention.output.LayerNorm": "attn_norm",
        "intermediate.dense": "intermediate",
        "output.dense": "output",
        "output.LayerNorm": "output_norm",
    }
    for i in range(f["num_layers"]):
        pairs |= {f"bert.encoder.layer.{i}.{k}": f"layers.{i}.{v}" for k, v in own.items()}
    for src, dst in pairs.items():
        names[f"{src}.weight"] = f"{dst}.weight"
        names[f"{src}.bias"] = f"{dst}.bias"
    return names


BERT_PARTS = ("embeddings.", "encoder.", "pooler.")


def _bert_rename(name: str) -> str:
    """Classic BERT exports (bert-base-uncased as Google converted it) name LayerNorm parameters
    `gamma`/`beta`; exports of the bare encoder omit the `bert.` prefix."""
    if name.startswith(BERT_PARTS):
        name = "bert." + name
    if "LayerNorm." in name:
        if name.endswith(".gamma"):
            return name.removesuffix(".gamma") + ".weight"
        if name.endswith(".beta"):
            return name.removesuffix(".beta") + ".bias"
    return name


def _bert_ignore(name: str) -> bool:
    # The decoder is tied to the word embeddings; pooler and NSP head serve other tasks.
    return name.startswith(("bert.pooler.", "cls.seq_relationship.")) or name in (
        "cls.predictions.decoder.weight",
        "cls.predictions.decoder.bias",
        "bert.embeddings.position_ids",
    )


LAYER_TYPES = ("linear_attention", "full_attention")


def _parse_qwen3_next(raw: RawConfig) -> dict[str, Any]:
    """Qwen3-Next's config (and block-diffusion hybrids built on it). Defaults are those of
    `transformers`' Qwen3NextConfig, so a config that leaves a field out means the same here."""
    _refuse(raw, "hidden_act", lambda v: v == "silu", "only SwiGLU with silu")
    _refuse(raw, "use_sliding_window", lambda v: v is False, "sliding-window attention")
    _refuse(raw, "rope_scaling", lambda v: v in (None, {}), "RoPE scaling")
    rope = _field(raw, "rope_parameters", dict, {})  # transformers 5 nests the RoPE fields here
    _refuse(rope, "rope_type", lambda v: v == "default", "RoPE scaling")
    theta = _field(rope, "rope_theta", float, _field(raw, "rope_theta", float, 10000.0))
    partial = _field(rope, "partial_rotary_factor", float, None)
    if partial is None:
        partial = _field(raw, "partial_rotary_factor", float, 0.25)
    hidden = _field(raw, "hidden_size", int)
    heads = _field(raw, "num_attention_heads", int)
    head_dim = _field(raw, "head_dim", int, 256)
    layers = _field(raw, "num_hidden_layers", int)
    layer_types = _field(raw, "layer_types", list, None)
    if layer_types is None:
        interval = _field(raw, "full_attention_interval", int, 4)
        layer_types = [LAYER_TYPES[(i + 1) % interval == 0] for i in range(layers)]
    if len(layer_types) != layers or any(t not in LAYER_TYPES for t in layer_types):
        raise ModelLoadError(
            f"config.json: `layer_types` must list {layers} entries of {LAYER_TYPES}, got "
            f"{layer_types!r}"
        )
    experts = _field(raw, "num_experts", int, 512)
    sparse_step = _field(raw, "decoder_sparse_step", int, 1)
    dense_layers = set(_field(raw, "mlp_only_layers", list, []))
    mlp_kinds = tuple(
        "moe" if i not in dense_layers and experts > 0 and (i + 1) % sparse_step == 0 else "dense"
        for i in range(layers)
    )
    try:
        spec = HybridSpec(
            layer_types=tuple(layer_types),
            mlp_kinds=mlp_kinds,  # type: ignore[arg-type]
            linear_num_key_heads=_field(raw, "linear_num_key_heads", int, 16),
            linear_num_value_heads=_field(raw, "linear_num_value_heads", int, 32),
            linear_key_head_dim=_field(raw, "linear_key_head_dim", int, 128),
            linear_value_head_dim=_field(raw, "linear_value_head_dim", int, 128),
            conv_kernel=_field(raw, "linear_conv_kernel_dim", int, 4),
            rotary_dim=int(head_dim * partial),
            num_experts=experts,
            num_experts_per_tok=_field(raw, "num_experts_per_tok", int, 10),
            moe_intermediate_size=_field(raw, "moe_intermediate_size", int, 512),
            shared_expert_intermediate_size=_field(
                raw, "shared_expert_intermediate_size", int, 512
            ),
            norm_topk_prob=_field(raw, "norm_topk_prob", bool, True),
        )
    except ValueError as exc:
        raise ModelLoadError(f"config.json: {exc}") from exc
    vocab = _field(raw, "vocab_size", int)
    bias = _field(raw, "attention_bias", bool, False)
    return _positive(
        {
            "vocab_size": vocab,
            "embedding_size": vocab,
            "hidden_size": hidden,
            "num_layers": layers,
            "num_heads": heads,
            "num_kv_heads": _field(raw, "num_key_value_heads", int, 2),
            "head_dim": head_dim,
            "intermediate_size": _field(raw, "intermediate_size", int, 5632),
            "rope_theta": theta,
            "norm_eps": _field(raw, "rms_norm_eps", float, 1e-6),
            "max_position_embeddings": _field(raw, "max_position_embeddings", int, 32768),
            "attention_bias": bias,
            "output_bias": bias,  # Qwen3-Next's o_proj follows the same flag
            "mlp_bias": False,
            "qk_norm": True,
            "tie_word_embeddings": _field(raw, "tie_word_embeddings", bool, False),
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


from .moe_families import MOE_BLOCK_SIZE_FIELDS, MOE_FAMILIES  # noqa: E402

FAMILIES: tuple[Family, ...] = (
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
    Family(
        name="bert",
        model_types=("bert",),
        attention="bidirectional",
        logits_shift=False,
        default_mask_token_id=None,
        default_block_size=None,
        parse=_parse_bert,
        weight_names=_bert_weights,
        ignore=_bert_ignore,
        rename=_bert_rename,
    ),
    Family(
        name="hybrid_gdn",
        model_types=("qwen3_next",),
        attention="block_causal",
        logits_shift=False,
        default_mask_token_id=None,
        default_block_size=32,
        parse=_parse_qwen3_next,
        weight_names=_qwen3_next_weights,
        ignore=_qwen3_next_ignore,
    ),
    *MOE_FAMILIES,
)

# Config fields that carry the block length, per family (first present wins).
BLOCK_SIZE_FIELDS: dict[str, tuple[str, ...]] = {
    "sdar": ("block_size", "block_length"),
    "fast_dllm": ("bd_size", "block_size"),
    "hybrid_gdn": ("block_size", "block_length", "bd_size"),
    **MOE_BLOCK_SIZE_FIELDS,
}


def supported_model_types() -> list[str]:
    return list(dict.fromkeys(t for f in FAMILIES for t in f.model_types))


def family_for(model_type: object, raw: RawConfig | None = None) -> Family:
    """The family of a `model_type` (with `raw`, a family that claims the config wins: LLaDA-MoE
    is published as `llada`); the error lists what is supported."""
    matches = [f for f in FAMILIES if model_type in f.model_types]
    for family in matches:
        if raw is not None and family.claims is not None and family.claims(raw):
            return family
    for family in sorted(matches, key=lambda f: f.claims is not None):
        return family
    raise ModelLoadError(
        f"config.json: unknown model_type {model_type!r}; supported: "
        + ", ".join(supported_model_types())
    )
