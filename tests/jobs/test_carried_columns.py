"""Input columns carried to the output keep every value exactly: they used to pass through
Python objects, which cut nanoseconds to microseconds and stopped the job for good on a date
past year 9999 ("year 20000 is out of range", again on every resume)."""

from __future__ import annotations

import polars as pl
from helpers.jobdata import QUESTIONS, carried, read_answers, write_docs

from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec


def test_carried_values_keep_their_precision_and_range(tiny_checkpoint, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 12, seed=8)
    frame = pl.read_parquet(docs)
    frame = frame.with_columns(**carried(frame.height))
    frame = pl.concat([frame, frame.head(1)])  # a duplicated id: an error row keeps them too
    frame.write_parquet(docs)
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    result = run_job(parse_spec({"questions": QUESTIONS[:2]}), [docs], tmp_path / "out",
                     model=model, batch_size=4, part_rows=5, progress=False)  # fmt: skip
    assert result.ok + result.failed == 12
    out = read_answers(tmp_path / "out").sort("doc_id")
    expected = frame.unique("doc_id", keep="first").sort("doc_id")
    for name in ("stamp", "far", "nested", "team"):
        assert out.schema[name] == expected.schema[name], name
        assert out[name].equals(expected[name]), name
