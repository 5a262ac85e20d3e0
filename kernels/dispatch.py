"""Backend choice shared by every kernel entry point, plus the scratch allocator the kernels use.

Each kernel has one public entry point taking `backend="auto" | "torch" | "triton"`. An explicit
"torch" or "triton" argument wins; otherwise the environment variable `DECIDE_KERNELS=torch|triton`
decides; otherwise "auto" picks Triton for CUDA tensors when `triton` imports and the PyTorch
reference for everything else. Forcing Triton on CPU tensors works only under `TRITON_INTERPRET=1`
(that is how the tests run the kernels). The choice is logged once per (kernel, backend) on the
`decide.kernels` logger. Triton is imported only by the `*_triton` modules, which `Kernel.triton()`
imports on first use, so `import decide.kernels` never imports triton. The Triton kernels are
forward-only: when autograd needs gradients through a call (`needs_grad`), "auto" and
`DECIDE_KERNELS` fall back to the differentiable reference, and an explicit "triton" is an error
(a Triton output would silently cut the gradient, and training would not train those weights).
`scratch()` allocates every buffer a kernel writes; tests switch `poison_scratch` on so that a
lane a kernel forgets to write still holds NaN (or a sentinel integer) and fails the comparison.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Literal

import torch

Backend = Literal["auto", "torch", "triton"]
ResolvedBackend = Literal["torch", "triton"]

ENV_VAR = "DECIDE_KERNELS"
BACKENDS: tuple[str, ...] = ("auto", "torch", "triton")

# Passed to every Triton launch. Triton 3.9 warns when fusion is left to its default and 3.10 flips
# that default; fixing it keeps results identical across versions, and fused multiply-adds are both
# faster and no less accurate.
FP_FUSION = True

# Written into poisoned integer scratch: never a valid token id, never the -1 of an empty row.
POISON_INT = -7

logger = logging.getLogger("decide.kernels")

_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()
_poison: float | None = None


def interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (`TRITON_INTERPRET=1`)."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


@functools.cache
def triton_import_error() -> str | None:
    """None when `import triton` works, else the reason it does not (cached: imports once)."""
    try:
        importlib.import_module("triton")
    except ImportError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def env_backend() -> ResolvedBackend | None:
    """The backend forced by `DECIDE_KERNELS`, or None when unset or empty."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if not value:
        return None
    if value not in ("torch", "triton"):
        raise ValueError(f"{ENV_VAR}={os.environ[ENV_VAR]!r}: expected 'torch' or 'triton'")
    return value  # type: ignore[return-value]


def needs_grad(*tensors: torch.Tensor | None) -> bool:
    """True when autograd would record a call on these tensors (grad mode on, one requires it)."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def select_backend(
    kernel: str, backend: str, device: torch.device, *, grad: bool = False
) -> ResolvedBackend:
    """Resolve `backend` for tensors on `device` (`grad`: autograd needs gradients through the
    call); raise when the forced choice cannot run there."""
    if backend not in BACKENDS:
        raise ValueError(f"{kernel}: backend={backend!r}, expected one of {BACKENDS}")
    reason = "argument"
    chosen: str = backend
    if grad and chosen == "triton":
        raise RuntimeError(
            f"{kernel}: backend 'triton' is forward-only, but autograd needs gradients through "
            "this call; use backend='torch' or 'auto' (or run under torch.no_grad())"
        )
    if chosen == "auto" and grad:
        chosen, reason = "torch", "auto: gradients needed, the Triton kernel is forward-only"
    elif chosen == "auto":
        forced = env_backend()
        if forced is not None:
            chosen, reason = forced, f"{ENV_VAR}={forced}"
        elif device.type == "cuda" and triton_import_error() is None:
            chosen, reason = "triton", "auto: CUDA tensors and triton imports"
        else:
            why = "tensors on " + device.type if device.type != "cuda" else triton_import_error()
            chosen, reason = "torch", f"auto: {why}"
    if chosen == "triton":
        error = triton_import_error()
        if error is not None:
            raise RuntimeError(f"{kernel}: backend 'triton' ({reason}); triton fails: {error}")
        if device.type != "cuda" and not interpreting():
            raise RuntimeError(
                f"{kernel}: backend 'triton' ({reason}) got tensors on {device}; Triton runs on "
                "CPU only with TRITON_INTERPRET=1 set before the kernels are first imported"
            )
    _log_once(kernel, chosen, reason)
    return chosen  # type: ignore[return-value]


def _log_once(kernel: str, backend: str, reason: str) -> None:
    with _logged_lock:
        if (kernel, backend) in _logged:
            return
        _logged.add((kernel, backend))
    logger.info("%s: using the %s backend (%s)", kernel, backend, reason)


def reset_backend_log() -> None:
    """Forget which choices were logged, so the next call logs again (for tests)."""
    with _logged_lock:
        _logged.clear()


@dataclass(frozen=True)
class Kernel:
    """One kernel's dispatch: its name (for logs and messages) and its Triton module's path."""

    name: str
    triton_module: str

    def select(self, backend: str, device: torch.device, *, grad: bool = False) -> ResolvedBackend:
        return select_backend(self.name, backend, device, grad=grad)

    def triton(self) -> ModuleType:
        """The kernel's Triton module, imported on first use (this is what imports triton)."""
        return importlib.import_module(self.triton_module)


def scratch(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """`torch.empty`, or a poisoned tensor while `poison_scratch` is active."""
    if _poison is None:
        return torch.empty(shape, dtype=dtype, device=device)
    fill = _poison if dtype.is_floating_point else POISON_INT
    return torch.full(shape, fill, dtype=dtype, device=device)


@contextlib.contextmanager
def poison_scratch(value: float = float("nan")) -> Iterator[None]:
    """Fill every buffer `scratch()` hands out with `value` (floats) or `POISON_INT` (integers)."""
    global _poison
    previous, _poison = _poison, value
    try:
        yield
    finally:
        _poison = previous
