"""A brute-force `SlotConstraint` for tests: the language is an explicit list of token sequences.

Allowed tokens at a position are exactly those of the listed sequences that agree with every
committed token, computed by enumeration, so it is an independent oracle for the sampler (and a
yardstick for the schema compiler's constraints)."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from decide.engine.constraints import InfeasibleSlot


class ListConstraint:
    def __init__(self, sequences: Sequence[Sequence[int]], finite: bool = True) -> None:
        lengths = {len(s) for s in sequences}
        assert len(lengths) <= 1, "all sequences of a slot have the slot's length"
        self.sequences = [tuple(s) for s in sequences]
        self._length = lengths.pop() if lengths else 1
        self.finite = finite
        self.committed: dict[int, int] = {}
        self.rejected = 0  # commits refused, to see the sampler's retry path exercised

    @property
    def length(self) -> int:
        return self._length

    def _consistent(self, extra: dict[int, int] | None = None) -> list[tuple[int, ...]]:
        fixed = self.committed | (extra or {})
        return [s for s in self.sequences if all(s[p] == t for p, t in fixed.items())]

    def fill_bitmask(self, out: torch.Tensor) -> None:
        alive = self._consistent()
        if not alive:
            raise InfeasibleSlot("no listed sequence agrees with the committed tokens")
        out.zero_()
        for position in range(self._length):
            for token in {s[position] for s in alive}:
                word, bit = divmod(token, 32)
                out[position, word] |= torch.tensor(1 << bit, dtype=torch.int64).to(torch.int32)

    def commit(self, position: int, token: int) -> bool:
        if position in self.committed or not self._consistent({position: token}):
            self.rejected += 1
            return False
        self.committed[position] = token
        return True

    def is_complete(self) -> bool:
        return len(self.committed) == self._length

    def options(self) -> list[tuple[int, ...]] | None:
        return self._consistent() if self.finite else None


class GrowingConstraint(ListConstraint):
    """A `ListConstraint` laid out short that asks to grow (`grown()`) into `longer` when its
    committed value fills every position (its last token is not `filler`); it stands for the
    positions of `longer` (`encoded_length`)."""

    def __init__(
        self, sequences: Sequence[Sequence[int]], longer: Sequence[Sequence[int]], filler: int
    ) -> None:
        super().__init__(sequences, finite=False)
        self.longer = longer
        self.filler = filler
        self.encoded_length = len(longer[0])

    def grown(self) -> ListConstraint | None:
        if not self.is_complete() or self.committed[self._length - 1] == self.filler:
            return None
        return ListConstraint(self.longer, finite=False)
