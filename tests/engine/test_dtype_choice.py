"""`dtype: auto` on a CPU: bf16 only where a timed bf16 product beats fp32's, fp32 copies of
16-bit weights only where they fit the machine's memory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from decide.engine import load_model, resolution

CPU = torch.device("cpu")


@pytest.fixture
def bf16_checkpoint(tiny_checkpoint: Callable[..., Path]) -> Path:
    return tiny_checkpoint("llada", dtype=torch.bfloat16)


def _cpu(monkeypatch: pytest.MonkeyPatch, has_bf16: bool, speedup: float) -> None:
    monkeypatch.setattr(resolution, "_cpu_has_bf16", lambda: has_bf16)
    monkeypatch.setattr(resolution, "cpu_bf16_speedup", lambda: speedup)


def test_bf16_is_kept_where_it_measures_faster(monkeypatch, bf16_checkpoint: Path) -> None:
    _cpu(monkeypatch, True, 1.8)
    dtype, why = resolution.resolve_dtype("auto", bf16_checkpoint, CPU)
    assert dtype == torch.bfloat16
    assert "1.80x as fast as fp32" in why and "safetensors header" in why


def test_bf16_instructions_alone_do_not_choose_bf16(monkeypatch, bf16_checkpoint: Path) -> None:
    # The Intel Xeon of 2026-12-06 (AVX512-BF16, no AMX): bf16 products at 0.66x fp32's speed.
    _cpu(monkeypatch, True, 0.66)
    dtype, why = resolution.resolve_dtype("auto", bf16_checkpoint, CPU)
    assert dtype == torch.float32
    assert why.startswith("fp32: stored torch.bfloat16") and "only 0.66x" in why
    loaded = load_model(bf16_checkpoint)  # what `decide run` gets on such a CPU
    assert loaded.dtype == torch.float32
    # Near a tie fp32 wins too.
    _cpu(monkeypatch, True, resolution.BF16_MARGIN - 0.01)
    assert resolution.resolve_dtype("auto", bf16_checkpoint, CPU)[0] == torch.float32


def test_no_bf16_instructions_means_fp32_without_timing(monkeypatch, bf16_checkpoint) -> None:
    monkeypatch.setattr(resolution, "_cpu_has_bf16", lambda: False)

    def never() -> float:
        raise AssertionError("timed a bf16 product on a CPU without bf16 instructions")

    monkeypatch.setattr(resolution, "cpu_bf16_speedup", never)
    dtype, why = resolution.resolve_dtype("auto", bf16_checkpoint, CPU)
    assert dtype == torch.float32 and "no bf16 instructions" in why


def test_fp32_weights_stay_fp32(monkeypatch, tiny_checkpoint: Callable[..., Path]) -> None:
    _cpu(monkeypatch, True, 3.0)
    dtype, why = resolution.resolve_dtype("auto", tiny_checkpoint("llada"), CPU)
    assert dtype == torch.float32 and why.startswith("stored")


def test_an_fp32_copy_too_big_for_memory_keeps_bf16(monkeypatch, bf16_checkpoint: Path) -> None:
    _cpu(monkeypatch, False, 0.5)
    size = sum(f.stat().st_size for f in resolution.weight_files(bf16_checkpoint))
    pages = {"SC_PAGE_SIZE": 1, "SC_PHYS_PAGES": 3 * size}  # fp32 needs 2x: 2/3 of memory
    monkeypatch.setattr(resolution.os, "sysconf", lambda name: pages[name])
    dtype, why = resolution.resolve_dtype("auto", bf16_checkpoint, CPU)
    assert dtype == torch.bfloat16
    assert "an fp32 copy would take" in why and "--dtype float32" in why
    # An explicit dtype is obeyed.
    assert resolution.resolve_dtype("float32", bf16_checkpoint, CPU)[0] == torch.float32
    pages["SC_PHYS_PAGES"] = 5 * size  # fp32 needs 2/5 of memory: allowed
    assert resolution.resolve_dtype("auto", bf16_checkpoint, CPU)[0] == torch.float32


def test_the_timing_itself_runs() -> None:
    speedup = resolution.cpu_bf16_speedup()
    assert 0.01 < speedup < 100
    assert resolution.cpu_bf16_speedup() is speedup or resolution.cpu_bf16_speedup() == speedup


def test_training_takes_the_same_measured_choice(monkeypatch) -> None:
    from decide.train.loop import bf16_is_fast

    _cpu(monkeypatch, True, 0.6)
    assert bf16_is_fast("cpu") is False
    _cpu(monkeypatch, True, 2.0)
    assert bf16_is_fast("cpu") is True
    _cpu(monkeypatch, False, 2.0)
    assert bf16_is_fast("cpu") is False
