"""What one denoising step proposes to commit: the typed items of the commit policy.

Contract. Scoring (`scoring.py`) turns every open slot of a row into items; the commit policy
(`commit.py`) commits some of them. An `OptionItem` is one whole option of a finite slot (enum,
boolean, small range) whose open positions all lie in the row's current unit; a `PositionItem` is
one open position with its best (or sampled) allowed token. `confidence` is the probability the
item would be committed with: the option's probability among the slot's options, or the token's
probability under the softmax restricted to the position's allowed tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple


class OptionItem(NamedTuple):
    confidence: float
    slot: int  # the slot's index in its block
    tokens: Sequence[int]  # the option's tokens at `positions`, in order
    positions: list[int]  # the slot's open positions (absolute), in order
    # Every option the slot had (all its tokens) with its probability among them, best first:
    # what a caller may fall back to when the chosen one breaks a rule checked after decoding.
    ranked: tuple[tuple[Sequence[int], float], ...] = ()


class PositionItem(NamedTuple):
    confidence: float
    position: int  # absolute position in the row's sequence
    token: int
    logits_row: int  # row of this position in the step's full-head logits; -1 if it had none
    # The allowed-token bitmask row `[W]` the full head's best token and probability were
    # computed under, set only for a greedy row at its step cap (None otherwise): lets its
    # forced fill (`CommitPolicy.commit_all`) reuse them while the position's mask is unchanged.
    mask: Any = None
    # For such a row's position scored from its allowed tokens only (`scoring.py`): those tokens
    # `[K]` and their logits `[K]`, all the forced fill needs, since commits only ever narrow a
    # position's mask (None otherwise).
    allowed: Any = None


Item = OptionItem | PositionItem
