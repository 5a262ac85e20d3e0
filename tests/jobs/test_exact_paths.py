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


def test_odd_inputs_fail_clearly_or_keep_their_types(tiny_checkpoint, tmp_path) -> None:
    """A zero-row input with a review queue crashed (`review` column missing, manifest left
    `running`); errors.parquet's doc_id was String when some id was null, Int64 otherwise; a
    fixed-offset time zone column made polars panic (exit 1 with a Rust backtrace); an input
    column named like the reader's own `__decide_file` was overwritten."""
    import datetime

    import pyarrow as pa
    import pyarrow.parquet as pq

    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    (tmp_path / "job.json").write_text(json.dumps({"questions": QUESTIONS[:2]}))

    def run(name: str, *extra: str):
        args = ["run", str(tmp_path / name), "-o", str(tmp_path / f"out-{name}"), "--spec",
                str(tmp_path / "job.json"), "--model", str(model), "--no-progress", *extra]  # fmt: skip
        return CliRunner().invoke(main, args)

    schema = {"doc_id": pl.Int64, "document": pl.String}
    pl.DataFrame(schema=schema).write_parquet(tmp_path / "zero.parquet")
    zero = run("zero.parquet", "--review-below", "0.9")
    assert zero.exit_code == 0, zero.output
    assert json.loads((tmp_path / "out-zero.parquet" / "manifest.json").read_text())["status"] == (
        "complete"
    )
    pl.DataFrame({"doc_id": [1, None, 3], "document": ["a car", "b", ""]}, schema=schema
                 ).write_parquet(tmp_path / "nulls.parquet")  # fmt: skip
    assert run("nulls.parquet").exit_code == 1  # an error row and a null id
    errors = pl.read_parquet(tmp_path / "out-nulls.parquet" / "errors.parquet")
    assert errors.schema["doc_id"] == pl.Int64 and errors.height == 2
    stamp = pa.array([datetime.datetime(2024, 1, 2, 3, 4, 5)], pa.timestamp("us", tz="+05:30"))
    table = pa.table({"doc_id": [1], "document": ["a car was hit"], "received": stamp})
    pq.write_table(table, tmp_path / "offset.parquet")
    offset = run("offset.parquet")
    assert offset.exit_code == 2 and "received (timestamp[us, tz=+05:30])" in offset.output
    assert "Traceback" not in offset.output
    pl.DataFrame({"doc_id": [1], "document": ["a"], "__decide_file": ["mine"]}).write_parquet(
        tmp_path / "reserved.parquet"
    )
    reserved = run("reserved.parquet")
    assert reserved.exit_code == 2 and "__decide_file" in reserved.output
    assert not (tmp_path / "out-reserved.parquet").exists()
