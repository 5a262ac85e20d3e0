"""Which keys each query may see, and the attention call.

A forward processes a *window* of `Lw` new positions per row on top of that row's cached prefix
(`prefix_lens[b]` tokens). Row `b`'s window is `window_lens[b]` tokens long; positions past it are
padding that nothing attends to. Keys live at absolute positions `0 .. prefix_lens[b] + Lw`.

- Bidirectional families: query i sees every valid key (prefix + valid window).
- Block-causal families: query at absolute position p sees valid keys at positions q with
  `q // block_size <= p // block_size` (its own block both ways, earlier blocks, never later ones).

When every query of a row sees exactly the keys `[0, prefix + window)` (bidirectional families, or a
block-causal window that fits inside one model block), attention goes through
`decide.kernels.block_attention`; otherwise an explicit boolean mask is built and SDPA is used.

`plan_queries` plans a forward whose queries are only *some* positions of the window (`offsets`),
over keys of the whole window that the cache already holds from an earlier forward (the queried
positions' keys are rewritten): every query sees `[0, prefix + window)`, through the same kernel
(its "prefix" is then prefix + window and its block empty).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from decide.kernels import block_attention


@dataclass(frozen=True)
class AttentionPlan:
    prefix_lens: torch.Tensor  # [B] committed tokens per row
    window_lens: torch.Tensor  # [B] valid window tokens per row
    positions: torch.Tensor  # [B, Lw] absolute positions of the window
    span: int  # keys to read from the cache: max(prefix_lens) + Lw
    mask: torch.Tensor | None  # [B, 1, Lw, span] bool (True = attend), None on the fast path
    # The positions the model encodes (BERT's position embedding, RoPE) when they differ from
    # `positions`, which index the cache: a slot laid out short keeps the tokens after it at
    # the positions of its whole layout (`Sampler`, `RowState.position_shifts`).
    encoded: torch.Tensor | None = None
    # A forward of some positions per row whose rows have unequal counts (`forward_queries`)
    # runs *packed*: the tokens are one sequence `[1, N]` of the real queries, so position-wise
    # work (embeddings, projections, MLP, norms) does no padding; only attention and the cache
    # see the padded `[B, Q]` layout of `positions`. `packed` `[N]`: each real query's flat index
    # in that layout; `spread` `[B·Q]`: each padded entry's index in the packed sequence
    # (padding repeats a real query of its row). None: tokens are laid out as `positions`.
    packed: torch.Tensor | None = None
    spread: torch.Tensor | None = None
    # Packed on the CPU: (queries, keys) of each row, so attention runs row by row over just its
    # queries and valid keys (no padding, no mask) instead of one padded, masked call.
    ragged: tuple[tuple[int, int], ...] | None = None

    @property
    def encoded_positions(self) -> torch.Tensor:
        return self.positions if self.encoded is None else self.encoded

    @property
    def token_positions(self) -> torch.Tensor:
        """`encoded_positions` in the layout of the tokens (`[1, N]` when packed)."""
        return self.to_packed(self.encoded_positions)

    def to_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Token-layout `x` `[1, N, ...]` in the padded layout `[B, Q, ...]` (identity unless
        packed)."""
        if self.spread is None:
            return x
        b, q = self.positions.shape
        return x[0].index_select(0, self.spread).view(b, q, *x.shape[2:])

    def to_packed(self, x: torch.Tensor) -> torch.Tensor:
        """Padded-layout `x` `[B, Q, ...]` in the token layout `[1, N, ...]` (identity unless
        packed)."""
        if self.packed is None:
            return x
        return x.reshape(-1, *x.shape[2:]).index_select(0, self.packed)[None]


def plan_attention(
    prefix_lens: torch.Tensor,
    window_lens: torch.Tensor,
    window: int,
    block_size: int | None,
) -> AttentionPlan:
    """Masking for one forward. `block_size` None means bidirectional."""
    device = prefix_lens.device
    offsets = torch.arange(window, device=device)
    positions = prefix_lens[:, None] + offsets  # [B, Lw]
    span = int(prefix_lens.max().item()) + window
    if block_size is None or window <= block_size:
        # Bidirectional, or block-causal with the window inside one (aligned) model block.
        return AttentionPlan(prefix_lens, window_lens, positions, span, None)
    keys = torch.arange(span, device=device)  # [S]
    valid = keys[None, :] < (prefix_lens + window_lens)[:, None]  # [B, S]
    causal = (keys[None, None, :] // block_size) <= (positions[:, :, None] // block_size)
    mask = (valid[:, None, :] & causal)[:, None]  # [B, 1, Lw, S]
    return AttentionPlan(prefix_lens, window_lens, positions, span, mask)


def plan_queries(
    prefix_lens: torch.Tensor,
    window_lens: torch.Tensor,
    window: int,
    offsets: torch.Tensor,
    block_size: int | None,
) -> AttentionPlan:
    """Masking for a forward of the window positions `offsets` `[B, Q]` only (see above)."""
    positions = prefix_lens[:, None] + offsets  # [B, Q]
    span = int(prefix_lens.max().item()) + window
    if block_size is None or window <= block_size:
        ends = prefix_lens + window_lens
        return AttentionPlan(ends, torch.zeros_like(window_lens), positions, span, None)
    keys = torch.arange(span, device=prefix_lens.device)  # [S]
    valid = keys[None, :] < (prefix_lens + window_lens)[:, None]  # [B, S]
    causal = (keys[None, None, :] // block_size) <= (positions[:, :, None] // block_size)
    mask = (valid[:, None, :] & causal)[:, None]  # [B, 1, Q, S]
    return AttentionPlan(prefix_lens, window_lens, positions, span, mask)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: AttentionPlan) -> torch.Tensor:
    """Attention of window queries `[B, Hq, Lw, D]` over keys/values `[B, Hkv, span, D]`."""
    if plan.mask is None:
        if plan.ragged is not None:
            return _attend_rows(q, k, v, plan.ragged)
        return block_attention(q, k, v, plan.prefix_lens, plan.window_lens)
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=plan.mask, enable_gqa=q.shape[1] != k.shape[1]
    )


def _attend_rows(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ragged: tuple[tuple[int, int], ...]
) -> torch.Tensor:
    """`attend` one row at a time over its first `queries` queries and `keys` keys (a packed
    plan on the CPU); the padded queries are left as zeros, nothing reads them."""
    out = q.new_zeros(q.shape)
    gqa = q.shape[1] != k.shape[1]
    for b, (queries, keys) in enumerate(ragged):
        if keys:
            out[b, :, :queries] = F.scaled_dot_product_attention(
                q[b : b + 1, :, :queries], k[b : b + 1, :, :keys], v[b : b + 1, :, :keys],
                enable_gqa=gqa,
            )[0]  # fmt: skip
    return out
