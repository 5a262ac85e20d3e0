"""The BERT masked-LM family (post-LN encoder, absolute positions, tied decoder; no tensors).

Contract. `_parse_bert` reads a `BertForMaskedLM` config, refusing relative positions, other
activations and causal decoders; the weight map gives the exact tensor set, `_bert_rename` maps
classic exports' spellings (`gamma`/`beta`, no `bert.` prefix) onto it and `_bert_ignore` skips
the pooler, the NSP head and the tied decoder. `BERT_FAMILY` is registered in `families.FAMILIES`.
"""

from __future__ import annotations

from typing import Any

from .family import Family, RawConfig, config_field, hf_sizes, refuse, require_positive


def _parse_bert(raw: RawConfig) -> dict[str, Any]:
    refuse(raw, "hidden_act", lambda v: v in ("gelu", "gelu_python"), "only exact GELU")
    refuse(raw, "position_embedding_type", lambda v: v == "absolute", "relative positions")
    refuse(raw, "is_decoder", lambda v: v is False, "a causal BERT decoder")
    sizes = hf_sizes(raw, kv_field=None)
    hidden, heads = sizes["hidden_size"], sizes["num_heads"]
    return require_positive(
        {
            **sizes,
            "head_dim": hidden // heads if heads else 0,
            "intermediate_size": config_field(raw, "intermediate_size", int),
            "rope_theta": 0.0,
            "norm_eps": config_field(raw, "layer_norm_eps", float, 1e-12),
            "max_position_embeddings": config_field(raw, "max_position_embeddings", int, 512),
            "attention_bias": True,
            "output_bias": True,
            "mlp_bias": True,
            "qk_norm": False,
            "tie_word_embeddings": True,
            "architecture": "bert",
            "type_vocab_size": config_field(raw, "type_vocab_size", int, 2),
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


BERT_FAMILY = Family(
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
)
