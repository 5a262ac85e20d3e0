"""Which model a job runs, and on which device: the directory given, else the bundled model.

The bundled model is package data of `decide` (`decide/model`, trained by `decide train`, see
docs/bundled-model.md); it is found through `importlib.resources`, so this layer needs no import
of the command-line or API modules above it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import torch

from .spec import SpecError

BUNDLED = Path(str(files("decide") / "model"))


def bundled_model_path() -> Path | None:
    """The bundled model's directory, or None when this installation has none."""
    return BUNDLED if (BUNDLED / "config.json").is_file() else None


def resolve_model_path(model: str | Path | None) -> Path:
    """The given model directory, else the bundled model; a clear error when neither exists."""
    if model is not None:
        return Path(model).expanduser()
    bundled = bundled_model_path()
    if bundled is None:
        raise SpecError(
            "no model given (--model or `model:` in the spec) and no bundled model is installed "
            f"at {BUNDLED}"
        )
    return bundled


def resolve_device(device: str) -> str:
    """`auto` (CUDA when available, else CPU), `cpu` or `cuda`; `SpecError` otherwise."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecError("--device cuda: no CUDA device is available")
    if device not in ("cpu", "cuda"):
        raise SpecError(f"unknown device {device!r}; use auto, cpu or cuda")
    return device
