"""Reductions shared by the Triton kernels, written so they also run in the CPU interpreter.

`tl.max`, `tl.min` and `tl.sum` are `@triton.jit` functions of triton's standard library, and
whether such a function runs compiled or interpreted is fixed when its module is imported. When
triton was imported before `TRITON_INTERPRET=1` was set (in a full test run `transformers` imports
it while tests are collected), the standard library is in compiled mode and the interpreter cannot
call it. `tl.reduce` is a builtin, and the interpreter recognises the standard library's combine
functions by identity and reduces with numpy without calling them, so `tl.reduce` with those
combine functions works in either case, fast, and compiles on the GPU to exactly what `tl.max`
and friends emit. The combine functions are private names of `triton.language.standard`; the
slow GPU-compile test fails loudly if a triton release renames them. Imported only by the
`*_triton` modules, never by `decide.kernels` itself.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def reduce_max(x, axis: tl.constexpr):
    """Maximum over `axis` (None: over every axis, giving a scalar)."""
    return tl.reduce(x, axis, tl.standard._elementwise_max)


@triton.jit
def reduce_min(x, axis: tl.constexpr):
    """Minimum over `axis` (None: over every axis, giving a scalar)."""
    return tl.reduce(x, axis, tl.standard._elementwise_min)


@triton.jit
def reduce_sum(x, axis: tl.constexpr):
    """Sum over `axis` (None: over every axis, giving a scalar)."""
    return tl.reduce(x, axis, tl.standard._sum_combine)
