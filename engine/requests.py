"""What the sampler is asked to decode and what it returns, in token ids only.

A `DecodeRequest` is one document: its prompt tokens and one or more `Block`s decided in order,
each finished block staying in context for the next. A block is a run of fixed tokens (the JSON
skeleton, in `decide`'s use) with `Slot`s at given offsets; every slot position starts masked and
ends holding a token its `SlotConstraint` admits. Results carry the filled tokens, a confidence per
slot and the forward passes spent, or the reason the document could not be decided.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .constraints import SlotConstraint


@dataclass(frozen=True)
class Slot:
    start: int  # offset of the slot's first position inside its block
    constraint: SlotConstraint

    @property
    def end(self) -> int:
        return self.start + self.constraint.length


@dataclass(frozen=True)
class Block:
    tokens: Sequence[int]  # the block's fixed tokens; slot positions hold anything (overwritten)
    slots: Sequence[Slot]

    def __post_init__(self) -> None:
        cursor = 0
        for slot in sorted(self.slots, key=lambda s: s.start):
            if slot.start < cursor or slot.end > len(self.tokens) or slot.constraint.length < 1:
                raise ValueError(
                    f"slot at [{slot.start}, {slot.end}) overlaps another or leaves the "
                    f"{len(self.tokens)}-token block"
                )
            cursor = slot.end

    def regrown(self, grown: dict[int, SlotConstraint]) -> Block:
        """This block with slot `i` holding constraint `grown[i]` (at least as long as the old
        one): the extra positions go at the slot's end and every later token moves along."""
        order = sorted(range(len(self.slots)), key=lambda i: self.slots[i].start)
        tokens: list[int] = []
        slots: list[Slot] = list(self.slots)
        cursor = shift = 0
        for i in order:
            old = self.slots[i]
            constraint = grown.get(i, old.constraint)
            extra = constraint.length - old.constraint.length
            if extra < 0:
                raise ValueError(f"slot {i} cannot shrink from {old.constraint.length} positions")
            tokens += list(self.tokens[cursor : old.end]) + [self.tokens[old.end - 1]] * extra
            slots[i] = Slot(old.start + shift, constraint)
            shift += extra
            cursor = old.end
        tokens += list(self.tokens[cursor:])
        return Block(tokens, slots)


@dataclass(frozen=True)
class DecodeRequest:
    prompt: Sequence[int]
    blocks: Sequence[Block]
    key: Any = None  # the caller's handle, returned untouched (e.g. a row number)
    seed: int = 0  # per-document seed for sampling at temperature > 0

    @property
    def length(self) -> int:
        return len(self.prompt) + sum(len(b.tokens) for b in self.blocks)


@dataclass
class SlotResult:
    tokens: list[int]
    confidence: float  # product of the probabilities the slot's tokens were committed with
    # A finite slot committed as one option: every option's tokens with its probability among
    # them, best first (empty otherwise).
    ranked: tuple[tuple[Sequence[int], float], ...] = ()


@dataclass
class BlockStats:
    nfe: int = 0  # forward passes this block took part in
    steps: int = 0  # denoising steps (forwards that committed tokens of this block)
    answer_tokens: int = 0  # slot positions in the block
    forced: bool = False  # the step cap was reached and the rest was committed greedily
    regrown: int = 0  # times the block was decided again with grown slots (`RowState.regrow`)
    rewound: int = 0  # of those, times its cache lane was rewound instead of the prefix re-read
    positions: int = 0  # window positions its forwards computed (all, or the queried ones)


@dataclass
class DecodeResult:
    request: DecodeRequest
    blocks: list[list[int]] = field(default_factory=list)  # final tokens per block
    # The blocks as decided: the request's own, or one laid out again with grown slots.
    layouts: list[Block] = field(default_factory=list)
    slots: list[list[SlotResult]] = field(default_factory=list)  # per block, per slot
    stats: list[BlockStats] = field(default_factory=list)
    error: str | None = None  # why the document could not be decided (the other fields partial)

    @property
    def nfe(self) -> int:
        return sum(s.nfe for s in self.stats)

    @property
    def answer_tokens(self) -> int:
        return sum(s.answer_tokens for s in self.stats)

    def value_tokens(self, filler: int) -> int:
        """Committed answer-slot positions that hold a value's token, not `filler`."""
        return sum(t != filler for group in self.slots for slot in group for t in slot.tokens)
