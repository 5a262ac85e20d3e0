"""Load a model directory in Hugging Face layout into a native `DiffusionLM`.

A directory holds `config.json`, safetensors weights (single or sharded), `tokenizer.json` and
optionally `tokenizer_config.json` / `chat_template.jinja`. Nothing in it is executed: no
`trust_remote_code`, no unpickling, the chat template only inside jinja2's sandbox.

The mask token id is resolved in this order and the source is recorded: the config's
`mask_token_id`, the tokenizer's `mask_token`, the family's documented default (when it fits the
embedding), else a `ModelLoadError`.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .bert import BertLM
from .checkpoint import read_weights, weight_files
from .config import ModelConfig
from .errors import ModelLoadError
from .families import BLOCK_SIZE_FIELDS, Family, family_for
from .hybrid import HybridLM
from .model import DiffusionLM, WindowedModel
from .moe import MoeLM
from .tokenizer import TokenizerBundle, load_tokenizer

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


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
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(raw, dict):
        raise ModelLoadError(f"{path}: expected a JSON object")
    if "model_type" not in raw:
        raise ModelLoadError(f"{path}: required field `model_type` is missing")
    return raw


def resolve_dtype(
    dtype: str | torch.dtype, raw: dict[str, Any], device: torch.device
) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        if device.type == "cpu":
            return torch.float32
        stored = raw.get("torch_dtype") or raw.get("dtype") or "float32"
        return DTYPES.get(str(stored), torch.float32)
    if dtype not in DTYPES:
        raise ModelLoadError(f"unknown dtype {dtype!r}; use one of auto, {', '.join(DTYPES)}")
    return DTYPES[dtype]


def _mask_token(
    raw: dict[str, Any], tokenizer: TokenizerBundle, family: Family, rows: int
) -> tuple[int, str]:
    value = raw.get("mask_token_id")
    if value is not None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ModelLoadError(f"config.json: `mask_token_id` must be an integer, got {value!r}")
        return value, "config.json mask_token_id"
    from_tokenizer = tokenizer.special_id("mask_token")
    if from_tokenizer is not None:
        return from_tokenizer, "tokenizer_config.json mask_token"
    default = family.default_mask_token_id
    if default is not None and default < rows:
        return default, f"{family.name} default"
    why = f"the {family.name} default {default} is outside the {rows}-row embedding"
    if default is None:
        why = f"the {family.name} family has no default"
    raise ModelLoadError(
        "no mask token id: config.json has no `mask_token_id`, tokenizer_config.json no "
        f"`mask_token`, and {why}"
    )


def _block_size(raw: dict[str, Any], family: Family, override: int | None) -> int | None:
    if family.attention != "block_causal":
        return None
    if override is not None:
        return override
    for name in BLOCK_SIZE_FIELDS.get(family.name, ()):
        value = raw.get(name)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ModelLoadError(
                    f"config.json: `{name}` must be a positive integer, got {value!r}"
                )
            return value
    return family.default_block_size


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
            f"{model_dir}: tokenizer.json has {tokenizer.vocab_size} tokens but the model only "
            f"{fields['embedding_size']} embedding rows"
        )
    mask_id, source = _mask_token(raw, tokenizer, family, fields["embedding_size"])
    try:
        config = ModelConfig(
            family=family.name,
            model_type=raw["model_type"],
            attention=family.attention,  # type: ignore[arg-type]
            logits_shift=family.logits_shift,
            block_size=_block_size(raw, family, block_size),
            mask_token_id=mask_id,
            mask_token_source=source,
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

    `dtype` "auto" means fp32 on CPU and the checkpoint's stored dtype elsewhere. `block_size`
    overrides the block length of block-causal families (else the config's, else the family's
    documented default).
    """
    model_dir = Path(model_dir)
    device = torch.device(device)
    family, config, tokenizer = load_config(model_dir, block_size)
    raw = read_config(model_dir)
    torch_dtype = resolve_dtype(dtype, raw, device)
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

    state = dict(read_weights(model_dir, names, shapes, torch_dtype, ignore=ignorable))
    model.load_state_dict(state, assign=True, strict=True)
    model = model.to(device).eval().requires_grad_(False)
    return LoadedModel(
        path=model_dir, family=family, config=config, model=model, tokenizer=tokenizer
    )


FULL_HASH_LIMIT = 2 << 30  # bytes of weights hashed in full; larger checkpoints are sampled
SAMPLES_PER_FILE = 16
SAMPLE_BYTES = 1 << 20


def model_fingerprint(model_dir: str | Path) -> str:
    """A stable identity of a model directory's contents (not its path or timestamps).

    Config, tokenizer files and chat template are hashed in full. Weights are hashed in full up to
    2 GiB in total; beyond that, each file's name, size, safetensors header and 16 evenly spaced
    1 MiB samples, which tells apart any two real fine-tunes at a fraction of the cost.
    """
    model_dir = Path(model_dir)
    digest = hashlib.sha256()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
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
