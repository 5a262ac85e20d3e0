"""Crash safety: a real `decide run` killed with SIGKILL at random points, then resumed, always
ends with exactly one row per doc id, identical to an uninterrupted run, and no torn part is ever
readable as output. A write that fails mid-job (disk full, permissions lost) exits 3 and leaves
every committed part intact and resumable."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner
from helpers.jobdata import QUESTIONS, write_docs

from decide.cli import main
from decide.jobs import output

DOCS = 48
TRIALS = 12  # about half of them kill mid-job (asserted below)


@pytest.fixture(scope="module")
def setup(tiny_checkpoint, tmp_path_factory):
    root = tmp_path_factory.mktemp("crash")
    docs = write_docs(root / "in.parquet", DOCS, seed=21)
    (root / "job.json").write_text(json.dumps({"questions": QUESTIONS}))
    model = tiny_checkpoint("sdar", vocab="small", init_std=0.2)
    base = [sys.executable, "-m", "decide", "run", str(docs), "--spec", str(root / "job.json"),
            "--model", str(model), "--batch-size", "4", "--part-rows", "3", "--no-progress"]  # fmt: skip
    started = time.monotonic()
    subprocess.run([*base, "-o", str(root / "reference")], check=True, capture_output=True)
    return root, base, time.monotonic() - started


def _answers(out: Path) -> pl.DataFrame:
    return pl.read_parquet(out / "answers" / "*.parquet").sort("doc_id")


def _assert_parts_whole(out: Path) -> None:
    """Every file that looks like output reads as a complete parquet file."""
    for part in (out / "answers").glob("part-*.parquet"):
        pl.read_parquet(part)  # raises on a torn file


def _assert_same(out: Path, reference: Path) -> None:
    got, want = _answers(out), _answers(reference)
    assert got["doc_id"].n_unique() == got.height == DOCS
    assert got.select("doc_id", "answers_json", "nfe").equals(
        want.select("doc_id", "answers_json", "nfe")
    )


def _wait_for_parts(process: subprocess.Popen, out: Path, parts: int) -> None:
    """Return once `parts` answer parts exist (or the run has ended)."""
    while process.poll() is None:
        if len(list((out / "answers").glob("part-*.parquet"))) >= parts:
            return
        time.sleep(0.002)


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume(setup) -> None:
    root, base, seconds = setup
    rng = random.Random(1234)
    outcomes = {"before any part": 0, "mid-run": 0, "after the end": 0}
    for trial in range(TRIALS):
        out = root / f"trial-{trial}"
        process = subprocess.Popen([*base, "-o", str(out)], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)  # fmt: skip
        if trial % 2:  # at a random time, from start-up to a little past the reference run
            time.sleep(rng.uniform(0.2, seconds * 1.1))
        else:  # once a random number of parts is written: mid-job whatever the machine's speed
            _wait_for_parts(process, out, rng.randint(1, DOCS // 3 - 1))
            time.sleep(rng.uniform(0.0, 0.05))
        process.send_signal(signal.SIGKILL)
        process.wait()
        parts = len(list((out / "answers").glob("part-*.parquet"))) if out.exists() else 0
        manifest = out / "manifest.json"
        complete = manifest.exists() and json.loads(manifest.read_text())["status"] == "complete"
        outcomes["after the end" if complete else "mid-run" if parts else "before any part"] += 1
        if out.exists():
            _assert_parts_whole(out)
        resumed = subprocess.run([*base, "-o", str(out), "--resume"], capture_output=True,
                                 text=True)  # fmt: skip
        assert resumed.returncode == 0, (trial, resumed.stderr[-2000:])
        _assert_parts_whole(out)
        _assert_same(out, root / "reference")
        assert not list(out.rglob("*.tmp")), "stale temporary files must be gone"
    assert outcomes["mid-run"] >= 5, outcomes  # the kills really landed mid-job


def test_write_failure_mid_job_exits_3_and_resumes(setup, monkeypatch) -> None:
    root, base, _ = setup
    out = root / "disk-full"
    real = output.OutputDir.write_part
    calls = {"n": 0}

    def failing(self, frame):
        calls["n"] += 1
        if calls["n"] == 4:
            raise output.OutputError(errno.ENOSPC, "No space left on device")
        return real(self, frame)

    monkeypatch.setattr(output.OutputDir, "write_part", failing)
    args = base[3:]  # drop "python -m decide"
    result = CliRunner().invoke(main, [*args, "-o", str(out)])
    assert result.exit_code == 3, result.output
    assert "No space left on device" in result.output and "--resume" in result.output
    written = _answers(out)
    assert written.height == 9  # three whole parts of three rows survived
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "aborted"
    monkeypatch.setattr(output.OutputDir, "write_part", real)
    again = CliRunner().invoke(main, [*args, "-o", str(out), "--resume"])
    assert again.exit_code == 0, again.output
    _assert_same(out, root / "reference")


def test_a_real_write_failure_of_a_part_exits_3_with_its_reason(setup, tmp_path) -> None:
    """polars reports a failed parquet write (a full disk, a file-size limit) as its own
    ComputeError, not an OSError: it printed a traceback and "aborted by an unexpected error".
    Here a real limit on file size (RLIMIT_FSIZE, no mock) fails the first part."""
    import resource

    root, base, _ = setup

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (6000, 6000))

    out = tmp_path / "out"
    failed = subprocess.run([*base, "-o", str(out)], capture_output=True, text=True,
                            preexec_fn=limited)  # fmt: skip
    assert failed.returncode == 3, failed.stderr
    assert "File too large" in failed.stderr and "--resume" in failed.stderr
    assert "Traceback" not in failed.stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "aborted"
    subprocess.run([*base, "-o", str(out), "--resume"], check=True, capture_output=True)
    _assert_same(out, root / "reference")


def test_ctrl_c_before_the_job_starts_exits_3(setup, tmp_path, monkeypatch) -> None:
    """A Ctrl-C that lands while `decide run` is still starting (torch importing, the model
    loading) is an abort, exit 3, as one during the job is; click's own handler said "Aborted!"
    and exited 1, the code of a finished job with failed rows."""
    import decide.cli

    _, base, _ = setup

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(decide.cli, "log_warnings", interrupted)  # the first thing `run` does
    result = CliRunner().invoke(main, [*base[3:], "-o", str(tmp_path / "out")])
    assert result.exit_code == 3 and "interrupted" in result.output, result.output
    assert not (tmp_path / "out").exists()


def _stop_after_a_part(base: list[str], out: Path, *signals: signal.Signals):
    """Run `base` into `out`, send `signals` once its first part is written; the finished run."""
    proc = subprocess.Popen([*base, "-o", str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list((out / "answers").glob("part-*.parquet")):
        time.sleep(0.02)
    for sig in signals:
        os.kill(proc.pid, sig)
    _, stderr = proc.communicate(timeout=300)
    return proc.returncode, stderr


def test_sigterm_aborts_as_ctrl_c_does_and_resumes(setup, tmp_path) -> None:
    """SIGTERM (kill, docker stop, a batch scheduler's time limit) killed the process at once:
    no exit 3, no message, and a manifest saying `running` for ever. Now it stops the job as
    Ctrl-C does, keeping the decisions made."""
    root, base, _ = setup
    out = tmp_path / "out"
    code, stderr = _stop_after_a_part(base, out, signal.SIGTERM)
    assert code == 3, stderr
    assert "terminated (SIGTERM); parts written so far are intact" in stderr
    assert "Traceback" not in stderr
    assert json.loads((out / "manifest.json").read_text())["status"] == "aborted"
    subprocess.run([*base, "-o", str(out), "--resume"], check=True, capture_output=True)
    _assert_same(out, root / "reference")


def test_a_second_interrupt_exits_at_once_with_3(setup, tmp_path) -> None:
    """Ctrl-C twice: the second one landed inside the first one's clean-up and printed a
    traceback from wherever it fell, or killed the process (exit -2). Now it exits 3 at once;
    what is on disk is written atomically and resumes."""
    root, base, _ = setup
    out = tmp_path / "out"
    code, stderr = _stop_after_a_part(base, out, signal.SIGINT, signal.SIGINT)
    assert code == 3, stderr
    assert "Traceback" not in stderr and "intact" in stderr
    subprocess.run([*base, "-o", str(out), "--resume"], check=True, capture_output=True)
    _assert_same(out, root / "reference")


def test_library_debug_logs_stay_off_stderr() -> None:
    """bm25s (long documents' `top_k`) sets its own logger to DEBUG at import: every document
    printed "DEBUG bm25s: Building index from tokens" under `decide run`."""
    code = (
        "import logging, bm25s; from decide.cli import log_warnings; log_warnings(); "
        "logging.getLogger('bm25s').debug('noise'); logging.getLogger('decide').warning('kept')"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stderr == "WARNING decide: kept\n"


def test_unwritable_output_directory_is_a_usage_error(setup, tmp_path) -> None:
    _, base, _ = setup
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result = CliRunner().invoke(main, [*base[3:], "-o", str(blocker / "out")])
    assert result.exit_code == 2 and "not-a-dir" in result.output
    if os.geteuid() != 0:  # root ignores permission bits
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        result = CliRunner().invoke(main, [*base[3:], "-o", str(locked / "out")])
        assert result.exit_code == 2 and "not writable" in result.output
