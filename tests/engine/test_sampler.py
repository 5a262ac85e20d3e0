"""The infilling sampler on tiny random checkpoints of every family, with brute-force list
constraints as the oracle for what each slot may hold."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
import torch
from helpers.constraints import GrowingConstraint, ListConstraint

from decide.engine import commit, load_model
from decide.engine.items import OptionItem, PositionItem
from decide.engine.requests import Block, DecodeRequest, Slot
from decide.engine.row_state import RowState
from decide.engine.sampler import Sampler, SamplerConfig

MODEL_TYPES = ("llada", "Dream", "sdar", "Fast_dLLM_Qwen")
FILLER = 50259  # <|pad|> in the tiny checkpoints' tokenizer


def _language(rng: random.Random, length: int, size: int) -> list[tuple[int, ...]]:
    """`size` distinct sequences of `length` tokens, values ending in filler, sharing prefixes
    often so that single-position choices can conflict."""
    out: set[tuple[int, ...]] = set()
    alphabet = [rng.randrange(0, 50000) for _ in range(4)]
    while len(out) < size:
        used = rng.randint(1, length)
        value = [rng.choice(alphabet) for _ in range(used)]
        out.add(tuple(value + [FILLER] * (length - used)))
    return sorted(out)


def _requests(seed: int, count: int, finite: bool = True) -> list[DecodeRequest]:
    rng = random.Random(seed)
    requests = []
    for key in range(count):
        blocks = []
        for _ in range(rng.randint(1, 3)):
            tokens: list[int] = []
            slots = []
            for _ in range(rng.randint(1, 4)):
                tokens += [rng.randrange(0, 50000) for _ in range(rng.randint(1, 4))]
                length = rng.randint(1, 4)
                language = _language(rng, length, rng.randint(1, min(6, 4**length)))
                slots.append(Slot(len(tokens), ListConstraint(language, finite=finite)))
                tokens += [0] * length
            tokens.append(rng.randrange(0, 50000))
            blocks.append(Block(tokens, slots))
        prompt = [rng.randrange(0, 50000) for _ in range(rng.randint(3, 30))]
        requests.append(DecodeRequest(prompt=prompt, blocks=blocks, key=key, seed=key))
    return requests


def _decode(model_dir, requests, **options):
    loaded = load_model(model_dir)
    results = list(Sampler(loaded.model, SamplerConfig(**options)).decode(requests))
    return {r.request.key: r for r in results}


def _check_valid(results) -> None:
    for result in results.values():
        assert result.error is None, result.error
        assert len(result.blocks) == len(result.request.blocks) == len(result.layouts)
        for block, tokens, slot_results in zip(
            result.layouts, result.blocks, result.slots, strict=True
        ):
            for slot, slot_result in zip(block.slots, slot_results, strict=True):
                assert tuple(slot_result.tokens) in slot.constraint.sequences
                assert tuple(tokens[slot.start : slot.end]) == tuple(slot_result.tokens)
                assert slot.constraint.is_complete()
                assert 0.0 < slot_result.confidence <= 1.0 + 1e-6
            fixed = [
                t
                for i, t in enumerate(block.tokens)
                if not any(s.start <= i < s.end for s in block.slots)
            ]
            kept = [
                t
                for i, t in enumerate(tokens)
                if not any(s.start <= i < s.end for s in block.slots)
            ]
            assert fixed == kept  # the skeleton is never touched
        assert result.nfe >= len(result.request.blocks)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
@pytest.mark.parametrize("finite", [True, False])
def test_every_slot_ends_in_its_language(model_type, finite, tiny_checkpoint) -> None:
    requests = _requests(seed=11, count=12, finite=finite)
    results = _decode(
        tiny_checkpoint(model_type, init_std=0.2), requests, batch_size=5, threshold=0.5
    )
    assert sorted(results) == list(range(12))
    _check_valid(results)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_batched_equals_one_document_at_a_time(model_type, tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    batched = _decode(model_dir, _requests(seed=12, count=8), batch_size=4)
    for key, result in batched.items():
        alone = _decode(model_dir, [_requests(seed=12, count=8)[key]], batch_size=1)[key]
        assert alone.blocks == result.blocks
        assert [s.nfe for s in alone.stats] == [s.nfe for s in result.stats]


@pytest.mark.parametrize("model_type", ["sdar", "Fast_dLLM_Qwen", "llada"])
def test_cached_equals_recomputed(model_type, tiny_checkpoint) -> None:
    """Block-causal caches are exact: the same tokens as recomputing everything every step. For
    bidirectional families the recompute path is the exact reference itself (checked valid)."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    exact = _decode(model_dir, _requests(seed=13, count=6), batch_size=3, cache=False)
    _check_valid(exact)
    if model_type != "llada":
        cached = _decode(model_dir, _requests(seed=13, count=6), batch_size=3, queries=False)
        for key in exact:
            assert cached[key].blocks == exact[key].blocks


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_in_block_queries_compute_fewer_positions(model_type, tiny_checkpoint) -> None:
    """Steps that recompute only the open and newly committed positions (approximate) stay
    valid, take as many forwards per block, and compute fewer positions than whole windows."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    whole = _decode(model_dir, _requests(seed=14, count=6), batch_size=3, queries=False)
    part = _decode(model_dir, _requests(seed=14, count=6), batch_size=3, queries=True)
    _check_valid(part)
    computed = {name: sum(s.positions for r in runs.values() for s in r.stats)
                for name, runs in (("whole", whole), ("part", part))}  # fmt: skip
    assert computed["part"] < computed["whole"], computed


class FillerConstraint(ListConstraint):
    """A `ListConstraint` whose tail may stay stale (`SlotConstraint.stale_filler`)."""

    stale_filler = FILLER


def _with_filler(requests: list[DecodeRequest]) -> list[DecodeRequest]:
    for request in requests:
        for block in request.blocks:
            for slot in block.slots:
                slot.constraint.__class__ = FillerConstraint
    return requests


@pytest.mark.parametrize("model_type", ("llada", "sdar"))
def test_in_block_queries_leave_out_positions_committed_to_filler(
    model_type, tiny_checkpoint, monkeypatch
) -> None:
    """A value's tail committed to its slot's filler keeps the keys and values it had as masks:
    no partial step recomputes it, so fewer positions are computed than for the same slots
    without a declared filler; the answers stay valid."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    plain = _decode(model_dir, _requests(seed=14, count=6), batch_size=3)
    recomputed_filler = []
    queries = Sampler._queries

    def spy(self, row, window):
        out = queries(self, row, window)
        if len(out) < window[1] - window[0]:  # a partial step
            slots = {p for first, slot in zip(row.slot_starts, row.slots(), strict=True)
                     for p in range(first, first + slot.constraint.length)}  # fmt: skip
            recomputed_filler.extend(k for k in out if window[0] + k in slots
                                     and row.seq[window[0] + k] == FILLER)  # fmt: skip
        return out

    monkeypatch.setattr(Sampler, "_queries", spy)
    named = _decode(model_dir, _with_filler(_requests(seed=14, count=6)), batch_size=3)
    _check_valid(named)
    assert recomputed_filler == []
    computed = {name: sum(s.positions for r in runs.values() for s in r.stats)
                for name, runs in (("plain", plain), ("named", named))}  # fmt: skip
    assert computed["named"] < computed["plain"], computed


def test_same_seed_same_bytes_when_sampling(tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint("Dream", init_std=0.2)
    options = dict(temperature=1.0, threshold=0.5)
    a = _decode(model_dir, _requests(seed=14, count=6), batch_size=3, **options)
    b = _decode(model_dir, _requests(seed=14, count=6), batch_size=2, **options)
    _check_valid(a)
    assert {k: r.blocks for k, r in a.items()} == {k: r.blocks for k, r in b.items()}


def test_finite_slots_are_committed_as_whole_options(tiny_checkpoint) -> None:
    """At threshold 1.0 without parallel continuations only one item commits per step: a
    3-token finite slot then takes one step as an option and three as positions."""
    language = [(a, b, c) for a in (1, 4) for b in (2, 5) for c in (3, 6)]  # no forced moves

    def request(finite: bool) -> DecodeRequest:
        block = Block([10, 0, 0, 0, 11], [Slot(1, ListConstraint(language, finite=finite))])
        return DecodeRequest(prompt=[12, 13, 14, 15], blocks=[block], key=0)

    model_dir = tiny_checkpoint("llada", init_std=0.2)
    one = {"threshold": 1.0, "parallel_continuations": False}
    whole = _decode(model_dir, [request(True)], **one)[0]
    single = _decode(model_dir, [request(False)], **one)[0]
    assert whole.stats[0].steps == 1
    assert single.stats[0].steps == 3
    assert tuple(whole.slots[0][0].tokens) in language
    assert tuple(single.slots[0][0].tokens) in language


def test_step_cap_commits_the_rest_greedily(tiny_checkpoint) -> None:
    results = _decode(
        tiny_checkpoint("sdar", init_std=0.2),
        _requests(seed=15, count=4, finite=False),
        threshold=1.0,
        max_steps=1,
    )
    _check_valid(results)
    for result in results.values():
        assert all(s.forced for s in result.stats)


def test_step_cap_counts_the_steps_of_each_unit(tiny_checkpoint) -> None:
    """On a block-causal family a block is decided unit by unit (model blocks): the cap bounds
    each unit's steps, so a unit decided late in a block still gets its own steps instead of
    being filled greedily because earlier units spent the block's."""
    model_dir = tiny_checkpoint("sdar", init_std=0.2)
    size = load_model(model_dir).config.block_size
    capped = _decode(model_dir, _requests(seed=15, count=8, finite=False), threshold=1.0,
                     max_steps=2)  # fmt: skip
    _check_valid(capped)
    spread = 0
    for result in capped.values():
        start = len(result.request.prompt)
        for stats, block in zip(result.stats, result.request.blocks, strict=True):
            answers = {start + p for s in block.slots for p in range(s.start, s.end)}
            units = len({p // size for p in answers})  # model blocks holding answer positions
            assert stats.steps <= 2 * units
            spread += stats.steps > units + 1  # more than one unit took two steps
            start += len(block.tokens)
    assert spread >= 3


def test_step_cap_counts_afresh_for_a_block_laid_out_again() -> None:
    """A block laid out again with grown slots decides them with a step budget of its own."""
    row = RowState(_growing_requests(1, fills=True)[0], mask_id=0)
    row.start_block(None)
    row.unit_steps = 3
    for pos, (slot, offset) in sorted(row.masked.items()):
        constraint = row.slots()[slot].constraint
        token = sorted(constraint.sequences)[0][offset]
        assert constraint.commit(offset, token)
        row.seq[pos] = token
        del row.masked[pos]
    assert row.regrow(None, 1000)
    assert row.masked and row.unit_steps == 0


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_step_cap_scores_independent_slots_together_with_the_same_commits(
    model_type, tiny_checkpoint
) -> None:
    """Slots that declare themselves `independent` are scored in one call per round of the
    forced fill; the commits are those of scoring slot by slot, and their confidences equal up to
    the float rounding of a differently batched softmax."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)  # llada: a step spans the block
    runs = []
    for independent in (False, True):
        requests = _requests(seed=15, count=6, finite=False)
        for request in requests:
            for block in request.blocks:
                for slot in block.slots:
                    slot.constraint.independent = independent
        runs.append(_decode(model_dir, requests, threshold=1.0, max_steps=1))
    slot_by_slot, together = runs
    _check_valid(together)
    assert sum(len(b.slots) > 1 for r in together.values() for b in r.request.blocks) >= 4
    for key, result in together.items():
        assert all(s.forced for s in result.stats)
        assert result.blocks == slot_by_slot[key].blocks
        for block, reference in zip(result.slots, slot_by_slot[key].slots, strict=True):
            assert [s.tokens for s in block] == [s.tokens for s in reference]
            assert [s.confidence for s in block] == pytest.approx(
                [s.confidence for s in reference], rel=1e-5
            )


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_step_cap_fill_starts_from_the_steps_own_scores(
    model_type, tiny_checkpoint, monkeypatch
) -> None:
    """The forced fill reuses the best token and probability the step computed for a position
    while its mask is unchanged: the same commits as scoring every position again, with fewer
    rows scored."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    scored_rows: list[int] = []
    real_confidence = commit.masked_confidence

    def counting(logits, masks, rows=None, *args, **kwargs):
        scored_rows[-1] += masks.shape[0]
        return real_confidence(logits, masks, rows, *args, **kwargs)

    monkeypatch.setattr(commit, "masked_confidence", counting)
    real_fill = commit.CommitPolicy.commit_all
    runs = []
    for reuse in (False, True):
        fill = real_fill if reuse else (lambda self, *a, seeds=None, **k: real_fill(self, *a, **k))
        monkeypatch.setattr(commit.CommitPolicy, "commit_all", fill)
        scored_rows.append(0)
        requests = _requests(seed=18, count=6, finite=False)
        runs.append(_decode(model_dir, requests, threshold=1.0, max_steps=1))
    again, reused = runs
    _check_valid(reused)
    for key, result in reused.items():
        assert all(s.forced for s in result.stats)
        assert result.blocks == again[key].blocks
        for block, reference in zip(result.slots, again[key].slots, strict=True):
            assert [s.confidence for s in block] == pytest.approx(
                [s.confidence for s in reference], rel=1e-5
            )
    assert 0 < scored_rows[1] < scored_rows[0], scored_rows


def test_parallel_commits_cut_forward_passes(tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint("Dream", init_std=0.2)
    eager = _decode(model_dir, _requests(seed=16, count=6, finite=False), threshold=0.01)
    one = _decode(model_dir, _requests(seed=16, count=6, finite=False), threshold=1.0)
    assert sum(r.nfe for r in eager.values()) < sum(r.nfe for r in one.values())
    for result in one.values():  # at most one step per answer token (forced tokens ride along)
        assert result.nfe <= result.answer_tokens


def _growing_requests(count: int, fills: bool) -> list[DecodeRequest]:
    """Blocks with a plain slot, a slot laid out with 2 positions that grows to 5 (its short
    values all fill it when `fills`, else none does) and a slot after it, over 2 blocks."""
    rng = random.Random(31)
    requests = []
    for key in range(count):
        blocks = []
        for _ in range(2):
            a, b, c, d = (rng.randrange(0, 50000) for _ in range(4))
            short = [(a, b), (b, a)] if fills else [(a, FILLER), (b, FILLER)]
            longer = [(a, b, c, FILLER, FILLER), (a, b, c, d, a), (b, a, FILLER, FILLER, FILLER)]
            tokens = [rng.randrange(0, 50000) for _ in range(3)] + [0]
            slots = [Slot(3, ListConstraint([(c,), (d,)]))]
            tokens += [7, 0, 0, 8]
            slots.append(Slot(5, GrowingConstraint(short, longer, FILLER)))
            tokens += [9, 0, 0, 10]
            slots.append(Slot(9, ListConstraint([(c, d), (d, FILLER)], finite=False)))
            blocks.append(Block(tokens, slots))
        prompt = [rng.randrange(0, 50000) for _ in range(rng.randint(3, 20))]
        requests.append(DecodeRequest(prompt=prompt, blocks=blocks, key=key))
    return requests


@pytest.mark.parametrize("model_type", [*MODEL_TYPES, "qwen3_next", "llada2_moe"])
def test_a_value_filling_its_short_slot_is_decided_again_grown(model_type, tiny_checkpoint) -> None:
    """A value that fills a slot laid out short makes the block be laid out again with the slot
    grown (later tokens moved along): the other slots keep their tokens, only the grown slot is
    decided again, and the cached paths give what recomputing everything gives."""
    extra = {"block_size": 8} if model_type == "qwen3_next" else {}
    model_dir = tiny_checkpoint(model_type, init_std=0.2, **extra)
    exact = _decode(model_dir, _growing_requests(4, fills=True), batch_size=3, cache=False)
    _check_valid(exact)
    for result in exact.values():
        assert [s.regrown for s in result.stats] == [1, 1]
        for request_block, layout, tokens in zip(
            result.request.blocks, result.layouts, result.blocks, strict=True
        ):
            assert [s.start for s in layout.slots] == [3, 5, 12]
            assert [s.constraint.length for s in layout.slots] == [1, 5, 2]
            assert tokens[4:5] + tokens[10:12] + tokens[14:] == [7, 8, 9, 10]
            assert layout.slots[1].constraint is not request_block.slots[1].constraint
            assert layout.slots[0].constraint is request_block.slots[0].constraint
        # the grown slot spends forwards of its own: one more prefill at least per block
        assert all(s.nfe >= 2 for s in result.stats)
    cached = _decode(model_dir, _growing_requests(4, fills=True), batch_size=3)
    _check_valid(cached)
    block_causal = load_model(model_dir).config.block_size is not None
    for result in cached.values():
        # Block-causal: the lane is rewound to the block's start instead of the prefix re-read.
        assert [s.rewound for s in result.stats] == ([1, 1] if block_causal else [0, 0])
    if model_type in ("sdar", "Fast_dLLM_Qwen", "qwen3_next"):  # block-causal: the cache is exact
        for key in exact:
            assert cached[key].blocks == exact[key].blocks
    ended = _decode(model_dir, _growing_requests(4, fills=False), batch_size=3)
    _check_valid(ended)
    for result in ended.values():  # values that end inside their slot never grow it
        assert [s.regrown for s in result.stats] == [0, 0]
        assert [len(b) for b in result.blocks] == [12, 12]


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_tokens_after_a_short_slot_keep_their_whole_layout_positions(
    model_type, tiny_checkpoint, monkeypatch
) -> None:
    """The model encodes every token after a slot laid out short (2 positions standing for 5)
    3 positions further on than the cache holds it; tokens before it where they are."""
    loaded = load_model(tiny_checkpoint(model_type, init_std=0.2))
    seen = []
    trunk = type(loaded.model)._trunk

    def spy(self, input_ids, plan, cache, *outputs):
        seen.append((plan.positions.clone(), plan.encoded_positions.clone()))
        return trunk(self, input_ids, plan, cache, *outputs)

    monkeypatch.setattr(type(loaded.model), "_trunk", spy)
    request = _growing_requests(1, fills=False)[0]
    prompt = len(request.prompt)
    result = next(iter(Sampler(loaded.model, SamplerConfig()).decode([request])))
    assert result.error is None and [s.regrown for s in result.stats] == [0, 0]
    ends = [prompt + 7, prompt + 12 + 7]  # the short slots' ends (tokens 5, 6 of each block)
    shifted = 0
    for positions, encoded in seen:  # every forward, prefill, steps and queries alike
        expected = sum(3 * (positions >= end).long() for end in ends)
        assert torch.equal(encoded - positions, expected)
        shifted += int((expected > 0).sum())
    assert shifted > 0


def test_a_slot_does_not_grow_past_the_model_positions(tiny_checkpoint) -> None:
    request = _growing_requests(1, fills=True)[0]
    blocks = request.blocks[:1]
    fits = 4096 - len(blocks[0].tokens)  # the tiny sdar's positions, exactly full
    request = DecodeRequest(prompt=[5] * fits, blocks=blocks, key=0)
    result = _decode(tiny_checkpoint("sdar", init_std=0.2), [request])[0]
    assert result.error is None
    assert result.stats[0].regrown == 0  # the short values stand
    assert [s.constraint.length for s in result.layouts[0].slots] == [1, 2, 2]


def test_regrown_block_moves_later_tokens_along() -> None:
    block = Block(
        [1, 0, 2, 0, 0, 3, 0, 4],
        [Slot(6, ListConstraint([(5,)])), Slot(1, ListConstraint([(6,)])),
         Slot(3, ListConstraint([(7, 8)]))],
    )  # fmt: skip
    bigger = block.regrown({1: ListConstraint([(6, 6, 6)]), 2: ListConstraint([(7, 8, 9)])})
    assert [s.start for s in bigger.slots] == [9, 1, 5]
    assert [s.constraint.length for s in bigger.slots] == [1, 3, 3]
    assert len(bigger.tokens) == 11
    assert [bigger.tokens[i] for i in (0, 4, 8, 10)] == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="cannot shrink"):
        bigger.regrown({1: ListConstraint([(6,)])})


def test_infeasible_slot_fails_only_its_document(tiny_checkpoint) -> None:
    requests = _requests(seed=17, count=3)
    broken = Block([1, 0, 2], [Slot(1, ListConstraint([]))])
    requests[1] = DecodeRequest(prompt=[5, 6, 7], blocks=[broken], key=1)
    results = _decode(tiny_checkpoint("llada", init_std=0.2), requests)
    assert "slot 0" in results[1].error
    assert results[0].error is None and results[2].error is None


def test_too_long_document_is_an_error_result(tiny_checkpoint) -> None:
    block = Block([1, 0, 2], [Slot(1, ListConstraint([(3,)]))])
    request = DecodeRequest(prompt=[5] * 5000, blocks=[block], key=0)
    result = _decode(tiny_checkpoint("sdar", init_std=0.2), [request])[0]
    assert "exceed the model's 4096 positions" in result.error


def test_config_is_checked() -> None:
    with pytest.raises(ValueError, match="threshold"):
        SamplerConfig(threshold=0)
    with pytest.raises(ValueError, match="max_steps"):
        SamplerConfig(max_steps=0)
    assert torch.get_num_threads() >= 1


def test_one_token_per_step_baseline(tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint("llada", init_std=0.2)
    results = _decode(model_dir, _requests(seed=18, count=5), threshold=0.01, max_tokens_per_step=1)
    _check_valid(results)
    for result in results.values():  # every step commits exactly one token, options included
        assert result.nfe == result.answer_tokens


def test_trie_scores_follow_the_chain_rule() -> None:
    """Options (A,X), (A,Y), (B,Z): the second position only matters below A, and the three
    probabilities are the chain-rule products, summing to one."""
    import math

    from decide.engine.scoring import _trie_scores

    la, lb, lx, ly, lz = 1.3, -0.4, 0.2, 2.0, -5.0
    scores = torch.tensor([la, lb, lx, ly, lz])  # candidates: pos 0 → [A, B], pos 1 → [X, Y, Z]
    pairs = torch.tensor([[0, 2], [0, 3], [1, 4]])  # each option's (position, token) pairs
    got = _trie_scores(scores, pairs, torch.zeros(3, dtype=torch.long)).exp()
    p_a = math.exp(la) / (math.exp(la) + math.exp(lb))
    p_x = math.exp(lx) / (math.exp(lx) + math.exp(ly))
    want = torch.tensor([p_a * p_x, p_a * (1 - p_x), 1 - p_a])
    assert torch.allclose(got, want.float(), atol=1e-6)
    assert abs(float(got.sum()) - 1.0) < 1e-6


def _chain_rule_reference(options: list[list[int]], logit: dict) -> list[float]:
    """Plain-Python log-probability of each option through the options' prefix tree: at each
    position, log-softmax of its token over the distinct tokens of the options sharing its prefix
    (nothing where they all agree)."""
    out = []
    for option in options:
        total = 0.0
        for j, token in enumerate(option):
            siblings = {o[j] for o in options if o[:j] == option[:j]}
            if len(siblings) > 1:
                norm = math.log(sum(math.exp(logit[j, t]) for t in siblings))
                total += logit[j, token] - norm
        out.append(total)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_trie_scores_match_the_chain_rule_on_random_option_sets(seed: int) -> None:
    """Several slots scored together (their own depths, shared prefixes, a single option, wide
    and deep trees): each slot's scores equal the plain tree walk, and sum to one."""
    from decide.engine.scoring import _trie_scores

    rng = random.Random(seed)
    scores: list[float] = []
    rows: list[list[int]] = []
    trees: list[int] = []
    want: list[float] = []
    spans = []
    for slot in range(rng.randint(1, 5)):
        length, alphabet = rng.randint(1, 5), rng.randint(1, 6)
        drawn = {tuple(rng.randrange(alphabet) for _ in range(length)) for _ in range(60)}
        options = [list(o) for o in sorted(drawn)][: rng.randint(1, 60)]
        logit = {(j, t): rng.gauss(0, 3) for j in range(length) for t in range(alphabet)}
        pair = {}  # (position, token) → index into scores, as the sampler numbers them
        for j in range(length):
            for t in sorted({o[j] for o in options}):
                pair[j, t] = len(scores)
                scores.append(logit[j, t])
        spans.append((len(rows), len(options)))
        rows.extend([pair[j, t] for j, t in enumerate(o)] for o in options)
        trees.extend([slot] * len(options))
        want.extend(_chain_rule_reference(options, logit))
    depth = max(len(r) for r in rows)
    pairs = torch.tensor([r + [-1] * (depth - len(r)) for r in rows])
    got = _trie_scores(torch.tensor(scores), pairs, torch.tensor(trees))
    assert torch.allclose(got, torch.tensor(want).float(), atol=1e-4)
    for first, count in spans:
        assert abs(float(got[first : first + count].exp().sum()) - 1.0) < 1e-4


def test_inference_mode_never_leaks_to_the_caller(tiny_checkpoint) -> None:
    """Decoding runs under inference mode, but the consumer of `decode` never sees it: between
    results, and after stopping early (a failed write, say), its thread still records gradients."""
    loaded = load_model(tiny_checkpoint("Dream", init_std=0.2))
    results = Sampler(loaded.model, SamplerConfig(batch_size=2)).decode(_requests(seed=3, count=5))
    first = next(results)
    assert first.error is None
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    next(results)
    del results  # abandoned mid-way, never closed explicitly
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    x = torch.ones(2, requires_grad=True)
    (x * 2).sum().backward()
    assert x.grad is not None


@pytest.mark.parametrize("model_type", ["llada", "Dream", "sdar"])
@pytest.mark.parametrize("finite", [True, False])
def test_sampler_answers_do_not_depend_on_the_head(model_type, finite, tiny_checkpoint) -> None:
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    options = dict(batch_size=4, threshold=0.5, max_tokens_per_step=None if finite else 2)
    _same_answers_either_head(model_dir, finite, options)


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_forced_fill_answers_do_not_depend_on_the_head(model_type, tiny_checkpoint) -> None:
    """At the step cap, positions allowing few tokens are scored from those tokens' logits only
    and the forced fill re-scores them from those under its narrower masks: the same commits as
    from full-vocabulary rows."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    for cap in (1, 2):
        options = dict(batch_size=4, threshold=1.0, max_steps=cap)
        results = _same_answers_either_head(model_dir, False, options)
        forced = [s.forced for r in results.values() for s in r.stats]
        assert sum(forced) >= len(forced) // 2, forced


def _same_answers_either_head(model_dir, finite: bool, options: dict) -> dict:
    full = _decode(model_dir, _requests(seed=21, count=8, finite=finite), head_limit=0, **options)
    restricted = _decode(model_dir, _requests(seed=21, count=8, finite=finite), **options)
    for key, result in full.items():
        other = restricted[key]
        assert other.blocks == result.blocks
        assert [s.nfe for s in other.stats] == [s.nfe for s in result.stats]
        for slots, other_slots in zip(result.slots, other.slots, strict=True):
            for a, b in zip(slots, other_slots, strict=True):
                assert a.tokens == b.tokens
                assert abs(a.confidence - b.confidence) <= 1e-6
    return restricted


@pytest.mark.parametrize("model_type", ["bert", "llada", "Dream", "sdar"])
def test_the_last_layer_on_open_positions_only_decides_the_same(
    model_type, tiny_checkpoint, monkeypatch
) -> None:
    """The sampler's forwards compute the last layer only where a state is read (`outputs`):
    the same tokens and confidences as computing every position (`supports_outputs` off)."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    # fresh requests for each run: decoding commits into their slots' constraints
    with_outputs = _decode(model_dir, _requests(7, 6, finite=False), max_steps=4, batch_size=4)
    monkeypatch.setattr(type(load_model(model_dir).model), "supports_outputs", False)
    without = _decode(model_dir, _requests(7, 6, finite=False), max_steps=4, batch_size=4)
    for key, result in without.items():
        assert with_outputs[key].blocks == result.blocks, key
        got = [s.confidence for block in with_outputs[key].slots for s in block]
        want = [s.confidence for block in result.slots for s in block]
        assert got == pytest.approx(want, rel=1e-4), key


def _row_with_begun_values() -> tuple[RowState, commit.CommitPolicy]:
    """A row of one block with four slots: two free ones whose first token is committed (values
    begun), one finite, one free and untouched."""
    a, b, c = 101, 102, 103
    free = [(a, b, c), (b, c, a), (a, c, b), (c, a, b)]
    tokens = [7, 0, 0, 0, 8, 0, 0, 0, 9, 0, 10, 0, 0]
    slots = [
        Slot(1, ListConstraint(free, finite=False)),
        Slot(5, ListConstraint(free, finite=False)),
        Slot(9, ListConstraint([(a,), (b,)])),
        Slot(11, ListConstraint([(a, b), (b, a)], finite=False)),
    ]
    row = RowState(DecodeRequest(prompt=[1, 2, 3], blocks=[Block(tokens, slots)], key=0), 0)
    assert row.start_block(None)
    policy = commit.CommitPolicy(0.9, None, 4)
    start = row.slot_starts
    assert policy.commit_position(row, start[0], a, 0.8)
    assert policy.commit_position(row, start[1], b, 0.8)
    return row, policy


def _by_confidence(items: list) -> list:
    return sorted(items, key=lambda it: it.confidence)


def test_uncertain_continuations_go_on_in_every_slot_and_choices_one_per_step() -> None:
    """Below the threshold, each slot commits its most confident continuation (an open position
    whose left neighbour in the slot is committed) and the row its single most confident choice
    (an option, or a position starting a value or with an open left neighbour); a confident
    choice stands for the step's choice. Without `parallel_continuations`, Fast-dLLM's rule."""
    row, policy = _row_with_begun_values()
    s = row.slot_starts

    def position(at: int, confidence: float) -> PositionItem:
        return PositionItem(confidence, at, 101, -1)

    go_on_0 = position(s[0] + 1, 0.4)  # continues slot 0
    open_left = position(s[0] + 2, 0.45)  # slot 0, its left neighbour open: a choice
    go_on_1 = position(s[1] + 1, 0.5)
    weaker_1 = position(s[1] + 2, 0.3)  # not a continuation either
    option = OptionItem(0.6, 2, (101,), [s[2]])
    begins = position(s[3], 0.7)  # starts slot 3's value: a choice
    items = [go_on_0, open_left, go_on_1, weaker_1, option, begins]
    assert _by_confidence(policy.choose(row, items)) == _by_confidence([go_on_0, go_on_1, begins])
    old = dataclasses.replace(policy, parallel_continuations=False)
    assert old.choose(row, items) == [begins]

    sure = option._replace(confidence=0.95)  # a confident choice: no other choice this step
    items = [go_on_0, open_left, go_on_1, sure, begins]
    assert _by_confidence(policy.choose(row, items)) == _by_confidence([sure, go_on_0, go_on_1])
    assert old.choose(row, items) == [sure]

    sure_going_on = go_on_1._replace(confidence=0.97)  # a confident continuation is no choice
    items = [go_on_0, sure_going_on, option, begins]
    assert _by_confidence(policy.choose(row, items)) == _by_confidence(
        [sure_going_on, go_on_0, begins]
    )
    assert old.choose(row, items) == [sure_going_on]

    one = dataclasses.replace(policy, max_tokens_per_step=1)  # the baseline: one item per step
    before = dict(row.masked)
    one.commit(row, [go_on_0, go_on_1, option, begins], None, forced=False)
    assert set(before) - set(row.masked) == {begins.position}


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_parallel_continuations_cut_forwards_and_keep_answers_valid(
    model_type, tiny_checkpoint
) -> None:
    """On a random model (nothing reaches 0.9) free slots go on together: fewer forwards than
    one uncertain item per step, every answer still in its slot's language."""
    model_dir = tiny_checkpoint(model_type, init_std=0.2)
    both = _decode(model_dir, _requests(seed=21, count=6, finite=False), threshold=0.9)
    one = _decode(
        model_dir,
        _requests(seed=21, count=6, finite=False),
        threshold=0.9,
        parallel_continuations=False,
    )
    _check_valid(both)
    _check_valid(one)
    assert sum(r.nfe for r in both.values()) < sum(r.nfe for r in one.values())
