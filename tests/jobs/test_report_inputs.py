"""The report finds the job's documents wherever it is built from: the manifest records the
inputs' resolved paths, an earlier manifest's relative paths are looked for from the current
directory and then from the output directory's parent, and an input that is gone is named in a
warning on stderr (the report is still written, without that file's texts). Parts whose doc ids
have different types are refused naming both."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, write_docs

from decide.cli import main
from decide.jobs import runner
from decide.jobs.spec import parse_spec
from decide.report import ReportError, build_report, sample_documents


@pytest.fixture(scope="module")
def model(tiny_checkpoint) -> Path:
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def _texts(out: Path) -> dict:
    return {row["doc_id"]: row["text"] for row in sample_documents(out, build_report(out))}


def test_report_from_another_directory_keeps_the_texts(model, tmp_path, monkeypatch, caplog):
    job = tmp_path / "job"
    job.mkdir()
    write_docs(job / "in.parquet", 4, seed=3)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(job)
    spec = parse_spec({"questions": QUESTIONS[:2]})
    runner.run_job(spec, [Path("in.parquet")], Path("out"), model=model, progress=False)
    out = job / "out"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"] == [str((job / "in.parquet").resolve())]
    monkeypatch.chdir(elsewhere)
    result = CliRunner().invoke(main, ["report", str(out)])
    assert result.exit_code == 0, result.output
    texts = _texts(out)
    assert len(texts) == 4 and all(text is not None for text in texts.values())
    # A manifest written before (the path as given, relative): read from the current directory,
    # else from the output directory's parent.
    manifest["inputs"] = ["in.parquet"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert all(text is not None for text in _texts(out).values())
    # Gone: the answers without their text, and a warning naming the file.
    (job / "in.parquet").rename(job / "moved.parquet")
    with caplog.at_level(logging.WARNING, logger="decide.report"):
        assert all(text is None for text in _texts(out).values())
    assert any("in.parquet is not there" in r.getMessage() for r in caplog.records)


def test_decide_report_warns_on_stderr_of_a_missing_input(model, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 3, seed=1)
    out = tmp_path / "out"
    spec = parse_spec({"questions": QUESTIONS[:2]})
    runner.run_job(spec, [docs], out, model=model, progress=False)
    docs.unlink()
    done = subprocess.run([sys.executable, "-m", "decide", "report", str(out)], cwd="/",
                          capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"input file {docs.resolve()} is not there" in done.stderr, done.stderr
    assert (out / "report.html").is_file()


def test_parts_with_ids_of_two_types_are_refused_naming_them(model, tmp_path) -> None:
    docs = write_docs(tmp_path / "in.parquet", 3, seed=1)
    out = tmp_path / "out"
    runner.run_job(parse_spec({"questions": QUESTIONS[:2]}), [docs], out, model=model,
                   progress=False)  # fmt: skip
    part = pl.read_parquet(out / "answers" / "part-00000.parquet")
    # What a resume with integer ids wrote next to string ones before it was refused.
    part.with_columns(pl.Series("doc_id", [1, 2, 3])).write_parquet(
        out / "answers" / "part-00001.parquet"
    )
    with pytest.raises(ReportError, match=r"doc_id of different types: String .*Int64"):
        build_report(out)
