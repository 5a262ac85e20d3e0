"""Load a model directory in Hugging Face layout into a native `DiffusionLM`.

A directory holds `config.json`, safetensors weights (single or sharded), `tokenizer.json` (or
`vocab.json` + `merges.txt`) and optionally `tokenizer_config.json`, `special_tokens_map.json`,
`generation_config.json`, `chat_template.jinja`. Nothing in it is executed: no
`trust_remote_code`, no unpickling, the chat template only inside jinja2's sandbox.

What a checkpoint can spell in several places (mask id, end of turn, dtype, context length, block
size) is resolved by `resolution.py`, each value with its source. Every check on names, shapes and
dtypes runs on the safetensors headers before the first tensor is read, so a refused checkpoint
is never loaded half-way.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from . import resolution
from .bert import BertLM
from .checkpoint import read_weights, weight_files
from .config import ModelConfig
from .errors import ModelLoadError
from .families import Family, family_for
from .hybrid import HybridLM
from .model import DiffusionLM, WindowedModel
from .moe import MoeLM
from .tokenizer import TokenizerBundle, load_tokenizer
from .tokenizer_files import read_json_object


@dataclass(frozen=True)
class LoadedModel:
    path: Path
    family: Family
    config: ModelConfig
    model: WindowedModel
    tokenizer: TokenizerBundle

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    def parameter_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def read_config(model_dir: Path) -> dict[str, Any]:
    if not model_dir.exists():
        raise ModelLoadError(f"{model_dir}: no such model directory")
    if not model_dir.is_dir():
        raise ModelLoadError(f"{model_dir}: not a directory")
    path = model_dir / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{model_dir}: config.json is missing")
    raw = read_json_object(path)
    if "model_type" not in raw:
        raise ModelLoadError(f"{path}: required field `model_type` is missing")
    return raw


def load_config(
    model_dir: str | Path, block_size: int | None = None
) -> tuple[Family, ModelConfig, TokenizerBundle]:
    """Parse a directory's config and tokenizer without reading any weights."""
    model_dir = Path(model_dir)
    raw = read_config(model_dir)
    family = family_for(raw["model_type"], raw)
    fields = family.parse(raw)
    tokenizer = load_tokenizer(model_dir)
    if tokenizer.vocab_size > fields["embedding_size"]:
        raise ModelLoadError(
            f"{model_dir}: the tokenizer ({tokenizer.source}) has {tokenizer.vocab_size} tokens "
            f"but the model only {fields['embedding_size']} embedding rows"
        )
    generation = resolution.generation_config(model_dir)
    mask_id, source = resolution.mask_token_id(
        raw, generation, tokenizer, family, fields["embedding_size"]
    )
    end_ids, end_source = resolution.end_of_turn(raw, generation, tokenizer)
    context, context_source = resolution.context_length(
        raw, family, read_json_object(model_dir / "tokenizer_config.json"),
        fields["max_position_embeddings"],
    )  # fmt: skip
    block, block_source = resolution.block_size(raw, family, block_size)
    try:
        config = ModelConfig(
            family=family.name,
            model_type=raw["model_type"],
            attention=family.attention,  # type: ignore[arg-type]
            logits_shift=family.logits_shift,
            block_size=block,
            block_size_source=block_source,
            mask_token_id=mask_id,
            mask_token_source=source,
            end_of_turn_ids=end_ids,
            end_of_turn_source=end_source,
            context_length=context,
            context_source=context_source,
            **fields,
        )
    except ValueError as exc:
        raise ModelLoadError(f"{model_dir / 'config.json'}: {exc}") from exc
    return family, config, tokenizer


def build_model(config: ModelConfig) -> WindowedModel:
    """An uninitialised module of the config's architecture."""
    if config.architecture == "bert":
        return BertLM(config)
    if config.architecture == "hybrid_gdn":
        return HybridLM(config)
    if config.architecture == "moe":
        return MoeLM(config)
    return DiffusionLM(config)


def load_model(
    model_dir: str | Path,
    *,
    dtype: str | torch.dtype = "auto",
    device: str | torch.device = "cpu",
    block_size: int | None = None,
) -> LoadedModel:
    """Load config, tokenizer, chat template and weights of `model_dir`.

    `dtype` "auto" means the dtype the weights are stored in where the device computes it fast
    (`resolution.resolve_dtype`: on a CPU, bf16 only where it measures faster than fp32).
    `block_size` overrides the block length of block-causal families (else the config's, else
    the family's documented default).
    """
    model_dir = Path(model_dir)
    device = torch.device(device)
    family, config, tokenizer = load_config(model_dir, block_size)
    raw = read_config(model_dir)
    torch_dtype, _ = resolution.resolve_dtype(dtype, model_dir, device)
    with torch.device("meta"):
        model = build_model(config)
    shapes = {name: tuple(t.shape) for name, t in model.state_dict().items()}
    names = family.weight_names({**family.parse(raw)})
    if set(names.values()) != set(shapes):
        raise AssertionError(f"family {family.name} weight map out of sync with the model")
    ignore_head = config.tie_word_embeddings

    def ignorable(name: str) -> bool:
        # Tensors the family never reads, and a head that a tied config never reads.
        return family.ignore(name) or (
            ignore_head and name in ("lm_head.weight", "model.transformer.ff_out.weight")
        )

    state = dict(
        read_weights(model_dir, names, shapes, torch_dtype, ignore=ignorable, rename=family.rename)
    )
    model.load_state_dict(state, assign=True, strict=True)
    model = model.to(device).eval().requires_grad_(False)
    return LoadedModel(
        path=model_dir, family=family, config=config, model=model, tokenizer=tokenizer
    )


# Every file whose content can change a decision: config, tokenizer in either form, special
# tokens, end-of-turn ids, chat template.
METADATA_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
    "vocab.json", "merges.txt", "added_tokens.json", "special_tokens_map.json",
    "generation_config.json",
)  # fmt: skip
FULL_HASH_LIMIT = 2 << 30  # bytes of weights hashed in full; larger checkpoints are sampled
SAMPLES_PER_FILE = 16
SAMPLE_BYTES = 1 << 20


def model_fingerprint(model_dir: str | Path) -> str:
    """A stable identity of a model directory's contents (not its path or timestamps).

    The metadata files (`METADATA_FILES`) are hashed in full. Weights are hashed in full up to
    2 GiB in total; beyond that, each file's name, size, safetensors header and 16 evenly spaced
    1 MiB samples, which tells apart any two real fine-tunes at a fraction of the cost.
    """
    model_dir = Path(model_dir)
    digest = hashlib.sha256()
    for name in METADATA_FILES:
        path = model_dir / name
        if path.is_file():
            digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    files = weight_files(model_dir)
    full = sum(p.stat().st_size for p in files) <= FULL_HASH_LIMIT
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.name}\0{size}\0".encode())
        with path.open("rb") as handle:
            if full:
                while chunk := handle.read(1 << 24):
                    digest.update(chunk)
                continue
            header_len = int.from_bytes(handle.read(8), "little")
            digest.update(handle.read(min(header_len, 100_000_000)))
            for i in range(SAMPLES_PER_FILE):
                handle.seek(i * max(size - SAMPLE_BYTES, 0) // (SAMPLES_PER_FILE - 1))
                digest.update(handle.read(SAMPLE_BYTES))
    return digest.hexdigest()[:16]
