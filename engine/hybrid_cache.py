"""The cache of a hybrid GDN + attention model: attention KV per attention layer, and per GDN layer
the conv and recurrent state of each row's *committed* prefix.

Same contract as `KVCache` (which it wraps for the attention layers, so lengths, `last_hidden`,
growth and the views behave identically): `lengths[b]` tokens of row b are committed; a forward
runs a window on top of them and changes nothing a later forward reads until `commit`. For the
attention layers that holds because the window's keys go after the prefix. The GDN state has no
"after": it is one fixed-size summary of the prefix. So a GDN layer reads the committed state
(`conv[i]` `[B, C, K−1]`: the last K−1 inputs of the causal convolution; `state[i]` fp32
`[B, Hv, Dk, Dv]`: the delta-rule memory), never writes it, and hands the state after exactly
`counts[b]` window tokens to `stage`; `commit(counts)` installs what was staged. `begin(commit)`,
called by the model before each forward, says which counts the staged states must be computed
for, and `commit` refuses counts other than those. Recomputing the same block over the same prefix
any number of times is therefore exact, which the in-place cache of `transformers` is not.

`view(rows, start)` shares storage with this cache (forwards and commits on it land here; `clear`
empties its rows for new documents); `select` and `move_row` copy. A row's GDN state costs
Σ_layers (C·(K−1) + Hv·Dk·Dv) numbers whatever its length: that is what keeps the cost of a
denoising step flat in document length.
"""

from __future__ import annotations

import torch

from .cache import KVCache


class HybridCache:
    def __init__(self, kv: KVCache, conv: list[torch.Tensor], state: list[torch.Tensor]) -> None:
        self.kv = kv  # attention layers, indexed by attention slot
        self.conv = conv  # per GDN slot [B, C, K−1], model dtype
        self.state = state  # per GDN slot [B, Hv, Dk, Dv], fp32
        self._counts: torch.Tensor | None = None  # commit counts of the forward in flight
        self._staged: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    @classmethod
    def empty(
        cls,
        *,
        batch_size: int,
        capacity: int,
        num_attention_layers: int,
        num_kv_heads: int,
        head_dim: int,
        hidden_size: int,
        num_gdn_layers: int,
        conv_dim: int,
        conv_kernel: int,
        state_shape: tuple[int, int, int],  # (Hv, Dk, Dv)
        dtype: torch.dtype,
        device: torch.device | str,
        limit: int | None = None,
    ) -> HybridCache:
        kv = KVCache(
            num_layers=num_attention_layers,
            batch_size=batch_size,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            hidden_size=hidden_size,
            capacity=capacity,
            dtype=dtype,
            device=device,
            limit=limit,
        )
        conv_shape = (batch_size, conv_dim, conv_kernel - 1)
        conv = [torch.zeros(conv_shape, dtype=dtype, device=device) for _ in range(num_gdn_layers)]
        shape = (batch_size, *state_shape)
        state = [
            torch.zeros(shape, dtype=torch.float32, device=device) for _ in range(num_gdn_layers)
        ]
        return cls(kv, conv, state)

    # The KVCache surface the model and the sampler use.
    @property
    def lengths(self) -> torch.Tensor:
        return self.kv.lengths

    @property
    def last_hidden(self) -> torch.Tensor:
        return self.kv.last_hidden

    @property
    def has_last(self) -> torch.Tensor:
        return self.kv.has_last

    @property
    def batch_size(self) -> int:
        return self.kv.batch_size

    @property
    def capacity(self) -> int:
        return self.kv.capacity

    def reserve(self, needed: int) -> None:
        self.kv.reserve(needed)

    def write(
        self, slot: int, k_new: torch.Tensor, v_new: torch.Tensor, span: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`KVCache.write` for attention slot `slot`."""
        return self.kv.write(slot, k_new, v_new, span)

    # Staging the GDN states of the forward in flight.
    def begin(self, counts: torch.Tensor) -> None:
        """A forward that will commit `counts` `[B]` starts: forget anything staged before."""
        self._counts = counts
        self._staged = {}

    @property
    def pending_counts(self) -> torch.Tensor | None:
        """The counts GDN layers must compute committed states for; None when no row commits."""
        if self._counts is None or not bool((self._counts > 0).any()):
            return None
        return self._counts

    def stage(self, slot: int, conv: torch.Tensor, state: torch.Tensor) -> None:
        """GDN slot `slot`'s conv and recurrent state after each row's first `counts[b]` tokens."""
        self._staged[slot] = (conv, state)

    def commit(self, counts: torch.Tensor, hidden: torch.Tensor | None = None) -> None:
        """Make the first `counts[b]` window tokens of each row part of its prefix (see
        `KVCache.commit` for `hidden`); the GDN states are the ones staged for these counts."""
        counts = counts.to(self.lengths.device)
        if self.conv and bool((counts > 0).any()):
            staged_for = self._counts
            if (
                staged_for is None
                or not torch.equal(staged_for.to(counts.device), counts)
                or len(self._staged) != len(self.conv)
            ):
                raise RuntimeError(
                    f"HybridCache.commit({counts.tolist()}): the GDN states were staged for "
                    f"{None if staged_for is None else staged_for.tolist()} "
                    f"({len(self._staged)} of {len(self.conv)} layers); commit only through the "
                    "model's forward(..., commit=counts)"
                )
            for slot, (conv, state) in self._staged.items():
                self.conv[slot].copy_(conv)  # in place: a view commits into its parent's rows
                self.state[slot].copy_(state)
        self._counts = None
        self._staged = {}
        self.kv.commit(counts, hidden)

    # Row management, as KVCache.
    def select(self, rows: torch.Tensor) -> HybridCache:
        """A cache holding only `rows` (copies)."""
        rows = rows.to(self.lengths.device)
        conv = [t.index_select(0, rows) for t in self.conv]
        state = [t.index_select(0, rows) for t in self.state]
        return HybridCache(self.kv.select(rows), conv, state)

    def view(self, rows: int, start: int = 0) -> HybridCache:
        """Rows `[start, start + rows)`, sharing storage. Call `reserve` on this cache first."""
        end = start + rows
        return HybridCache(
            self.kv.view(rows, start),
            [t[start:end] for t in self.conv],
            [t[start:end] for t in self.state],
        )

    def clear(self) -> None:
        """`KVCache.clear`, and the GDN conv and recurrent states back to zero (a new document's
        linear attention starts from nothing)."""
        self.kv.clear()
        for t in (*self.conv, *self.state):
            t.zero_()

    def mark(self, row: int) -> tuple[torch.Tensor, ...]:
        """`KVCache.mark`, and copies of the row's GDN conv and recurrent states (a fixed-size
        summary of the prefix cannot be cut back, so it is kept: Σ_layers C·(K−1) + Hv·Dk·Dv
        numbers)."""
        return (*self.kv.mark(row), *(t[row].clone() for t in (*self.conv, *self.state)))

    def rewind(self, row: int, mark: tuple[torch.Tensor, ...]) -> None:
        """`KVCache.rewind`, the GDN states back to the marked ones."""
        self.kv.rewind(row, mark)
        for t, saved in zip((*self.conv, *self.state), mark[3:], strict=True):
            t[row] = saved

    def move_row(self, src: int, dst: int) -> None:
        """Overwrite row `dst` with row `src` (compaction after a row leaves)."""
        self.kv.move_row(src, dst)
        for buffers in (self.conv, self.state):
            for t in buffers:
                t[dst] = t[src]
