"""Random checkpoints in the real on-disk format of each supported family (a product feature).

Model hubs are out of reach on many machines, yet sizing hardware for a family (memory and
speed at a real model's shape: `benchmarks/mfu.py`, `benchmarks/memory.py`), benchmarks and tests
need real model directories: real `model_type`, real config field names, real weight names,
safetensors (single or sharded), a `tokenizers` tokenizer with the special tokens a diffusion
model needs, and a chat template. `write_random_checkpoint` writes exactly that from random
weights, seeded. Norm weights are drawn around 1 rather than set to 1 so that a mis-mapped norm
changes the logits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer

from .config import ModelConfig
from .families import family_for
from .hybrid import OffsetRMSNorm
from .loader import build_model
from .random_configs import config_json

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ("<|im_start|>", "<|im_end|>", "<|pad|>", "<|mask|>")


def write_random_checkpoint(
    path: str | Path,
    model_type: str,
    *,
    tokenizer_json: str | Path,
    num_layers: int = 2,
    hidden_size: int = 96,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    head_dim: int | None = None,
    intermediate_size: int = 160,
    block_size: int = 4,
    tie_word_embeddings: bool = False,
    attention_bias: bool | None = None,
    rope_theta: float = 10000.0,
    shards: int = 1,
    seed: int = 0,
    init_std: float = 0.05,
    dtype: torch.dtype = torch.float32,
    extra_config: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
) -> Path:
    """Write a random model of `model_type` ("llada", "Dream", "sdar", "Fast_dLLM_Qwen", "bert",
    "qwen3_next", "llada2_moe", "sdar_moe", "lladamoe") to `path` and return it. The tokenizer
    is `tokenizer_json` plus the special tokens
    `<|im_start|>`, `<|im_end|>`, `<|pad|>` and `<|mask|>`; embedding rows are padded to a
    multiple of 64 beyond the tokenizer, as real checkpoints do. `init_std` scales the linear
    layers' weights: larger values make outputs depend more on context. `extra_config` overrides
    config.json fields (a mapping or (field, value) pairs; e.g. a qwen3_next model's `layer_types`
    or expert counts)."""
    family = family_for(model_type)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    tokenizer.add_special_tokens([AddedToken(t, special=True) for t in SPECIAL_TOKENS])
    tokenizer.save(str(path / "tokenizer.json"))
    vocab = tokenizer.get_vocab_size(with_added_tokens=True)
    rows = (vocab + 63) // 64 * 64
    mask_id = tokenizer.token_to_id("<|mask|>")

    if head_dim is None or model_type not in ("sdar", "qwen3_next", "sdar_moe", "llada2_moe"):
        head_dim = hidden_size // num_heads
    if attention_bias is None:
        attention_bias = model_type in ("Dream", "Fast_dLLM_Qwen")
    fields = {
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "head_dim": head_dim,
        "intermediate_size": intermediate_size,
        "rope_theta": rope_theta,
        "tie_word_embeddings": tie_word_embeddings,
        "attention_bias": attention_bias,
        "block_size": block_size,
    }
    raw = config_json(model_type, fields, vocab, rows) | dict(extra_config or {})
    raw = json.loads(json.dumps(raw))  # what a reader of config.json sees (tuples → lists)
    # The mask id lives where each family's real checkpoints keep it: config for LLaDA and Dream,
    # the tokenizer's mask token for SDAR and Fast-dLLM v2.
    if model_type in ("llada", "Dream"):
        raw["mask_token_id"] = mask_id
    (path / "config.json").write_text(json.dumps(raw, indent=2))
    tokenizer_config = {
        "chat_template": CHATML_TEMPLATE,
        "eos_token": "<|im_end|>",
        "pad_token": "<|pad|>",
        "bos_token": None,
    }
    if model_type not in ("llada", "Dream"):
        tokenizer_config["mask_token"] = "<|mask|>"  # bert's tokenizers keep it there too
    (path / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))

    parsed = family.parse(raw)
    config = ModelConfig(
        family=family.name,
        model_type=model_type,
        attention=family.attention,  # type: ignore[arg-type]
        logits_shift=family.logits_shift,
        block_size=block_size if family.attention == "block_causal" else None,
        mask_token_id=mask_id,
        mask_token_source="synthetic",
        **parsed,
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.device("meta"):  # names and shapes only
        model = build_model(config)
    # Norms computing x̂ · (1 + w) store w around 0 (Qwen3-Next's decoder norms).
    offset = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, OffsetRMSNorm)}
    state = {}
    for name, tensor in model.state_dict().items():
        if name in offset:
            value = 0.2 * torch.randn(tensor.shape, generator=generator)
        elif name.endswith("norm.weight"):
            value = 1.0 + 0.2 * torch.randn(tensor.shape, generator=generator)
        elif name.endswith(".A_log"):
            # Decay rates exp(A_log) from 0.01 to 1: GDN heads that remember for hundreds of tokens
            # next to heads that forget within a few, so a wrong prefix state shows.
            value = torch.empty(tensor.shape).uniform_(0.01, 1.0, generator=generator).log()
        elif name == "embed.weight":
            value = torch.randn(tensor.shape, generator=generator)
        else:
            value = init_std * torch.randn(tensor.shape, generator=generator)
        state[name] = value.to(dtype)
    to_checkpoint = {engine: ckpt for ckpt, engine in family.weight_names(parsed).items()}
    tensors = {to_checkpoint[name]: t.contiguous() for name, t in state.items()}

    names = sorted(tensors)
    if shards <= 1:
        save_file(tensors, str(path / "model.safetensors"), metadata={"format": "pt"})
        return path
    weight_map = {}
    for i in range(shards):
        shard_name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[i::shards]}
        save_file(part, str(path / shard_name), metadata={"format": "pt"})
        weight_map |= dict.fromkeys(part, shard_name)
    index = {
        "metadata": {"total_size": sum(t.numel() * t.element_size() for t in tensors.values())}
    }
    index["weight_map"] = weight_map
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return path
