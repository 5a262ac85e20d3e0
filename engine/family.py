"""What a model family is, and the checked reading of `config.json` fields its parsers share.

Contract. A `Family` knows its checkpoints' config field names, their weight names, where their
mask token id lives and how they run at inference (bidirectional or block-causal attention,
shifted logits): `parse` turns a raw config dict into `ModelConfig` fields, `weight_names` gives,
for those fields, the exact set of tensors a checkpoint must hold (checkpoint name → engine
parameter name). `config_field` reads one field with its type checked, `refuse` rejects a switch
the engine does not implement, `require_positive` the sizes that must be positive, `hf_sizes`
reads the size fields most configs spell the Hugging Face way and `refuse_decoder_switches` the
switches LLaMA/Qwen-style configs share; every failure is a `ModelLoadError` naming the field.
Nothing here touches tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ModelLoadError

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


def config_field(
    raw: RawConfig, name: str, kind: type | tuple[type, ...], default: Any = ...
) -> Any:
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


def refuse(raw: RawConfig, name: str, allowed: Callable[[Any], bool], why: str) -> None:
    if name in raw and not allowed(raw[name]):
        raise ModelLoadError(f"config.json: `{name}` = {raw[name]!r} is not supported ({why})")


def require_positive(fields: dict[str, Any]) -> dict[str, Any]:
    for key in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads"):
        if fields[key] <= 0:
            raise ModelLoadError(f"config.json: `{key}` must be positive, got {fields[key]}")
    return fields


def hf_sizes(raw: RawConfig, kv_field: str | None = "num_key_value_heads") -> dict[str, Any]:
    """`ModelConfig`'s size fields from `vocab_size` (also the embedding rows), `hidden_size`,
    `num_hidden_layers`, `num_attention_heads` and `kv_field` (key/value heads, defaulting to the
    attention heads; None: as many as attention heads, for families without GQA)."""
    hidden = config_field(raw, "hidden_size", int)
    heads = config_field(raw, "num_attention_heads", int)
    kv = heads if kv_field is None else config_field(raw, kv_field, int, heads)
    vocab = config_field(raw, "vocab_size", int)
    return {
        "vocab_size": vocab,
        "embedding_size": vocab,
        "hidden_size": hidden,
        "num_layers": config_field(raw, "num_hidden_layers", int),
        "num_heads": heads,
        "num_kv_heads": kv,
    }


def refuse_decoder_switches(raw: RawConfig) -> None:
    """Refuse what LLaMA/Qwen-style configs can switch on that the engine does not implement."""
    refuse(raw, "hidden_act", lambda v: v == "silu", "only SwiGLU with silu")
    refuse(raw, "rope_scaling", lambda v: v in (None, {}), "RoPE scaling")
    refuse(raw, "use_sliding_window", lambda v: v is False, "sliding-window attention")
