"""Each supported model type against `transformers` on the same weights, and the engine's own
invariants: cached equals uncached, ragged batches equal one row at a time."""

from __future__ import annotations

import pytest
import torch
from helpers.oracle import max_rel_error, oracle_logits, oracle_model

from decide.engine import load_model

# Awkward on purpose: odd head dims (24, 20), GQA, tied and untied heads, QKV bias on and off.
CASES = {
    "llada": dict(init_std=0.2, num_layers=2, hidden_size=96, num_heads=4, num_kv_heads=2),
    "llada-qkv-bias": dict(
        init_std=0.2,
        num_layers=2,
        hidden_size=96,
        num_heads=4,
        num_kv_heads=1,
        attention_bias=True,
        tie_word_embeddings=True,
    ),
    "Dream": dict(
        init_std=0.2,
        num_layers=2,
        hidden_size=96,
        num_heads=4,
        num_kv_heads=2,
        tie_word_embeddings=True,
    ),
    "sdar": dict(
        init_std=0.2,
        num_layers=3,
        hidden_size=96,
        num_heads=4,
        num_kv_heads=2,
        head_dim=20,
        block_size=4,
    ),
    "bert": dict(num_layers=2, hidden_size=96, num_heads=4, intermediate_size=160, init_std=0.5),
    "Fast_dLLM_Qwen": dict(
        init_std=0.2,
        num_layers=2,
        hidden_size=96,
        num_heads=6,
        num_kv_heads=2,
        block_size=4,
        shards=3,
    ),
}
LENGTHS = [13, 9, 16]
# What the public checkpoints do, stated independently of the engine's family table.
SHIFTED = {"llada": False, "Dream": True, "sdar": False, "Fast_dLLM_Qwen": True, "bert": False}
BLOCK_CAUSAL = {"llada": False, "Dream": False, "sdar": True, "Fast_dLLM_Qwen": True, "bert": False}


def _model_type(case: str) -> str:
    return case.split("-")[0]


def _ids(lengths: list[int], vocab: int, mask_id: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (len(lengths), max(lengths)), generator=g)
    ids[:, 3::5] = mask_id  # diffusion inputs are full of mask tokens
    return ids


@pytest.mark.parametrize("case", list(CASES))
def test_logits_match_transformers(case: str, tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint(_model_type(case), **CASES[case])
    loaded = load_model(model_dir, dtype="float32")
    config = loaded.config
    ids = _ids(LENGTHS, loaded.tokenizer.vocab_size, config.mask_token_id)

    cache = loaded.model.new_cache(len(LENGTHS))
    with torch.no_grad():
        hidden = loaded.model(ids, cache, window_lens=torch.tensor(LENGTHS))
        ours = loaded.model.logits(hidden)
    model_type = _model_type(case)
    assert config.logits_shift == SHIFTED[model_type]
    assert (config.attention == "block_causal") == BLOCK_CAUSAL[model_type]
    block = CASES[case]["block_size"] if BLOCK_CAUSAL[model_type] else None
    theirs = oracle_logits(oracle_model(model_dir), ids, LENGTHS, block)

    assert ours.shape == theirs.shape
    for row, n in enumerate(LENGTHS):
        if SHIFTED[model_type]:  # our position i is predicted by their position i - 1
            a, b = ours[row, 1:n], theirs[row, : n - 1]
        else:
            a, b = ours[row, :n], theirs[row, :n]
        assert max_rel_error(a, b) <= 1e-4, (case, row)
    if SHIFTED[model_type]:  # no prefix: position 0 predicts nothing and reads as zeros
        assert torch.count_nonzero(ours[:, 0]) == 0


@pytest.mark.parametrize("case", list(CASES))
def test_ragged_batch_equals_one_row_at_a_time(case: str, tiny_checkpoint) -> None:
    loaded = load_model(tiny_checkpoint(_model_type(case), **CASES[case]))
    ids = _ids(LENGTHS, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=1)
    with torch.no_grad():
        batch = loaded.model(ids, loaded.model.new_cache(3), window_lens=torch.tensor(LENGTHS))
        uncached = loaded.model(ids, None, window_lens=torch.tensor(LENGTHS))
        for row, n in enumerate(LENGTHS):  # no cache at all: the same as a fresh one
            assert max_rel_error(uncached[row, :n], batch[row, :n]) <= 1e-6
        for row, n in enumerate(LENGTHS):
            alone = loaded.model(ids[row : row + 1, :n], loaded.model.new_cache(1))
            assert max_rel_error(batch[row, :n], alone[0]) <= 1e-5


@pytest.mark.parametrize("model_type", ["sdar", "Fast_dLLM_Qwen"])
@pytest.mark.parametrize("window", [4, 8, 3])
def test_block_causal_cached_equals_full_recompute(model_type: str, window: int, tiny_checkpoint):
    """Prefill whole blocks (ragged: 8, 4 and 12 tokens) into the cache, then run a window of
    one block, two blocks, or a partial block: equal to the uncached block-causal forward."""
    loaded = load_model(tiny_checkpoint(model_type, **CASES[model_type]))
    model, bs = loaded.model, loaded.config.block_size
    prefixes = [2 * bs, bs, 3 * bs]
    full_lens = [p + window for p in prefixes]
    ids = _ids(full_lens, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=2)
    with torch.no_grad():
        full = model(ids, model.new_cache(3), window_lens=torch.tensor(full_lens))

        cache = model.new_cache(3)
        prompt = torch.zeros(3, max(prefixes), dtype=torch.long)
        block = torch.zeros(3, window, dtype=torch.long)
        for row, p in enumerate(prefixes):
            prompt[row, :p] = ids[row, :p]
            block[row] = ids[row, p : p + window]
        lens = torch.tensor(prefixes)
        model(prompt, cache, window_lens=lens, commit=lens)
        assert cache.lengths.tolist() == prefixes
        # Run the block twice over the same prefix: nothing may leak from the first pass.
        model(block.flip(1), cache)
        cached = model(block, cache)
    for row, p in enumerate(prefixes):
        assert max_rel_error(cached[row], full[row, p : p + window]) <= 1e-5


@pytest.mark.parametrize("model_type", ["sdar", "Fast_dLLM_Qwen"])
def test_block_causal_commit_then_next_block(model_type: str, tiny_checkpoint) -> None:
    """Decide a block, commit it, run the next: equal to the full forward (also the shifted first
    position, which comes from the committed block's last state)."""
    loaded = load_model(tiny_checkpoint(model_type, **CASES[model_type]))
    model, bs = loaded.model, loaded.config.block_size
    ids = _ids([4 * bs], loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=3)
    with torch.no_grad():
        full = model(ids, model.new_cache(1))
        cache = model.new_cache(1)
        model(ids[:, : 2 * bs], cache, commit=2 * bs)
        model(ids[:, 2 * bs : 3 * bs], cache, commit=bs)
        last = model(ids[:, 3 * bs :], cache)
    assert max_rel_error(last[0], full[0, 3 * bs :]) <= 1e-5


def test_block_causal_refuses_unaligned_prefix(tiny_checkpoint) -> None:
    loaded = load_model(tiny_checkpoint("sdar", **CASES["sdar"]))
    cache = loaded.model.new_cache(1)
    with torch.no_grad():
        loaded.model(torch.zeros(1, 6, dtype=torch.long), cache, commit=6)
        with pytest.raises(ValueError, match="whole blocks"):
            loaded.model(torch.zeros(1, 4, dtype=torch.long), cache)


@pytest.mark.parametrize("model_type", ["llada", "Dream", "bert"])
def test_bidirectional_prefix_cache(model_type: str, tiny_checkpoint) -> None:
    """Prefix-cache mode: the prefix's keys come from a forward that also saw the block (as in
    Fast-dLLM), so re-running the unchanged block over the cache reproduces the exact forward; a
    changed block is then approximate (the prefix does not see the change)."""
    loaded = load_model(tiny_checkpoint(model_type, **CASES[model_type]))
    model = loaded.model
    prefixes, window = [10, 6], 5
    lens = [p + window for p in prefixes]
    ids = _ids(lens, loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=4)
    with torch.no_grad():
        cache = model.new_cache(2)
        exact = model(ids, cache, window_lens=torch.tensor(lens), commit=torch.tensor(prefixes))
        block = torch.stack([ids[r, p : p + window] for r, p in enumerate(prefixes)])
        again = model(block, cache)
        changed = block.clone()
        changed[:, 0] = loaded.config.mask_token_id - 1
        approx = model(changed, cache)
        recomputed = model(
            torch.cat(
                [torch.stack([ids[r, :p] for r, p in enumerate(prefixes) if p == 10]), changed[:1]],
                dim=1,
            ),
            model.new_cache(1),
        )
    for row, p in enumerate(prefixes):
        assert max_rel_error(again[row], exact[row, p : p + window]) <= 1e-5
    assert not torch.allclose(approx[0], again[0])
    assert max_rel_error(approx[0], recomputed[0, 10:]) > 1e-6  # approximate, not exact


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_low_precision_load_tracks_fp32(dtype: torch.dtype, tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint("sdar", **CASES["sdar"])
    ref, low = load_model(model_dir, dtype="float32"), load_model(model_dir, dtype=dtype)
    assert all(p.dtype == dtype for p in low.model.parameters())
    ids = _ids([12], ref.tokenizer.vocab_size, ref.config.mask_token_id, seed=5)
    with torch.no_grad():
        a = ref.model.logits(ref.model(ids, ref.model.new_cache(1)))
        b = low.model.logits(low.model(ids, low.model.new_cache(1)))
    assert b.dtype == dtype
    assert max_rel_error(b.float(), a) <= 5e-2


@pytest.mark.parametrize("case", ["llada", "Dream", "bert"])
def test_token_logits_match_full_logits(case: str, tiny_checkpoint) -> None:
    loaded = load_model(tiny_checkpoint(_model_type(case), **CASES[case]))
    ids = _ids([9], loaded.tokenizer.vocab_size, loaded.config.mask_token_id, seed=6)
    with torch.no_grad():
        hidden = loaded.model(ids, loaded.model.new_cache(1))[0]  # [L, H]
        full = loaded.model.logits(hidden)
        rows = torch.tensor([0, 3, 3, 8, 5])
        tokens = torch.tensor([5, 17, 50000, 0, loaded.config.mask_token_id])
        picked = loaded.model.token_logits(hidden, rows, tokens)
    assert max_rel_error(picked, full[rows, tokens]) <= 1e-5


def test_padding_past_the_last_position_is_harmless(tiny_checkpoint) -> None:
    """A row whose window ends exactly at the model's last position, batched with a row whose
    window is longer: the padding lanes of the first row lie past the position table (learned
    absolute positions) and must neither fail nor change its outputs."""
    loaded = load_model(tiny_checkpoint("bert", **CASES["bert"]))
    last = loaded.config.max_position_embeddings
    vocab, mask_id = loaded.tokenizer.vocab_size, loaded.config.mask_token_id
    prefix_ids = _ids([last - 12, 10], vocab, mask_id, seed=2)
    window_ids = _ids([12, 20], vocab, mask_id, seed=3)
    with torch.no_grad():
        cache = loaded.model.new_cache(2)
        loaded.model(prefix_ids, cache, window_lens=torch.tensor([last - 12, 10]),
                     commit=torch.tensor([last - 12, 10]))  # fmt: skip
        batch = loaded.model(window_ids, cache, window_lens=torch.tensor([12, 20]))
        alone_cache = loaded.model.new_cache(1)
        loaded.model(prefix_ids[:1], alone_cache, commit=last - 12)
        alone = loaded.model(window_ids[:1, :12], alone_cache)
    assert max_rel_error(batch[0, :12], alone[0]) <= 1e-5
