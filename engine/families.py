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

Each family's parser and weight names live in its own module (`dense_families.py`,
`bert_family.py`, `hybrid_family.py`, `moe_families.py`; the `Family` type and the checked field
reader in `family.py`); this module is the registry: `FAMILIES` in lookup order,
`BLOCK_SIZE_FIELDS`, `family_for` and `supported_model_types`.
"""

from __future__ import annotations

from .bert_family import BERT_FAMILY
from .dense_families import DENSE_BLOCK_SIZE_FIELDS, DENSE_FAMILIES
from .errors import ModelLoadError
from .family import Family, RawConfig
from .hybrid_family import HYBRID_FAMILY
from .moe_families import MOE_BLOCK_SIZE_FIELDS, MOE_FAMILIES

FAMILIES: tuple[Family, ...] = (*DENSE_FAMILIES, BERT_FAMILY, HYBRID_FAMILY, *MOE_FAMILIES)

# Config fields that carry the block length, per family (first present wins).
BLOCK_SIZE_FIELDS: dict[str, tuple[str, ...]] = {
    **DENSE_BLOCK_SIZE_FIELDS,
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
