"""Masks and commits of `SlotState` against brute force over a tiny synthetic vocabulary.

The oracle never touches our automata: candidate values are enumerated by hand-written generators,
kept when `jsonschema` accepts them, written as canonical compact JSON, and every split of each text
into vocabulary pieces of at most L tokens (then filler) is listed. Allowed tokens at a position are
the tokens some listed sequence consistent with the commits has there.
"""

from __future__ import annotations

import itertools
import json
import random

import jsonschema
import numpy as np
import pytest
import torch

from decide.engine.constraints import InfeasibleSlot, SlotConstraint
from decide.schemas import Vocabulary, compile_slot

PIECES = [
    '"',
    "a",
    "b",
    "ab",
    "ba",
    '"a',
    'b"',
    "é",
    b"\xc3",
    b"\xa9",
    "\\",
    "n",
    "\\n",
    "\n",
    "0",
    "1",
    "2",
    "10",
    "12",
    "-",
    "-1",
    "t",
    "r",
    "u",
    "e",
    "true",
    "f",
    "al",
    "se",
    "false",
    "null",
    "nu",
    "ll",
    "[",
    "]",
    ",",
    '["',
    '"]',
    '","',
    "{",
    "}",
    '{"',
    "k",
    '":',
    '"k":',
    ":",
]
SURFACES = [p.encode() if isinstance(p, str) else p for p in PIECES]
FILLER = len(SURFACES)
MASK = FILLER + 1
VOCAB = Vocabulary.from_bytes([*SURFACES, None, None], excluded=[FILLER, MASK])


def strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(p) for n in range(max_len + 1) for p in itertools.product(alphabet, repeat=n)]


CASES = [
    ({"enum": ["ab", "ba", "a"]}, ["ab", "ba", "a", "b", 1]),
    ({"type": "boolean"}, [True, False, None]),
    ({"type": ["null", "boolean"]}, [True, False, None, 0]),
    ({"type": "integer", "minimum": -2, "maximum": 12}, list(range(-15, 25))),
    ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 2.5}, list(range(-5, 5))),
    ({"type": "string", "maxLength": 2, "pattern": "^[abé]*$"}, strings("abé", 3)),
    ({"type": "string", "minLength": 1, "maxLength": 2, "pattern": "^[a\n]*$"}, strings("a\nb", 3)),
    (
        {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        [list(p) for n in range(4) for p in itertools.product("ab", repeat=n)],
    ),
    (
        {
            "type": "object",
            "properties": {"k": {"type": "integer", "minimum": 0, "maximum": 2}},
            "additionalProperties": False,
        },
        [{}, *({"k": i} for i in range(-1, 12))],
    ),
    (
        {"anyOf": [{"const": "a"}, {"type": "integer", "minimum": 9, "maximum": 11}]},
        ["a", "b", *range(0, 15)],
    ),
    ({"type": "integer", "minimum": 0, "maximum": 12, "not": {"const": 10}}, list(range(0, 15))),
]


def tokenizations(data: bytes, limit: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []

    def go(off: int, path: tuple[int, ...]) -> None:
        if off == len(data):
            out.append(path)
            return
        if len(path) == limit:
            return
        for i, s in enumerate(SURFACES):
            if data.startswith(s, off):
                go(off + len(s), (*path, i))

    go(0, ())
    return out


def oracle(schema: dict, candidates: list, length: int) -> list[tuple[int, ...]]:
    validator = jsonschema.Draft202012Validator(schema)
    seqs = set()
    for value in candidates:
        if validator.is_valid(value):
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
            for toks in tokenizations(text.encode(), length):
                seqs.add(toks + (FILLER,) * (length - len(toks)))
    return sorted(seqs)


def rows_of(state: SlotConstraint) -> list[set[int]]:
    out = torch.full((state.length, (MASK + 32) // 32 + 1), -1, dtype=torch.int32)
    state.fill_bitmask(out)
    words = out.numpy().view(np.uint32)
    return [
        {w * 32 + b for w in range(words.shape[1]) for b in range(32) if words[r, w] >> b & 1}
        for r in range(state.length)
    ]


@pytest.mark.parametrize("schema,candidates", CASES, ids=[json.dumps(c[0]) for c in CASES])
def test_masks_equal_brute_force_under_random_commits(schema: dict, candidates: list) -> None:
    slot = compile_slot(schema, VOCAB, max_tokens=8)
    seqs = oracle(schema, candidates, slot.length)
    assert seqs, "the oracle admits values"
    assert max(sum(t != FILLER for t in s) for s in seqs) == slot.length
    rng = random.Random(json.dumps(schema))
    for _ in range(25):
        state = slot.new_constraint(FILLER)
        assert isinstance(state, SlotConstraint)
        committed: dict[int, int] = {}
        for position in rng.sample(range(slot.length), slot.length):
            live = [s for s in seqs if all(s[p] == t for p, t in committed.items())]
            expected = [
                {s[p] for s in live} if p not in committed else {committed[p]}
                for p in range(slot.length)
            ]
            assert rows_of(state) == expected
            # Try a token the oracle rejects (commit must refuse and change nothing), then one
            # it accepts.
            rejected = [t for t in range(FILLER + 1) if t not in expected[position]]
            if rejected:
                assert state.commit(position, rng.choice(rejected)) is False
                assert rows_of(state) == expected
            assert state.commit(position, rng.choice(sorted(expected[position])))
            committed[position] = int(state.tokens[position])
        assert state.is_complete()
        full = tuple(committed[p] for p in range(slot.length))
        assert full in seqs
        decoded = state.decode()
        assert jsonschema.Draft202012Validator(schema).is_valid(decoded.value)


@pytest.mark.parametrize("schema,candidates", CASES[:4], ids=[json.dumps(c[0]) for c in CASES[:4]])
def test_options_are_admissible_sequences_one_per_value(schema: dict, candidates: list) -> None:
    slot = compile_slot(schema, VOCAB, max_tokens=8)
    seqs = set(oracle(schema, candidates, slot.length))
    state = slot.new_constraint(FILLER)
    options = state.options()
    assert options is not None
    values = {slot.decode(o, FILLER).text for o in options}
    assert len(values) == len(options)
    spellable = {
        text
        for v in candidates
        if jsonschema.Draft202012Validator(schema).is_valid(v)
        and tokenizations((text := json.dumps(v, separators=(",", ":"))).encode(), slot.length)
    }
    assert spellable == values
    assert all(tuple(o) in seqs for o in options)
    first = options[0]
    state.commit(0, first[0])
    assert all(o[0] == first[0] for o in state.options())


def test_pickled_slot_gives_the_same_masks() -> None:
    import pickle

    slot = compile_slot(CASES[6][0], VOCAB, max_tokens=8)
    again = pickle.loads(pickle.dumps(slot))
    a, b = slot.new_constraint(FILLER), again.new_constraint(FILLER)
    assert rows_of(a) == rows_of(b)
    assert a.commit(1, PIECES.index("a")) and b.commit(1, PIECES.index("a"))
    assert rows_of(a) == rows_of(b)
    assert again.language.validator.is_valid("a")


def test_infeasible_and_misuse_are_loud() -> None:
    slot = compile_slot({"const": "ab"}, VOCAB, max_tokens=8)
    with pytest.raises(ValueError, match="filler"):
        slot.new_constraint(PIECES.index("a"))
    state = slot.new_constraint(FILLER)
    with pytest.raises(ValueError, match="shape"):
        state.fill_bitmask(torch.zeros((state.length + 1, 4), dtype=torch.int32))
    with pytest.raises(ValueError, match="int32"):
        state.fill_bitmask(torch.zeros((state.length, 4), dtype=torch.int64))
    assert state.commit(0, PIECES.index("b")) is False
    # The state object never becomes infeasible through commit; a forged state must raise.
    state.f[-1] = np.zeros_like(state.f[-1])
    with pytest.raises(InfeasibleSlot):
        state.fill_bitmask(torch.zeros((state.length, 4), dtype=torch.int32))


def test_only_open_ended_slots_let_their_filler_tail_stay_stale() -> None:
    """`stale_filler`: the in-block cache may skip recomputing an open-ended value's filler tail,
    never a finite slot's (its short option's tail tells the other answers it ended)."""
    free = compile_slot({"type": "string"}, VOCAB).new_constraint(FILLER)
    assert free.stale_filler == FILLER
    for schema in ({"enum": ["ab", "ba", "a"]}, {"type": "boolean"}):
        assert compile_slot(schema, VOCAB).new_constraint(FILLER).stale_filler is None


def test_open_ended_slots_start_short_and_grow_only_when_filled() -> None:
    """A free string is laid out with `GROW_FROM` positions first; a value that ends inside
    them stays, one that fills them asks for the slot's whole length. Finite and short slots
    are laid out whole from the start."""
    from decide.schemas.slot import GROW_FROM

    free = compile_slot({"type": "string"}, VOCAB)
    assert (free.first_length, free.length) == (GROW_FROM, 32)
    short = free.new_constraint(FILLER, first=True)
    assert short.length == GROW_FROM
    a, quote = PIECES.index("a"), PIECES.index('"')
    for p, t in enumerate([quote, a, quote] + [FILLER] * (GROW_FROM - 3)):
        assert short.commit(p, t)
    assert short.grown() is None  # it ended: nothing was cut
    assert free.decode(short.tokens.tolist(), FILLER).value == "a"

    full = free.new_constraint(FILLER, first=True)
    spelled = [quote] + [a] * (GROW_FROM - 2) + [quote]
    for p, t in enumerate(spelled):
        assert full.commit(p, t)
    bigger = full.grown()
    assert bigger is not None and bigger.length == free.length
    assert not (bigger.tokens >= 0).any()  # fresh: the sampler decides it again
    assert bigger.grown() is None  # already whole
    assert free.decode(full.tokens.tolist(), FILLER).value == "a" * (GROW_FROM - 2)
    with pytest.raises(ValueError, match="below the language"):
        free.new_constraint(FILLER, GROW_FROM - 1)

    for schema in ({"enum": ["ab", "ba", "a"]}, {"type": "integer", "minimum": -2, "maximum": 12}):
        slot = compile_slot(schema, VOCAB)
        assert slot.first_length == slot.length <= GROW_FROM
        assert slot.new_constraint(FILLER, first=True).length == slot.length


def test_token_transitions_are_remembered_read_only_and_bounded(monkeypatch) -> None:
    """`token_pairs` answers a token again from memory (the same arrays, which nobody can write
    into), equal to computing them afresh, and forgets everything past its bound."""
    from decide.schemas import tokens

    automaton = compile_slot({"type": "string", "maxLength": 3}, VOCAB).automaton
    ids = list(range(len(SURFACES)))
    first = [automaton.token_pairs(t) for t in ids]
    for t, (src, dst) in zip(ids, first, strict=True):
        again = automaton.token_pairs(t)
        assert again[0] is src and again[1] is dst
        fresh = automaton._token_pairs(t)
        assert np.array_equal(src, fresh[0]) and np.array_equal(dst, fresh[1])
        assert not src.flags.writeable and not dst.flags.writeable
    assert any(len(src) for src, _ in first)
    monkeypatch.setattr(tokens, "_PAIRS_MEMO", 4)
    other = compile_slot({"type": "string", "maxLength": 2}, VOCAB).automaton
    for t in ids:
        other.token_pairs(t)
        assert 0 < len(other._pairs) <= 4
