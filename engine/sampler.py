"""The infilling sampler's scheduler: decodes many documents' blocks together, continuously
batched.

Every step runs one forward per group of rows, scores each row's open slots into items
(`scoring.py`: one item per open position, its best allowed token and that token's probability
under the softmax restricted to allowed tokens; one item per finite slot whose open positions all
lie in the current unit, its best whole option among the slot's options) and hands them to the
commit policy (`commit.py`: everything at or above the threshold, each slot's most confident
continuation of a value it has begun, and the most confident choice when none reached it).
The per-document state lives in `row_state.py`, the item types in `items.py`.

Rows move through *units*: the whole block for bidirectional families, and the model blocks the
answer slots fall in for block-causal families (decided left to right, as those models were
trained). A row's window is `[cached, unit end)`; tokens before its unit's model block are
committed to the cache by the same forward that reads them; for block-causal families the cache
is exact. Bidirectional families build their prefix cache once per block from a forward over
prompt + block and then run only the block (approximate, as Fast-dLLM). With `queries` (the
in-block cache), a step after the first over a window recomputes only its open positions and those
committed since (`_queries`), reading the rest of the window's keys/values from the cache
(approximate too; a step that commits to the prefix recomputes its whole window). With
`cache=False` every step recomputes everything from a fresh cache (exact for all families, and
slow).

New rows and rows whose prefix must be rebuilt go through a *prefill* forward on the main cache's
free lanes, emptied (`KVCache.clear`; a block-causal prefix longer than `PREFILL_CHUNK` is
committed first in leading chunks, exactly), and then step as lanes of it: rows in lanes step
together on views of it, and finished rows leave by swap-removal, so the lanes stay packed and
nothing is copied from one cache to another.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import torch

from .cache import KVCache
from .commit import CommitPolicy
from .constraints import InfeasibleSlot, bitmask_width
from .items import Item
from .model import DiffusionLM
from .requests import DecodeRequest, DecodeResult
from .row_state import RowState
from .scoring import RESTRICTED_LIMIT, score_options, score_positions

OPTION_LIMIT = 256  # finite slots with more options than this are decided position by position
# A block-causal prefill commits a long prefix in forwards of about this many positions (whole
# model blocks), so its attention masks and activations grow with the prompt, not its square.
PREFILL_CHUNK = 2048


@dataclass(frozen=True)
class SamplerConfig:
    threshold: float = 0.9  # commit every item at least this confident
    # Steps per unit (the block, or a model block of a block-causal family; counted afresh for a
    # block laid out again with grown slots), then the unit's rest is committed greedily.
    max_steps: int | None = None
    temperature: float = 0.0  # 0: greedy; > 0: sample tokens/options, seeded per document
    cache: bool = True  # reuse the committed prefix's keys/values between steps (see below)
    # At most this many tokens committed per row per step; 1 gives the one-token-per-step
    # baseline (finite slots are then decided position by position as well). None: no limit.
    max_tokens_per_step: int | None = None
    batch_size: int = 16  # rows decoded together
    # Positions allowing at most this many tokens are scored from those tokens' logits only
    # (`scoring.py`; exact); 0: every position through the full-vocabulary head.
    head_limit: int = RESTRICTED_LIMIT
    # After a window's first forward, a step recomputes only the positions still open and those
    # committed since the last forward, open-ended filler tails excepted (`_queries`,
    # `DiffusionLM.forward_queries`), reading every other position's keys/values from that
    # forward: approximate; False runs the whole window.
    queries: bool = True
    # Below the threshold, every slot also commits its most confident continuation (a position
    # whose left neighbour in its slot is committed: how a begun value goes on), and a step
    # makes one uncertain choice, not one item (`commit.py`); False: Fast-dLLM's rule.
    parallel_continuations: bool = True

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
        self.partial = self.config.queries and self.config.cache and model.supports_queries
        self.mask_id = c.mask_token_id
        self.max_length = c.max_position_embeddings
        self.width = bitmask_width(c.embedding_size)
        self.policy = CommitPolicy(
            self.config.threshold,
            self.config.max_tokens_per_step,
            self.width,
            self.config.parallel_continuations,
        )

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
        lanes: list[RowState] = []  # rows stepping on the main cache, row i in lane i
        main: KVCache | None = None
        refill: list[RowState] = []  # rows whose prefix must be (re)built
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
            stepped: list[RowState] = []
            if lanes:  # rows already in lanes: one step on views of the main cache
                assert main is not None
                ahead = max(r.unit[1] - r.cached for r in lanes)
                main.reserve(max(r.cached for r in lanes) + ahead)
                self._step(lanes, main.view(len(lanes)), prefill=False)
                stepped.extend(lanes)
            if refill:  # new rows and rebuilt prefixes: one forward on the free lanes
                group, refill = refill, []
                cache = None
                if not self.exact:  # the exact path recomputes everything, nothing to keep
                    # Longest prefix first: the rows a leading chunk is for are then the first
                    # rows of the group's view (`_read_ahead`).
                    for row in group:
                        row.cached = 0
                    if self.block_size is not None:
                        group.sort(key=lambda r: -self._window(r, prefill=True)[2])
                    # The prefill runs on the main cache's free lanes, emptied: no second cache
                    # to allocate and copy from (for a long prompt, no second copy of its keys).
                    if main is None:
                        main = self.model.new_cache(self.config.batch_size)
                    # Room for each row's whole request at once: growing later copies the cache.
                    main.reserve(max(max(r.unit[1], r.request.length) for r in group))
                    free = main.view(len(group), start=len(lanes))
                    free.clear()
                    self._read_ahead(group, free)
                    # The prefill's keys reach the most read ahead plus the widest window left
                    # (a view cannot grow, so the main cache grows first).
                    main.reserve(
                        max(r.cached for r in group) + max(r.unit[1] - r.cached for r in group)
                    )
                    cache = main.view(len(group), start=len(lanes))
                self._step(group, cache, prefill=True)
                if cache is not None:
                    for row in group:
                        row.lane = len(lanes)
                        lanes.append(row)
                stepped.extend(group)
            for row in stepped:
                state = self._advance(row, main)
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

    def _admit(self, request: DecodeRequest) -> RowState:
        row = RowState(request, self.mask_id)
        if self.config.temperature > 0:
            row.rng = torch.Generator().manual_seed(request.seed)
        if request.length > self.max_length:
            row.result.error = (
                f"{request.length} tokens exceed the model's {self.max_length} positions"
            )
            return row
        row.start_block(self.block_size)
        return row

    def _leave(self, row: RowState, lanes: list[RowState], main: KVCache | None) -> None:
        """Remove a row from its lane, moving the last lane's row into the gap."""
        lane, last = row.lane, len(lanes) - 1
        assert lane is not None and main is not None
        if lane != last:
            main.move_row(last, lane)
            lanes[lane] = lanes[last]
            lanes[lane].lane = lane
        lanes.pop()
        row.lane = None

    def _rewind(self, row: RowState, main: KVCache | None) -> bool:
        """Block-causal families: after `row.regrow`, bring the row's cache lane back to its
        mark (`RowState.mark`) instead of rebuilding its prefix, when the mark lies before the
        model block of the first grown slot (the keys, values and states before it saw only
        tokens the new layout keeps, at the positions it keeps). False: rebuild it."""
        if (
            self.block_size is None
            or main is None
            or row.lane is None
            or row.mark is None
            or row.mark_block != row.block
            or row.mark_cached > min(row.masked) // self.block_size * self.block_size
        ):
            return False
        main.rewind(row.lane, row.mark)
        row.cached = row.mark_cached
        row.stats.rewound += 1
        return True

    def _advance(self, row: RowState, main: KVCache | None = None) -> str:
        """After a step: "stay" (same unit), "done", or "refill" (prefix rebuild needed)."""
        if row.result.error is not None:
            return "done"
        if row.unit_masked():
            return "stay"
        row.next_unit()
        if row.units:
            return "stay"
        if row.regrow(self.block_size, self.max_length):
            if self._rewind(row, main):
                return "stay"  # the block laid out again over the prefix its lane holds
            return "refill"  # the block laid out again: its prefix and window are rebuilt
        if not row.start_block(self.block_size):
            return "done"
        if self.block_size is None:
            return "refill"  # bidirectional: rebuild the prefix over prompt + decided blocks
        return "stay"

    # ------------------------------------------------------------------ one step
    def _queries(self, row: RowState, window: tuple[int, int, int]) -> list[int]:
        """The window offsets a step recomputes for `row`: its whole window, unless the cache
        holds the keys/values of this very window from the row's last forward and the step
        commits nothing; then the offsets whose tokens were committed since (but not to a slot's
        `stale_filler`: an open-ended value's tail keeps the keys and values of its masks,
        docs/benchmarks.md), those whose states predict its open positions (one earlier for
        families with shifted logits), and the skeleton token on either side of each slot still
        open."""
        start, end, commit = window
        if commit or row.window_seen != (start, end):
            return list(range(end - start))
        shift = 1 if self.model.config.logits_shift else 0
        open_positions = row.unit_masked()
        needed = {p - start - shift for p in open_positions} - {-1}
        # The skeleton tokens either side of a slot still being decided (its key's `":` and the
        # `,` or `}` after it) are recomputed too: stale, they kept the slot's value length from
        # the first forward (a free "4,275" read as 427 on the bundled model).
        for slot in {row.masked[p][0] for p in open_positions}:
            first = row.slot_starts[slot] - start
            needed |= {first - 1, first + row.slots()[slot].constraint.length}
        width = end - start
        changed = row.changed_in_window(filler=False)
        return sorted({k for k in needed if 0 <= k < width} | set(changed))

    def _window(self, row: RowState, prefill: bool) -> tuple[int, int, int]:
        """(window start, window end, tokens to commit) for this row's next forward."""
        unit_start, unit_end = row.unit
        if prefill:
            if self.exact:
                return 0, unit_end, 0
            if self.block_size is None:
                return 0, unit_end, row.block_start
            # `row.cached` is what `_read_ahead` already committed of a long prefix (else 0).
            start = row.cached
            return start, unit_end, unit_start // self.block_size * self.block_size - start
        if self.block_size is None:
            return row.cached, unit_end, 0
        return row.cached, unit_end, unit_start // self.block_size * self.block_size - row.cached

    def _read_ahead(self, rows: list[RowState], cache: KVCache) -> None:
        """Block-causal families: commit each row's prefix beyond `PREFILL_CHUNK` positions in
        leading forwards of whole model blocks on `cache` (the group's emptied lanes), leaving the
        prefill forward at most a chunk of the prefix plus the unit. Exact: a block-causal
        position attends to the blocks up to its own, and a Gated DeltaNet state carries over,
        whether the earlier blocks were read in the same forward or committed by an earlier one.
        `rows` are sorted longest prefix first, so each leading forward runs on a view of the
        first rows' lanes."""
        if self.block_size is None:
            return
        chunk = max(self.block_size, PREFILL_CHUNK // self.block_size * self.block_size)
        while True:
            ahead = [r for r in rows if self._window(r, prefill=True)[2] > chunk]
            if not ahead:
                return
            assert ahead == rows[: len(ahead)], "rows must come longest prefix first"
            ids = torch.tensor([r.seq[r.cached : r.cached + chunk] for r in ahead])
            shift = self._shifts(ahead, [(r.cached, r.cached + chunk) for r in ahead], chunk)
            self.model(
                ids.to(self.model.device), cache.view(len(ahead)), commit=chunk,
                position_shift=shift,
            )  # fmt: skip
            for row in ahead:
                row.cached += chunk
                row.stats.nfe += 1
                row.stats.positions += chunk

    def _shifts(
        self, rows: list[RowState], spans: list[tuple[int, int]], width: int
    ) -> torch.Tensor | None:
        """`position_shift` `[B, width]` of a forward over `spans` (`RowState.position_shifts`),
        or None when no row has a slot laid out short before its span's end."""
        per_row = [
            row.position_shifts(start, end) for row, (start, end) in zip(rows, spans, strict=True)
        ]
        if all(s is None for s in per_row):
            return None
        out = torch.zeros((len(rows), width), dtype=torch.long)
        for i, s in enumerate(per_row):
            if s is not None:
                out[i, : len(s)] = torch.tensor(s)
        return out.to(self.model.device)

    def _step(self, rows: list[RowState], cache: KVCache | None, prefill: bool) -> None:
        windows = [self._window(r, prefill) for r in rows]
        width = max(end - start for start, end, _ in windows)
        ids = torch.full((len(rows), width), self.mask_id, dtype=torch.long)
        for i, (row, (start, end, _)) in enumerate(zip(rows, windows, strict=True)):
            ids[i, : end - start] = torch.tensor(row.seq[start:end])
        lens = torch.tensor([end - start for start, end, _ in windows])
        commits = torch.tensor([c for _, _, c in windows])
        device = self.model.device
        shift = self._shifts(rows, [(start, end) for start, end, _ in windows], width)
        computed = [end - start for start, end, _ in windows]
        # Only the open positions' states are read below: the last layer runs just those
        # (`outputs` of `WindowedModel.forward` and `forward_queries`; exact).
        reads = [
            [p - start for p in row.unit_masked() if start <= p < end]
            for row, (start, end, _) in zip(rows, windows, strict=True)
        ]
        if self.partial and not prefill and cache is not None:
            queries = [self._queries(row, w) for row, w in zip(rows, windows, strict=True)]
            computed = [len(q) for q in queries]
            hidden = self.model.forward_queries(
                ids.to(device), cache, lens, queries, commits, position_shift=shift, outputs=reads
            )
        else:
            hidden = self.model(
                ids.to(device), cache, window_lens=lens, commit=commits, position_shift=shift,
                outputs=reads if cache is not None else None,
            )  # fmt: skip
        for i, (row, (_, end, commit), n) in enumerate(zip(rows, windows, computed, strict=True)):
            row.cached = (0 if prefill and self.block_size is None else row.cached) + commit
            row.stats.nfe += 1
            row.stats.positions += n
            # What the cache now holds for the rest of the window: keys/values of these tokens.
            row.window_seen = (row.cached, end)
            row.window_tokens = row.seq[row.cached : end]
            if (
                self.block_size is not None
                and cache is not None
                and row.mark_block != row.block
                and row.may_grow()
            ):
                # After a block's first forward everything before its first unit is committed
                # and fixed: a block laid out again with grown slots restarts from here.
                row.mark, row.mark_cached, row.mark_block = cache.mark(i), row.cached, row.block

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
        items: dict[int, list[Item]] = {i: [] for i in range(len(rows))}
        for i, item in score_options(
            self.model, rows, option_slots, hidden, starts, self.config.temperature
        ):
            items[i].append(item)
        logits = None
        if dense:
            logits = score_positions(
                self.model,
                rows,
                dense,
                hidden,
                starts,
                items,
                head_limit=self.config.head_limit,
                max_steps=self.config.max_steps,
                temperature=self.config.temperature,
                width=self.width,
                vocab=self.model.config.embedding_size,
            )

        for i, row in enumerate(rows):
            if row.result.error is not None or not items[i]:
                continue
            row.stats.steps += 1
            row.unit_steps += 1
            forced = self.config.max_steps is not None and row.unit_steps >= self.config.max_steps
            row.stats.forced |= forced
            try:
                self.policy.commit(row, items[i], logits, forced)
            except InfeasibleSlot as exc:
                row.result.error = f"block {row.block}: {exc}"
