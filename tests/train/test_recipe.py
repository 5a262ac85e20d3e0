"""`decide train --recipe bundled` end to end, cut to a few steps: it starts from the weights it
names, records what it ran, exports bf16 weights, and the same seed writes the same bytes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from decide.cli import main
from decide.train import bundled
from decide.train.bundled import sha256_of

from .test_handwritten import _shallow


@pytest.mark.skipif(_shallow(), reason="the recipe's starting weights are in git history")
def test_the_recipe_cut_short_is_recorded_and_repeats_byte_for_byte(tmp_path) -> None:
    shas = []
    for run in ("a", "b"):
        out = tmp_path / f"{run}_model"
        args = ["train", "--recipe", "bundled", "--work", str(tmp_path / run), "-o", str(out),
                "--steps", "2000", "--stop-at", "2", "--no-bf16", "--no-progress"]  # fmt: skip
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        shas.append(sha256_of(out / "model.safetensors"))
    assert shas[0] == shas[1] != bundled.START.sha256
    summary = json.loads((tmp_path / "a_model" / "train_summary.json").read_text())
    recipe = summary["recipe"]
    assert recipe["command"].startswith("decide train --recipe bundled")
    assert "--stop-at 2 --no-bf16" in recipe["command"]
    assert recipe["start"]["model_sha256"] == bundled.START.sha256
    assert recipe["config"]["lr"] == bundled.RECIPE_LR and recipe["config"]["steps"] == 2000
    assert recipe["data"]["handwritten_train_documents"] == {"claims": 60, "loans": 60,
                                                             "tickets": 60}  # fmt: skip
    assert summary["steps"] == 2 and len(recipe["commit"]) >= 40
    config = json.loads((tmp_path / "a_model" / "config.json").read_text())
    assert config["torch_dtype"] == "bfloat16"
