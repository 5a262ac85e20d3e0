"""The constraint protocol between the sampler and whatever decides which tokens a slot admits.

`engine` knows token ids, never JSON. A *slot* is a fixed run of positions in a block whose tokens
must spell one value of some language; `decide.schemas` compiles JSON Schemas into objects that
satisfy `SlotConstraint`, and the sampler only ever talks to this protocol.

Bitmasks are int32 tensors `[rows, ceil(V / 32)]` on the CPU, the layout XGrammar, llguidance and
outlines-core share: bit `t % 32` of word `t // 32` is set when token `t` is allowed. Tokens at or
beyond the mask's width (for example logits padded wider than the tokenizer) are never allowed.
Importing this module does not import torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the protocol is importable without torch (`decide.schemas` imports it)
    import torch


def bitmask_width(vocab_size: int) -> int:
    """Number of int32 words per bitmask row for a vocabulary of `vocab_size` tokens."""
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be positive, got {vocab_size}")
    return (vocab_size + 31) // 32


class InfeasibleSlot(RuntimeError):
    """No completion of the slot is consistent with the tokens committed so far."""


@runtime_checkable
class SlotConstraint(Protocol):
    """Mutable state of one slot while its block is being decided.

    Positions are counted from the slot's first position (0 .. length-1). Positions after the value
    hold the filler token the constraint was created with.

    Optional attribute `independent` (True or False; absent reads as False): True when the
    slot's masks depend on its own commits only, never on another slot's (a slot tied to others
    by rules is not), which lets the sampler score several slots' positions together.

    Optional method `grown()` (absent reads as never growing): called once the slot is complete;
    returns a fresh constraint with more positions when the slot was laid out shorter than its
    language's longest value and the committed value may have been cut by it, else None. The
    sampler then decides the block again with the grown slot in place of this one.

    Optional attribute `stale_filler` (absent or None: none): the filler token id, where the
    slot's tail may keep the keys and values it had as masks: the sampler's in-block cache does
    not recompute a position committed to it (`Sampler`).

    Optional attribute `encoded_length` (absent reads as `length`): the positions the slot stands
    for. When it exceeds `length` (a slot laid out short), the tokens after the slot are encoded
    at the positions they would have after `encoded_length` positions (the cache still holds
    them densely), so a model sees the layout it was trained on, minus the filler.
    """

    @property
    def length(self) -> int:
        """Number of token positions of the slot (fixed for its lifetime)."""
        ...

    def fill_bitmask(self, out: torch.Tensor) -> None:
        """Write the allowed tokens of every position into `out` (int32 `[length, W]`, CPU).

        A committed position allows exactly its token. An uncommitted position allows the tokens
        that lie on some accepting path consistent with every committed token. Never all-zero for a
        feasible slot; raises `InfeasibleSlot` otherwise.
        """
        ...

    def commit(self, position: int, token: int) -> bool:
        """Fix `token` at `position` if the slot stays feasible; return False and change nothing
        otherwise (the sampler then leaves that position masked for the next step)."""
        ...

    def is_complete(self) -> bool:
        """True once every position is committed."""
        ...

    def options(self) -> Sequence[Sequence[int]] | None:
        """For finite slots (enum, boolean, const, small ranges): one full token sequence per
        admissible value (its canonical spelling, padded with filler to `length` tokens)
        consistent with the committed tokens, so the sampler can score whole options. None for
        slots whose language is too large."""
        ...


__all__ = ["InfeasibleSlot", "SlotConstraint", "bitmask_width"]
