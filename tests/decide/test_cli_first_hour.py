"""A new user's first hour with the command line: an interrupted job's report says what was left
undecided, `decide report` names a path that is no job directory, and output piped to a reader
that leaves early (`| head -1`) keeps the command's own exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, run_interrupted, write_docs

from decide.cli import main

DOCS = 12


@pytest.fixture(scope="module")
def job(tiny_checkpoint, tmp_path_factory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("first-hour")
    docs = write_docs(root / "in.parquet", DOCS, seed=5)
    spec = root / "job.json"
    spec.write_text(json.dumps({"questions": QUESTIONS}))
    model = tiny_checkpoint("sdar", vocab="small", init_std=0.2)
    return docs, spec, model


@pytest.fixture(scope="module")
def aborted(job, tmp_path_factory) -> Path:
    """A job interrupted after 5 of its 12 documents (Ctrl-C), its report not yet built."""
    from decide.jobs.spec import load_spec

    docs, spec, model = job
    out = tmp_path_factory.mktemp("aborted") / "out"
    with pytest.MonkeyPatch.context() as patch:
        run_interrupted(patch, 5, load_spec(spec), [docs], out, model=model, batch_size=2,
                        part_rows=1, progress=False)  # fmt: skip
    assert json.loads((out / "manifest.json").read_text())["status"] == "aborted"
    return out


def test_an_aborted_jobs_report_says_what_was_not_decided(aborted: Path) -> None:
    """The page showed "documents 12, ok 5, failed 0" and nothing about the other 7; the command
    printed "5 documents (5 ok, 0 failed)". Both now say they were not decided, and how to
    decide them."""
    result = CliRunner().invoke(main, ["report", str(aborted)])
    assert result.exit_code == 0, result.output
    counts = json.loads((aborted / "report.json").read_text())["counts"]
    gap = counts["total"] - counts["ok"] - counts["failed"]
    assert counts["total"] == DOCS and gap > 0
    assert f"{gap} of {DOCS} documents not decided (job aborted)" in result.output
    assert "--resume" in result.output
    page = (aborted / "report.html").read_text()
    assert '<span class="muted">not decided</span><b>' + str(gap) + "</b>" in page
    assert f"The job was aborted: {gap} of the {DOCS} documents were not decided" in page
    assert "--resume" in page


def test_a_complete_jobs_report_has_no_undecided_note(job, tmp_path) -> None:
    docs, spec, model = job
    out = tmp_path / "out"
    args = ["run", str(docs), "--spec", str(spec), "--model", str(model), "-o", str(out)]
    result = CliRunner().invoke(main, [*args, "--no-progress"])
    assert result.exit_code in (0, 1), result.output
    page = (out / "report.html").read_text()
    assert "not decided" not in page and 'id="undecided"' not in page
    again = CliRunner().invoke(main, ["report", str(out)])
    assert again.exit_code == 0 and "not decided" not in again.output


def test_report_names_a_missing_path_or_a_file(tmp_path) -> None:
    """Both said "no manifest.json; not the output directory of a decide job", for a path that
    does not exist or is a file, as for a directory without a job."""
    missing = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 2
    assert "nope: no such directory; pass the -o directory of a `decide run`" in missing.output
    file = tmp_path / "answers.parquet"
    file.write_bytes(b"PAR1")
    not_dir = CliRunner().invoke(main, ["report", str(file)])
    assert not_dir.exit_code == 2
    assert "answers.parquet: not a directory" in not_dir.output
    assert not (tmp_path / "nope").exists()


def _closed_pipe_run(args: list[str]) -> subprocess.CompletedProcess:
    """`python -m decide ARGS` with stdout a pipe whose reader is already gone (`| head -0`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "decide", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=600)  # fmt: skip
    finally:
        os.close(write)


def test_run_piped_to_a_reader_that_left_keeps_the_jobs_exit_code(job, tmp_path) -> None:
    """`decide run ... | head -1`: click turned the BrokenPipeError of the summary lines into
    exit 1, "finished with failed rows", for a job whose every row was decided."""
    docs, spec, model = job
    out = tmp_path / "out"
    args = ["run", str(docs), "--spec", str(spec), "--model", str(model), "-o", str(out)]
    reference = CliRunner().invoke(main, [*args[:-1], str(tmp_path / "reference")])
    done = _closed_pipe_run(args)
    assert done.returncode == reference.exit_code, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"


def test_report_and_validate_piped_to_a_reader_that_left_exit_as_they_would(
    aborted: Path, job, tmp_path
) -> None:
    """`decide report OUT | head -0` and `decide validate SPEC | head -1` exited 1, a code
    neither command has."""
    _, spec, model = job
    report = _closed_pipe_run(["report", str(aborted)])
    assert report.returncode == 0, report.stderr[-2000:]
    assert (aborted / "report.html").exists()
    valid = _closed_pipe_run(["validate", str(spec), "--model", str(model)])
    assert valid.returncode == 0, valid.stderr[-2000:]
    refused = tmp_path / "refused.json"
    schema = {"type": "string", "pattern": "(?<=a)b"}  # lookbehind: refused
    refused.write_text(json.dumps({"questions": [{"id": "q", "text": "Q?", "schema": schema}]}))
    bad = _closed_pipe_run(["validate", str(refused), "--model", str(model)])
    assert bad.returncode == 2, bad.stderr[-2000:]
