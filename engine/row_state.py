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

import torch

from .requests import BlockStats, DecodeRequest, DecodeResult, Slot, SlotResult


class RowState:
    """Decoding state of one document; see the module docstring."""

    def __init__(self, request: DecodeRequest, mask_id: int) -> None:
        self.request = request
        self.result = DecodeResult(request=request)
        self.mask_id = mask_id
        self.seq: list[int] = list(request.prompt)
        self.block = -1
        self.block_start = self.block_end = len(self.seq)
        self.units: list[tuple[int, int]] = []
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

    @property
    def stats(self) -> BlockStats:
        return self.result.stats[self.block]

    @property
    def unit(self) -> tuple[int, int]:
        return self.units[0]

    def slots(self) -> Sequence[Slot]:
        return self.request.blocks[self.block].slots

    def start_block(self, block_size: int | None) -> bool:
        """Append the next block; False when every block is decided."""
        if self.block >= 0:
            self._finish_block()
        self.block += 1
        if self.block >= len(self.request.blocks):
            return False
        block = self.request.blocks[self.block]
        self.block_start = len(self.seq)
        self.seq.extend(block.tokens)
        self.block_end = len(self.seq)
        self.masked = {}
        self.slot_starts = []
        for i, slot in enumerate(block.slots):
            start = self.block_start + slot.start
            self.slot_starts.append(start)
            for offset in range(slot.constraint.length):
                self.seq[start + offset] = self.mask_id
                self.masked[start + offset] = (i, offset)
        self.slot_logp = [0.0] * len(block.slots)
        self.slot_ranked = [()] * len(block.slots)
        self.result.stats.append(BlockStats(answer_tokens=len(self.masked)))
        if block_size is None:
            self.units = [(self.block_start, self.block_end)]
        else:  # the model blocks holding answer slots, each clipped to this block
            first = {p // block_size for p in self.masked}
            self.units = [
                (max(b * block_size, self.block_start), min((b + 1) * block_size, self.block_end))
                for b in sorted(first)
            ]
        return True

    def _finish_block(self) -> None:
        block = self.request.blocks[self.block]
        self.result.blocks.append(self.seq[self.block_start : self.block_end])
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

    def changed_in_window(self) -> list[int]:
        """Offsets in `window_seen` of the tokens committed since the forward that wrote it."""
        start, end = self.window_seen or (0, 0)
        now = self.seq[start:end]
        return [k for k, (a, b) in enumerate(zip(now, self.window_tokens, strict=True)) if a != b]

    def unit_masked(self) -> list[int]:
        """The open positions of the current unit, in order."""
        start, end = self.unit
        return sorted(p for p in self.masked if start <= p < end)
