"""The independent implementation our engine is checked against: `transformers`' Llama, Qwen2 and
Qwen3 run on the same weights, read straight from the checkpoint files, with an explicit 4D float
attention mask. Test-only code; nothing in the package imports `transformers`."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import (
    BertConfig,
    BertForMaskedLM,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
)

LLADA_TO_LLAMA = {
    "attn_norm": "input_layernorm",
    "ff_norm": "post_attention_layernorm",
    "q_proj": "self_attn.q_proj",
    "k_proj": "self_attn.k_proj",
    "v_proj": "self_attn.v_proj",
    "attn_out": "self_attn.o_proj",
    "ff_proj": "mlp.gate_proj",
    "up_proj": "mlp.up_proj",
    "ff_out": "mlp.down_proj",
}


def max_rel_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest absolute difference relative to the largest magnitude of `expected`."""
    return (
        (actual.double() - expected.double()).abs().max() / expected.double().abs().max()
    ).item()


def _weights(model_dir: Path) -> dict[str, torch.Tensor]:
    tensors: dict[str, torch.Tensor] = {}
    for path in sorted(model_dir.glob("*.safetensors")):
        tensors |= load_file(str(path))
    return {k: v.float() for k, v in tensors.items()}


def _llada_to_llama(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out = {}
    for name, t in tensors.items():
        if name == "model.transformer.wte.weight":
            out["model.embed_tokens.weight"] = t
        elif name == "model.transformer.ln_f.weight":
            out["model.norm.weight"] = t
        elif name == "model.transformer.ff_out.weight":
            out["lm_head.weight"] = t
        else:
            _, _, _, layer, module, kind = name.split(".")
            out[f"model.layers.{layer}.{LLADA_TO_LLAMA[module]}.{kind}"] = t
    return out


def oracle_model(model_dir: Path) -> torch.nn.Module:
    raw = json.loads((model_dir / "config.json").read_text())
    tensors = _weights(model_dir)
    if raw["model_type"] == "bert":
        config = BertConfig(
            vocab_size=raw["vocab_size"],
            hidden_size=raw["hidden_size"],
            num_hidden_layers=raw["num_hidden_layers"],
            num_attention_heads=raw["num_attention_heads"],
            intermediate_size=raw["intermediate_size"],
            max_position_embeddings=raw["max_position_embeddings"],
            type_vocab_size=raw["type_vocab_size"],
            layer_norm_eps=raw["layer_norm_eps"],
            hidden_act=raw["hidden_act"],
        )
        model = BertForMaskedLM(config)
    elif raw["model_type"] == "llada":
        heads = raw["n_heads"]
        config = LlamaConfig(
            vocab_size=raw["embedding_size"],
            hidden_size=raw["d_model"],
            intermediate_size=raw["mlp_hidden_size"],
            num_hidden_layers=raw["n_layers"],
            num_attention_heads=heads,
            num_key_value_heads=raw["n_kv_heads"],
            head_dim=raw["d_model"] // heads,
            rms_norm_eps=raw["rms_norm_eps"],
            rope_theta=raw["rope_theta"],
            tie_word_embeddings=raw["weight_tying"],
            attention_bias=raw["include_qkv_bias"],
        )
        tensors = _llada_to_llama(tensors)
        if raw["include_qkv_bias"]:  # Llama's flag also puts a bias on o_proj: make it zero
            for i in range(raw["n_layers"]):
                tensors[f"model.layers.{i}.self_attn.o_proj.bias"] = torch.zeros(raw["d_model"])
        model = LlamaForCausalLM(config)
    else:
        common = dict(
            vocab_size=raw["vocab_size"],
            hidden_size=raw["hidden_size"],
            intermediate_size=raw["intermediate_size"],
            num_hidden_layers=raw["num_hidden_layers"],
            num_attention_heads=raw["num_attention_heads"],
            num_key_value_heads=raw["num_key_value_heads"],
            rms_norm_eps=raw["rms_norm_eps"],
            rope_theta=raw["rope_theta"],
            tie_word_embeddings=raw["tie_word_embeddings"],
        )
        if raw["model_type"] == "sdar":
            config = Qwen3Config(
                head_dim=raw["head_dim"], attention_bias=raw["attention_bias"], **common
            )
            model = Qwen3ForCausalLM(config)
        else:
            config = Qwen2Config(**common)
            model = Qwen2ForCausalLM(config)
    config._attn_implementation = "eager"
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    tied = ("lm_head.weight", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias")
    missing = [m for m in missing if not (config.tie_word_embeddings and m in tied)]
    missing = [m for m in missing if m != "bert.embeddings.position_ids"]
    assert not missing and not unexpected, (missing, unexpected)
    if config.tie_word_embeddings:
        model.tie_weights()
    return model.eval()


def float_mask(allowed: torch.Tensor) -> torch.Tensor:
    """Boolean `[B, Lq, Lk]` (True = attend) → additive float mask `[B, 1, Lq, Lk]`.

    A 4D bool mask is silently added to eager scores by `transformers`; floats are what works."""
    mask = torch.zeros(allowed.shape, dtype=torch.float32)
    mask.masked_fill_(~allowed, torch.finfo(torch.float32).min)
    return mask[:, None]


def allowed_keys(lengths: list[int], total: int, block_size: int | None) -> torch.Tensor:
    """Which keys each query may see in a full (uncached) forward of right-padded rows."""
    pos = torch.arange(total)
    valid = pos[None, :] < torch.tensor(lengths)[:, None]  # [B, L]
    allowed = valid[:, None, :].expand(len(lengths), total, total)
    if block_size is not None:
        allowed = allowed & ((pos[None, :] // block_size) <= (pos[:, None] // block_size))
    return allowed


@torch.no_grad()
def oracle_logits(
    model: torch.nn.Module, ids: torch.Tensor, lengths: list[int], block_size: int | None
) -> torch.Tensor:
    total = ids.shape[1]
    if isinstance(model, BertForMaskedLM):  # BERT takes the plain padding mask
        padding = (torch.arange(total)[None, :] < torch.tensor(lengths)[:, None]).long()
        return model(input_ids=ids, attention_mask=padding).logits
    mask = float_mask(allowed_keys(lengths, total, block_size))
    positions = torch.arange(total)[None].expand(ids.shape[0], total)
    return model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
