"""The commit policy: which of a step's items a row commits, and committing them.

Contract. `CommitPolicy.commit` commits every item whose confidence reaches the threshold. Below
it, items are *choices* or *continuations*. A continuation is an open position of a slot decided
position by position whose left neighbour, inside the slot, was committed before this step: the
model saw how the value begins, and the position says how it goes on. Every other item is a
choice: a finite slot's option, or a position that starts a value or has an open position on its
left (which value, which number, which name: what related answers inform). When no choice reached
the threshold, the most confident choice is committed, so each step makes progress and uncertain
choices are made one per step, each seeing the ones before; with `parallel_continuations` each
slot also commits its most confident continuation, so values already begun go on in every slot at
once (without it, only the single most confident item is committed when none reached the
threshold: Fast-dLLM's rule). With `max_tokens_per_step` at most that many items, the most
confident first. Items are committed in decreasing confidence; a commit the slot's constraint
rejects (another commit of the same step made it impossible) leaves the position open for the
next step. A slot's confidence is the product of the probabilities its commits were made with
(accumulated as log-probabilities in the row). When the row reached its step cap (`forced`),
every option item is committed and every open position greedily (`commit_all`); a best allowed
token the constraint then rejects is a constraint bug and raises `InfeasibleSlot`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from decide.kernels import masked_confidence

from .constraints import InfeasibleSlot
from .items import Item, OptionItem, PositionItem
from .row_state import RowState


@dataclass(frozen=True)
class CommitPolicy:
    threshold: float
    max_tokens_per_step: int | None
    width: int  # int32 words per bitmask row
    # Below the threshold, each slot also commits its most confident continuation (see above).
    parallel_continuations: bool = True

    def commit(
        self, row: RowState, items: list[Item], logits: torch.Tensor | None, forced: bool
    ) -> None:
        """Commit this step's chosen items (see the module docstring); `logits` are the step's
        full-head logits the position items index (needed only when `forced`)."""
        positions: list[PositionItem] = []
        if forced:
            chosen: list[Item] = [it for it in items if isinstance(it, OptionItem)]
            positions = [it for it in items if isinstance(it, PositionItem)]
        else:
            chosen = self.choose(row, items)
            if self.max_tokens_per_step is not None:
                ranked = sorted(chosen, key=lambda it: -it.confidence)
                chosen = ranked[: self.max_tokens_per_step]
        for item in sorted(chosen, key=lambda it: -it.confidence):
            if isinstance(item, OptionItem):
                self.commit_option(row, item)
            else:
                self.commit_position(row, item.position, item.token, item.confidence)
        if positions:
            seeds = {it.position: (it.mask, it.confidence, it.token)
                     for it in positions if it.mask is not None}  # fmt: skip
            rows = self._fill_logits(positions, logits)
            self.commit_all(row, [it.position for it in positions], rows, seeds=seeds)

    def choose(self, row: RowState, items: list[Item]) -> list[Item]:
        """The items a step commits, before `max_tokens_per_step` (the module docstring)."""
        chosen = [it for it in items if it.confidence >= self.threshold]
        if not self.parallel_continuations:
            return chosen or [max(items, key=lambda it: it.confidence)]
        choices: list[Item] = []
        going_on: dict[int, PositionItem] = {}  # slot -> its most confident continuation
        for item in items:
            if item.confidence >= self.threshold:
                continue
            slot = self._continues(row, item)
            if slot is None:
                choices.append(item)
            elif slot not in going_on or item.confidence > going_on[slot].confidence:
                going_on[slot] = item
        chosen += going_on.values()
        if choices and all(self._continues(row, it) is not None for it in chosen):
            chosen.append(max(choices, key=lambda it: it.confidence))
        return chosen

    @staticmethod
    def _continues(row: RowState, item: Item) -> int | None:
        """The slot `item` continues, if it is a continuation (its left neighbour in its slot was
        committed before this step); None for a choice."""
        if isinstance(item, OptionItem):
            return None
        slot, offset = row.masked[item.position]
        return slot if offset > 0 and item.position - 1 not in row.masked else None

    def _fill_logits(self, items: list[PositionItem], logits: torch.Tensor | None) -> torch.Tensor:
        """One logits row per item for the forced fill: its full-head row, or for an item scored
        from its allowed tokens only, those logits and -inf elsewhere (the fill's masks are
        narrower than the one scored, so no other token can be allowed; one that were would be
        rejected as the constraint bug `commit_all` raises for)."""
        order = [it.logits_row for it in items]
        if all(r >= 0 for r in order):
            assert logits is not None
            return logits[order]
        width = logits.shape[1] if logits is not None else 32 * self.width
        device = logits.device if logits is not None else items[0].allowed[0].device
        out = torch.full((len(items), width), float("-inf"), device=device)
        full = [k for k, r in enumerate(order) if r >= 0]
        if full:
            assert logits is not None
            out[full] = logits[[order[k] for k in full]].float()
        for k, it in enumerate(items):
            if it.allowed is not None:
                tokens, values = it.allowed
                out[k, tokens] = values
        return out

    def commit_option(self, row: RowState, item: OptionItem) -> None:
        constraint = row.slots()[item.slot].constraint
        committed = False
        for pos, token in zip(item.positions, item.tokens, strict=True):
            if pos not in row.masked:
                continue
            # An option listed at the start of the step can lose its support when another slot
            # commits first (cross-question rules couple slots): keep what was accepted, the
            # slot's other positions wait for the next step.
            if not constraint.commit(pos - row.slot_starts[item.slot], token):
                break
            row.seq[pos] = token
            del row.masked[pos]
            committed = True
        if committed:
            row.slot_logp[item.slot] += math.log(max(item.confidence, 1e-300))
            if not any(pos in row.masked for pos in item.positions):  # the whole option
                row.slot_ranked[item.slot] = item.ranked

    def commit_position(self, row: RowState, pos: int, token: int, prob: float) -> bool:
        slot_index, offset = row.masked[pos]
        if not row.slots()[slot_index].constraint.commit(offset, token):
            return False
        row.seq[pos] = token
        del row.masked[pos]
        row.slot_logp[slot_index] += math.log(max(prob, 1e-300))
        return True

    def commit_all(
        self,
        row: RowState,
        positions: list[int],
        logits: torch.Tensor,
        seeds: dict[int, tuple[torch.Tensor, float, int]] | None = None,
    ) -> None:
        """Step cap reached: commit every given position greedily, in rounds: each slot commits
        its most confident open position under the mask its commits so far leave.

        A position is scored again only when its mask row changed since it was last scored (the
        best allowed token and its mask-restricted probability depend on the logits, fixed here,
        and the mask only). `seeds` (position -> mask row, probability, best token) are scores
        the step already computed from these logits: a position whose mask is still that row
        is not scored again. When every slot of the block is `independent` (its masks depend on
        its own commits only; a constraint that does not say so is taken to depend on the
        others'), a round fills each slot's masks once and scores all slots' changed positions
        in one `masked_confidence` call; otherwise each slot is scored after the commits of the
        slots before it in the round. All ways give the same commits
        (`tests/engine/test_sampler.py`)."""
        remaining = dict(zip(positions, range(len(positions)), strict=True))
        slots = row.slots()
        together = all(getattr(s.constraint, "independent", False) for s in slots)
        # pos -> (mask row, prob, token)
        scored: dict[int, tuple[torch.Tensor, float, int]] = dict(seeds or {})
        while remaining:
            by_slot: dict[int, list[int]] = {}
            for pos in remaining:
                by_slot.setdefault(row.masked[pos][0], []).append(pos)
            groups = [by_slot] if together else [{k: v} for k, v in by_slot.items()]
            for group in groups:
                stale: list[tuple[int, torch.Tensor]] = []
                for slot_index, slot_positions in group.items():
                    constraint = slots[slot_index].constraint
                    buffer = torch.zeros((constraint.length, self.width), dtype=torch.int32)
                    constraint.fill_bitmask(buffer)
                    for p in slot_positions:
                        mask = buffer[row.masked[p][1]]
                        if p not in scored or not torch.equal(scored[p][0], mask):
                            stale.append((p, mask))
                if stale:
                    masks = torch.stack([m for _, m in stale]).to(logits.device)
                    rows = torch.tensor([remaining[p] for p, _ in stale]).to(logits.device)
                    best = masked_confidence(logits, masks, rows)
                    probs, tokens = best.prob.float().cpu().tolist(), best.token.cpu().tolist()
                    for (p, mask), prob, token in zip(stale, probs, tokens, strict=True):
                        scored[p] = (mask, prob, token)
                for slot_index, slot_positions in group.items():
                    segment = [scored[p][1] for p in slot_positions]
                    pos = slot_positions[segment.index(max(segment))]  # the first of equals
                    _, prob, token = scored.pop(pos)
                    if not self.commit_position(row, pos, token, prob):
                        raise InfeasibleSlot(
                            f"slot {slot_index}: its best allowed token was rejected "
                            "(constraint bug)"
                        )
                    del remaining[pos]
