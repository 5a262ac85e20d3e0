"""The package runs on the oldest Python it declares (`requires-python`): `vermin` finds no
language feature, standard-library module or member newer than that in any module of it (the
check that caught `datetime.UTC`, 3.11+, under a 3.10 floor)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERMIN = shutil.which("vermin")
PACKAGE_DIRS = ["decide", "engine", "kernels", "schemas", "jobs", "train"]


def _floor() -> str:
    found = re.search(
        r'requires-python\s*=\s*">=\s*(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text()
    )
    assert found, "pyproject.toml declares no requires-python floor"
    return found.group(1)


@pytest.mark.skipif(VERMIN is None, reason="vermin is not installed (dev extra)")
def test_every_module_runs_on_the_declared_python_floor() -> None:
    run = subprocess.run(
        [VERMIN or "vermin", f"-t={_floor()}-", "--violations", "--no-tips", "--eval-annotations",
         "--backport", "typing_extensions", *PACKAGE_DIRS],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Analyzing" in run.stdout  # it looked at the files


def test_the_floor_check_catches_a_newer_member(tmp_path: Path) -> None:
    if VERMIN is None:
        pytest.skip("vermin is not installed (dev extra)")
    (tmp_path / "new.py").write_text("from datetime import UTC\n\nprint(UTC)\n")
    run = subprocess.run([VERMIN, f"-t={_floor()}-", "--violations", "--no-tips", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode != 0 and "datetime.UTC" in run.stdout
