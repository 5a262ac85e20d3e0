"""Decoding state of one document while the sampler works on it.

Contract. A `RowState` holds the document's token sequence (prompt, decided blocks, the current
block with its open slot positions set to the mask token), which block and which *unit* of it is
being decided, the open positions (absolute position → (slot, offset)), the log-probability each
slot's commits have accumulated, how many tokens its cache holds and its lane in the main cache.
Units are the whole block for bidirectional families and, for block-causal ones, the model blocks
(`block_size` positions, clipped to the block) that hold answer positions, decided left to right.
Finishing a block writes its tokens and per-slot results into the row's `DecodeResult`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate

import torch

from .requests import Block, BlockStats, DecodeRequest, DecodeResult, Slot, SlotResult


class RowState:
    """Decoding state of one document; see the module docstring."""

    def __init__(self, request: DecodeRequest, mask_id: int) -> None:
        self.request = request
        self.blocks = list(request.blocks)  # as decided: a block with grown slots replaces its own
        self.result = DecodeResult(request=request)
        self.mask_id = mask_id
        self.seq: list[int] = list(request.prompt)
        self.block = -1
        self.block_start = self.block_end = len(self.seq)
        self.units: list[tuple[int, int]] = []
        # Steps taken on the current unit: the step cap (`SamplerConfig.max_steps`) counts these,
        # afresh for each unit and for a block laid out again with grown slots.
        self.unit_steps = 0
        self.masked: dict[int, tuple[int, int]] = {}  # absolute position -> (slot, offset)
        self.slot_starts: list[int] = []
        self.slot_logp: list[float] = []
        self.slot_ranked: list[tuple] = []  # per slot: its options ranked at commit, if any
        self.cached = 0  # tokens committed to this row's cache
        # The window [start, end) whose keys/values the cache holds after the prefix, from the
        # row's last forward, and the tokens they were computed from (`Sampler._partial`).
        self.window_seen: tuple[int, int] | None = None
        self.window_tokens: list[int] = []
        self.lane: int | None = None
        self.rng: torch.Generator | None = None
        # Block-causal families: the cache's mark (`KVCache.mark`) of this row after its current
        # block's first forward, and how many tokens it had committed then (`Sampler._rewind`).
        self.mark: tuple[torch.Tensor, ...] | None = None
        self.mark_cached = 0
        self.mark_block = -1

    @property
    def stats(self) -> BlockStats:
        return self.result.stats[self.block]

    @property
    def unit(self) -> tuple[int, int]:
        return self.units[0]

    def slots(self) -> Sequence[Slot]:
        return self.blocks[self.block].slots

    def start_block(self, block_size: int | None) -> bool:
        """Append the next block; False when every block is decided."""
        if self.block >= 0:
            self._finish_block()
        self.block += 1
        self.mark = None  # the last block's (a hybrid's copies GDN states: let them go)
        if self.block >= len(self.blocks):
            return False
        block = self.blocks[self.block]
        self.block_start = len(self.seq)
        self.seq.extend(block.tokens)
        self.block_end = len(self.seq)
        self._open(block, range(len(block.slots)), block_size)
        self.slot_logp = [0.0] * len(block.slots)
        self.slot_ranked = [()] * len(block.slots)
        self.result.stats.append(BlockStats(answer_tokens=len(self.masked)))
        return True

    def regrow(self, block_size: int | None, max_length: int) -> bool:
        """Once every position of the current block is committed: when slots ask to grow
        (their constraints' optional `grown()`, for a value that fills a slot laid out short),
        lay the block out again with the grown slots, open only their positions (the other
        slots keep their committed tokens, which the grown ones now see) and return True; the
        row's prefix must then be rebuilt. False, changing nothing, when no slot grows or the
        grown block would not fit the model's `max_length` positions (the values stand)."""
        block = self.blocks[self.block]
        grown = {}
        for i, slot in enumerate(block.slots):
            grow = getattr(slot.constraint, "grown", None)
            new = grow() if grow is not None else None
            if new is not None:
                grown[i] = new
        if not grown:
            return False
        bigger = block.regrown(grown)
        total = len(self.request.prompt) + sum(len(b.tokens) for b in self.blocks)
        if total + len(bigger.tokens) - len(block.tokens) > max_length:
            return False
        old = [
            self.seq[s : s + slot.constraint.length]
            for s, slot in zip(self.slot_starts, block.slots, strict=True)
        ]
        self.blocks[self.block] = bigger
        del self.seq[self.block_start :]
        self.seq.extend(bigger.tokens)
        self.block_end = len(self.seq)
        self._open(bigger, sorted(grown), block_size)
        for i, slot in enumerate(bigger.slots):
            if i not in grown:
                start = self.slot_starts[i]
                self.seq[start : start + slot.constraint.length] = old[i]
            else:
                self.slot_logp[i] = 0.0
                self.slot_ranked[i] = ()
        self.stats.answer_tokens = sum(s.constraint.length for s in bigger.slots)
        self.stats.regrown += 1
        self.window_seen = None
        return True

    def may_grow(self) -> bool:
        """Whether a slot of the current block is laid out short (it may ask to grow)."""
        return any(
            getattr(slot.constraint, "encoded_length", slot.constraint.length)
            > slot.constraint.length
            for slot in self.slots()
        )

    def next_unit(self) -> None:
        """The current unit is decided: move on to the next one of the block (if any)."""
        self.units.pop(0)
        self.unit_steps = 0

    def _open(self, block: Block, slots: Sequence[int], block_size: int | None) -> None:
        """Mask the positions of `block`'s slots `slots` and lay out the units that decide them."""
        self.masked = {}
        self.unit_steps = 0
        self.slot_starts = [self.block_start + slot.start for slot in block.slots]
        for i in slots:
            start = self.slot_starts[i]
            for offset in range(block.slots[i].constraint.length):
                self.seq[start + offset] = self.mask_id
                self.masked[start + offset] = (i, offset)
        if block_size is None:
            self.units = [(self.block_start, self.block_end)]
        else:  # the model blocks holding answer slots, each clipped to this block
            first = {p // block_size for p in self.masked}
            self.units = [
                (max(b * block_size, self.block_start), min((b + 1) * block_size, self.block_end))
                for b in sorted(first)
            ]

    def _finish_block(self) -> None:
        block = self.blocks[self.block]
        self.result.blocks.append(self.seq[self.block_start : self.block_end])
        self.result.layouts.append(block)
        self.result.slots.append(
            [
                SlotResult(
                    tokens=self.seq[start : start + slot.constraint.length],
                    confidence=math.exp(self.slot_logp[i]),
                    ranked=self.slot_ranked[i],
                )
                for i, (slot, start) in enumerate(zip(block.slots, self.slot_starts, strict=True))
            ]
        )

    def position_shifts(self, start: int, end: int) -> list[int] | None:
        """Per position of `[start, end)`: how many positions the slots laid out short before it
        left out (their constraints' optional `encoded_length` beyond `length`), so the model
        encodes it where the whole layout would have it; None when nothing is left out."""
        gaps: list[tuple[int, int]] = []  # (first position after a short slot, positions left out)
        begin = len(self.request.prompt)
        for b in range(self.block + 1):
            block = self.blocks[b]
            for slot in block.slots:
                c = slot.constraint
                extra = getattr(c, "encoded_length", c.length) - c.length
                if extra > 0:
                    gaps.append((begin + slot.end, extra))
            begin += len(block.tokens)
        if not gaps or gaps[0][0] >= end:
            return None
        steps = [0] * (end - start)  # what each position adds to the one before it
        for at, n in gaps:
            if at < end:
                steps[max(at - start, 0)] += n
        return list(accumulate(steps))

    def changed_in_window(self, filler: bool = True) -> list[int]:
        """Offsets in `window_seen` of the tokens committed since the forward that wrote it;
        `filler=False` leaves out positions of a current slot committed to its constraint's
        optional `stale_filler` token."""
        start, end = self.window_seen or (0, 0)
        now = self.seq[start:end]
        pairs = enumerate(zip(now, self.window_tokens, strict=True))
        changed = [k for k, (a, b) in pairs if a != b]
        if filler or not changed:
            return changed
        tails = set()
        for first, slot in zip(self.slot_starts, self.slots(), strict=True):
            fill = getattr(slot.constraint, "stale_filler", None)
            if fill is not None:
                tails.update(
                    p - start
                    for p in range(first, first + slot.constraint.length)
                    if self.seq[p] == fill
                )
        return [k for k in changed if k not in tails]

    def unit_masked(self) -> list[int]:
        """The open positions of the current unit, in order."""
        start, end = self.unit
        return sorted(p for p in self.masked if start <= p < end)
