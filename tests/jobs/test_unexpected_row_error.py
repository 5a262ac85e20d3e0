"""An exception no check foresaw, met while deciding one row (a bug, or input nothing refused),
fails that row as `internal_error` with its traceback in the log; the job goes on and completes.
Before, it stopped the job, and every `--resume` stopped again at the same row."""

from __future__ import annotations

import logging

from helpers.jobdata import QUESTIONS, read_answers, write_docs

from decide.jobs.decisions import DecisionEngine
from decide.jobs.runner import run_job
from decide.jobs.spec import parse_spec


def test_one_rows_unexpected_error_fails_that_row_only(tiny_checkpoint, tmp_path, monkeypatch,
                                                      caplog) -> None:  # fmt: skip
    docs = write_docs(tmp_path / "in.parquet", 6, seed=5)
    finish = DecisionEngine._finish

    def broken(self, item, *args):
        if item.doc_id == "doc-00003":
            raise RecursionError("maximum recursion depth exceeded")
        return finish(self, item, *args)

    monkeypatch.setattr(DecisionEngine, "_finish", broken)
    model = tiny_checkpoint("bert", vocab="small", init_std=0.2)
    with caplog.at_level(logging.ERROR):
        result = run_job(parse_spec({"questions": QUESTIONS}), [docs], tmp_path / "out",
                         model=model, progress=False)  # fmt: skip
    assert (result.ok, result.failed) == (5, 1)
    assert result.failures == {"internal_error": 1}
    row = read_answers(tmp_path / "out").filter(doc_id="doc-00003").row(0, named=True)
    assert row["error_kind"] == "internal_error"
    assert (
        row["error"] == "internal error (a bug): RecursionError: maximum recursion depth exceeded"
    )
    logged = [r for r in caplog.records if "doc-00003" in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # loud, with its traceback
