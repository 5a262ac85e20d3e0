"""Finite values an uncased vocabulary cannot spell ("Yes", "USD") are spelled as its tokenizer
reads them and decoded back to the value as written; values spelled neither way are said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from decide.schemas import Vocabulary, compile_slot
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


def test_free_upper_case_strings_are_still_refused(vocab: Vocabulary) -> None:
    reports = check_questions([("code", {"type": "string", "pattern": "^[A-Z]{3}$"})], vocab)
    assert not reports[0].supported and "upper case" in reports[0].message


def test_an_option_longer_than_a_slot_is_left_out_and_said(vocab: Vocabulary) -> None:
    long = " ".join(["confidential information used for another purpose"] * 6)
    schema = {"enum": [long, "none", "other"]}
    slot = compile_slot(schema, vocab)
    assert len(slot.values) == 2 and [text for text, _ in slot.too_long] == [json.dumps(long)]
    table = render_table(check_questions([("breach", schema)], vocab))
    assert 'left out: breach: "confidential information used for another purpose' in table
    assert "more than the 32 of a slot" in table
