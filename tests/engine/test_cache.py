"""The KV cache's writes: rows copied by index equal the scatter they replace, at ragged and
repeated positions, on contiguous and strided buffers; positions past the capacity fail."""

from __future__ import annotations

import pytest
import torch

from decide.engine.cache import KVCache, _put
from decide.engine.model import place_rows


def _scattered(buffer: torch.Tensor, positions: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    b, h, lw, d = new.shape
    want = buffer.clone()
    return want.scatter_(2, positions[:, None, :, None].expand(b, h, lw, d), new)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_put_equals_scatter_at_ragged_and_repeated_positions(dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    buffer = torch.randn(3, 2, 20, 4, generator=gen).to(dtype)
    new = torch.randn(3, 2, 5, 4, generator=gen).to(dtype)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 9, 11, 13, 19], [5, 6, 6, 8, 10]])
    new[2, :, 2] = new[2, :, 1]  # a repeated position carries the same values (padded queries)
    want = _scattered(buffer, positions, new)
    got = buffer.clone()
    _put(got, positions, new)
    assert torch.equal(got, want)
    strided = torch.zeros(3, 2, 40, 4, dtype=dtype)[:, :, ::2]  # not contiguous: the scatter path
    strided.copy_(buffer)
    _put(strided, positions, new)
    assert torch.equal(strided, want)


def test_a_position_past_the_capacity_fails_instead_of_landing_in_another_head() -> None:
    buffer = torch.zeros(2, 2, 8, 4)
    with pytest.raises(ValueError, match="positions must be < 8"):
        _put(buffer, torch.tensor([[7], [8]]), torch.ones(2, 2, 1, 4))
    assert not buffer.any()


def test_cache_write_appends_after_each_rows_prefix() -> None:
    cache = KVCache(num_layers=1, batch_size=2, num_kv_heads=1, head_dim=2, hidden_size=4,
                    capacity=6, dtype=torch.float32, device="cpu")  # fmt: skip
    cache.lengths = torch.tensor([1, 3])
    k = torch.arange(8.0).view(2, 1, 2, 2)
    keys, _ = cache.write(0, k, -k, span=5)
    assert torch.equal(keys[0, 0, 1:3], k[0, 0]) and torch.equal(keys[1, 0, 3:5], k[1, 0])
    assert not keys[0, 0, 0].any() and not keys[0, 0, 3:].any()


def test_place_rows_equals_scatter() -> None:
    part = torch.randn(2, 3, 5)
    offsets = torch.tensor([[4, 0, 2], [1, 1, 3]])
    part[1, 1] = part[1, 0]
    want = torch.zeros(2, 6, 5).scatter_(1, offsets[..., None].expand(-1, -1, 5), part)
    assert torch.equal(place_rows(part, offsets, 6), want)


def test_a_view_cannot_grow_and_clear_empties_only_its_rows() -> None:
    """Growing a view would give it buffers of its own, and the forwards on it would no longer
    land in the cache it views: an error, not lost writes."""
    cache = KVCache(num_layers=1, batch_size=4, num_kv_heads=1, head_dim=2, hidden_size=2,
                    capacity=8, dtype=torch.float32, device="cpu")  # fmt: skip
    cache.lengths[:] = torch.tensor([3, 4, 5, 6])
    cache.has_last[:] = True
    view = cache.view(2, start=1)
    view.reserve(8)  # within capacity: nothing to do
    with pytest.raises(RuntimeError, match="cannot grow"):
        view.reserve(9)
    view.clear()
    assert cache.lengths.tolist() == [3, 0, 0, 6]
    assert cache.has_last.tolist() == [True, False, False, True]
    cache.reserve(20)  # the cache itself grows (a quarter more than needed)
    assert cache.capacity == 25


def test_growth_stops_at_the_model_positions(tiny_checkpoint) -> None:
    from decide.engine import load_model

    model = load_model(tiny_checkpoint("llada")).model
    limit = model.config.max_position_embeddings
    cache = model.new_cache(2, capacity=limit // 2 + 10)
    cache.reserve(limit // 2 + 11)  # doubling would pass the model's positions
    assert cache.capacity == limit
    view = cache.view(1)
    assert view.limit == limit and cache.select(torch.tensor([1])).limit == limit
    free = KVCache(num_layers=1, batch_size=1, num_kv_heads=1, head_dim=2, hidden_size=2,
                   capacity=10, dtype=torch.float32, device="cpu")  # fmt: skip
    free.reserve(11)
    assert free.capacity == 20  # no limit: doubling
    free.reserve(100)
    assert free.capacity == 125  # or a quarter more than needed
