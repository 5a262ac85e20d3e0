"""The benchmark scripts run: each with tiny arguments, in a child process, printing its table.

Benchmarks are not in the measured path of any test (tests never assert timings); this only keeps
the scripts from rotting between the sessions that record their tables. Two broke unnoticed
before this test existed (a configuration that did not fit crashed `scaling.py`; `memory.py`
reported the peak of a run in which every row had failed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

CASES = {
    "memory": ["--rows", "40", "80"],
    "report_size": ["--rows", "2000"],
    "scaling": ["--model", "tiny", "--docs", "2", "--batch-sizes", "2", "--questions", "1",
                "--doc-tokens", "64"],
    "constraint_overhead": ["--models", "bert", "--docs", "2", "--batch-size", "2"],
    "mfu": ["--batch-sizes", "16", "--window", "8", "--prefix", "16", "--reps", "1", "--dtypes",
            "fp32", "--llama-layers", "1"],
    "train_precision": ["--steps", "1", "--batch-size", "1"],
    "extract": ["--words", "60", "--reps", "1", "--docs", "4"],
    "contractnli": ["--split", "validation", "--docs", "1", "--window-tokens", "200"],
    "rules": ["--docs", "2"],
    "step_profile": ["--docs", "2", "--batch-sizes", "2", "--max-steps", "0", "2"],
    "accuracy": ["--docs", "2", "--mams", "2", "--splits", "validation", "--decoding",
                 "max_steps=2"],
    "calibration": ["--mams", "12", "--docs", "6", "--decoding", "max_steps=4"],
    # above one 2,048-token chunk; with a regrown block re-reading its prefix, too
    "long_prompt": ["--families", "sdar", "--tokens", "2600", "--reread"],
}  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", sorted(CASES))
def test_benchmark_script_runs_and_prints_its_table(script: str) -> None:
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{script}.py"), *CASES[script]],
        capture_output=True, text=True, timeout=540, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    table = [line for line in result.stdout.splitlines() if line.startswith("|")]
    assert len(table) >= 3, result.stdout  # header, separator, at least one row
    if script == "memory":  # every row answered, none failed
        rows = [line.split("|") for line in table[2:]]
        assert all(r[2].strip() == r[1].strip() and r[3].strip() == "0" for r in rows), table
    if script == "long_prompt":  # one forward, chunks, a regrow re-reading: the same answers
        same = [line.split("|")[-2].strip() for line in table]
        same = [v for v in same if v in ("True", "False")]
        assert same == ["True", "True"], table
