"""The bundled decision model ships inside the package and is what `decide run` uses when no
model is given: the README's first command, run here on the example claims, must decide every
claim, well above chance (the full accuracy table is `benchmarks/accuracy.py`).

The floors are regression guards, not the product targets: the model shipped on 2026-11-30
(trained on a GPU, docs/bundled-model.md) gets 239 of 360 answers right on the example claims
(66 %), far from the ≥ 95 % / ≥ 85 % the model issue asks for, while a broken model, tokenizer or
packing lands near chance (about 30 %); on the first 60 MAMS-ACSA val reviews it beats both
majority baselines by more than 20 points (the issue's target is 10)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from click.testing import CliRunner

from decide import Decider
from decide.bundled import BUNDLED, bundled_model_path
from decide.cli import main
from decide.engine import load_model

ROOT = Path(__file__).resolve().parents[2]


def test_the_bundled_model_is_shipped_small_and_licensed() -> None:
    assert bundled_model_path() == BUNDLED, f"no bundled model at {BUNDLED}"
    files = {p.name: p.stat().st_size for p in BUNDLED.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "LICENSE", "NOTICE"} <= set(files)
    assert sum(files.values()) <= 50 * 2**20, files
    assert json.loads((BUNDLED / "config.json").read_text())["torch_dtype"] == "bfloat16"
    assert "all-MiniLM-L6-v2" in (BUNDLED / "NOTICE").read_text()


def test_readme_first_command_decides_the_example_claims_mostly_right(tmp_path) -> None:
    out = tmp_path / "claims"
    args = ["run", str(ROOT / "examples" / "claims.parquet"), "--spec",
            str(ROOT / "examples" / "claims.yaml"), "-o", str(out), "--no-progress"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"] == str(BUNDLED)
    spec = importlib.util.spec_from_file_location(
        "check_claims", ROOT / "examples" / "check_claims.py"
    )
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    score = check.score(out)
    assert score["documents"] == 40
    assert score["right"] >= 0.6 * score["total"], score


def test_bundled_model_beats_the_mams_baselines_by_ten_points() -> None:
    from decide.jobs.decisions import DecisionEngine
    from decide.jobs.spec import Decoding
    from decide.train.evaluate import evaluate_mams

    engine = DecisionEngine(load_model(BUNDLED), Decoding(threshold=0.9), batch_size=16)
    report = evaluate_mams(engine, limit=60)
    assert report.failed_rows == 0
    assert report.sentiment.total > 100 and report.mention.total == 480
    assert report.sentiment.rate >= report.sentiment_baseline.rate + 0.10, report
    assert report.mention.rate >= report.mention_baseline.rate + 0.10, report


def test_decider_defaults_to_the_bundled_model() -> None:
    decider = Decider()
    letter = (
        "Dear claims team, my car was hit in a parking lot in Denver on 3 May. I claim 4,250 "
        "dollars for the repairs. My policy is active. Regards, Maria Lopez"
    )
    d = decider.decide(letter, [
        {"id": "claim_type", "text": "What kind of claim is this?",
         "schema": {"enum": ["auto", "home", "health", "travel"]}},
        {"id": "amount", "text": "How many dollars are claimed?",
         "schema": {"type": "integer", "minimum": 0, "maximum": 100000}},
    ])  # fmt: skip
    assert d.ok and d.answers == {"claim_type": "auto", "amount": 4250}, d
