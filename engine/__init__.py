"""decide.engine: native diffusion-LM architectures, checkpoint loading, caches and sampling.

Knows token ids, never JSON. Public names: `load_model`, `load_config`, `LoadedModel`,
`DiffusionLM`, `KVCache`, `ModelConfig`, `ModelLoadError`, `UnsafeTemplateError`, and the slot
constraint protocol in `decide.engine.constraints`.
"""

from .cache import KVCache
from .config import ModelConfig
from .errors import ModelLoadError, UnsafeTemplateError
from .families import supported_model_types
from .loader import LoadedModel, load_config, load_model, model_fingerprint
from .model import DiffusionLM

__all__ = [
    "DiffusionLM",
    "KVCache",
    "LoadedModel",
    "ModelConfig",
    "ModelLoadError",
    "UnsafeTemplateError",
    "load_config",
    "load_model",
    "model_fingerprint",
    "supported_model_types",
]
