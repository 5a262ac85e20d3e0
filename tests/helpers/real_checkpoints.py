"""Published checkpoints as a new user brings them, with random weights at shrunk sizes.

`write_published(name, path)` lays out the published metadata of a checkpoint exactly as its
authors wrote it (`tests/data/real-checkpoints/<name>/`: config, generation config, tokenizer
config with its chat template, special-tokens map, added tokens, Qwen's `vocab.json` +
`merges.txt`), shrinks only the size fields of `config.json`, and writes random bf16 weights under
the real tensor names of `model.safetensors.index.json` (its first layers), into the real shard
files. The tensor names are taken from the published index, not from our family tables, so a
name the engine expects but the release does not have fails the load.

LLaDA's real `tokenizer.json` (126,464 tokens) is not among the published files kept here; its
stand-in is GPT-2's byte-level BPE padded with unused tokens up to the first special id, followed
by LLaDA's special tokens at their real ids (from `added_tokens_decoder`).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer

DATA = Path(__file__).resolve().parents[1] / "data"
PUBLISHED = DATA / "real-checkpoints"
QWEN_VOCAB = PUBLISHED / "qwen2-vocab"
GPT2_TOKENIZER = DATA / "gpt2" / "tokenizer.json"
NAMES = ("llada-8b-instruct", "dream-v0-instruct-7b", "sdar-4b-chat", "fast-dllm-v2-7b")
LAYERS = 2
# Size fields per config spelling; everything else (ids, vocab, theta, flags) stays as published.
SHRINK = {
    "llada": {"d_model": 64, "n_heads": 4, "n_kv_heads": 4, "n_layers": LAYERS,
              "mlp_hidden_size": 96},
    "qwen": {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
             "num_hidden_layers": LAYERS, "intermediate_size": 96, "max_window_layers": LAYERS},
}  # fmt: skip


def _layer_of(name: str) -> int | None:
    found = re.search(r"\.(?:layers|blocks)\.(\d+)\.", name)
    return int(found.group(1)) if found else None


def _llada_tokenizer(tokenizer_config: dict, path: Path) -> None:
    added = sorted(
        (int(i), t) for i, t in tokenizer_config["added_tokens_decoder"].items()
    )  # [(126080, {...}), ...]
    data = json.loads(GPT2_TOKENIZER.read_text())
    vocab = data["model"]["vocab"]
    specials = {t["content"] for _, t in added}
    for text in [t for t in vocab if t in specials]:  # GPT-2's own <|endoftext|>
        token_id = vocab.pop(text)
        vocab[f"<|unused_{token_id}|>"] = token_id
    for i in range(len(vocab), added[0][0]):
        vocab[f"<|unused_{i}|>"] = i
    data["added_tokens"] = [
        {"id": i, "content": t["content"], "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": t["special"]}
        for i, t in added
    ]  # fmt: skip
    Tokenizer.from_str(json.dumps(data)).save(str(path / "tokenizer.json"))


def write_published(name: str, path: Path, *, seed: int = 0) -> Path:
    """The published checkpoint `name` (one of `NAMES`) with random weights, at `path`."""
    source = PUBLISHED / name
    path.mkdir(parents=True, exist_ok=True)
    for file in source.iterdir():
        shutil.copy(file, path / file.name)
    raw = json.loads((source / "config.json").read_text())
    llada = raw["model_type"] == "llada"
    if llada:
        _llada_tokenizer(json.loads((source / "tokenizer_config.json").read_text()), path)
    else:
        for file in ("vocab.json", "merges.txt"):
            with gzip.open(QWEN_VOCAB / f"{file}.gz", "rt", encoding="utf-8") as handle:
                (path / file).write_text(handle.read(), encoding="utf-8")
    shrunk = raw | SHRINK["llada" if llada else "qwen"]
    if "head_dim" in raw:
        shrunk["head_dim"] = 16
    if "layer_types" in raw:
        shrunk["layer_types"] = raw["layer_types"][:LAYERS]
    (path / "config.json").write_text(json.dumps(shrunk, indent=2))

    from decide.engine.families import family_for
    from decide.engine.loader import build_model, load_config

    family = family_for(raw["model_type"], raw)
    index = json.loads((source / "model.safetensors.index.json").read_text())
    published = {
        n: shard for n, shard in index["weight_map"].items() if (_layer_of(n) or 0) < LAYERS
    }
    _, config, _ = load_config(path)
    to_engine = family.weight_names(family.parse(shrunk))
    if set(to_engine) != set(published):
        raise AssertionError(
            f"{name}: published names and the family's differ: "
            f"{sorted(set(published) ^ set(to_engine))[:6]}"
        )
    with torch.device("meta"):
        shapes = {n: t.shape for n, t in build_model(config).state_dict().items()}
    generator = torch.Generator().manual_seed(seed)
    shards: dict[str, dict[str, torch.Tensor]] = {}
    for tensor_name, shard in sorted(published.items()):
        shape = shapes[to_engine[tensor_name]]
        value = 0.05 * torch.randn(shape, generator=generator)
        if tensor_name.endswith("norm.weight"):
            value = 1.0 + value
        shards.setdefault(shard, {})[tensor_name] = value.to(torch.bfloat16).contiguous()
    for shard, tensors in shards.items():
        save_file(tensors, str(path / shard), metadata={"format": "pt"})
    total = sum(t.numel() * t.element_size() for ts in shards.values() for t in ts.values())
    index = {"metadata": {"total_size": total}, "weight_map": published}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return path
