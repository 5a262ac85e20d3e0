"""The infilling sampler: decodes many documents' blocks together, continuously batched.

Every step runs one forward per group of rows, scores each still-masked slot position under its
slot's token mask (`decide.kernels.masked_confidence`: best allowed token and its probability under
the softmax restricted to allowed tokens; positions allowing few tokens compute the same from those
tokens' logits only, `scoring.restricted_confidence`), and commits, per row, every item whose
confidence reaches the threshold, or else the single most confident one, so each step makes
progress. An item is one position, or, for a finite slot (enum, boolean, small range) whose masked
positions all lie in the current unit, one whole option scored as the sum of its tokens' masked
log-probabilities and normalised over the options. Positions of one slot are committed in
decreasing confidence; a commit the constraint rejects (another commit of the same step made it
impossible) waits for the next step.

Rows move through *units*: the whole block for bidirectional families, and the model blocks the
answer slots fall in for block-causal families (decided left to right, as those models were
trained). A row's window is `[cached, unit end)`; tokens before its unit's model block are
committed to the cache by the same forward that reads them; for block-causal families the cache
is exact. Bidirectional families build their prefix cache once per block from a forward over
prompt + block and then run only the block (approximate, as Fast-dLLM). With `cache=False` every
step recomputes everything from a fresh cache (exact for all families, and slow).

New rows and rows whose prefix must be rebuilt go through a *prefill* forward on a fresh cache and
then join the lanes of the main cache; rows in lanes step together on views of it, and finished rows
leave by swap-removal, so the lanes stay packed and their cache is never copied wholesale.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from decide.kernels import masked_confidence

from .cache import KVCache
from .constraints import InfeasibleSlot, bitmask_width
from .model import DiffusionLM
from .requests import BlockStats, DecodeRequest, DecodeResult, SlotResult
from .scoring import (
    RESTRICTED_LIMIT,
    _trie_scores,  # noqa: F401  (imported from here by tests and benchmarks)
    allowed_counts,
    allowed_pairs,
    restricted_confidence,
    score_options,
    unpack_bitmask,
)

OPTION_LIMIT = 256  # finite slots with more options than this are decided position by position


@dataclass(frozen=True)
class SamplerConfig:
    threshold: float = 0.9  # commit every item at least this confident
    max_steps: int | None = None  # per block; then the rest of each unit is committed greedily
    temperature: float = 0.0  # 0: greedy; > 0: sample tokens/options, seeded per document
    cache: bool = True  # reuse the committed prefix's keys/values between steps (see below)
    # At most this many tokens committed per row per step; 1 gives the one-token-per-step
    # baseline (finite slots are then decided position by position as well). None: no limit.
    max_tokens_per_step: int | None = None
    batch_size: int = 16  # rows decoded together
    # Positions allowing at most this many tokens are scored from those tokens' logits only
    # (`scoring.py`; exact); 0: every position through the full-vocabulary head.
    head_limit: int = RESTRICTED_LIMIT

    def __post_init__(self) -> None:
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"threshold must lie in (0, 1], got {self.threshold}")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be ≥ 1, got {self.max_steps}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be ≥ 0, got {self.temperature}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be ≥ 1, got {self.batch_size}")
        if self.head_limit < 0:
            raise ValueError(f"head_limit must be ≥ 0, got {self.head_limit}")
        if self.max_tokens_per_step is not None and self.max_tokens_per_step < 1:
            raise ValueError(f"max_tokens_per_step must be ≥ 1, got {self.max_tokens_per_step}")


class _Row:
    """Decoding state of one document."""

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
        self.cached = 0  # tokens committed to this row's cache
        self.lane: int | None = None
        self.rng: torch.Generator | None = None

    @property
    def stats(self) -> BlockStats:
        return self.result.stats[self.block]

    @property
    def unit(self) -> tuple[int, int]:
        return self.units[0]

    def slots(self):
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
                )
                for i, (slot, start) in enumerate(zip(block.slots, self.slot_starts, strict=True))
            ]
        )

    def unit_masked(self) -> list[int]:
        start, end = self.unit
        return sorted(p for p in self.masked if start <= p < end)


class Sampler:
    """Decodes `DecodeRequest`s with one model; see the module docstring for the algorithm."""

    def __init__(self, model: DiffusionLM, config: SamplerConfig | None = None) -> None:
        self.model = model
        self.config = config or SamplerConfig()
        c = model.config
        self.block_size = c.block_size if c.attention == "block_causal" else None
        # Without the cache every step recomputes prompt + decided blocks + current unit: exact
        # for every family, and the reference the cached paths are tested against.
        self.exact = not self.config.cache
        self.mask_id = c.mask_token_id
        self.max_length = c.max_position_embeddings
        self.width: int | None = None

    # ------------------------------------------------------------------ driving
    def decode(self, requests: Iterable[DecodeRequest]) -> Iterator[DecodeResult]:
        """Decode every request; results stream out as documents finish (not in input order).

        The work runs under `torch.inference_mode()`, entered for each step and left before a
        result is handed out: a generator that yielded inside the mode would leave it on in the
        caller's thread while suspended, and for good if the caller stopped early (after a failed
        write, a training step in the same thread then got no gradients)."""
        steps = self._decode(requests)
        try:
            while True:
                with torch.inference_mode():
                    result = next(steps, None)
                if result is None:
                    return
                yield result
        finally:
            steps.close()

    def _decode(self, requests: Iterable[DecodeRequest]) -> Iterator[DecodeResult]:
        pending = iter(requests)
        lanes: list[_Row] = []  # rows stepping on the main cache, row i in lane i
        main: KVCache | None = None
        refill: list[_Row] = []  # rows whose prefix must be (re)built
        exhausted = False
        while True:
            while not exhausted and len(lanes) + len(refill) < self.config.batch_size:
                request = next(pending, None)
                if request is None:
                    exhausted = True
                    break
                row = self._admit(request)
                if row.result.error is not None or row.block >= len(request.blocks):
                    yield row.result
                else:
                    refill.append(row)
            if not lanes and not refill:
                return
            stepped: list[_Row] = []
            if lanes:  # rows already in lanes: one step on views of the main cache
                assert main is not None
                ahead = max(r.unit[1] - r.cached for r in lanes)
                main.reserve(max(r.cached for r in lanes) + ahead)
                self._step(lanes, main.view(len(lanes)), prefill=False)
                stepped.extend(lanes)
            if refill:  # new rows and rebuilt prefixes: one forward on a fresh cache
                group, refill = refill, []
                cache = None
                if not self.exact:  # the exact path recomputes everything, nothing to keep
                    cache = self.model.new_cache(len(group), max(r.unit[1] for r in group))
                self._step(group, cache, prefill=True)
                if cache is not None:
                    if main is None:
                        main = self.model.new_cache(self.config.batch_size)
                    first = len(lanes)
                    main.copy_rows(
                        list(range(first, first + len(group))), cache, list(range(len(group)))
                    )
                    for row in group:
                        row.lane = len(lanes)
                        lanes.append(row)
                stepped.extend(group)
            for row in stepped:
                state = self._advance(row)
                if state == "stay":
                    if self.exact:
                        refill.append(row)
                    continue
                if row.lane is not None:
                    self._leave(row, lanes, main)
                if state == "done":
                    yield row.result
                else:  # "refill": its prefix must be rebuilt for the next block
                    refill.append(row)

    def _admit(self, request: DecodeRequest) -> _Row:
        row = _Row(request, self.mask_id)
        if self.config.temperature > 0:
            row.rng = torch.Generator().manual_seed(request.seed)
        if request.length > self.max_length:
            row.result.error = (
                f"{request.length} tokens exceed the model's {self.max_length} positions"
            )
            return row
        row.start_block(self.block_size)
        return row

    def _leave(self, row: _Row, lanes: list[_Row], main: KVCache | None) -> None:
        """Remove a row from its lane, moving the last lane's row into the gap."""
        lane, last = row.lane, len(lanes) - 1
        assert lane is not None and main is not None
        if lane != last:
            main.move_row(last, lane)
            lanes[lane] = lanes[last]
            lanes[lane].lane = lane
        lanes.pop()
        row.lane = None

    def _advance(self, row: _Row) -> str:
        """After a step: "stay" (same unit), "done", or "refill" (prefix rebuild needed)."""
        if row.result.error is not None:
            return "done"
        if row.unit_masked():
            return "stay"
        row.units.pop(0)
        if row.units:
            return "stay"
        if not row.start_block(self.block_size):
            return "done"
        if self.block_size is None:
            return "refill"  # bidirectional: rebuild the prefix over prompt + decided blocks
        return "stay"

    # ------------------------------------------------------------------ one step
    def _window(self, row: _Row, prefill: bool) -> tuple[int, int, int]:
        """(window start, window end, tokens to commit) for this row's next forward."""
        unit_start, unit_end = row.unit
        if prefill:
            if self.exact:
                return 0, unit_end, 0
            if self.block_size is None:
                return 0, unit_end, row.block_start
            return 0, unit_end, unit_start // self.block_size * self.block_size
        if self.block_size is None:
            return row.cached, unit_end, 0
        return row.cached, unit_end, unit_start // self.block_size * self.block_size - row.cached

    def _step(self, rows: list[_Row], cache: KVCache | None, prefill: bool) -> None:
        windows = [self._window(r, prefill) for r in rows]
        width = max(end - start for start, end, _ in windows)
        ids = torch.full((len(rows), width), self.mask_id, dtype=torch.long)
        for i, (row, (start, end, _)) in enumerate(zip(rows, windows, strict=True)):
            ids[i, : end - start] = torch.tensor(row.seq[start:end])
        lens = torch.tensor([end - start for start, end, _ in windows])
        commits = torch.tensor([c for _, _, c in windows])
        device = self.model.device
        hidden = self.model(ids.to(device), cache, window_lens=lens, commit=commits)
        for row, (_, _, commit) in zip(rows, windows, strict=True):
            row.cached = (0 if prefill else row.cached) + commit
            row.stats.nfe += 1

        # Split each row's open slots: finite ones are scored as whole options from the logits of
        # their options' tokens only; the others position by position over the whole vocabulary.
        dense: list[tuple[int, int]] = []  # (row index, absolute position)
        option_slots: list[tuple[int, int, list[int], Sequence[Sequence[int]]]] = []
        for i, row in enumerate(rows):
            by_slot: dict[int, list[int]] = {}
            for pos in row.unit_masked():
                by_slot.setdefault(row.masked[pos][0], []).append(pos)
            for slot_index, positions in by_slot.items():
                options = None
                if len(positions) == sum(1 for s, _ in row.masked.values() if s == slot_index):
                    options = row.slots()[slot_index].constraint.options()
                whole = self.config.max_tokens_per_step is None
                if whole and options is not None and 0 < len(options) <= OPTION_LIMIT:
                    option_slots.append((i, slot_index, positions, options))
                else:
                    dense.extend((i, pos) for pos in positions)
        starts = [start for start, _, _ in windows]
        items: dict[int, list[tuple[float, int, object]]] = {i: [] for i in range(len(rows))}
        for i, item in score_options(
            self.model, rows, option_slots, hidden, starts, self.config.temperature
        ):
            items[i].append(item)
        logits = self._score_positions(rows, dense, hidden, starts, items) if dense else None

        for i, row in enumerate(rows):
            if row.result.error is not None or not items[i]:
                continue
            row.stats.steps += 1
            forced = self.config.max_steps is not None and row.stats.steps >= self.config.max_steps
            row.stats.forced |= forced
            try:
                self._commit(row, items[i], logits, forced)
            except InfeasibleSlot as exc:
                row.result.error = f"block {row.block}: {exc}"

    def _score_positions(
        self,
        rows: list[_Row],
        dense: list[tuple[int, int]],
        hidden: torch.Tensor,
        starts: list[int],
        items: dict[int, list[tuple[float, int, object]]],
    ) -> torch.Tensor | None:
        """One item per open position of `dense`: its best allowed token and that token's
        probability under the softmax over the allowed tokens. Positions allowing at most
        `head_limit` tokens take the restricted head (`scoring.restricted_confidence`, the same
        quantity from the allowed tokens' logits only), unless their row samples or reaches its
        step cap this step (those need full rows); the others take the full head and
        `masked_confidence`. Returns the full head's logits (row = the item's payload index;
        restricted items carry -1), or None when no position took the full head."""
        device = self.model.device
        vocab = self.model.config.embedding_size
        if self.width is None:
            self.width = bitmask_width(vocab)
        bitmask, failed = self._bitmasks(rows, dense)
        for i, message in failed.items():
            rows[i].result.error = message
        cap = self.config.max_steps
        whole = [r.rng is not None or (cap is not None and r.stats.steps + 1 >= cap) for r in rows]
        index = torch.tensor([(i, pos - starts[i]) for i, pos in dense], device=device)
        states = hidden[index[:, 0], index[:, 1]]  # [N, H]
        masks = bitmask.to(device)
        full = allowed_counts(masks) > self.config.head_limit
        full |= torch.tensor([whole[i] for i, _ in dense], device=device)
        tokens = torch.empty(len(dense), dtype=torch.long, device=device)
        probs = torch.empty(len(dense), dtype=torch.float32, device=device)
        logits = None
        at = full.nonzero().squeeze(1)
        if at.numel():
            logits = self.model.logits(states[at]).float()  # [F, V]
            best = masked_confidence(logits, masks[at])
            tokens[at], probs[at] = best.token, best.prob
        few = (~full).nonzero().squeeze(1)
        if few.numel():
            entry, token = allowed_pairs(masks[few], vocab)  # entry: index among `few`
            t, p = restricted_confidence(self.model, states[few], entry, token, few.numel())
            tokens[few], probs[few] = t, p
        row_of = torch.where(full, torch.cumsum(full, 0) - 1, -1).tolist()
        for n, (i, pos), token_n, prob_n in zip(
            range(len(dense)), dense, tokens.tolist(), probs.tolist(), strict=True
        ):
            if rows[i].rng is not None:
                assert logits is not None
                allowed = unpack_bitmask(bitmask[n], vocab)
                token_n, prob_n = self._sample(rows[i], logits[row_of[n]].cpu(), allowed)
            items[i].append((prob_n, 1, (pos, token_n, row_of[n])))
        return logits

    def _commit(
        self,
        row: _Row,
        items: list[tuple[float, int, object]],
        logits: torch.Tensor | None,
        forced: bool,
    ) -> None:
        """Commit every item at or above the threshold (all of them when forced), else the most
        confident one; items are (confidence, kind, payload), kind 0 = option, 1 = position."""
        if forced:
            chosen = [it for it in items if it[1] == 0]
            positions = [it[2] for it in items if it[1] == 1]
        else:
            chosen = [it for it in items if it[0] >= self.config.threshold]
            if not chosen:
                chosen = [max(items, key=lambda it: it[0])]
            if self.config.max_tokens_per_step is not None:
                chosen = sorted(chosen, key=lambda it: -it[0])[: self.config.max_tokens_per_step]
            positions = []
        for confidence, kind, payload in sorted(chosen, key=lambda it: -it[0]):
            if kind == 0:
                slot_index, option, slot_positions = payload  # type: ignore[misc]
                self._commit_option(row, slot_index, option, slot_positions, confidence)
            else:
                pos, token, _ = payload  # type: ignore[misc]
                self._commit_position(row, pos, token, confidence)
        if positions:
            assert logits is not None
            order = [n for _, _, n in positions]  # type: ignore[misc]
            self._commit_all(row, [p for p, _, _ in positions], logits[order])  # type: ignore[misc]

    def _bitmasks(
        self, rows: list[_Row], entries: list[tuple[int, int]]
    ) -> tuple[torch.Tensor, dict[int, str]]:
        """Bitmask rows `[N, W]` for the entries, from one `fill_bitmask` per touched slot."""
        assert self.width is not None
        out = torch.zeros((len(entries), self.width), dtype=torch.int32)
        filled: dict[tuple[int, int], torch.Tensor] = {}
        failed: dict[int, str] = {}
        for n, (i, pos) in enumerate(entries):
            row = rows[i]
            slot_index, offset = row.masked[pos]
            key = (i, slot_index)
            if key not in filled:
                constraint = row.slots()[slot_index].constraint
                buffer = torch.zeros((constraint.length, self.width), dtype=torch.int32)
                try:
                    constraint.fill_bitmask(buffer)
                except InfeasibleSlot as exc:
                    failed[i] = f"block {row.block}, slot {slot_index}: {exc}"
                    buffer.fill_(-1)  # keep the row scorable; its result is discarded
                filled[key] = buffer
            out[n] = filled[key][offset]
        return out, failed

    def _sample(self, row: _Row, logits: torch.Tensor, allowed: torch.Tensor) -> tuple[int, float]:
        """Draw a token from the masked softmax at the configured temperature."""
        assert row.rng is not None
        scaled = (logits / self.config.temperature).masked_fill(~allowed, float("-inf"))
        p = torch.softmax(scaled, dim=-1)
        u = torch.rand((), generator=row.rng).item()
        token = int(torch.searchsorted(p.cumsum(-1), torch.tensor([u])).clamp(max=p.numel() - 1))
        while not allowed[token]:  # rounding can land the draw on a zero-probability tail
            token -= 1
        return token, float(p[token])

    def _commit_option(
        self, row: _Row, slot_index: int, option: list[int], positions: list[int], p: float
    ) -> None:
        constraint = row.slots()[slot_index].constraint
        committed = False
        for pos, token in zip(positions, option, strict=True):
            if pos not in row.masked:
                continue
            # An option listed at the start of the step can lose its support when another slot
            # commits first (cross-question rules couple slots): keep what was accepted, the
            # slot's other positions wait for the next step.
            if not constraint.commit(pos - row.slot_starts[slot_index], token):
                break
            row.seq[pos] = token
            del row.masked[pos]
            committed = True
        if committed:
            row.slot_logp[slot_index] += math.log(max(p, 1e-300))

    def _commit_position(self, row: _Row, pos: int, token: int, prob: float) -> bool:
        slot_index, offset = row.masked[pos]
        if not row.slots()[slot_index].constraint.commit(offset, token):
            return False
        row.seq[pos] = token
        del row.masked[pos]
        row.slot_logp[slot_index] += math.log(max(prob, 1e-300))
        return True

    def _commit_all(self, row: _Row, positions: list[int], logits: torch.Tensor) -> None:
        """Step cap reached: commit every given position greedily, in rounds: each slot commits
        its most confident open position under the mask its commits so far leave.

        A position is scored again only when its mask row changed since it was last scored (the
        best allowed token and its mask-restricted probability depend on the logits, fixed here,
        and the mask only). When every slot of the block is `independent` (its masks depend on
        its own commits only; a constraint that does not say so is taken to depend on the
        others'), a round fills each slot's masks once and scores all slots' changed positions
        in one `masked_confidence` call; otherwise each slot is scored after the commits of the
        slots before it in the round. All ways give the same commits
        (`tests/engine/test_sampler.py`)."""
        assert self.width is not None
        remaining = dict(zip(positions, range(len(positions)), strict=True))
        slots = row.slots()
        together = all(getattr(s.constraint, "independent", False) for s in slots)
        scored: dict[int, tuple[torch.Tensor, float, int]] = {}  # pos -> (mask row, prob, token)
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
                    if not self._commit_position(row, pos, token, prob):
                        raise InfeasibleSlot(
                            f"slot {slot_index}: its best allowed token was rejected "
                            "(constraint bug)"
                        )
                    del remaining[pos]
