"""`masked_confidence` on the CPU (and any device without Triton): the reference's semantics
(`masked_confidence_ref`) in fewer passes over the `[N, vocab]` logits.

The reference masks with a boolean copy and then runs arg-max, top-2 and logsumexp over it: five
passes, two of them slow on CPUs (a boolean `masked_fill`, and `exp` of −inf in logsumexp). Here
the mask becomes an additive bias (0 or −inf) straight from the bitmask's bytes through a
256 × 8 table, added to the logits in one pass; the vectorised softmax then gives every allowed
token's probability, `max` over the masked logits the best token (lowest id among equal logits,
as the reference), and `max` over the probabilities with the best one knocked out the runner-up.
Rows go in chunks small enough for their temporaries to stay in cache. About 4× less CPU time
than the reference at 240-600 rows × 30,522 tokens (docs/benchmarks.md); equal to it within fp32
rounding (tests/kernels/test_masked_confidence.py).
"""

from __future__ import annotations

import functools
import math
import sys

import torch

from decide.kernels.masked_confidence_ref import (
    MaskedConfidence,
    _bit_table,
    nothing_allowed,
    unpack_bitmask,
)

CHUNK_ELEMENTS = 1 << 19  # logits per chunk of rows (2 MB of fp32)


@functools.cache
def _bias_table(device: torch.device) -> torch.Tensor:
    """float32 [256, 8]: 0 where bit j of byte value b is set, −inf where it is not."""
    return torch.where(_bit_table(device), 0.0, -math.inf).to(torch.float32)


def _bias(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """int32 [N, W] bitmask → float32 [N, vocab]: 0 for allowed tokens, −inf for the others."""
    n = bitmask.shape[0]
    if sys.byteorder != "little":
        allowed = unpack_bitmask(bitmask, vocab)
        return torch.zeros(allowed.shape, device=bitmask.device).masked_fill_(~allowed, -math.inf)
    as_bytes = bitmask.contiguous().view(torch.uint8).reshape(-1).long()  # [N·4W]
    table = _bias_table(bitmask.device)
    return table.index_select(0, as_bytes).reshape(n, -1)[:, :vocab]


def masked_confidence_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None,
    vocab: int,
    entropy: bool,
) -> MaskedConfidence:
    """`masked_confidence_ref`'s results (same contract, already-checked arguments)."""
    n = bitmask.shape[0]
    device = logits.device
    if vocab == 0 or n == 0:
        return nothing_allowed(n, entropy, device)

    token = torch.empty(n, dtype=torch.int64, device=device)
    prob = torch.empty(n, dtype=torch.float32, device=device)
    margin = torch.empty(n, dtype=torch.float32, device=device)
    ent = torch.empty(n, dtype=torch.float32, device=device) if entropy else None
    # On a CPU, rows in chunks of about CHUNK_ELEMENTS logits: the three [rows, vocab]
    # temporaries of a chunk stay in cache (600 rows × 30,522 at once: 2.9× slower per row).
    step = max(1, CHUNK_ELEMENTS // vocab) if device.type == "cpu" else n
    for a in range(0, n, step):
        b = min(n, a + step)
        x = logits[a:b] if rows is None else logits.index_select(0, rows[a:b])
        _rows(x, bitmask[a:b], vocab, token[a:b], prob[a:b], margin[a:b],
              None if ent is None else ent[a:b])  # fmt: skip
    return MaskedConfidence(token, prob, margin, ent)


def _rows(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    vocab: int,
    token: torch.Tensor,
    prob: torch.Tensor,
    margin: torch.Tensor,
    ent: torch.Tensor | None,
) -> None:
    """One chunk of rows, written into the result slices."""
    x = logits[:, :vocab].float() + _bias(bitmask, vocab)  # [rows, vocab], a new tensor
    best, best_token = x.max(dim=1)  # first maximum = lowest id
    empty = ~(best > -math.inf)  # no allowed token, or only −inf logits (NaN too)
    p = torch.softmax(x, dim=1)  # NaN on empty rows
    # The softmax divides by a sum accumulated in plain fp32 lanes, off by ~1e-5 over 150k
    # tokens: renormalise by the sum of its output, which torch accumulates in cascade.
    p.div_(p.sum(dim=1, keepdim=True))
    best_prob = p.gather(1, best_token[:, None]).squeeze(1)
    if ent is not None:
        ent.copy_(torch.special.entr(p).sum(dim=1).masked_fill_(empty, float("nan")))  # entr(0) = 0
    p.scatter_(1, best_token[:, None], -1.0)  # knock the best out; an equal runner-up stays
    second = p.max(dim=1).values.clamp_min(0.0) if vocab > 1 else torch.zeros_like(best_prob)
    token.copy_(best_token.masked_fill(empty, -1))
    prob.copy_(best_prob.masked_fill(empty, float("nan")))
    margin.copy_((best_prob - second).masked_fill(empty, float("nan")))
