"""Input columns named like decide's own output columns are refused, never overwritten."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import spec, write_docs

from decide.cli import main
from decide.jobs.calibrate import ConfidencePlan
from decide.jobs.inputs import OUTPUT_COLUMNS, InputPlan
from decide.jobs.runner import _frame
from decide.jobs.spec import InputColumns


def test_the_list_names_every_column_a_part_can_hold() -> None:
    plan = InputPlan(
        files=[], columns=InputColumns(), doc_id_type=pl.String, has_questions=False, carried=[]
    )
    frame = _frame([], plan, {}, {"model": "m", "spec": "s"})
    # A run with `--review-below` adds `review`; one with `--calibration`, `raw_confidence`.
    one = frame.with_columns(pl.lit(None, pl.Struct({"q": pl.Float64})).alias("confidence"))
    reviewed = ConfidencePlan(None, 0.5, {"model": "m", "spec": "s"}, {}).frame(one)
    written = set(reviewed.columns) | {"raw_confidence"}
    assert written <= set(OUTPUT_COLUMNS), written - set(OUTPUT_COLUMNS)


@pytest.mark.parametrize("column", ["error_kind", "value_tokens", "review", "raw_confidence"])
def test_an_input_column_named_like_an_output_column_is_a_usage_error(
    column: str, models, tmp_path: Path
) -> None:
    docs = write_docs(tmp_path / "in.parquet", 2)
    frame = pl.read_parquet(docs).with_columns(pl.lit("mine").alias(column))
    frame.write_parquet(docs)
    (tmp_path / "job.json").write_text(json.dumps(spec()))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        ["run", str(docs), "-o", str(out), "--spec", str(tmp_path / "job.json"),
         "--model", str(models["llada"])],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"input column(s) {column} would collide" in result.output
    assert not (out / "answers").exists()
