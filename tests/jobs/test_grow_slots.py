"""Open-ended slots laid out short and grown (`Decoding.grow_slots`): on tiny random models of
a bidirectional and a block-causal family, every answer is a value of its schema, values longer
than the short layout come back whole (their slot grew), and the short layout spends fewer
answer positions than the whole one."""

from __future__ import annotations

import json

import pytest

from decide.engine import load_model
from decide.jobs.decisions import DecisionEngine, Item
from decide.jobs.spec import Decoding, Question

QUESTIONS = [
    {"id": "name", "text": "Who wrote it?", "schema": {"type": "string"}},
    {"id": "count", "text": "How many?", "schema": {"type": "integer", "minimum": 0}},  # unbounded
    {"id": "kind", "text": "Which kind?", "schema": {"enum": ["a", "b", "c"]}},
    {"id": "note", "text": "Anything else?", "schema": {"type": "string", "maxLength": 40}},
]


@pytest.mark.parametrize("model_type", ["llada", "sdar"])
def test_short_slots_grow_for_long_values_and_answers_stay_valid(model_type, tiny_checkpoint):
    loaded = load_model(tiny_checkpoint(model_type, init_std=0.2))
    engine = DecisionEngine(loaded, batch_size=4)
    questions = engine.questions([Question.model_validate(q) for q in QUESTIONS])
    slots = {q.id: q.slot for q in questions}
    assert slots["name"].first_length < slots["name"].length
    assert slots["kind"].first_length == slots["kind"].length
    items = [Item(i, f"Document {i}: Ann Lee counted {i} birds.", questions) for i in range(8)]
    runs = {}
    for grow in (True, False):
        engine.set_decoding(Decoding(grow_slots=grow))
        runs[grow] = {d.doc_id: d for d in engine.decide(items)}
        assert all(d.ok for d in runs[grow].values()), [d.error for d in runs[grow].values()]
    grew = 0
    for decision in runs[True].values():
        engine.questions(questions).validator().validate(decision.answers)
        for qid in ("name", "count", "note"):
            tokens = slots[qid].vocab.encode(json.dumps(decision.answers[qid]))
            grew += len(tokens) >= slots[qid].first_length  # cannot end in the short layout
    assert grew > 0  # random weights write long values: their slots grew and held them whole
    short = sum(d.answer_tokens for d in runs[True].values())
    whole = sum(d.answer_tokens for d in runs[False].values())
    assert short < whole


FINITE = [
    {"id": "ok", "text": "Is it ok?", "schema": {"type": "boolean"}},
    {"id": "kind", "text": "Which kind?", "schema": {"enum": ["alpha", "beta gamma", "delta"]}},
]


def test_finite_slots_are_laid_out_one_past_their_longest_option(tiny_checkpoint) -> None:
    """A finite slot (decided as one whole option) is laid out one position past its longest
    option, not as long as its longest spelling ("true" is one token, spelled letter by letter
    four): the other positions could only ever hold filler. The one filler position left after
    the longest option tells the other slots where an option ended, as in training. No finite
    slot regrows: every decision spends exactly the short layout."""
    loaded = load_model(tiny_checkpoint("llada", init_std=0.2))
    engine = DecisionEngine(loaded, batch_size=4)
    questions = engine.questions([Question.model_validate(q) for q in FINITE])
    for q in questions:
        longest = max(len(ids) for ids in q.slot.value_tokens)
        assert q.slot.first_length == longest + 1 < q.slot.length, (q.id, q.slot.length)
    items = [Item(i, f"Document {i}: an alpha, maybe a delta.", questions) for i in range(6)]
    runs = {}
    for grow in (True, False):
        engine.set_decoding(Decoding(grow_slots=grow))
        runs[grow] = list(engine.decide(items))
        for d in runs[grow]:
            assert d.ok, d.error
            engine.questions(questions).validator().validate(d.answers)
    short = sum(q.slot.first_length for q in questions)
    assert all(d.answer_tokens == short for d in runs[True])  # nothing regrew
    assert all(d.answer_tokens == sum(q.slot.length for q in questions) for d in runs[False])
