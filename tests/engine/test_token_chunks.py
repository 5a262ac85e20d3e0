"""Position-wise layer work in chunks of tokens on a CPU (`layers.by_token_chunks`): the same
states as one pass over all tokens, for the BERT and the LLaMA-style layers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from decide.engine import layers, load_model


@pytest.mark.parametrize("model_type", ["bert", "llada"])
def test_chunked_forward_equals_one_pass(
    monkeypatch: pytest.MonkeyPatch, tiny_checkpoint: Callable[..., Path], model_type: str
) -> None:
    loaded = load_model(tiny_checkpoint(model_type))
    model = loaded.model
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 200, (3, 90), generator=gen)  # 270 tokens
    lens = torch.tensor([90, 61, 7])

    def forward(chunk: int) -> torch.Tensor:
        monkeypatch.setattr(layers, "CPU_TOKEN_CHUNK", chunk)
        with torch.inference_mode():
            return model(ids, model.new_cache(3, 90), window_lens=lens)

    calls = []
    real = layers.by_token_chunks

    def counting(fn, *xs):
        calls.append(xs[0].shape)
        return real(fn, *xs)

    whole = forward(10_000)
    monkeypatch.setattr(layers, "by_token_chunks", counting)
    for module in ("decide.engine.bert", "decide.engine.model"):
        monkeypatch.setattr(f"{module}.by_token_chunks", counting)
    chunked = forward(32)  # 270 tokens: 9 chunks, the last one short
    assert calls, "the layers do not go through by_token_chunks"
    for row, n in enumerate(lens.tolist()):
        torch.testing.assert_close(chunked[row, :n], whole[row, :n], rtol=1e-5, atol=1e-5)


def test_chunks_only_on_cpu_without_grad() -> None:
    seen = []

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append(x.shape[0])
        return x * 2 + y

    x = torch.randn(2, layers.CPU_TOKEN_CHUNK + 700, 4)
    y = torch.randn(2, layers.CPU_TOKEN_CHUNK + 700, 4)
    with torch.no_grad():
        out = layers.by_token_chunks(fn, x, y)
    assert seen == [layers.CPU_TOKEN_CHUNK] * (len(seen) - 1) + [seen[-1]] and len(seen) > 1
    torch.testing.assert_close(out, x * 2 + y)
    seen.clear()
    with torch.enable_grad():
        layers.by_token_chunks(fn, x.requires_grad_(), y)
    assert seen == [2]  # one call over everything: [2, tokens, 4]
