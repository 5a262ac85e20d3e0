"""Comparison helpers for tests that check one float computation against another.

`rel_err(actual, expected, scale)` is the largest |actual − expected| / |scale| over all elements,
with `scale` defaulting to `expected` itself (pure relative error). Pass a scale when the quantity
is a difference or an average whose own magnitude says nothing about how exactly it was computed:
a margin p1 − p2 is judged against p1, an attention output against the largest output of its head.
NaN must sit in the same places in both tensors (an empty row is NaN by contract, an unwritten lane
of a NaN-poisoned buffer is NaN by accident, so the comparison looks at the positions explicitly).
Test support: tests import it as `helpers.numerics` (pytest's pythonpath holds tests/), and
`benchmarks/kernels.py` puts tests/ on its path for its accuracy columns.
"""

from __future__ import annotations

import torch


def rel_err(
    actual: torch.Tensor, expected: torch.Tensor, scale: torch.Tensor | float | None = None
) -> float:
    """max |actual − expected| / |scale| over the elements where `expected` is not NaN."""
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: {tuple(actual.shape)} vs {tuple(expected.shape)}")
    a = actual.detach().to(torch.float64).cpu()
    e = expected.detach().to(torch.float64).cpu()
    nan_a, nan_e = torch.isnan(a), torch.isnan(e)
    if not torch.equal(nan_a, nan_e):
        where = (nan_a != nan_e).nonzero()[:8].tolist()
        raise AssertionError(f"NaN in different places (first at {where})")
    s = e if scale is None else torch.as_tensor(scale, dtype=torch.float64).cpu()
    s = torch.broadcast_to(s.abs(), e.shape)
    keep = ~nan_e
    if not bool(keep.any()):
        return 0.0
    diff = (a - e).abs()[keep]
    denom = s[keep]
    # Exact agreement is error 0 even where the scale is 0 (e.g. both outputs exactly zero).
    err = torch.where(diff == 0, 0.0, diff / denom)
    return float(err.max())


def assert_rel_close(
    actual: torch.Tensor,
    expected: torch.Tensor,
    rtol: float,
    scale: torch.Tensor | float | None = None,
    what: str = "values",
) -> None:
    """Fail with the worst element's position and values unless `rel_err(...) <= rtol`."""
    err = rel_err(actual, expected, scale)
    if not err <= rtol:
        a = actual.detach().to(torch.float64).cpu()
        e = expected.detach().to(torch.float64).cpu()
        worst = torch.nan_to_num((a - e).abs(), nan=0.0).argmax()
        idx = tuple(int(i) for i in torch.unravel_index(worst, e.shape))
        raise AssertionError(
            f"{what}: relative error {err:.3g} > {rtol:g} (worst at {idx}: "
            f"{a[idx].item()!r} vs expected {e[idx].item()!r})"
        )
