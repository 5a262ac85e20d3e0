"""Argument checks shared by the kernel entry points; every message names the kernel and the values.

Wrong dtypes raise TypeError; wrong shapes, devices, strides and index values raise ValueError.
Value checks (indices in range, lengths that fit) need the tensor's contents: on CPU they are
checked here with the offending values in the message; on CUDA they are queued with
`torch._assert_async`, which costs no host synchronisation but reports a violation only at a later
launch and leaves the CUDA context unusable, the right trade for a contract bug in a hot path.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch


def dtype(kernel: str, name: str, t: torch.Tensor, allowed: Iterable[torch.dtype]) -> None:
    allowed = tuple(allowed)
    if t.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        raise TypeError(f"{kernel}: {name}.dtype is {t.dtype}, expected one of {names}")


def ndim(kernel: str, name: str, t: torch.Tensor, expected: int, layout: str) -> None:
    if t.dim() != expected:
        raise ValueError(f"{kernel}: {name} must be {layout}, got shape {tuple(t.shape)}")


def shape(kernel: str, name: str, t: torch.Tensor, expected: tuple[int, ...], why: str) -> None:
    if tuple(t.shape) != tuple(expected):
        raise ValueError(
            f"{kernel}: {name}.shape is {tuple(t.shape)}, expected {tuple(expected)} ({why})"
        )


def same_device(kernel: str, **tensors: torch.Tensor | None) -> torch.device:
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {k: v.device for k, v in present.items()}
    first = next(iter(devices.values()))
    if any(d != first for d in devices.values()):
        listed = ", ".join(f"{k} on {d}" for k, d in devices.items())
        raise ValueError(f"{kernel}: tensors on different devices: {listed}")
    return first


def value(kernel: str, ok: torch.Tensor, message: str, bad: torch.Tensor | None = None) -> None:
    """Require every element of the boolean tensor `ok`; `bad` (same shape) is shown on failure."""
    if ok.device.type == "cpu":
        if not bool(ok.all()):
            where = (~ok).nonzero().flatten()[:8].tolist()
            shown = "" if bad is None else f"; values there: {bad[~ok].flatten()[:8].tolist()}"
            raise ValueError(f"{kernel}: {message} (fails at {where}{shown})")
    else:
        torch._assert_async(ok.all(), f"{kernel}: {message}")
