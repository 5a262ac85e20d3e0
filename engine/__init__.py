"""decide.engine: native diffusion-LM architectures, checkpoint loading, caches and sampling.

Knows token ids, never JSON. Public names: `load_model`, `load_config`, `LoadedModel`,
`DiffusionLM`, `HybridLM`, `KVCache`, `HybridCache`, `ModelConfig`, `ModelLoadError`,
`UnsafeTemplateError`, `model_fingerprint`, `supported_model_types`, and the slot constraint
protocol in `decide.engine.constraints`. Names are imported on first use, so importing the
protocol module does not load torch's model code.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    "DiffusionLM": "model",
    "HybridCache": "hybrid_cache",
    "HybridLM": "hybrid",
    "KVCache": "cache",
    "LoadedModel": "loader",
    "ModelConfig": "config",
    "ModelLoadError": "errors",
    "UnsafeTemplateError": "errors",
    "load_config": "loader",
    "load_model": "loader",
    "model_fingerprint": "loader",
    "supported_model_types": "families",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
