"""Kernel tests run the Triton kernels on CPU tensors through Triton's interpreter.

`@triton.jit` decides between compiled and interpreted kernels when a kernel module is imported,
so `TRITON_INTERPRET=1` has to be in the environment before `decide.kernels.*_triton` is first
imported. `decide.kernels` imports those modules only on first Triton use, and pytest imports this
conftest before running any test, so setting the variable here is early enough. Triton itself may
have been imported earlier (in a full run `transformers` does so while test modules are
collected); the kernels avoid triton's own jit'd helpers for that reason (see
`decide.kernels.triton_common`), and `test_dispatch` checks that case in a fresh interpreter.
"""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import pytest

from decide.kernels import dispatch


@pytest.fixture(autouse=True)
def _kernel_env(monkeypatch: pytest.MonkeyPatch):
    """No outside `DECIDE_KERNELS` choice, and every buffer a kernel allocates starts as NaN."""
    monkeypatch.delenv(dispatch.ENV_VAR, raising=False)
    with dispatch.poison_scratch():
        yield
