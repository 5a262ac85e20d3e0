"""Values a checkpoint can spell in several places, each resolved in one documented order and
returned with the file and field it came from (`decide inspect` prints both; docs/engine.md has
the table). First present wins:

- mask id: config.json `mask_token_id`; the tokenizer's `mask_token` (tokenizer_config.json, then
  special_tokens_map.json); generation_config.json `mask_token_id`; an
  `additional_special_tokens` entry named like a mask (`|<MASK>|`); a token the tokenizer marks
  special named like one (`[MASK]`); the family's documented default; else an error.
- end of turn: the special token the chat template writes after an assistant message;
  generation_config.json `eos_token_id` (a list: each); config.json `eos_token_id`; the
  tokenizer's `eos_token`, then `sep_token`. All of them are stop ids; the first ends an answer.
- dtype `auto`: the floating dtype of the weight matrices in the safetensors headers, where the
  device computes it fast: on a CPU, bf16 only where a timed bf16 matrix product beats fp32's by
  `BF16_MARGIN` (having the instructions is not enough), fp16 never.
- context: the smallest of the config's positions field, the family's documented trained
  context and tokenizer_config.json `model_max_length` (when it is a real number).
- block size: the override; the family's config fields (`block_size`, `bd_size`, ...); its
  documented default.

Special tokens themselves resolve in `tokenizer.py`. Nothing here reads weights.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from .checkpoint import TensorSource, weight_files
from .errors import ModelLoadError
from .families import BLOCK_SIZE_FIELDS, Family
from .tokenizer import MASK_NAME, TokenizerBundle
from .tokenizer_files import read_json_object

DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}
# Context lengths a family documents and its config.json does not say: Dream's config inherits
# Qwen2.5's 131,072 positions; Dream's own evaluation harness runs at `max_length=2048`.
TRAINED_CONTEXT = {"dream": (2048, "Dream's documented context (config.json inherits Qwen2.5's)")}
POSITION_FIELDS = {"llada": "max_sequence_length"}  # else `max_position_embeddings`
UNBOUNDED_MAX_LENGTH = 10**7  # transformers writes 1e30 for "no limit"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _token_ids(value: Any, origin: str) -> list[int]:
    values = value if isinstance(value, list) else [value]
    if not all(_is_int(v) for v in values):
        raise ModelLoadError(f"{origin}: expected a token id or a list of them, got {value!r}")
    return list(values)


def _check_token(token_id: int, source: str, tokenizer: TokenizerBundle) -> int:
    if tokenizer.tokenizer.id_to_token(token_id) is None:
        raise ModelLoadError(
            f"{source} = {token_id} is not a token of the vocabulary "
            f"({tokenizer.vocab_size} tokens, {tokenizer.source})"
        )
    return token_id


def mask_token_id(
    raw: Mapping[str, Any],
    generation: Mapping[str, Any],
    tokenizer: TokenizerBundle,
    family: Family,
    rows: int,
) -> tuple[int, str]:
    value = raw.get("mask_token_id")
    if value is not None:
        if not _is_int(value):
            raise ModelLoadError(f"config.json: `mask_token_id` must be an integer, got {value!r}")
        return _check_token(value, "config.json `mask_token_id`", tokenizer), (
            "config.json mask_token_id"
        )
    from_tokenizer = tokenizer.special_id("mask_token")
    if from_tokenizer is not None:
        return from_tokenizer, tokenizer.special_sources["mask_token"]
    value = generation.get("mask_token_id")
    if value is not None:
        if not _is_int(value):
            raise ModelLoadError(
                f"generation_config.json: `mask_token_id` must be an integer, got {value!r}"
            )
        return _check_token(value, "generation_config.json `mask_token_id`", tokenizer), (
            "generation_config.json mask_token_id"
        )
    vocab = tokenizer.tokenizer
    for text in tokenizer.additional_special_tokens:
        if MASK_NAME.match(text) and vocab.token_to_id(text) is not None:
            return vocab.token_to_id(text), f"additional_special_tokens {text}"
    for token_id, added in sorted(vocab.get_added_tokens_decoder().items()):
        if added.special and MASK_NAME.match(added.content):
            return token_id, f"tokenizer special token {added.content}"
    default = family.default_mask_token_id
    if default is not None and default < rows:
        return default, f"{family.name} default"
    why = f"the {family.name} default {default} is outside the {rows}-row embedding"
    if default is None:
        why = f"the {family.name} family has no default"
    raise ModelLoadError(
        "no mask token id: config.json has no `mask_token_id`, the tokenizer no `mask_token` "
        f"nor a special token named like one, and {why}"
    )


def end_of_turn(
    raw: Mapping[str, Any], generation: Mapping[str, Any], tokenizer: TokenizerBundle
) -> tuple[tuple[int, ...], str]:
    """The stop ids, the one written after an answer first, and where that one came from."""
    found: list[tuple[int, str]] = []
    if tokenizer.chat_template is not None:
        text = tokenizer.chat_template.turn_end(tokenizer.special_texts())
        if text is not None:
            found.append((tokenizer.tokenizer.token_to_id(text), f"chat template turn end {text}"))
    for name, config in (("generation_config.json", generation), ("config.json", raw)):
        if config.get("eos_token_id") is not None:
            ids = _token_ids(config["eos_token_id"], f"{name} `eos_token_id`")
            found += [(i, f"{name} eos_token_id") for i in ids]
    for key in ("eos_token", "sep_token"):
        token_id = tokenizer.special_id(key)
        if token_id is not None:
            found.append((token_id, tokenizer.special_sources[key]))
    ids: list[int] = []
    for token_id, source in found:
        _check_token(token_id, source, tokenizer)
        if token_id not in ids:
            ids.append(token_id)
    return tuple(ids), found[0][1] if found else "none"


def _cpu_has_bf16() -> bool:
    """bf16 matrix instructions on this CPU (AVX512-BF16 or AMX); Linux only, else False."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


# bf16 is chosen on a CPU only where its matrix products are at least this much faster than
# fp32's: near a tie fp32 wins (it is the more exact, and a measurement near the line could
# otherwise pick either dtype from one run to the next).
BF16_MARGIN = 1.25
# What is timed: a product of this many positions through one MLP-sized matrix, the shape of the
# forwards decoding runs (a step reads ~100 positions, a prefill hundreds per row).
_PROBE_SHAPE = (256, 768, 3072)


@functools.cache
def cpu_bf16_speedup() -> float:
    """How many times faster a bf16 matrix product runs than an fp32 one on this CPU, at the
    torch threads set now (best of several runs each; ~0.1 s, once per process). Having bf16
    instructions is not enough: on some CPUs with AVX512-BF16 and no AMX, oneDNN's bf16
    products run at two thirds of fp32's speed (measured 91 against 138 GFLOP/s on an Intel
    Xeon; docs/benchmarks.md), on others (AMD EPYC with AVX512-BF16, AMX Xeons) faster."""
    m, k, n = _PROBE_SHAPE
    best = {}
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(m, k, generator=gen).to(dtype)
        w = torch.randn(n, k, generator=gen).to(dtype)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            torch.nn.functional.linear(a, w)
            times.append(time.perf_counter() - started)
        best[dtype] = min(times[1:])  # the first warms up oneDNN's kernel choice
    return best[torch.float32] / best[torch.bfloat16]


# An fp32 copy of 16-bit weights is refused when it would take more than this share of the
# machine's memory: slow arithmetic in the stored dtype beats running out of memory.
FP32_MEMORY_SHARE = 0.5


def _fp32_too_big(model_dir: Path) -> str | None:
    """Why the weights of `model_dir` (16-bit) must stay 16-bit on this machine, or None."""
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not POSIX: no figure, no refusal
        return None
    need = 2 * sum(f.stat().st_size for f in weight_files(model_dir))
    if need <= FP32_MEMORY_SHARE * memory:
        return None
    return (
        f"an fp32 copy would take {need / 2**30:.1f} GiB of this machine's "
        f"{memory / 2**30:.1f} GiB; pass --dtype float32 to force it"
    )


def cpu_bf16_is_fast() -> tuple[bool, str]:
    """Whether bf16 is the faster compute dtype on this CPU, and why."""
    if not _cpu_has_bf16():
        return False, "no bf16 instructions"
    speedup = cpu_bf16_speedup()
    if speedup >= BF16_MARGIN:
        return True, f"bf16 products {speedup:.2f}x as fast as fp32 on this CPU"
    return False, f"bf16 products only {speedup:.2f}x as fast as fp32 on this CPU"


def stored_dtype(model_dir: Path) -> tuple[torch.dtype, str]:
    """The dtype the weight matrices are stored in, from the safetensors headers. 1-D tensors
    (norms, biases, router biases) may be kept in fp32 beside bf16 matrices; matrices of two
    dtypes are refused, naming one tensor of each."""
    source = TensorSource(weight_files(model_dir))
    seen: dict[torch.dtype, str] = {}
    for name in sorted(source.names()):
        if len(source.shape(name)) >= 2:
            seen.setdefault(source.float_dtype(name), name)
    if len(seen) > 1:
        examples = ", ".join(
            f"{name!r} ({str(dtype).removeprefix('torch.')}, {source.file_of(name).name})"
            for dtype, name in seen.items()
        )
        raise ModelLoadError(
            f"{model_dir}: weight matrices are stored in mixed dtypes: {examples}; pass an "
            "explicit dtype (--dtype / dtype=) to cast them all to one"
        )
    if not seen:
        return torch.float32, "no weight matrices"
    ((dtype, name),) = seen.items()
    return dtype, f"safetensors header of {source.file_of(name).name}"


def resolve_dtype(
    dtype: str | torch.dtype, model_dir: Path, device: torch.device
) -> tuple[torch.dtype, str]:
    """The compute dtype and why: explicit, or `auto` (see the module table)."""
    if isinstance(dtype, torch.dtype):
        return dtype, "requested"
    if dtype != "auto":
        if dtype not in DTYPES:
            raise ModelLoadError(f"unknown dtype {dtype!r}; use one of auto, {', '.join(DTYPES)}")
        return DTYPES[dtype], "requested"
    stored, where = stored_dtype(model_dir)
    if device.type == "cpu":
        if stored == torch.float32:
            return stored, f"stored ({where})"
        too_big = _fp32_too_big(model_dir)
        if too_big:
            return stored, f"stored ({where}): {too_big}"
        if stored == torch.bfloat16:
            fast, why = cpu_bf16_is_fast()
            if fast:
                return stored, f"stored ({where}), {why}"
            return torch.float32, f"fp32: stored {stored} ({where}), {why}"
        return torch.float32, f"fp32: stored {stored} ({where}) is slow on CPUs"
    if stored == torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16, f"fp16: stored bf16 ({where}), the GPU has no bf16"
    return stored, f"stored ({where})"


def context_length(
    raw: Mapping[str, Any], family: Family, tokenizer_config: Mapping[str, Any], positions: int
) -> tuple[int, str]:
    field = POSITION_FIELDS.get(family.name, "max_position_embeddings")
    best = (positions, f"config.json {field}" if field in raw else f"{family.name} default")
    trained = TRAINED_CONTEXT.get(family.name)
    if trained is not None and trained[0] < best[0]:
        best = trained
    limit = tokenizer_config.get("model_max_length")
    if _is_int(limit) and 0 < limit < min(best[0], UNBOUNDED_MAX_LENGTH):
        best = (limit, "tokenizer_config.json model_max_length")
    return best


def block_size(
    raw: Mapping[str, Any], family: Family, override: int | None
) -> tuple[int | None, str]:
    if family.attention != "block_causal":
        return None, "-"
    if override is not None:
        return override, "requested"
    for name in BLOCK_SIZE_FIELDS.get(family.name, ()):
        value = raw.get(name)
        if value is not None:
            if not _is_int(value) or value <= 0:
                raise ModelLoadError(
                    f"config.json: `{name}` must be a positive integer, got {value!r}"
                )
            return value, f"config.json {name}"
    return family.default_block_size, f"{family.name} default"


def generation_config(model_dir: Path) -> dict[str, Any]:
    return read_json_object(model_dir / "generation_config.json")
