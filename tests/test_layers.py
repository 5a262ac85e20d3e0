"""Imports only point down: the `import-linter` contracts of pyproject.toml hold, and break on a
deliberately upward import.

The repository maps `decide.engine`, `decide.jobs`, ... onto top-level folders (pyproject's
`package-dir`), a layout import-linter cannot walk; the test lays the sources out as an installed
wheel holds them (copies of the .py files only) and runs `lint-imports` on that tree.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own TOML reader
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports")
pytestmark = pytest.mark.skipif(LINT is None, reason="import-linter is not installed (dev extra)")


def _wheel_layout(where: Path) -> Path:
    """The package's modules under `where` as a wheel would install them."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for package, folder in config["tool"]["setuptools"]["package-dir"].items():
        target = where.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in (ROOT / folder).glob("*.py"):
            shutil.copy2(source, target / source.name)
    shutil.copy2(ROOT / "pyproject.toml", where / "pyproject.toml")
    return where


def _lint(where: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run(
        [LINT or "lint-imports", "--no-cache"], cwd=where, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def test_the_import_contracts_hold(tmp_path: Path) -> None:
    run = _lint(_wheel_layout(tmp_path))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "BROKEN" not in run.stdout and " 0 broken" in run.stdout and "KEPT" in run.stdout
    assert "Analyzed" in run.stdout  # the tree was really analysed


@pytest.mark.parametrize(
    ("module", "upward", "contract"),
    [
        ("schemas/errors.py", "import decide.jobs.spec", "layers"),
        ("kernels/__init__.py", "from decide.engine import config", "layers"),
        ("jobs/spec.py", "import decide.report", "front doors"),
    ],
)
def test_an_upward_import_breaks_a_contract(
    tmp_path: Path, module: str, upward: str, contract: str
) -> None:
    where = _wheel_layout(tmp_path)
    target = where / "decide" / module
    target.write_text(target.read_text() + f"\n{upward}  # deliberately upward\n")
    run = _lint(where)
    assert run.returncode != 0, run.stdout
    broken = [line for line in run.stdout.splitlines() if line.endswith("BROKEN")]
    assert len(broken) == 1 and contract in broken[0], run.stdout
    name = "decide." + module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    assert name in run.stdout
