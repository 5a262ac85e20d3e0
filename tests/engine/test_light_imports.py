"""The slot-constraint protocol and the schema compiler import without torch (issue 33)."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("modules", [["decide.engine.constraints"], ["decide.schemas"]])
def test_importing_does_not_import_torch(modules: list[str]) -> None:
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = sorted(m for m in ('torch', 'triton') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "", f"importing {modules} imported {done.stdout.strip()}"
