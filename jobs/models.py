"""Which model a job runs: the directory given, else the bundled model.

The bundled model is package data of `decide` (`decide/model`, trained by `decide train`, see
docs/bundled-model.md); it is found through `importlib.resources`, so this layer needs no import
of the command-line or API modules above it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

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
