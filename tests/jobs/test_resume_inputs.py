"""A resume continues the job it finds: with ids of another type than its parts, or with other
input files than the job started with (another file, one more, one less, one changed since), it
exits 2 before any work and writes nothing; the same files named another way (a relative path,
another order) resume. The manifest keeps the first run's start and sums the seconds of every
run, and the report's documents per second is every decided row over that sum."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, read_answers, run_interrupted, write_docs

from decide.cli import main
from decide.jobs import runner
from decide.jobs.manifest import Manifest
from decide.jobs.spec import parse_spec
from decide.report import build_report, validate_report


@pytest.fixture(scope="module")
def model(tiny_checkpoint) -> Path:
    return tiny_checkpoint("bert", vocab="small", init_std=0.2)


def _files(out: Path) -> dict[str, bytes]:
    """Every file under `out` with its bytes (what a refused resume must leave as it was)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def _cli(model: Path, tmp_path: Path, out: Path, *inputs: Path | str, resume: bool = False,
         extra: tuple[str, ...] = ()):  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps({"questions": QUESTIONS[:3]}))
    args = ["run", *map(str, inputs), "-o", str(out), "--spec", str(tmp_path / "job.json")]
    args += ["--model", str(model), "--no-progress", *(["--resume"] if resume else []), *extra]
    return CliRunner().invoke(main, args)


def _ints(path: Path, ids: list[int]) -> Path:
    pl.DataFrame({"doc_id": ids, "document": [f"a car was hit {i} days ago" for i in ids]}
                 ).write_parquet(path)  # fmt: skip
    return path


def test_resume_where_no_job_is_says_so_and_decides_every_row(model, tmp_path, caplog):
    """`--resume` into a directory holding no job (a mistyped path, a first run of a retry loop)
    decides every row, and warns that it found nothing to resume (`decide run` prints warnings
    on stderr; the Python API and the Ray runner share the check)."""
    docs = _ints(tmp_path / "in.parquet", [1, 2, 3])
    out = tmp_path / "typo"
    with caplog.at_level("WARNING", logger="decide.jobs"):
        result = _cli(model, tmp_path, out, docs, resume=True)
    assert result.exit_code == 0, result.output
    assert f"--resume: {out} holds no job" in caplog.text
    assert sorted(read_answers(out)["doc_id"].to_list()) == [1, 2, 3]
    caplog.clear()
    with caplog.at_level("WARNING", logger="decide.jobs"):
        again = _cli(model, tmp_path, out, docs, resume=True)  # now there is one: no warning
    assert again.exit_code == 0, again.output
    assert "holds no job" not in caplog.text


def test_resume_with_ids_of_another_type_exits_2_naming_column_and_types(model, tmp_path):
    docs = _ints(tmp_path / "in.parquet", [1, 2, 3])
    out = tmp_path / "out"
    first = _cli(model, tmp_path, out, docs)
    assert first.exit_code == 0, first.output
    before = _files(out)
    # The same file, its ids now strings (as a re-export of the data could give).
    pl.DataFrame({"doc_id": ["1", "2", "3", "4"], "document": ["a", "b", "c", "d"]}).write_parquet(
        docs
    )
    again = _cli(model, tmp_path, out, docs, resume=True)
    assert again.exit_code == 2, again.output
    assert "column 'doc_id'" in again.output and "String" in again.output
    assert "Int64" in again.output and "Traceback" not in again.output
    assert _files(out) == before  # nothing written
    assert read_answers(out)["doc_id"].dtype == pl.Int64  # still one readable table


def test_resume_with_other_input_files_exits_2_naming_them(model, tmp_path, monkeypatch):
    docs = _ints(tmp_path / "in.parquet", [1, 2, 3])
    other = _ints(tmp_path / "other.parquet", [4, 5])
    dupe = _ints(tmp_path / "dupe.parquet", [3, 6])  # 3 is in.parquet's too
    out = tmp_path / "out"
    assert _cli(model, tmp_path, out, docs).exit_code == 0
    before = _files(out)
    cases = [
        ((other,), ["other.parquet is not one of them", f"{docs} is not named"]),
        ((docs, dupe), ["dupe.parquet is not one of them"]),
    ]
    for inputs, messages in cases:
        result = _cli(model, tmp_path, out, *inputs, resume=True)
        assert result.exit_code == 2, result.output
        assert "the same, unchanged input files" in result.output
        assert "new output directory" in result.output
        for message in messages:
            assert message in result.output, (message, result.output)
        assert _files(out) == before
    # The same path, other rows: the answers were decided from what the file held then.
    _ints(docs, [1, 2, 3, 7])
    changed = _cli(model, tmp_path, out, docs, resume=True)
    assert changed.exit_code == 2 and "in.parquet has changed since the job started" in (
        changed.output
    ), changed.output
    assert _files(out) == before
    # The same files named another way resume (relative path, another order).
    _ints(docs, [1, 2, 3])
    both = tmp_path / "both"
    assert _cli(model, tmp_path, both, docs, other).exit_code == 0
    monkeypatch.chdir(tmp_path)
    again = _cli(model, tmp_path, both, "other.parquet", "in.parquet", resume=True)
    assert again.exit_code == 0, again.output
    assert "decided 5 of 5 documents" in again.output
    # A manifest written before sizes were recorded (inputs as given, relative) still resumes
    # with its files, read from the current directory, and refuses others.
    path = both / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["input_files"]
    manifest["inputs"] = ["in.parquet", "other.parquet"]
    path.write_text(json.dumps(manifest))
    assert _cli(model, tmp_path, both, docs, other, resume=True).exit_code == 0
    manifest = json.loads(path.read_text())
    assert manifest["inputs"] == [str(docs.resolve()), str(other.resolve())]
    assert [f["path"] for f in manifest["input_files"]] == manifest["inputs"]
    refused = _cli(model, tmp_path, both, docs, resume=True)
    assert refused.exit_code == 2, refused.output
    assert f"{other.resolve()} is not named" in refused.output
    # An earlier manifest's relative path is shown as recorded, with where it was looked for.
    manifest["inputs"] = ["in.parquet", "other.parquet"]
    del manifest["input_files"]
    path.write_text(json.dumps(manifest))
    refused = _cli(model, tmp_path, both, docs, resume=True)
    assert refused.exit_code == 2, refused.output
    assert f"other.parquet (read as {other.resolve()}) is not named" in refused.output


def test_a_resumed_job_keeps_its_start_and_sums_its_seconds(model, tmp_path, monkeypatch):
    docs = write_docs(tmp_path / "in.parquet", 10, seed=2)
    spec = parse_spec({"questions": QUESTIONS[:3]})
    options = dict(model=model, batch_size=1, part_rows=2, progress=False)
    out = tmp_path / "out"
    run_interrupted(monkeypatch, 5, spec, [docs], out, **options)
    # The first run as a long one would have recorded it (an hour earlier, 1000 s of work).
    path = out / "manifest.json"
    first = json.loads(path.read_text())
    assert first["status"] == "aborted"
    first["started"], first["seconds"] = "2026-01-01T00:00:00+00:00", 1000.0
    path.write_text(json.dumps(first))
    again = runner.run_job(spec, [docs], out, resume=True, **options)
    assert again.skipped == 5 and again.ok + again.failed == 10
    manifest = Manifest.read(out)
    assert manifest.started == "2026-01-01T00:00:00+00:00"
    assert manifest.seconds == pytest.approx(1000.0 + again.seconds, abs=0.002)
    report = build_report(out)
    validate_report(report)
    assert report["job"]["started"] == manifest.started
    assert report["job"]["seconds"] == manifest.seconds
    decided = report["counts"]["decided"]
    assert decided == 10
    assert math.isclose(report["throughput"]["documents_per_second"], decided / manifest.seconds)


def test_a_resume_keeps_the_dtype_the_job_started_with(model, tmp_path) -> None:
    """bf16 and fp32 can flip close answers: a resume under `auto` continues in the recorded
    dtype, another named one is refused before any work (it was accepted, unrecorded)."""
    docs = _ints(tmp_path / "in.parquet", [1, 2, 3])
    out = tmp_path / "out"
    first = _cli(model, tmp_path, out, docs, extra=("--dtype", "bfloat16"))
    assert first.exit_code == 0, first.output
    assert Manifest.read(out).dtype == "bfloat16"
    before = _files(out)
    other = _cli(model, tmp_path, out, docs, resume=True, extra=("--dtype", "float32"))
    assert other.exit_code == 2, other.output
    assert "cannot resume in float32: the job decided its rows in bfloat16" in other.output
    assert "--dtype bfloat16" in other.output and _files(out) == before
    kept = _cli(model, tmp_path, out, docs, resume=True)  # auto: the job's own
    assert kept.exit_code == 0, kept.output
    assert Manifest.read(out).dtype == "bfloat16"


def test_parts_without_a_manifest_are_still_checked_against_the_spec(model, tmp_path) -> None:
    """A directory whose manifest is gone (or whose parts were copied in) resumed another spec's
    rows: "decided 40 of 15 documents", wrong questions in the output."""
    docs = _ints(tmp_path / "in.parquet", [1, 2, 3])
    out = tmp_path / "out"
    assert _cli(model, tmp_path, out, docs).exit_code == 0
    (out / "manifest.json").unlink()
    (tmp_path / "other.json").write_text(json.dumps({"questions": QUESTIONS[:2]}))
    args = ["run", str(docs), "-o", str(out), "--spec", str(tmp_path / "other.json"),
            "--model", str(model), "--no-progress", "--resume"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "holds results of another spec" in result.output
    assert _cli(model, tmp_path, out, docs, resume=True).exit_code == 0  # its own spec resumes


def test_a_second_run_on_a_directory_being_written_is_refused(model, tmp_path) -> None:
    """A retry started while the job still runs read the same done ids and wrote the same rows
    twice: the directory is held (`flock`) from before the done ids are read to the end."""
    import subprocess
    import sys

    docs = _ints(tmp_path / "in.parquet", [1, 2, 3])
    out = tmp_path / "out"
    assert _cli(model, tmp_path, out, docs).exit_code == 0
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; "
         "from decide.jobs.output import OutputDir; d = OutputDir(Path(sys.argv[1]), resume=True); "
         "d.lock(); print('held', flush=True); time.sleep(60)", str(out)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        before = _files(out)
        busy = _cli(model, tmp_path, out, docs, resume=True)
        assert busy.exit_code == 2, busy.output
        assert "another decide run is writing to this directory" in busy.output
        assert _files(out) == before
    finally:
        holder.kill()
        holder.wait()
    again = _cli(model, tmp_path, out, docs, resume=True)  # the lock ends with its process
    assert again.exit_code == 0, again.output
    assert _cli(model, tmp_path, out, docs, resume=True).exit_code == 0  # and with each run
