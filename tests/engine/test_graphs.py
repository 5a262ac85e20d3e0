"""`CapturedStep`: the body a CUDA graph records (planned once, static buffers, nothing read back)
equals the step through the model's checked entry points, for every family it takes, whole
window and open positions only. The capture itself needs a GPU (`benchmarks/llada_step.py` runs
it and checks replay against the eager step there); everything it records runs here."""

from __future__ import annotations

import pytest
import torch

from decide.engine import load_model
from decide.engine.constraints import bitmask_width
from decide.engine.graphs import CapturedStep, StepShape

FAMILIES = ("llada", "Dream", "sdar", "Fast_dLLM_Qwen", "bert", "llada2_moe")


def _step(tiny_checkpoint, model_type: str, queries: int | None, scored: int = 0) -> CapturedStep:
    """A step over a cached prompt; `queries` None: the whole window is recomputed."""
    model = load_model(tiny_checkpoint(model_type, init_std=0.2)).model
    c = model.config
    window = c.block_size if c.attention == "block_causal" else 8
    shape = StepShape(3, window, window if queries is None else queries, 2 * window, scored)
    gen = torch.Generator().manual_seed(5)
    vocab = min(c.embedding_size, 1000)
    prompt = torch.randint(0, vocab, (3, 2 * window), generator=gen)
    cache = model.new_cache(3, 4 * window)
    with torch.inference_mode():
        model(prompt, cache, commit=prompt.shape[1])
    words = bitmask_width(c.embedding_size)
    bitmask = torch.randint(
        -(2**31), 2**31 - 1, (3 * shape.open, words), dtype=torch.int32, generator=gen
    )
    step = CapturedStep(model, cache, shape, bitmask)
    ids = torch.randint(0, vocab, (3, window), generator=gen)
    ids[:, window - shape.open :] = c.mask_token_id
    step.ids.copy_(ids)
    return step


@pytest.mark.parametrize("model_type", FAMILIES)
@pytest.mark.parametrize("open_positions", ["all", "last 3", "all run, last 3 scored"])
def test_static_body_equals_the_checked_step(model_type, open_positions, tiny_checkpoint) -> None:
    queries = None if open_positions.startswith("all") else 3
    scored = 3 if open_positions.endswith("scored") else 0
    step = _step(tiny_checkpoint, model_type, queries, scored)
    with torch.inference_mode():
        want = [t.clone() for t in step.eager()[:3]]
        got = step.static_step()
        lengths = step.cache.lengths.clone()
    assert torch.equal(got.token, want[0])
    torch.testing.assert_close(got.prob, want[1], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.margin, want[2], rtol=1e-5, atol=1e-6)
    assert bool((lengths == step.shape.prefix).all())  # the step commits nothing


def test_bad_shapes_are_refused(tiny_checkpoint) -> None:
    model = load_model(tiny_checkpoint("llada", init_std=0.2)).model
    cache = model.new_cache(2, 16)
    mask = torch.zeros((8, bitmask_width(model.config.embedding_size)), dtype=torch.int32)
    with pytest.raises(ValueError, match="committed tokens"):
        CapturedStep(model, cache, StepShape(2, 4, 4, 3), mask)
    with pytest.raises(ValueError, match="queries must lie"):
        CapturedStep(model, cache, StepShape(2, 4, 5, 0), mask)
    with pytest.raises(ValueError, match="bitmask must be"):
        CapturedStep(model, cache, StepShape(2, 4, 2, 0), mask)
    with pytest.raises(RuntimeError, match="capture"):
        CapturedStep(model, cache, StepShape(2, 4, 4, 0), mask).replay()
