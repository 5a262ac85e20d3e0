"""`Decider.from_spec`: the Python API deciding as `decide run --spec` does, on the bundled model
and the example claims: the same answers and confidences as the job's rows, a spec's calibration
applied the same way (the engine's confidence kept in `raw_confidence`) and `review` the job's
review column; a calibration fitted for another spec is refused as `decide run` refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from decide import Decider, load_spec, run_job
from decide.cli import main
from decide.jobs.spec import SpecError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """Eight example claims decided by `decide run`, calibrated on their gold, and decided again
    with that calibration and a review threshold."""
    root = tmp_path_factory.mktemp("from_spec")
    claims = pl.read_parquet(EXAMPLES / "claims.parquet").head(8)
    claims.write_parquet(root / "claims.parquet")
    spec = load_spec(EXAMPLES / "claims.yaml")
    run_job(spec, root / "claims.parquet", root / "plain", report=False, progress=False)
    result = CliRunner().invoke(main, ["calibrate", str(root / "plain"),
                                       str(EXAMPLES / "claims_gold.parquet"),
                                       "-o", str(root / "cal.json")])  # fmt: skip
    assert result.exit_code == 0, result.output
    calibrated = spec.model_copy(
        update={"calibration": str(root / "cal.json"), "review_below": 0.95}
    )
    run_job(calibrated, root / "claims.parquet", root / "cal", report=False, progress=False)
    return claims, spec, calibrated, root


def _rows(out: Path) -> dict[str, dict]:
    frame = pl.read_parquet(sorted((out / "answers").glob("*.parquet")))
    return {row["doc_id"]: row for row in frame.iter_rows(named=True)}


def test_the_spec_decides_as_decide_run_does(job) -> None:
    claims, _, _, root = job
    decider = Decider.from_spec(EXAMPLES / "claims.yaml")  # a spec file, as run takes it
    decisions = decider.decide_many(dict(zip(claims["doc_id"], claims["document"], strict=True)))
    rows = _rows(root / "plain")
    for d in decisions:
        row = rows[d.doc_id]
        assert d.ok and json.loads(row["answers_json"]) == d.answers
        assert row["confidence"] == d.confidence
        assert d.raw_confidence is None and d.review is None  # no calibration, no threshold
    one = decider.decide(claims["document"][0])  # the spec's questions, one document
    assert one.answers == decisions[0].answers
    with pytest.raises(TypeError, match="no questions given"):
        Decider().decide("text")


def test_a_spec_calibration_and_review_apply_as_in_the_job(job) -> None:
    claims, _, calibrated, root = job
    decider = Decider.from_spec(calibrated)
    decisions = decider.decide_many(dict(zip(claims["doc_id"], claims["document"], strict=True)))
    rows = _rows(root / "cal")
    assert any(row["review"] for row in rows.values())  # the threshold sends some to review
    for d in decisions:
        row = rows[d.doc_id]
        assert d.raw_confidence == row["raw_confidence"]
        assert d.confidence == pytest.approx(row["confidence"], rel=1e-12)
        assert d.confidence != d.raw_confidence
        assert d.review == row["review"]


def test_a_calibration_fitted_for_another_spec_is_refused(job) -> None:
    _, _, calibrated, _ = job
    other = calibrated.model_copy(update={"instruction": "Answer briefly."})
    with pytest.raises(SpecError, match=r"fitted for another spec .*force_calibration"):
        Decider.from_spec(other)
    assert Decider.from_spec(other, force_calibration=True)._confidence.forced


def test_from_spec_checks_its_batch_size_as_decider_does() -> None:
    with pytest.raises(TypeError, match=r"Decider\.from_spec: batch_size must be an int"):
        Decider.from_spec(EXAMPLES / "claims.yaml", batch_size="16")
