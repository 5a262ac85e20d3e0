"""The restricted output head against the full head and `masked_confidence`, on tiny random
checkpoints of several families (the sampler with and without it: `test_sampler.py`)."""

from __future__ import annotations

import pytest
import torch

from decide.engine import load_model
from decide.engine.constraints import bitmask_width
from decide.engine.scoring import allowed_counts, allowed_pairs, restricted_confidence
from decide.kernels import masked_confidence
from decide.kernels.masked_confidence_ref import unpack_bitmask

FAMILIES = ("llada", "Dream", "bert", "qwen3_next", "llada2_moe")


def _bitmasks(vocab: int, counts: list[int], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    out = torch.zeros((len(counts), bitmask_width(vocab)), dtype=torch.int32)
    for n, count in enumerate(counts):
        for t in torch.randperm(vocab, generator=g)[:count].tolist():
            out[n, t // 32] |= torch.tensor(1 << (t % 32)).to(torch.int32)
    return out


def test_allowed_pairs_unpack_the_bitmask() -> None:
    masks = _bitmasks(1000, [0, 1, 7, 999, 1000], seed=3)
    entry, token = allowed_pairs(masks, 1000)
    dense = unpack_bitmask(masks, 1000)
    want = dense.nonzero(as_tuple=True)
    assert torch.equal(entry, want[0]) and torch.equal(token, want[1])
    assert allowed_counts(masks).tolist() == [0, 1, 7, 999, 1000]
    every = torch.tensor([[-1, -(1 << 31), 0x7FFFFFFF]], dtype=torch.int32)  # sign bits included
    assert allowed_counts(every).tolist() == [32 + 1 + 31]


@pytest.mark.parametrize("model_type", FAMILIES)
def test_restricted_head_equals_full_head(model_type, tiny_checkpoint) -> None:
    model = load_model(tiny_checkpoint(model_type, init_std=0.2)).model
    vocab = model.config.embedding_size
    counts = [1, 2, 3, 10, 50, 300, 2000, 0, 1, 2]
    torch.manual_seed(5)
    states = torch.randn(len(counts), model.config.hidden_size)
    masks = _bitmasks(vocab, counts, seed=7)
    with torch.inference_mode():
        logits = model.logits(states).float()
        full = masked_confidence(logits, masks)
        entry, token = allowed_pairs(masks, vocab)
        tokens, probs, pair_logits = restricted_confidence(model, states, entry, token, len(counts))
    assert tokens.tolist() == full.token.tolist()
    # each pair's logit is the full head's, but for an entry's only token (never needed)
    several = torch.tensor(counts)[entry] > 1
    torch.testing.assert_close(
        pair_logits[several], logits[entry[several], token[several]], atol=1e-4, rtol=1e-4
    )
    assert pair_logits[~several].eq(0.0).all()
    ok = ~torch.isnan(full.prob)
    assert torch.isnan(probs[~ok]).all()
    torch.testing.assert_close(probs[ok], full.prob[ok], atol=1e-6, rtol=0)
    assert probs[torch.tensor(counts) == 1].eq(1.0).all()  # exactly, as the masked softmax
