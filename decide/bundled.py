"""Where the model comes from when none is given: the small decision model shipped inside the
package (trained by `decide train`, see docs/bundled-model.md)."""

from __future__ import annotations

from pathlib import Path

from decide.jobs.spec import SpecError

BUNDLED = Path(__file__).parent / "model"


def bundled_model_path() -> Path | None:
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
