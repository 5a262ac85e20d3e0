"""Property test on the GPT-2 vocabulary (50,257 tokens, an awkward width) and on the bundled
model's uncased WordPiece (upper case spelled case-folded, options as the tokenizer reads them):
schemas drawn from the supported subset, random partial commitments, then completion by sampling through the masks. Every
completed slot must decode to a value `jsonschema` accepts, every open position of a feasible slot
must allow some token, and every finite slot's options must be paths the masks allow."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from tokenizers import Tokenizer

from decide.engine.constraints import bitmask_width
from decide.schemas import UnsupportedSchema, Vocabulary, compile_slot

GPT2 = Path(__file__).parents[1] / "data" / "gpt2" / "tokenizer.json"
WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"  # uncased


@pytest.fixture(scope="module", params=["gpt2", "wordpiece"])
def vocab(request: pytest.FixtureRequest) -> tuple[Vocabulary, int]:
    """(vocabulary, filler): GPT-2's <|endoftext|> (50256), or one id past WordPiece's tokens;
    either is excluded from values."""
    if request.param == "gpt2":
        return Vocabulary.from_tokenizer(Tokenizer.from_file(str(GPT2)), excluded=[50256]), 50256
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    filler = tokenizer.get_vocab_size()
    return Vocabulary.from_tokenizer(tokenizer, excluded={filler}), filler


TEXT = st.text(alphabet=st.sampled_from('ab Zé"\\\n\t€🙂'), max_size=4)
PATTERNS = ["^[a-z]+$", "^[A-Z][a-z]*$", "x", "^(yes|no)$", "^[0-9]{2,3}-[a-f]*$", "é|\\d$"]


@st.composite
def integer(draw):
    lo = draw(st.one_of(st.none(), st.integers(-(10**6), 10**6)))
    hi = draw(st.one_of(st.none(), st.integers(-(10**6), 10**6)))
    out = {"type": "integer"}
    if lo is not None:
        out[draw(st.sampled_from(["minimum", "exclusiveMinimum"]))] = lo
    if hi is not None and (lo is None or hi > lo + 1):
        out[draw(st.sampled_from(["maximum", "exclusiveMaximum"]))] = hi
    return out


@st.composite
def number(draw):
    lo = draw(st.floats(-1000, 1000, allow_nan=False).map(lambda x: round(x, 3)))
    span = draw(st.floats(0.01, 1000).map(lambda x: round(x, 2)))
    return {
        "type": "number",
        draw(st.sampled_from(["minimum", "exclusiveMinimum"])): lo,
        draw(st.sampled_from(["maximum", "exclusiveMaximum"])): round(lo + span, 3),
    }


@st.composite
def string(draw):
    out: dict = {"type": "string"}
    lo = draw(st.integers(0, 4))
    if draw(st.booleans()):
        out["minLength"] = lo
    if draw(st.booleans()):
        out["maxLength"] = lo + draw(st.integers(0, 12))
    if draw(st.booleans()):
        out["pattern"] = draw(st.sampled_from(PATTERNS))
    elif draw(st.booleans()):
        out["format"] = draw(
            st.sampled_from(["date", "time", "date-time", "uuid", "ipv4", "email"])
        )
    return out


@st.composite
def negated(draw):
    base = draw(st.one_of(integer(), string(), st.just({"type": "boolean"})))
    banned = draw(st.lists(st.one_of(st.integers(-5, 5), TEXT, st.booleans()), min_size=1,
                           max_size=3))  # fmt: skip
    return {**base, "not": {"enum": banned}}


LEAF = st.one_of(
    negated(),
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.lists(TEXT, min_size=1, max_size=4, unique=True).map(lambda v: {"enum": v}),
    st.lists(st.integers(-50, 50), min_size=1, max_size=3).map(lambda v: {"enum": v}),
    integer(),
    number(),
    string(),
)


@st.composite
def composite(draw):
    kind = draw(st.sampled_from(["object", "array", "anyOf", "leaf"]))
    if kind == "leaf":
        return draw(LEAF)
    if kind == "array":
        out = {"type": "array", "items": draw(LEAF), "maxItems": draw(st.integers(0, 3))}
        out["minItems"] = draw(st.integers(0, out["maxItems"]))
        return out
    if kind == "anyOf":
        return {"anyOf": draw(st.lists(LEAF, min_size=2, max_size=3))}
    names = draw(
        st.lists(st.sampled_from(["a", "b", "c_d", "é"]), min_size=1, max_size=3, unique=True)
    )
    props = {n: draw(LEAF) for n in names}
    required = draw(st.lists(st.sampled_from(names), unique=True))
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": draw(st.booleans()),
    }


def allowed_tokens(row: np.ndarray) -> np.ndarray:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")
    return np.nonzero(bits)[0]


# Values a contradictory schema of this subset must reject.
PROBES = [None, True, False, 0, 1, -1, 7, 0.5, "", "a", "ab", [], [0], {}, {"a": 1}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=composite(), seed=st.integers(0, 2**32 - 1), fraction=st.floats(0, 1))
# Found by this test: an empty string branch (no [a-z]+ of length 0) once bounded the other.
@example(
    schema={
        "anyOf": [
            {"type": "string", "pattern": "^[a-z]+$"},
            {"type": "string", "pattern": "^[a-z]+$", "maxLength": 0},
        ]
    },
    seed=0,
    fraction=0.0,
)
def test_sampled_completions_validate(vocab, schema, seed: int, fraction: float):
    vocab, filler = vocab
    try:
        slot = compile_slot(schema, vocab, max_tokens=16)
    except UnsupportedSchema as exc:
        # The refusals this subset may hit: a union of differently bounded strings, values too
        # long for the slot, or a schema no value satisfies (e.g. `not` of every boolean).
        # Or an empty slot whose valid values all lie outside what a slot spells (undeclared keys,
        # the depth limit): it says so instead of "no value satisfies".
        assert exc.keyword in ("maxLength", "schema") or "valid values exist" in exc.message, exc
        if "with this vocabulary" in exc.message:
            # Values an uncased WordPiece has no spelling for ("🙂", accents it strips): the
            # byte-level GPT-2 vocabulary spells every value, so it must never say so.
            assert vocab.kind == "wordpiece", exc
            return
        if exc.keyword == "schema":
            # `decide` asserts `format` (as jsonschema does with a format checker): a schema such
            # as {"format": "date", "maxLength": 0} has no value, though "" passes without one.
            probe = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
            assert not any(probe.is_valid(v) for v in PROBES), schema
        return
    rng = np.random.default_rng(seed)
    state = slot.new_constraint(filler)
    out = torch.zeros((slot.length, bitmask_width(max(vocab.size, filler + 1))), dtype=torch.int32)
    order = rng.permutation(slot.length)
    # A random prefix of the order commits uniformly random allowed tokens; the rest prefers the
    # filler half the time, as a sampler that has learned to stop would.
    for i, p in enumerate(order):
        state.fill_bitmask(out)
        for q in range(slot.length):
            assert allowed_tokens(out[q].numpy()).size > 0, f"empty row {q} in a feasible slot"
        choices = allowed_tokens(out[p].numpy())
        if i >= fraction * slot.length and filler in choices and rng.random() < 0.5:
            token = filler
        else:
            token = int(rng.choice(choices))
        assert state.commit(int(p), token)
    decoded = state.decode()
    jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    ).validate(decoded.value)
    options = slot.new_constraint(filler).options()
    if options is not None:
        for option in options[:5]:
            fresh = slot.new_constraint(filler)
            assert all(fresh.commit(p, t) for p, t in enumerate(option))
            assert fresh.decode().value is not None or option[0] != filler
