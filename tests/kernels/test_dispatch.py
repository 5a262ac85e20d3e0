"""Backend dispatch: argument beats `DECIDE_KERNELS` beats auto, auto on CPU is torch, one log line.

The import-hygiene checks run in a fresh interpreter, because this process has long since imported
triton for the interpreted kernels.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from decide.kernels import block_attention, dispatch, masked_confidence

CPU = torch.device("cpu")


def test_auto_on_cpu_is_torch() -> None:
    assert dispatch.select_backend("k", "auto", CPU) == "torch"


def test_env_var_decides_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECIDE_KERNELS", "triton")
    assert dispatch.select_backend("k", "auto", CPU) == "triton"  # allowed: TRITON_INTERPRET=1
    monkeypatch.setenv("DECIDE_KERNELS", " Torch ")
    assert dispatch.select_backend("k", "auto", CPU) == "torch"
    monkeypatch.setenv("DECIDE_KERNELS", "")
    assert dispatch.select_backend("k", "auto", CPU) == "torch"


def test_explicit_argument_beats_env_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECIDE_KERNELS", "triton")
    assert dispatch.select_backend("k", "torch", CPU) == "torch"
    monkeypatch.setenv("DECIDE_KERNELS", "torch")
    assert dispatch.select_backend("k", "triton", CPU) == "triton"


def test_bad_names_are_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"backend='gpu', expected one of"):
        dispatch.select_backend("k", "gpu", CPU)
    monkeypatch.setenv("DECIDE_KERNELS", "cuda")
    with pytest.raises(ValueError, match=r"DECIDE_KERNELS='cuda': expected 'torch' or 'triton'"):
        dispatch.select_backend("k", "auto", CPU)


def test_env_var_reaches_the_entry_points(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("DECIDE_KERNELS", "triton")
    dispatch.reset_backend_log()
    with caplog.at_level(logging.INFO, logger="decide.kernels"):
        masked_confidence(torch.randn(2, 40), torch.full((2, 2), -1, dtype=torch.int32))
        q = torch.randn(1, 2, 4, 16)
        block_attention(q, q, q, torch.zeros(1, dtype=torch.int64))
    messages = [r.getMessage() for r in caplog.records if r.name == "decide.kernels"]
    assert messages == [
        "masked_confidence: using the triton backend (DECIDE_KERNELS=triton)",
        "block_attention: using the triton backend (DECIDE_KERNELS=triton)",
    ]


def test_choice_is_logged_once_per_kernel_and_backend(caplog: pytest.LogCaptureFixture) -> None:
    dispatch.reset_backend_log()
    logits, bitmask = torch.randn(3, 64), torch.full((3, 2), 5, dtype=torch.int32)
    with caplog.at_level(logging.INFO, logger="decide.kernels"):
        for _ in range(3):
            masked_confidence(logits, bitmask)
        masked_confidence(logits, bitmask, backend="triton")
        masked_confidence(logits, bitmask, backend="triton")
    messages = [r.getMessage() for r in caplog.records if r.name == "decide.kernels"]
    assert messages == [
        "masked_confidence: using the torch backend (auto: tensors on cpu)",
        "masked_confidence: using the triton backend (argument)",
    ]


def test_scratch_poisoning_is_scoped() -> None:
    with dispatch.poison_scratch(7.5):
        assert dispatch.scratch((2,), torch.float32, CPU).tolist() == [7.5, 7.5]
        assert dispatch.scratch((1,), torch.int64, CPU).item() == dispatch.POISON_INT
        with dispatch.poison_scratch():
            assert torch.isnan(dispatch.scratch((3,), torch.bfloat16, CPU)).all()
        assert dispatch.scratch((1,), torch.float32, CPU).item() == 7.5


def run_fresh(code: str) -> subprocess.CompletedProcess[str]:
    unset = ("TRITON_INTERPRET", dispatch.ENV_VAR)
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_triton_is_imported_only_where_used() -> None:
    """`import decide.kernels` and CPU calls on auto never import triton; forcing Triton on CPU
    without the interpreter is refused with a message that says what to do."""
    result = run_fresh(
        """
        import sys
        import torch
        import decide.kernels as k
        assert "triton" not in sys.modules, "import decide.kernels imported triton"
        x = torch.randn(2, 40)
        k.masked_confidence(x, torch.full((2, 2), -1, dtype=torch.int32))
        q = torch.randn(1, 2, 4, 16)
        k.block_attention(q, q, q, torch.zeros(1, dtype=torch.int64))
        assert "triton" not in sys.modules, "an auto call on CPU imported triton"
        try:
            k.masked_confidence(x, torch.full((2, 2), -1, dtype=torch.int32), backend="triton")
        except RuntimeError as exc:
            print(exc)
        else:
            raise AssertionError("forced triton ran on CPU without TRITON_INTERPRET")
        """
    )
    assert result.returncode == 0, result.stderr
    assert "TRITON_INTERPRET=1" in result.stdout and "tensors on cpu" in result.stdout


def test_interpreter_works_when_triton_was_imported_first() -> None:
    """In a full test run `transformers` imports triton before this folder's conftest sets
    TRITON_INTERPRET=1; every kernel must still run interpreted on CPU tensors (triton's own
    jit'd helpers such as `tl.zeros` would not)."""
    result = run_fresh(
        """
        import os
        import torch
        import triton
        os.environ["TRITON_INTERPRET"] = "1"
        from decide.kernels import block_attention, masked_confidence
        x = torch.randn(3, 100)
        got = masked_confidence(x, torch.full((3, 4), -1, dtype=torch.int32), backend="triton")
        assert got.token.tolist() == x.argmax(dim=1).tolist()
        q = torch.randn(1, 2, 16, 64)
        out = block_attention(q, q, q, torch.zeros(1, dtype=torch.int64), backend="triton")
        want = block_attention(q, q, q, torch.zeros(1, dtype=torch.int64), backend="torch")
        assert (out - want).abs().max() < 1e-5
        from decide.kernels.gated_delta import gated_delta_rule
        g = -torch.rand(1, 20, 2)
        beta = torch.rand(1, 20, 2)
        qk = torch.nn.functional.normalize(torch.randn(1, 20, 2, 16), dim=-1)
        v = torch.randn(1, 20, 2, 16)
        for mode in ("recurrent", "chunk"):
            got = gated_delta_rule(qk, qk, v, g, beta, mode=mode, backend="triton")
            ref = gated_delta_rule(qk, qk, v, g, beta, mode=mode, backend="torch")
            assert (got.out - ref.out).abs().max() < 1e-4, mode
        from decide.kernels.moe import moe_experts
        x = torch.randn(5, 16)
        ids = torch.tensor([[0, 1]] * 5)
        w = torch.full((5, 2), 0.5)
        gate_up, down = torch.randn(2, 16, 16), torch.randn(2, 16, 8)
        got = moe_experts(x, ids, w, gate_up, down, backend="triton")
        ref = moe_experts(x, ids, w, gate_up, down, backend="torch")
        assert (got - ref).abs().max() < 1e-3 * ref.abs().max()
        """
    )
    assert result.returncode == 0, result.stderr


def test_gradients_never_go_through_a_forward_only_triton_kernel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Training on CUDA once ran attention through the Triton kernel, whose output has no
    grad_fn: the query/key/value weights silently got no gradient. Auto and DECIDE_KERNELS now
    fall back to the differentiable reference when autograd needs it; an explicit 'triton' says
    why it cannot."""
    cuda = torch.device("cuda")  # a descriptor only: select_backend looks at the type
    assert dispatch.select_backend("k", "auto", cuda) == "triton"
    assert dispatch.select_backend("k", "auto", cuda, grad=True) == "torch"
    with pytest.raises(RuntimeError, match="forward-only"):
        dispatch.select_backend("k", "triton", cuda, grad=True)

    from decide.kernels.gated_delta import gated_delta_rule
    from decide.kernels.moe import moe_experts

    gen = torch.Generator().manual_seed(0)

    def inputs(*shapes):
        return [torch.randn(*s, generator=gen).requires_grad_() for s in shapes]

    def grads(run, tensors):
        for t in tensors:
            t.grad = None
        run(*tensors).sum().backward()
        assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in tensors)
        return [t.grad.clone() for t in tensors]

    lens = torch.tensor([3, 0], dtype=torch.int64)
    calls = [
        (
            lambda q, k, v: block_attention(q, k, v, torch.zeros(2, dtype=torch.int64), lens),
            inputs(*[(2, 2, 4, 8)] * 3),
        ),
        (
            lambda q, k, v, g, b: (
                gated_delta_rule(q, k, v, -torch.nn.functional.softplus(g), b.sigmoid()).out
            ),
            inputs((1, 5, 2, 8), (1, 5, 2, 8), (1, 5, 2, 8), (1, 5, 2), (1, 5, 2)),
        ),
        (
            lambda x, w, gu, d: moe_experts(
                x, torch.tensor([[0, 2], [1, 0], [2, 1]]), w.softmax(-1), gu, d
            ),
            inputs((3, 8), (3, 2), (3, 12, 8), (3, 8, 6)),
        ),
    ]
    for run, tensors in calls:
        monkeypatch.setenv("DECIDE_KERNELS", "torch")
        expected = grads(run, tensors)
        monkeypatch.setenv("DECIDE_KERNELS", "triton")  # interpreted here, as on a GPU
        got = grads(run, tensors)
        assert all(torch.allclose(a, b) for a, b in zip(expected, got, strict=True))
        with torch.no_grad():  # no gradients needed: the Triton kernel runs
            run(*tensors)
