"""Recomputing only some positions of a window (`forward_queries`, the sampler's in-block
cache): exact where nothing it reads is stale. Recomputing every position equals `forward`, even
over keys left by a forward of other tokens; recomputing a subset of a window whose tokens have
not changed since its last forward equals `forward` at those positions, also when rows recompute
different numbers of positions (run packed); for every family that allows it (not the hybrid,
whose Gated DeltaNet layers carry a state along the window)."""

from __future__ import annotations

import pytest
import torch

from decide.engine import load_model

FAMILIES = ("llada", "Dream", "sdar", "Fast_dLLM_Qwen", "bert", "llada2_moe")


def _setup(tiny_checkpoint, model_type: str):
    loaded = load_model(tiny_checkpoint(model_type, init_std=0.2))
    model = loaded.model
    c = model.config
    block = c.block_size if c.attention == "block_causal" else 8
    gen = torch.Generator().manual_seed(3)
    vocab = min(c.embedding_size, 1000)
    prompt = torch.randint(0, vocab, (2, 2 * block), generator=gen)
    window = torch.randint(0, vocab, (2, block), generator=gen)
    other = torch.randint(0, vocab, (2, block), generator=gen)
    return model, prompt, window, other


def _cache(model, prompt):
    cache = model.new_cache(prompt.shape[0], 4 * prompt.shape[1])
    model(prompt, cache, commit=prompt.shape[1])
    return cache


@pytest.mark.parametrize("model_type", FAMILIES)
def test_every_position_recomputed_equals_forward(model_type, tiny_checkpoint) -> None:
    model, prompt, window, other = _setup(tiny_checkpoint, model_type)
    lens = torch.tensor([window.shape[1], window.shape[1] - 3])
    with torch.inference_mode():
        reference = model(window, _cache(model, prompt), window_lens=lens)
        cache = _cache(model, prompt)
        model(other, cache, window_lens=lens)  # keys of other tokens, all to be rewritten
        everything = [list(range(int(n))) for n in lens]
        got = model.forward_queries(window, cache, lens, everything)
    for row, n in enumerate(lens.tolist()):
        torch.testing.assert_close(got[row, :n], reference[row, :n], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_subset_of_an_unchanged_window_equals_forward(model_type, tiny_checkpoint) -> None:
    model, prompt, window, _ = _setup(tiny_checkpoint, model_type)
    lens = torch.full((2,), window.shape[1])
    queries = [[1, 3], [0, 2]]
    with torch.inference_mode():
        cache = _cache(model, prompt)
        reference = model(window, cache, window_lens=lens)
        got = model.forward_queries(window, cache, lens, queries)
    shift = 1 if model.config.logits_shift else 0
    for row, offsets in enumerate(queries):
        aligned = [o + shift for o in offsets if o + shift < window.shape[1]]
        torch.testing.assert_close(got[row, aligned], reference[row, aligned], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_rows_of_unequal_query_counts_run_packed_and_equal_forward(
    model_type, tiny_checkpoint
) -> None:
    """Rows recomputing different numbers of positions share one packed sequence of just their
    queries (no padding through projections and MLP), with the same states as `forward`."""
    model, prompt, window, _ = _setup(tiny_checkpoint, model_type)
    lens = torch.full((2,), window.shape[1])
    width = window.shape[1]
    queries = [list(range(width - 1)), [width // 2]]
    seen = []
    trunk = model._trunk

    def spy(ids, plan, cache):
        seen.append(tuple(ids.shape))
        return trunk(ids, plan, cache)

    with torch.inference_mode():
        cache = _cache(model, prompt)
        reference = model(window, cache, window_lens=lens)
        model._trunk = spy
        got = model.forward_queries(window, cache, lens, queries)
    assert seen == [(1, width)]  # not 2 × (width - 1)
    shift = 1 if model.config.logits_shift else 0
    for row, offsets in enumerate(queries):
        aligned = [o + shift for o in offsets if o + shift < window.shape[1]]
        torch.testing.assert_close(got[row, aligned], reference[row, aligned], rtol=1e-5, atol=1e-5)


def test_the_hybrid_refuses_a_partial_window(tiny_checkpoint) -> None:
    model = load_model(tiny_checkpoint("qwen3_next", init_std=0.2)).model
    assert not model.supports_queries
    cache = model.new_cache(1, 32)
    with pytest.raises(ValueError, match="cannot be recomputed in part"):
        model.forward_queries(torch.zeros(1, 4, dtype=torch.long), cache, torch.tensor([4]), [[0]])


@pytest.mark.parametrize("commits", [False, True])
@pytest.mark.parametrize("model_type", FAMILIES)
def test_a_forward_computing_only_the_states_read_equals_forward(
    model_type, tiny_checkpoint, commits: bool
) -> None:
    """`forward(outputs=...)`: the states at the offsets read (aligned, so one earlier for the
    shifted families), the keys and values of every position and the recorded last state of a
    commit are those of a full forward; a further forward over the cache agrees too."""
    model, prompt, window, other = _setup(tiny_checkpoint, model_type)
    width = window.shape[1]
    # committing: whole windows (a block-causal prefix must stay whole model blocks)
    lens = torch.tensor([width, width if commits else width - 1])
    commit = width if commits else 0
    # (a shifted family also computes the state a commit records: fewer reads, so that the
    # last layer still skips most positions of the 4-token block-causal windows)
    reads = [[width - 1], [width // 2]] if commits else [[1, width - 1], [width // 2]]
    assert model.supports_outputs
    with torch.inference_mode():
        full_cache, part_cache = _cache(model, prompt), _cache(model, prompt)
        full = model(window, full_cache, window_lens=lens, commit=commit)
        calls = []
        trunk = model._trunk

        def spy(ids, plan, cache, *outputs):
            calls.append(outputs)
            return trunk(ids, plan, cache, *outputs)

        model._trunk = spy
        part = model(window, part_cache, window_lens=lens, commit=commit, outputs=reads)
        del model._trunk
        assert calls and calls[0], "the last layer was not told which states are read"
        for row, offsets in enumerate(reads):
            torch.testing.assert_close(part[row, offsets], full[row, offsets], rtol=1e-5, atol=1e-5)
        for layer in range(model.config.num_layers):
            span = prompt.shape[1] + width
            torch.testing.assert_close(part_cache.k[layer][:, :, :span],
                                       full_cache.k[layer][:, :, :span])  # fmt: skip
            torch.testing.assert_close(part_cache.v[layer][:, :, :span],
                                       full_cache.v[layer][:, :, :span])  # fmt: skip
        assert torch.equal(part_cache.lengths, full_cache.lengths)
        if model.config.logits_shift and commit:
            torch.testing.assert_close(part_cache.last_hidden, full_cache.last_hidden)
        # the next forward reads those caches
        after = [model(other, c, window_lens=lens) for c in (full_cache, part_cache)]
        torch.testing.assert_close(after[1], after[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model_type", FAMILIES)
def test_queries_computing_only_the_states_read_equal_all_queries(
    model_type, tiny_checkpoint
) -> None:
    """`forward_queries(outputs=...)` on rows of unequal query counts (packed): the states read
    and the keys and values written equal those of the same queries without `outputs`; a row
    whose read state is its first query and that has fewer queries than the others included
    (its padding repeats that query)."""
    model, prompt, window, _ = _setup(tiny_checkpoint, model_type)
    width = window.shape[1]
    lens = torch.full((2,), width)
    queries = [list(range(width)), [1, 2]]
    shift = 1 if model.config.logits_shift else 0
    reads = [[width - 1], [1 + shift]]  # the second row reads its first query's state
    results = []
    with torch.inference_mode():
        for outputs in (None, reads):
            cache = _cache(model, prompt)
            model(window, cache, window_lens=lens)  # the window's keys, as a step finds them
            got = model.forward_queries(window, cache, lens, queries, outputs=outputs)
            results.append((got, cache))
    (full, full_cache), (part, part_cache) = results
    for row, offsets in enumerate(reads):
        torch.testing.assert_close(part[row, offsets], full[row, offsets], rtol=1e-5, atol=1e-5)
    for layer in range(model.config.num_layers):
        torch.testing.assert_close(part_cache.k[layer], full_cache.k[layer])
        torch.testing.assert_close(part_cache.v[layer], full_cache.v[layer])
