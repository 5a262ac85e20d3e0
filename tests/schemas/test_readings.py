"""Finite values an uncased vocabulary cannot spell ("Yes", "USD") are spelled as its tokenizer
reads them and decoded back to the value as written; values spelled neither way are said."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from decide.schemas import Vocabulary, automata, compile_slot
from decide.schemas.language import compile_language
from decide.schemas.span import SpanSlot
from decide.schemas.validate import check_questions, render_table

WORDPIECE = Path(__file__).parents[2] / "decide" / "model" / "tokenizer.json"  # uncased


@pytest.fixture(scope="module")
def vocab() -> Vocabulary:
    tokenizer = Tokenizer.from_file(str(WORDPIECE))
    return Vocabulary.from_tokenizer(tokenizer, excluded={tokenizer.get_vocab_size()})


def decoded_options(slot, filler: int) -> list:
    state = slot.new_constraint(filler)
    out = []
    for tokens in state.options():
        one = slot.new_constraint(filler)
        assert all(one.commit(p, t) for p, t in enumerate(tokens))
        out.append(one.decode().value)
    return out


@pytest.mark.parametrize(
    "schema, values",
    [
        ({"enum": ["Yes", "No", "Unclear"]}, ["Yes", "No", "Unclear"]),
        ({"enum": ["USD", "EUR", "GBP"]}, ["USD", "EUR", "GBP"]),
        ({"enum": ["Yes", "no"]}, ["Yes", "no"]),  # "Yes" was silently never an answer
        ({"anyOf": [{"enum": ["HIGH", "LOW"]}, {"type": "null"}]}, ["HIGH", "LOW", None]),
        ({"enum": ["São Paulo", "Zürich"]}, ["São Paulo", "Zürich"]),
        (
            {
                "type": "object",
                "properties": {"Currency": {"enum": ["USD", "EUR"]}},
                "required": ["Currency"],
                "additionalProperties": False,
            },
            [{"Currency": "USD"}, {"Currency": "EUR"}],
        ),  # an object's upper-case keys and options: lower-cased as a whole
    ],
    ids=json.dumps,
)
def test_finite_values_are_answered_as_written(vocab: Vocabulary, schema: dict, values) -> None:
    slot = compile_slot(schema, vocab)
    filler = vocab.size  # excluded above: never a value token
    assert sorted(map(json.dumps, decoded_options(slot, filler))) == sorted(map(json.dumps, values))
    assert slot.unspelled == []
    assert len(slot.values) == len(values)


def test_a_value_that_reads_like_another_is_left_out_and_said(vocab: Vocabulary) -> None:
    slot = compile_slot({"enum": ["Yes", "yes", "no"]}, vocab)
    assert slot.unspelled == ['"Yes"']
    assert sorted(decoded_options(slot, vocab.size)) == ["no", "yes"]
    table = render_table(check_questions([("answer", {"enum": ["Yes", "yes", "no"]})], vocab))
    assert 'left out: answer: "Yes" (no spelling in this vocabulary)' in table
    assert "2 values" in table and "some values left out" in table


CODE = {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"}
KEYED = {
    "type": "object",
    "properties": {
        "Code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]+$"},
        "n": {"type": "integer"},
    },
    "required": ["Code", "n"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "schema, spelled, value",
    [
        (CODE, "ab-1234", "AB-1234"),
        ({"anyOf": [CODE, {"type": "null"}]}, "ab-1234", "AB-1234"),
        ({"type": "string", "format": "date-time"}, "2024-03-01t09:30:00z", "2024-03-01T09:30:00Z"),
        ({"type": "string", "pattern": "^[A-Za-z]{2,8}$"}, "abc", "abc"),  # a value as it is
        ({"type": "string", "pattern": "^[A-Z][a-z]+ [A-Z]+$"}, "john doe", "John DOE"),
        (KEYED, {"code": "ab12", "n": 7}, {"Code": "AB12", "n": 7}),
    ],
    ids=lambda x: json.dumps(x)[:40],
)
def test_open_ended_upper_case_values_are_spelled_folded_and_decoded_in_the_schemas_case(
    vocab: Vocabulary, schema: dict, spelled, value
) -> None:
    """An uncased vocabulary spells "AB-1234" as "ab-1234": the slot's token automaton runs over
    the case-folded language, and `decode` writes the value in the case the schema asks for."""
    slot = compile_slot(schema, vocab)
    ids = vocab.encode(json.dumps(spelled, separators=(",", ":")))
    assert ids is not None and len(ids) <= slot.length
    filler = vocab.size
    state = slot.new_constraint(filler, slot.length)
    tokens = ids + [filler] * (slot.length - len(ids))
    assert all(state.commit(p, t) for p, t in enumerate(tokens))
    assert state.decode().value == value
    # no spelling of an upper-case letter the schema forbids gets through
    if schema is CODE:
        bad = vocab.encode('"ab-12345"')
        state = slot.new_constraint(filler, slot.length)
        assert not all(state.commit(p, t) for p, t in enumerate(bad[: slot.length]))


def test_upper_case_patterns_are_supported_and_accented_capitals_refused(vocab: Vocabulary) -> None:
    reports = check_questions([("code", {"type": "string", "pattern": "^[A-Z]{3}$"})], vocab)
    assert reports[0].supported, reports[0].message
    assert "upper case spelled in lower case, answered as the schema writes it" in render_table(
        reports
    )
    free = check_questions([("name", {"type": "string", "maxLength": 20})], vocab)
    assert not free[0].folded  # a free string is the same in either case
    # an uncased vocabulary reads "É" as "e": no case folding of ASCII letters brings it back
    reports = check_questions([("code", {"type": "string", "pattern": "^[À-Ö]{3}$"})], vocab)
    assert not reports[0].supported and "accented" in reports[0].message


def test_an_option_longer_than_a_slot_is_left_out_and_said(vocab: Vocabulary) -> None:
    long = " ".join(["confidential information used for another purpose"] * 6)
    schema = {"enum": [long, "none", "other"]}
    slot = compile_slot(schema, vocab)
    assert len(slot.values) == 2 and [text for text, _ in slot.too_long] == [json.dumps(long)]
    table = render_table(check_questions([("breach", schema)], vocab))
    assert 'left out: breach: "confidential information used for another purpose' in table
    assert "more than the 32 of a slot" in table


@pytest.mark.parametrize(
    "pattern", ["^[A-Z]{2}[0-9]?$", "^(Ab|aB|c)$", "^[A-Za-z][a-z]?$", "^A[a-z]$", "^[a-c]{1,2}$"]
)
def test_folding_and_unfolding_agree_with_brute_force(pattern: str) -> None:
    """`fold_case` accepts exactly the strings of the language with some of their capitals
    lower-cased; `unfold` finds one of those originals, the string itself when it is one."""
    language = compile_language({"type": "string", "pattern": pattern})
    folded = automata.fold_case(language.dfa)
    alphabet = "aAbBcCzZ1"
    for n in range(4):
        for chars in itertools.product(alphabet, repeat=n):
            text = "".join(chars)
            data = json.dumps(text).encode()
            originals = [
                "".join(o)
                for o in itertools.product(*[(c, c.upper()) if c.islower() else (c,) for c in text])
                if re.search(pattern, "".join(o))
            ]
            assert folded.accepts(data) == bool(originals), text
            found = automata.unfold(language.dfa, data)
            if not originals:
                assert found is None, text
            else:
                assert found is not None and json.loads(found) in originals, text
                if text in originals:
                    assert json.loads(found) == text


def test_an_extract_question_reads_upper_case_codes_of_the_document(vocab: Vocabulary) -> None:
    slot = compile_slot({"type": ["string", "null"], "pattern": "^[A-Z]{2}-[0-9]{4}$"}, vocab)
    state = SpanSlot(slot, vocab.size, "Policy AB-1234 (ref xz-0042, not AB-12345) is paid.")
    assert sorted(state.values) == ['"ab-1234"', '"xz-0042"', "null"]
