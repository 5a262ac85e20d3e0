"""`decide calibrate` refuses a gold parquet that gives a doc_id more than one row (exit 2, naming
the first few ids and their rows) instead of counting identical rows twice or fitting on both of
two conflicting labels; null ids are not duplicates (they are skipped, not in the job)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, read_answers, write_docs

from decide.cli import main
from decide.jobs.calibrate import DUPLICATES_NAMED, refuse_duplicate_ids
from decide.jobs.spec import SpecError

DOCS = 4


@pytest.fixture(scope="module")
def job(tiny_checkpoint, tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("calibrate-duplicates")
    docs = write_docs(where / "in.parquet", DOCS, seed=7)
    (where / "spec.json").write_text(json.dumps({"questions": QUESTIONS}))
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    result = CliRunner().invoke(main, ["run", str(docs), "--spec", str(where / "spec.json"),
                                       "--model", str(model), "--no-progress",
                                       "-o", str(where / "raw")])  # fmt: skip
    assert result.exit_code == 0, result.output
    answers = read_answers(where / "raw")
    golds = dict(zip(answers["doc_id"], answers["answers_json"], strict=True))
    return {"where": where, "golds": golds}


def _calibrate(job: dict, rows: list[dict], name: str):
    where = job["where"]
    pl.DataFrame(rows).write_parquet(where / f"{name}.parquet")
    output = where / f"{name}.json"
    args = ["calibrate", str(where / "raw"), str(where / f"{name}.parquet"), "-o", str(output)]
    result = CliRunner().invoke(main, args)
    return result, output


def test_identical_and_conflicting_duplicate_gold_rows_exit_2(job: dict) -> None:
    golds = job["golds"]
    rows = [{"doc_id": doc_id, "gold": gold} for doc_id, gold in golds.items()]
    flipped = json.loads(golds["doc-00002"])
    flipped["eligible"] = not flipped["eligible"]
    rows += [
        {"doc_id": "doc-00001", "gold": golds["doc-00001"]},  # the same row again
        {"doc_id": "doc-00002", "gold": json.dumps(flipped)},  # a conflicting label
    ]
    result, output = _calibrate(job, rows, "duplicated")
    assert result.exit_code == 2, result.output
    assert "2 doc_ids with more than one gold row" in result.output
    assert f"doc_id 'doc-00001' at rows 1, {DOCS}" in result.output
    assert f"doc_id 'doc-00002' at rows 2, {DOCS + 1}" in result.output
    assert "answers matched" not in result.output and not output.exists()


def test_one_gold_row_per_doc_id_still_fits(job: dict) -> None:
    rows = [{"doc_id": doc_id, "gold": gold} for doc_id, gold in job["golds"].items()]
    rows += [{"doc_id": None, "gold": "{}"}, {"doc_id": None, "gold": "{}"}]  # skipped, not dupes
    result, output = _calibrate(job, rows, "unique")
    assert result.exit_code == 0, result.output
    assert f"{DOCS} gold rows, " in result.output and output.is_file()


def test_the_error_names_the_first_few_duplicated_ids() -> None:
    ids = [f"d{i}" for i in range(DUPLICATES_NAMED + 3)]
    gold = pl.DataFrame({"doc_id": ids + ids, "gold": ["{}"] * (2 * len(ids))})
    with pytest.raises(SpecError) as raised:
        refuse_duplicate_ids(gold, Path("gold.parquet"))
    message = str(raised.value)
    assert message.startswith(f"gold.parquet: {len(ids)} doc_ids with more than one gold row")
    assert f"doc_id 'd0' at rows 0, {len(ids)}" in message
    assert f"'d{DUPLICATES_NAMED - 1}'" in message and f"'d{DUPLICATES_NAMED}'" not in message
    assert "and 3 more doc_ids" in message
    refuse_duplicate_ids(pl.DataFrame({"doc_id": [1, 2, None, None]}), Path("g"))  # no error
