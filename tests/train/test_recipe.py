"""`decide train --recipe bundled` end to end, cut to a few steps: it starts from the weights it
names, records what it ran, exports bf16 weights, and the same seed writes the same bytes."""

from __future__ import annotations

import json

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from decide.cli import main
from decide.train import bundled
from decide.train.bundled import sha256_of

from .test_handwritten import _shallow


@pytest.mark.skipif(_shallow(), reason="the recipe's starting weights are in git history")
def test_the_recipe_cut_short_is_recorded_and_repeats_byte_for_byte(tmp_path) -> None:
    """Run a writes the recipe's interpolation with the starting weights; run b, the same
    training with `--merge-weight 1`, the trained weights alone: the same bytes as a's."""
    summaries = {}
    for run, extra in (("a", []), ("b", ["--merge-weight", "1"])):
        out = tmp_path / f"{run}_model"
        args = ["train", "--recipe", "bundled", "--work", str(tmp_path / run), "-o", str(out),
                "--steps", "2000", "--stop-at", "2", "--no-bf16", "--no-progress", *extra]  # fmt: skip
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        summaries[run] = json.loads((out / "train_summary.json").read_text())
        assert summaries[run]["recipe"]["merge"]["model_sha256"] == sha256_of(
            out / "model.safetensors"
        )
    merge_a, merge_b = summaries["a"]["recipe"]["merge"], summaries["b"]["recipe"]["merge"]
    assert merge_a["trained_sha256"] == merge_b["trained_sha256"] == merge_b["model_sha256"]
    assert merge_a["model_sha256"] not in (merge_a["trained_sha256"], bundled.START.sha256)
    assert (merge_a["weight"], merge_b["weight"]) == (bundled.RECIPE_MERGE["shipped"], 1.0)
    # a's weights are (1 - w)·start + w·trained, tensor by tensor, in bf16
    start = load_file(str(tmp_path / "a" / "start" / "model.safetensors"))
    trained = load_file(str(tmp_path / "b_model" / "model.safetensors"))
    written = load_file(str(tmp_path / "a_model" / "model.safetensors"))
    assert set(written) == set(trained) == set(start)
    w = bundled.RECIPE_MERGE["shipped"]
    for name in ("bert.embeddings.word_embeddings.weight", "cls.predictions.bias"):
        mix = torch.lerp(start[name].float(), trained[name].float(), w).to(torch.bfloat16)
        assert written[name].dtype == torch.bfloat16 and torch.equal(written[name], mix), name
    embeddings = "bert.embeddings.word_embeddings.weight"  # two steps move it past bf16's grain
    assert not torch.equal(written[embeddings], trained[embeddings])
    recipe = summaries["a"]["recipe"]
    assert recipe["command"].startswith("decide train --recipe bundled")
    assert "--stop-at 2 --no-bf16" in recipe["command"]
    assert recipe["start"]["model_sha256"] == bundled.START.sha256
    assert recipe["config"]["lr"] == bundled.RECIPE_LR and recipe["config"]["steps"] == 2000
    assert recipe["data"]["handwritten_train_documents"] == {"claims": 120, "loans": 120,
                                                             "tickets": 120}  # fmt: skip
    assert summaries["a"]["steps"] == 2 and len(recipe["commit"]) >= 40
    config = json.loads((tmp_path / "a_model" / "config.json").read_text())
    assert config["torch_dtype"] == "bfloat16"
    # the recipe trains ContractNLI windows: its model carries their evidence ranker, and
    # ContractNLI (CC BY 4.0) is attributed exactly when its windows were trained on
    assert (
        bundled.CONTRACTNLI_SHARE > 0 and (tmp_path / "a_model" / "evidence_ranker.json").is_file()
    )
    notice = (tmp_path / "a_model" / "NOTICE").read_text()
    assert "ContractNLI" in notice and "CC BY 4.0" in notice and "evidence_ranker.json" in notice
    bundled.export(tmp_path / "a" / "run", tmp_path / "plain", contractnli_windows=False)
    assert "ContractNLI" not in (tmp_path / "plain" / "NOTICE").read_text()
