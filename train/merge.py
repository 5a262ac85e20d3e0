"""Weight-space interpolation of two checkpoints of one model: OUT = (1 - w)·A + w·B.

Two fine-tunes from a common ancestor often sit in one basin of the loss, so the average of their
weights can keep what each learned (model soups, WiSE-FT). The bundled model is such an average:
stage 7 (strong on stated facts) and stage 9a (it learned to compare amounts) at w = 0.5
(docs/bundled-model.md, changelog, stage 9).

The two directories must hold the same model: the same config.json (up to `torch_dtype`), the
same tokenizer.json, the same tensor names and shapes. Tensors are mixed in fp32 and stored in
A's dtype; like the engine, it refuses tensors that are not floating point. The result is
written to a temporary directory beside OUT and renamed into place, so a failure leaves no
half-written model, and an existing model at OUT is never overwritten.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import torch
from safetensors.torch import save_file

from ..engine.checkpoint import INDEX_NAME, TensorSource, weight_files
from ..engine.errors import ModelLoadError

SUMMARY = "train_summary.json"


def _config(model_dir: Path) -> dict:
    path = model_dir / "config.json"
    if not path.is_file():
        raise ModelLoadError(f"{model_dir}: no config.json")
    config = json.loads(path.read_text())
    config.pop("torch_dtype", None)
    return config


def _same_model(a: Path, b: Path) -> None:
    config_a, config_b = _config(a), _config(b)
    differ = sorted(k for k in set(config_a) | set(config_b) if config_a.get(k) != config_b.get(k))
    if differ:
        raise ModelLoadError(
            f"{a} and {b} are not the same model: config.json differs in {', '.join(differ[:5])}"
        )
    tok_a, tok_b = a / "tokenizer.json", b / "tokenizer.json"
    if not tok_a.is_file() or not tok_b.is_file():
        raise ModelLoadError(f"{a} and {b} must both hold tokenizer.json")
    if tok_a.read_bytes() != tok_b.read_bytes():
        raise ModelLoadError(f"{a} and {b} have different tokenizer.json files")


def merge_checkpoints(a: Path, b: Path, weight: float, out: Path) -> Path:
    """Write (1 - weight)·A + weight·B to `out`, with A's other files (tokenizer, licences), not
    its `train_*` files (a training run's config, summary and optimizer state).

    `train_summary.json` records both parents, the weight and each parent's own summary.
    """
    a, b, out = Path(a), Path(b), Path(out)
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must lie in [0, 1] (got {weight}): 0 gives A, 1 gives B")
    if out.is_dir() and any(out.glob("*.safetensors")):
        raise FileExistsError(f"{out} already holds a model; choose another output directory")
    _same_model(a, b)
    source_a, source_b = TensorSource(weight_files(a)), TensorSource(weight_files(b))
    only = sorted(source_a.names() ^ source_b.names())
    if only:
        raise ModelLoadError(
            f"{a} and {b} hold different tensors: {', '.join(only[:5])} is in only one of them"
        )
    mixed: dict[str, torch.Tensor] = {}
    for name in sorted(source_a.names()):
        if source_a.shape(name) != source_b.shape(name):
            raise ModelLoadError(
                f"tensor {name!r}: shape {source_a.shape(name)} in {a}, "
                f"{source_b.shape(name)} in {b}"
            )
        mix = torch.lerp(
            source_a.get(name, torch.float32), source_b.get(name, torch.float32), weight
        )
        mixed[name] = mix.to(source_a.float_dtype(name)).contiguous()

    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        # Not A's training files (its config, summary, optimizer state): the merge is no run
        # that `decide train --resume` could continue.
        for item in a.iterdir():
            if (
                item.is_file()
                and item.suffix != ".safetensors"
                and item.name != INDEX_NAME
                and not item.name.startswith("train_")
            ):
                shutil.copyfile(item, staging / item.name)
        save_file(mixed, str(staging / "model.safetensors"), metadata={"format": "pt"})
        summary = {
            "merge": {"a": str(a), "b": str(b), "weight": weight, "formula": "(1 - w)*A + w*B"},
            "a": _summary(a),
            "b": _summary(b),
        }
        (staging / SUMMARY).write_text(json.dumps(summary, indent=2))
        # mkdtemp makes the directory private (0700) and safetensors its file 0600: give the
        # model the permissions any other new directory gets here.
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
        for item in staging.iterdir():
            item.chmod(0o666 & ~umask)
        if out.exists():
            for item in staging.iterdir():
                item.replace(out / item.name)
            staging.rmdir()
        else:
            staging.replace(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out


def _summary(model_dir: Path) -> dict | None:
    path = model_dir / SUMMARY
    return json.loads(path.read_text()) if path.is_file() else None
