"""What a model family is, and the checked reading of `config.json` fields its parsers share.

Contract. A `Family` knows its checkpoints' config field names, their weight names, where their
mask token id lives and how they run at inference (bidirectional or block-causal attention,
shifted logits): `parse` turns a raw config dict into `ModelConfig` fields, `weight_names` gives,
for those fields, the exact set of tensors a checkpoint must hold (checkpoint name → engine
parameter name). `config_field` reads one field with its type checked, `refuse` rejects a switch
the engine does not implement, `require_positive` the sizes that must be positive, `hf_sizes`
reads the size fields most configs spell the Hugging Face way, `refuse_decoder_switches` the
switches LLaMA/Qwen-style configs share and `rope_settings` the RoPE theta and partial rotary
factor in either spelling (top level as transformers 4 writes them, or `rope_parameters` /
legacy `rope_scaling` as transformers 5 does), refusing any RoPE variant but the default one;
every failure is a `ModelLoadError` naming the field. Nothing here touches tensors.
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
    """Refuse what LLaMA/Qwen-style configs can switch on that the engine does not implement
    (RoPE scaling is refused by `rope_settings`, which every RoPE family's parser calls)."""
    refuse(raw, "hidden_act", lambda v: v == "silu", "only SwiGLU with silu")
    refuse(raw, "use_sliding_window", lambda v: v is False, "sliding-window attention")


# The RoPE dicts, in the order transformers 5 prefers their values (`rope_scaling` is the legacy
# name of `rope_parameters`; a config may carry both, one of them null).
ROPE_DICTS = ("rope_parameters", "rope_scaling")
# Keys of a RoPE dict the default RoPE reads (`original_max_position_embeddings` is informative
# only: transformers' default RoPE ignores it); any other key belongs to a scaled variant.
ROPE_KEYS = frozenset(
    {"rope_type", "type", "rope_theta", "partial_rotary_factor", "original_max_position_embeddings"}
)


@dataclass(frozen=True)
class RopeSettings:
    theta: float
    theta_source: str  # "config.json rope_theta", "config.json rope_parameters.rope_theta", ...
    partial_rotary_factor: float


def _rope_number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ModelLoadError(f"config.json: field `{name}` must be a number, got {value!r}")
    return float(value)


def rope_settings(
    raw: RawConfig,
    *,
    default_theta: float | None = 10000.0,
    default_partial: float = 1.0,
    partial: bool = False,
) -> RopeSettings:
    """RoPE theta (with the field it came from) and partial rotary factor, read from the top level
    (transformers 4) and from `rope_parameters` / `rope_scaling` (transformers 5 nests them).

    A value given in several places must agree; a RoPE dict must be the default RoPE
    (`rope_type`/`type` "default" or absent) with no key a scaled variant reads. `default_theta`
    None makes theta required. Families without partial RoPE (`partial=False`) refuse a
    `partial_rotary_factor` other than 1."""
    found: dict[str, list[tuple[str, float]]] = {"rope_theta": [], "partial_rotary_factor": []}
    for dict_name in ROPE_DICTS:
        rope = raw.get(dict_name)
        if rope is None or rope == {}:
            continue
        if not isinstance(rope, Mapping):
            raise ModelLoadError(
                f"config.json: field `{dict_name}` must be an object, got {rope!r}"
            )
        scaled = [rope[k] for k in ("rope_type", "type") if k in rope and rope[k] != "default"]
        if scaled:
            raise ModelLoadError(
                f"config.json: `{dict_name}` = {dict(rope)!r} is not supported (RoPE scaling: "
                f"rope_type {scaled[0]!r}; only the default RoPE is implemented)"
            )
        unknown = sorted(set(rope) - ROPE_KEYS)
        if unknown:
            raise ModelLoadError(
                f"config.json: `{dict_name}` = {dict(rope)!r} is not supported (keys {unknown} "
                "change the default RoPE; only rope_type 'default', rope_theta and "
                "partial_rotary_factor are implemented)"
            )
        for key, values in found.items():
            if rope.get(key) is not None:
                name = f"{dict_name}.{key}"
                values.append((name, _rope_number(rope[key], name)))
    for key, values in found.items():
        if raw.get(key) is not None:
            values.append((key, _rope_number(raw[key], key)))
        if len({v for _, v in values}) > 1:
            given = " and ".join(f"`{n}` = {v:g}" for n, v in values)
            raise ModelLoadError(f"config.json: {given} disagree")
    thetas, partials = found["rope_theta"], found["partial_rotary_factor"]
    if thetas:
        theta, source = thetas[0][1], f"config.json {thetas[0][0]}"
    elif default_theta is None:
        raise ModelLoadError(
            "config.json: required field `rope_theta` is missing (neither at the top level nor "
            f"in {' / '.join(f'`{d}`' for d in ROPE_DICTS)})"
        )
    else:
        theta, source = default_theta, "default (config.json sets no rope_theta)"
    if theta <= 0:
        raise ModelLoadError(f"config.json: `{thetas[0][0]}` must be positive, got {theta:g}")
    factor = partials[0][1] if partials else default_partial
    if partials and not partial and factor != 1.0:
        raise ModelLoadError(
            f"config.json: `{partials[0][0]}` = {factor:g} is not supported (partial RoPE; this "
            "family rotates the whole head)"
        )
    return RopeSettings(theta=theta, theta_source=source, partial_rotary_factor=factor)
