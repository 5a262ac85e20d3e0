"""Key/value cache with a committed length per row, for ragged batches.

Layout per layer: `k`, `v` `[B, Hkv, capacity, D]`. Row `b` holds its committed tokens at positions
`[0, lengths[b])`. A forward writes its window's keys and values right after them, at
`[lengths[b], lengths[b] + window)`, and attends to them there; only `commit` makes them part of the
prefix, by advancing `lengths`. So a block can be recomputed any number of times over the same
clean prefix, and committing a decided block costs nothing beyond the forward that wrote it.

Buffers are zero-initialised rather than `empty`: masked keys still enter the attention product
(with weight 0), and garbage NaNs there would poison every output.

`last_hidden` serves families whose logits are shifted by one: the final hidden state of each row's
last committed position predicts the first token of the next window.
"""

from __future__ import annotations

import torch

from decide.kernels import checks


class KVCache:
    def __init__(
        self,
        *,
        num_layers: int,
        batch_size: int,
        num_kv_heads: int,
        head_dim: int,
        hidden_size: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device | str,
        limit: int | None = None,
    ) -> None:
        shape = (batch_size, num_kv_heads, max(capacity, 1), head_dim)
        # The most positions a row can hold (the model's): growing by doubling stops there.
        self.limit = limit
        self.k = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)  # [B]
        self.last_hidden = torch.zeros(batch_size, hidden_size, dtype=dtype, device=device)
        self.has_last = torch.zeros(batch_size, dtype=torch.bool, device=device)  # [B]
        self.is_view = False  # a view's buffers are slices of another cache's (`view`)

    @property
    def batch_size(self) -> int:
        return self.lengths.shape[0]

    @property
    def capacity(self) -> int:
        return self.k[0].shape[2] if self.k else 0

    def reserve(self, needed: int) -> None:
        """Grow every layer's buffers to hold at least `needed` positions (see below)."""
        if needed <= self.capacity:
            return
        if self.is_view:  # new buffers would no longer be the viewed cache's: writes would be lost
            raise RuntimeError(
                f"a cache view cannot grow ({self.capacity} → {needed} positions): reserve on the "
                "cache it views first"
            )
        # A quarter more than needed, at least double: the rows that come next rarely make it
        # grow again (each growth copies every layer's buffers); never past the model's positions.
        new_cap = max(needed + needed // 4, 2 * self.capacity)
        if self.limit is not None:
            new_cap = max(needed, min(new_cap, self.limit))
        for buffers in (self.k, self.v):
            for i, old in enumerate(buffers):
                grown = old.new_empty(*old.shape[:2], new_cap, old.shape[3])
                grown[:, :, : old.shape[2]] = old
                grown[:, :, old.shape[2] :].zero_()  # zeros, as the buffers start (see above)
                buffers[i] = grown

    def write(
        self,
        layer: int,
        k_new: torch.Tensor,
        v_new: torch.Tensor,
        span: int,
        positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store a window's keys/values `[B, Hkv, Lw, D]` after each row's committed prefix (or
        at the absolute `positions` `[B, Lw]`, for a forward of some window positions only) and
        return the layer's keys and values `[B, Hkv, span, D]` for attention."""
        lw = k_new.shape[2]
        if positions is None:
            positions = self.lengths[:, None] + torch.arange(lw, device=k_new.device)  # [B, Lw]
        # Under autocast the projections come out in a lower precision than the buffers.
        k_new, v_new = k_new.to(self.k[layer].dtype), v_new.to(self.v[layer].dtype)
        if self.k[layer].is_contiguous() and self.v[layer].is_contiguous():
            rows = _rows(self.k[layer], positions)  # the same rows in both buffers
            for buffer, new in ((self.k[layer], k_new), (self.v[layer], v_new)):
                buffer.view(-1, buffer.shape[3]).index_copy_(0, rows, new.reshape(-1, new.shape[3]))
        else:
            _put(self.k[layer], positions, k_new)
            _put(self.v[layer], positions, v_new)
        return self.k[layer][:, :, :span], self.v[layer][:, :, :span]

    def commit(self, counts: torch.Tensor, hidden: torch.Tensor | None = None) -> None:
        """Make the first `counts[b]` window positions of each row part of its prefix.

        `hidden` `[B, Lw, H]` (the window's final hidden states) records, for rows that commit
        anything, the hidden state of their new last position.
        """
        counts = counts.to(self.lengths.device)
        if hidden is not None:
            rows = torch.nonzero(counts > 0).flatten()
            if rows.numel():
                self.last_hidden[rows] = hidden[rows, counts[rows] - 1].to(self.last_hidden.dtype)
                self.has_last[rows] = True
        self.lengths += counts

    def select(self, rows: torch.Tensor) -> KVCache:
        """A cache holding only `rows` (e.g. the documents still being decided)."""
        rows = rows.to(self.lengths.device)
        out = KVCache.__new__(KVCache)
        out.k = [t.index_select(0, rows) for t in self.k]
        out.v = [t.index_select(0, rows) for t in self.v]
        out.lengths = self.lengths.index_select(0, rows)
        out.last_hidden = self.last_hidden.index_select(0, rows)
        out.has_last = self.has_last.index_select(0, rows)
        out.is_view = False
        out.limit = self.limit
        return out

    def view(self, rows: int, start: int = 0) -> KVCache:
        """Rows `[start, start + rows)`, sharing storage: forwards and commits on the view land
        here. Call `reserve` on this cache first; a view cannot grow."""
        end = start + rows
        out = KVCache.__new__(KVCache)
        out.k = [t[start:end] for t in self.k]
        out.v = [t[start:end] for t in self.v]
        out.lengths = self.lengths[start:end]
        out.last_hidden = self.last_hidden[start:end]
        out.has_last = self.has_last[start:end]
        out.is_view = True
        out.limit = self.limit
        return out

    def clear(self) -> None:
        """Empty every row (on a view: its rows), for new documents: nothing committed, no last
        hidden state. Keys and values left behind stay: attention never reads past a row's
        committed prefix and window, and they are finite (see the module docstring)."""
        self.lengths.zero_()
        self.has_last.zero_()

    def mark(self, row: int) -> tuple[torch.Tensor, ...]:
        """What `rewind` needs to bring row `row` back to its committed prefix of now: its length
        and last hidden state (keys and values below that length are never written again: a
        forward writes after the committed prefix only)."""
        return (self.lengths[row].clone(), self.last_hidden[row].clone(),
                self.has_last[row].clone())  # fmt: skip

    def rewind(self, row: int, mark: tuple[torch.Tensor, ...]) -> None:
        """Row `row` back to the committed prefix it had at `mark` (which must not be longer
        than its prefix now): later commits are forgotten."""
        length, last, has = mark[:3]
        if int(length) > int(self.lengths[row]):
            raise ValueError(
                f"rewind to {int(length)} tokens past the {int(self.lengths[row])} held"
            )
        self.lengths[row] = length
        self.last_hidden[row] = last
        self.has_last[row] = has

    def move_row(self, src: int, dst: int) -> None:
        """Overwrite row `dst` with row `src` (compaction after a row leaves), window keys
        after the prefix included."""
        span = self.capacity
        for buffers in (self.k, self.v):
            for t in buffers:
                t[dst, :, :span] = t[src, :, :span]
        self.lengths[dst] = self.lengths[src]
        self.last_hidden[dst] = self.last_hidden[src]
        self.has_last[dst] = self.has_last[src]


def _rows(buffer: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Row indices `[B·H·Lw]` of `positions` `[B, Lw]` in the `[B·H·C, D]` view of a contiguous
    `buffer` `[B, H, C, D]`. Writing by `index_copy_` over these rows costs a twelfth of
    `scatter_` along the positions on CPU (2.4 against 0.2 ms per layer's keys at batch 16,
    bf16: a quarter of a decoding step). Repeated positions carry equal values (a padded query
    repeats a real one), so which copy lands does not matter."""
    b, h, capacity, _ = buffer.shape
    # Out of range, a row index would land in the next head's rows instead of failing.
    in_range = positions < capacity
    checks.value("KVCache.write", in_range, f"positions must be < {capacity}", positions)
    heads = torch.arange(b * h, device=buffer.device).view(b, h, 1) * capacity
    return (heads + positions[:, None, :]).reshape(-1)


def _put(buffer: torch.Tensor, positions: torch.Tensor, new: torch.Tensor) -> None:
    """`buffer[b, h, positions[b, l]] = new[b, h, l]` for `buffer` `[B, H, C, D]`, `new`
    `[B, H, Lw, D]`: by rows where the buffer is contiguous (`_rows`), else by `scatter_`."""
    b, h, lw, d = new.shape
    if not buffer.is_contiguous():
        buffer.scatter_(2, positions[:, None, :, None].expand(b, h, lw, d), new)
        return
    buffer.view(-1, d).index_copy_(0, _rows(buffer, positions), new.reshape(-1, d))
