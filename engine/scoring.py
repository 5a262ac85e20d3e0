"""Scoring a step's open positions and finite slots into commit items (`items.py`).

Contract. `score_positions` gives one `PositionItem` per open position: its best allowed token
(or, for a row that samples, a token drawn at the temperature) and that token's probability under
the softmax restricted to the position's allowed tokens. `score_options` gives one `OptionItem`
per finite slot: its best (or sampled) option and that option's probability among the options,
read through the options' prefix tree (`_trie_scores`) from the logits of the options' own
tokens only. Rows whose slot mask cannot be filled (`InfeasibleSlot`) get their error set.

The restricted head: for a position whose token mask allows few tokens (digits, punctuation, the
filler after a value has ended), the best allowed token and its probability under the softmax
restricted to the allowed tokens (what `masked_confidence` returns) need only the allowed tokens'
logits: one product with the gathered rows of the output embedding (`subset_logits`) over the
union of the allowed tokens, instead of the full `[V, H]` head and a `[V]` masked softmax. Both
compute the same quantity (the probability is normalised over the allowed set in either path),
so the restricted head is exact up to the rounding of a narrower matrix product (same token,
confidence within 1e-6 in the tests). A position allowing exactly one token gets it with
probability exactly 1.0, which is what the masked softmax over one finite logit returns,
without computing any logit.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

import torch

from decide.kernels import masked_confidence

from .constraints import InfeasibleSlot
from .items import Item, OptionItem, PositionItem
from .row_state import RowState

# Positions whose mask allows at most this many tokens take the restricted head; see
# docs/benchmarks.md ("Scoring only allowed tokens") for the measurement behind the number.
RESTRICTED_LIMIT = 1024


class SubsetHead(Protocol):
    def subset_logits(self, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor: ...


class PositionHead(SubsetHead, Protocol):
    @property
    def device(self) -> torch.device: ...

    def logits(self, hidden: torch.Tensor) -> torch.Tensor: ...


def allowed_counts(bitmask: torch.Tensor) -> torch.Tensor:
    """Set bits `[N]` of int32 bitmask rows `[N, W]` (a SWAR popcount per word, no unpacking)."""
    x = bitmask
    x = x - ((x >> 1) & 0x55555555)  # the masks clear the sign bits the shifts copy
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    return ((x * 0x01010101) >> 24).sum(1)  # the top byte holds the word's count (≤ 32)


def allowed_pairs(bitmask: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(entry, token) `[Q]` of every allowed token below `vocab` of int32 bitmask rows `[N, W]`,
    ordered by entry, then token; only the non-zero words are unpacked."""
    entry, word = (bitmask != 0).nonzero(as_tuple=True)
    words = bitmask[entry, word]
    bits = (words[:, None] >> torch.arange(32, dtype=torch.int32, device=bitmask.device)) & 1
    pair, bit = bits.nonzero(as_tuple=True)
    token = word[pair] * 32 + bit
    keep = token < vocab
    return entry[pair][keep], token[keep]


def restricted_confidence(
    model: SubsetHead, states: torch.Tensor, entry: torch.Tensor, token: torch.Tensor, n: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Best allowed token `[n]` (lowest id among equal logits) and its probability `[n]` under the
    softmax over the allowed tokens, for `n` entries with hidden states `states` `[n, H]` and
    allowed pairs (`entry`, `token`) from `allowed_pairs`; entries with no allowed token (or only
    -inf logits) get token -1 and NaN, as `masked_confidence`. Third: each pair's logit `[Q]`
    (fp32; 0 for an entry's only allowed token, whose logit is never needed)."""
    device = states.device
    counts = torch.bincount(entry, minlength=n)
    best = torch.full((n,), -1, dtype=torch.long, device=device)
    prob = torch.full((n,), float("nan"), dtype=torch.float32, device=device)
    pair_logits = torch.zeros(token.shape, dtype=torch.float32, device=device)
    single = counts == 1
    one = single[entry]
    best[entry[one]] = token[one]
    prob[single] = 1.0
    many = ~one
    if bool(many.any()):
        e, t = entry[many], token[many]
        scored, local = torch.unique(e, return_inverse=True)  # entries with ≥ 2 allowed tokens
        # One product over the union of the allowed tokens, then each pair's entry: far
        # cheaper per token than a gather and dot product per pair.
        union, column = torch.unique(t, return_inverse=True)
        x = model.subset_logits(states[scored], union).float()[local, column]  # [Q]
        pair_logits[many] = x
        m = scored.numel()
        top = torch.full((m,), float("-inf"), device=device).scatter_reduce(0, local, x, "amax")
        finite = top > float("-inf")
        shifted = torch.where(finite[local], x - top[local], float("-inf"))
        mass = torch.zeros(m, device=device).index_add_(0, local, shifted.exp())
        big = torch.iinfo(torch.long).max
        at_top = (x == top[local]) & finite[local]
        first = torch.full((m,), big, dtype=torch.long, device=device).scatter_reduce(
            0, local, torch.where(at_top, t, big), "amin"
        )
        # exp(best - logsumexp) as masked_confidence computes it: logsumexp = top + log(mass).
        p = torch.exp(top - (top + mass.log()))
        best[scored] = torch.where(finite, first, -1)
        prob[scored] = torch.where(finite, p, float("nan"))
    return best, prob, pair_logits


class OptionHead(Protocol):
    def token_logits(
        self, hidden: torch.Tensor, rows: torch.Tensor, tokens: torch.Tensor
    ) -> torch.Tensor: ...


def score_options(
    model: OptionHead,
    rows: Sequence[RowState],
    option_slots: list[tuple[int, int, list[int], Sequence[Sequence[int]]]],
    hidden: torch.Tensor,
    starts: list[int],
    temperature: float,
) -> Iterator[tuple[int, OptionItem]]:
    """One item per finite slot: its best (or sampled) option and that option's probability
    among the options, read through the options' prefix tree (`_trie_scores`) from the
    logits of the options' own tokens only."""
    if not option_slots:
        return
    # Every (open position, candidate token) pair of every finite slot, scored in one gather.
    pair_rows: list[int] = []  # index into `picks`
    pair_tokens: list[int] = []
    picks: list[tuple[int, int]] = []
    option_pairs: list[list[int]] = []  # per option of every slot: its pairs, left to right
    option_tree: list[int] = []  # per option: its slot's index in `layout`
    layout = []
    for i, slot_index, positions, options in option_slots:
        start = rows[i].slot_starts[slot_index]
        offsets = [pos - start for pos in positions]
        opts = [[opt[o] for o in offsets] for opt in options]  # [K][m]
        pairs: list[list[int]] = [[] for _ in opts]
        for j, pos in enumerate(positions):
            candidates: dict[int, int] = {}  # token → its pair index
            for k, opt in enumerate(opts):
                n = candidates.get(opt[j])
                if n is None:
                    n = candidates[opt[j]] = len(pair_tokens)
                    pair_tokens.append(opt[j])
                    pair_rows.append(len(picks))
                pairs[k].append(n)
            picks.append((i, pos - starts[i]))
        layout.append((i, slot_index, positions, opts, options, len(option_pairs)))
        option_tree.extend([len(layout) - 1] * len(opts))
        option_pairs.extend(pairs)
    device = hidden.device
    index = torch.tensor(picks, device=device)
    states = hidden[index[:, 0], index[:, 1]]  # [P, H]
    scores_flat = (
        model.token_logits(
            states,
            torch.tensor(pair_rows, device=device),
            torch.tensor(pair_tokens, device=device),
        )
        .float()
        .cpu()
    )  # [Q]
    depth = max(len(p) for p in option_pairs)
    totals = _trie_scores(
        scores_flat,
        torch.tensor([p + [-1] * (depth - len(p)) for p in option_pairs], dtype=torch.long),
        torch.tensor(option_tree, dtype=torch.long),
    )
    for i, slot_index, positions, opts, full, first in layout:
        total = totals[first : first + len(opts)]
        row = rows[i]
        if row.rng is not None:
            p = torch.softmax(total / temperature, -1)
            k = int(torch.multinomial(p, 1, generator=row.rng))
        else:
            p = torch.softmax(total, -1)
            k = int(torch.argmax(p))  # first of equals: lowest option index
        order = torch.argsort(p, descending=True, stable=True).tolist()
        ranked = tuple((full[j], float(p[j])) for j in order)
        yield i, OptionItem(float(p[k]), slot_index, opts[k], positions, ranked)


def _trie_scores(scores: torch.Tensor, pairs: torch.Tensor, trees: torch.Tensor) -> torch.Tensor:
    """Log-probability `[K]` of each option, read left to right through its slot's prefix tree.

    `scores[q]` is the logit of candidate pair q (one open position, one token); `pairs[k]` lists
    option k's pairs left to right, padded with -1 past its slot's open positions; `trees[k]` is
    option k's slot. All slots' trees are walked together, one position deep at a time.

    At every open position where the options that share this option's earlier tokens still
    disagree, the option gets the log-softmax of its token over theirs. Positions where they
    agree cost nothing. Scoring every position over all options' tokens instead (a product of
    unconditioned marginals) is biased: when every position is masked, a late position's
    marginal mixes all options, so an option whose tail resembles the frequent options' tails
    wins regardless of the position where the options actually differ.
    """
    total = torch.zeros(pairs.shape[0])
    node = trees.clone()  # each option's prefix node; the roots are the slots
    q = scores.numel()
    for j in range(pairs.shape[1]):
        live = (pairs[:, j] >= 0).nonzero().squeeze(1)
        pair, here = pairs[live, j], node[live]
        # The distinct (node, pair) combinations are the edges out of this depth's nodes; their
        # dense index is each option's child node for the next depth.
        edges, child = torch.unique(here * q + pair, return_inverse=True)
        parent, edge_scores = edges // q, scores[edges % q]
        nodes = int(here.max()) + 1
        top = torch.full((nodes,), float("-inf")).scatter_reduce(0, parent, edge_scores, "amax")
        mass = torch.zeros(nodes).index_add_(0, parent, (edge_scores - top[parent]).exp())
        # log-sum-exp over each node's distinct tokens: exactly 0 where a node has one token.
        total[live] += scores[pair] - (top + mass.log())[here]
        node[live] = child
    return total


def unpack_bitmask(words: torch.Tensor, vocab: int) -> torch.Tensor:
    """int32 words `[W]` → bool `[vocab]` (tokens past 32·W are not allowed)."""
    bits = torch.arange(32, dtype=torch.int32)
    allowed = ((words[:, None] >> bits) & 1).bool().flatten()  # [32 W]
    out = torch.zeros(vocab, dtype=torch.bool)
    n = min(vocab, allowed.numel())
    out[:n] = allowed[:n]
    return out


def score_positions(
    model: PositionHead,
    rows: Sequence[RowState],
    dense: list[tuple[int, int]],
    hidden: torch.Tensor,
    starts: list[int],
    items: dict[int, list[Item]],
    *,
    head_limit: int,
    max_steps: int | None,
    temperature: float,
    width: int,
    vocab: int,
) -> torch.Tensor | None:
    """Append to `items[i]` one `PositionItem` per open position `(i, pos)` of `dense` (row
    index, absolute position; `starts[i]` is row i's first position in `hidden`; `vocab` is the
    head's width). Positions
    allowing at most `head_limit` tokens take the restricted head (`restricted_confidence`),
    unless their row samples (that needs full rows); the others take the full head and
    `masked_confidence`. A row reaching its step cap this step keeps, for its forced fill, each
    position's mask and, where it took the restricted head, its allowed tokens' logits
    (`PositionItem.allowed`). Returns the full head's logits (row = the item's `logits_row`;
    restricted items carry -1), or None when no position took the full head."""
    device = model.device
    bitmask, failed = bitmasks(rows, dense, width)
    for i, message in failed.items():
        rows[i].result.error = message
    # Greedy rows whose step reaches the cap: their items keep what the forced fill reads.
    capped = [
        r.rng is None and max_steps is not None and r.unit_steps + 1 >= max_steps for r in rows
    ]
    index = torch.tensor([(i, pos - starts[i]) for i, pos in dense], device=device)
    states = hidden[index[:, 0], index[:, 1]]  # [N, H]
    masks = bitmask.to(device)
    full = allowed_counts(masks) > head_limit
    full |= torch.tensor([rows[i].rng is not None for i, _ in dense], device=device)
    tokens = torch.empty(len(dense), dtype=torch.long, device=device)
    probs = torch.empty(len(dense), dtype=torch.float32, device=device)
    logits = None
    at = full.nonzero().squeeze(1)
    if at.numel():
        # In the model's dtype: `masked_confidence` widens each chunk of rows to fp32 itself, and
        # a copy of every row at once costs more than the head on a CPU (bf16, 840 × 30,522).
        logits = model.logits(states[at])  # [F, V]
        best = masked_confidence(logits, masks[at])
        tokens[at], probs[at] = best.token, best.prob
    few = (~full).nonzero().squeeze(1)
    kept: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # dense index -> tokens, logits
    if few.numel():
        entry, token = allowed_pairs(masks[few], vocab)  # entry: index among `few`
        t, p, pair_logits = restricted_confidence(model, states[few], entry, token, few.numel())
        tokens[few], probs[few] = t, p
        # A forced fill re-scores a position under narrower masks: its allowed tokens' logits
        # are all it needs (pairs come ordered by entry).
        forced = {k for k, n in enumerate(few.tolist()) if capped[dense[n][0]]}
        if forced:
            counts = torch.bincount(entry, minlength=few.numel()).tolist()
            pairs = zip(token.split(counts), pair_logits.split(counts), strict=True)
            for k, (n, pair) in enumerate(zip(few.tolist(), pairs, strict=True)):
                if k in forced:
                    kept[n] = pair
    row_of = torch.where(full, torch.cumsum(full, 0) - 1, -1).tolist()
    for n, (i, pos), token_n, prob_n in zip(
        range(len(dense)), dense, tokens.tolist(), probs.tolist(), strict=True
    ):
        rng = rows[i].rng
        mask = None  # kept only where the forced fill reads it: a greedy row at its step cap
        if rng is not None:
            assert logits is not None
            allowed = unpack_bitmask(bitmask[n], vocab)
            token_n, prob_n = sample_token(
                logits[row_of[n]].float().cpu(), allowed, temperature, rng
            )
        elif capped[i]:
            mask = bitmask[n]
        items[i].append(PositionItem(prob_n, pos, token_n, row_of[n], mask, kept.get(n)))
    return logits


def bitmasks(
    rows: Sequence[RowState], entries: list[tuple[int, int]], width: int
) -> tuple[torch.Tensor, dict[int, str]]:
    """Bitmask rows `[N, W]` for the entries (row index, absolute position), from one
    `fill_bitmask` per touched slot, and the error message of each row whose slot is infeasible
    (its rows are all-ones so the row stays scorable; its result is discarded)."""
    out = torch.zeros((len(entries), width), dtype=torch.int32)
    filled: dict[tuple[int, int], torch.Tensor] = {}
    failed: dict[int, str] = {}
    for n, (i, pos) in enumerate(entries):
        row = rows[i]
        slot_index, offset = row.masked[pos]
        key = (i, slot_index)
        if key not in filled:
            constraint = row.slots()[slot_index].constraint
            buffer = torch.zeros((constraint.length, width), dtype=torch.int32)
            try:
                constraint.fill_bitmask(buffer)
            except InfeasibleSlot as exc:
                failed[i] = f"block {row.block}, slot {slot_index}: {exc}"
                buffer.fill_(-1)
            filled[key] = buffer
        out[n] = filled[key][offset]
    return out, failed


def sample_token(
    logits: torch.Tensor, allowed: torch.Tensor, temperature: float, rng: torch.Generator
) -> tuple[int, float]:
    """Draw a token from the softmax of `logits` `[V]` at `temperature` over the `allowed` tokens
    (bool `[V]`); returns the token and its probability under that softmax."""
    scaled = (logits / temperature).masked_fill(~allowed, float("-inf"))
    p = torch.softmax(scaled, dim=-1)
    u = torch.rand((), generator=rng).item()
    token = int(torch.searchsorted(p.cumsum(-1), torch.tensor([u])).clamp(max=p.numel() - 1))
    while not allowed[token]:  # rounding can land the draw on a zero-probability tail
        token -= 1
    return token, float(p[token])
