"""PyTorch reference for `masked_confidence`: the semantics, written the obvious way.

For output row n (logits row `rows[n]`, or n without `rows`) and token t < `vocab`, t is allowed iff
bit t % 32 of `bitmask[n, t // 32]` is set and its logit is not -inf. Over the allowed tokens, with
softmax restricted to them: `token` is the arg-max (lowest id among equal logits), `prob` its
probability, `margin` = prob − (probability of the second-best allowed token, 0 if there is none;
equal logits give margin 0), `entropy` = −Σ p log p. A row with no allowed token gets token −1 and
NaN for every float. This module materialises a masked fp32 copy of the `[N, vocab]` logits, which
is exactly the traffic the Triton kernel avoids; it is the tests' yardstick (the CPU backend is
`masked_confidence_torch`: the same results in fewer passes).
"""

from __future__ import annotations

import sys
from typing import NamedTuple

import torch


class MaskedConfidence(NamedTuple):
    """Per output row: best allowed token and its confidence under the allowed-only softmax."""

    token: torch.Tensor  # [N] int64, −1 where no token is allowed
    prob: torch.Tensor  # [N] float32
    margin: torch.Tensor  # [N] float32
    entropy: torch.Tensor | None  # [N] float32, None unless asked for


def _bit_table(device: torch.device) -> torch.Tensor:
    """bool [256, 8]: bit j of byte value b."""
    values = torch.arange(256, dtype=torch.int32, device=device)
    return ((values[:, None] >> torch.arange(8, dtype=torch.int32, device=device)) & 1).bool()


def unpack_bitmask(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """int32 [N, W] bitmask → bool [N, vocab] (token t ↔ bit t % 32 of word t // 32)."""
    if sys.byteorder == "little":
        # Bytes of a little-endian int32 hold bits 0-7, 8-15, ...: one table lookup per byte
        # is several times less work than shifting every token's word.
        as_bytes = bitmask.contiguous().view(torch.uint8).long()  # [N, 4W]
        bits = _bit_table(bitmask.device)[as_bytes]  # [N, 4W, 8]
        return bits.reshape(bitmask.shape[0], -1)[:, :vocab]
    ids = torch.arange(vocab, device=bitmask.device)  # [vocab]
    words = bitmask[:, ids // 32]  # [N, vocab]
    # Arithmetic shift of a negative int32 keeps bit 0 right, so bit 31 needs no special case.
    return ((words >> (ids % 32).to(torch.int32)) & 1).bool()


def nothing_allowed(n: int, entropy: bool, device: torch.device) -> MaskedConfidence:
    """The result of `n` rows that allow no token: token −1, NaN for every float."""
    nan = torch.full((n,), float("nan"), dtype=torch.float32, device=device)
    token = torch.full((n,), -1, dtype=torch.int64, device=device)
    return MaskedConfidence(token, nan, nan.clone(), nan.clone() if entropy else None)


def masked_confidence_ref(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None,
    vocab: int,
    entropy: bool,
) -> MaskedConfidence:
    """Reference on already-checked arguments; `vocab` ≤ min(logits.shape[1], 32 * bitmask W)."""
    n = bitmask.shape[0]
    device = logits.device
    if vocab == 0 or n == 0:
        return nothing_allowed(n, entropy, device)

    x = logits if rows is None else logits.index_select(0, rows)  # [N, V']
    x = x[:, :vocab].float()  # [N, vocab]
    x = x.masked_fill(~unpack_bitmask(bitmask, vocab), float("-inf"))  # [N, vocab]

    token = x.argmax(dim=1)  # [N], first maximum = lowest id
    top2 = x.topk(min(2, vocab), dim=1).values  # [N, 2]; values only, ties are fine here
    best = top2[:, 0]
    second = top2[:, 1] if vocab > 1 else torch.full_like(best, float("-inf"))
    empty = best == float("-inf")  # also rows whose allowed logits are all -inf

    log_total = torch.logsumexp(x, dim=1)  # [N]; -inf on empty rows
    prob = torch.exp(best - log_total)
    margin = prob - torch.exp(second - log_total)

    ent = None
    if entropy:
        logp = x - log_total[:, None]  # [N, vocab]
        ent = -torch.where(x > float("-inf"), logp.exp() * logp, 0.0).sum(dim=1)
        ent = ent.masked_fill(empty, float("nan"))

    token = token.masked_fill(empty, -1)
    prob = prob.masked_fill(empty, float("nan"))
    margin = margin.masked_fill(empty, float("nan"))
    return MaskedConfidence(token, prob, margin, ent)
