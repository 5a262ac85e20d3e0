"""Input files, output directories and parts are read by their exact names: polars reads a path
as a glob pattern unless told not to, so `data[1].parquet` decided the rows of `data1.parquet`,
`report [final].parquet` was "not a readable parquet file", and an output directory named
`out [v1]` aborted the job after deciding every row."""

from __future__ import annotations

import json

import polars as pl
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS

from decide.cli import main


def test_brackets_and_question_marks_in_paths_are_names(tiny_checkpoint, tmp_path) -> None:
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    docs = {"data[1].parquet": ["REAL-1", "REAL-2"], "data1.parquet": ["WRONG-1"],
            "what?.parquet": ["Q-1"], "whatX.parquet": ["WRONG-2"],
            "report [final].parquet": ["F-1"]}  # fmt: skip
    for name, ids in docs.items():
        pl.DataFrame({"doc_id": ids, "document": ["The car was hit in Leeds."] * len(ids)}
                     ).write_parquet(tmp_path / name)  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps({"questions": QUESTIONS[:2]}))
    for name, ids in (("data[1].parquet", ["REAL-1", "REAL-2"]), ("what?.parquet", ["Q-1"]),
                      ("report [final].parquet", ["F-1"])):  # fmt: skip
        out = tmp_path / f"out [{name}]"
        args = ["run", str(tmp_path / name), "-o", str(out), "--spec", str(tmp_path / "job.json"),
                "--model", str(model), "--no-progress", "--review-below", "0.5"]  # fmt: skip
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        answers = pl.concat([pl.read_parquet(p, glob=False) for p in (out / "answers").iterdir()])
        assert sorted(answers["doc_id"]) == ids
        report = json.loads((out / "report.json").read_text())
        assert report["counts"]["total"] == len(ids)
        again = CliRunner().invoke(main, [*args, "--resume"])
        assert again.exit_code == 0, again.output
